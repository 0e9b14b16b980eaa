// test/fuzz/fuzz_client_hello.cpp: the ClientHello reader never crashes or reads past its
// input, what it accepts is sane, and a stream cut before the end of an accepted ClientHello
// is "need more", never another verdict.
#include "net/tls/client_hello.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using sandbox::net::tls::hello_peek;
    using sandbox::net::tls::peek_client_hello;
    const std::span<const unsigned char> in(data, size);
    const hello_peek p = peek_client_hello(in);
    if (p.bytes > size)
        std::abort();
    if (p.what != hello_peek::verdict::tls)
        return 0;
    if (p.sni.size() > 0xffff)
        std::abort();
    for (const auto& proto : p.alpn)
        if (proto.empty() || proto.size() > 255)
            std::abort();
    for (std::size_t cut : {p.bytes - 1, p.bytes / 2, std::size_t{4}})
        if (cut < p.bytes &&
            peek_client_hello(in.first(cut)).what != hello_peek::verdict::need_more)
            std::abort();
    return 0;
}
