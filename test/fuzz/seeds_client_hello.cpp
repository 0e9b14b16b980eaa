// test/fuzz/seeds_client_hello.cpp: the seeds of fuzz_client_hello: a real ClientHello
// (Python's ssl on OpenSSL 3.0: SNI api.test, ALPN h2 and http/1.1, 517 bytes), its first
// record cut short, and bytes that are not TLS.
#include <string>
#include <vector>

namespace {

std::string from_hex(const char* hex)
{
    std::string out;
    for (const char* p = hex; p[0] && p[1]; p += 2)
        out.push_back(static_cast<char>(std::stoi(std::string(p, 2), nullptr, 16)));
    return out;
}

const std::string hello =
    from_hex("1603010200010001fc0303c66ad13f2fd5375f26a1732abff2b6ab4812034774057ebd47dddb22b1d282f"
             "5202b746451"
             "70b7926ac9d4e30efb9ae8711ffc83617534a6399a162e837df7501b0024130213031301c02cc030c02bc"
             "02fcca9cca8"
             "c024c028c023c027009f009e006b006700ff0100018f0000000d000b0000086170692e74657374000b000"
             "40300010200"
             "0a00160014001d0017001e0019001801000101010201030104002300000010000e000c026832086874747"
             "02f312e3100"
             "16000000170000000d002a0028040305030603080708080809080a080b080408050806040105010601030"
             "30301030204"
             "0205020602002b00050403040303002d00020101003300260024001d002057358b60c0dd8e2bdc6b39029"
             "c132abe09e5"
             "4e9131c68f9023f2100d58aa4e6a001500d30000000000000000000000000000000000000000000000000"
             "00000000000"
             "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "00000000000"
             "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "00000000000"
             "0000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
             "00000000000"
             "00000000000000000000000000000000000000000000000000000000000000000000000000");

} // namespace

extern const std::vector<std::string> fuzz_seeds = {
    hello,
    hello.substr(0, 200),
    hello + hello,
    "GET / HTTP/1.1\r\nHost: api.test\r\n\r\n",
    "SSH-2.0-OpenSSH_9.2\r\n",
    std::string("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00", 10),
};
