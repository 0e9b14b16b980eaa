// test/fuzz/seeds.cpp: starting inputs shared by the fuzz targets' random driver.
#include <string>
#include <vector>

using namespace std::string_literals;

extern const std::vector<std::string> fuzz_seeds = {
    "4242 (my (odd) name) S 4200 4242 4100 34816 4242 4194304 120 0 0 0 17 5 30 12 20 0 3 0 "
    "987654 123456789 2560 18446744073709551615 1 1 0 0\n",
    "12 13 14\n",
    "example.com\0socks5://user:pass@127.0.0.1:1080\0/run/x.sock"s,
    "*.internal.example\0http://proxy:3128/\0relative"s,
    "10.0.0.0/8\0ftp://x\0"s,
    "[::1]\0http://[::1]:80\0"s,
    "fd00::/8",
    "500ms", "1.5s", "2m", "64M", "1GiB", "100",
    "--timeout\0""2s\0--memory\0""64M\0--\0echo\0hi"s,
    "--json\0--env\0A=B\0--env-allow\0PATH\0sh\0-c\0exit 3"s,
    "h\xc3\xa9llo \xed\xa0\x80 \xff\xfe wor\xf0\x9f\x98\x80ld",
};
