// test/fuzz/fuzz_cli.cpp: sandbox-run's parsers on arbitrary bytes: no crash, classified
// errors only, and sanitize_utf8 always yields valid UTF-8 (and is idempotent).
#include "cli.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {
bool valid_utf8(std::string_view s)
{
    std::size_t i = 0;
    while (i < s.size())
    {
        auto c = static_cast<unsigned char>(s[i]);
        std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size())
            return false;
        std::uint32_t cp = n == 1 ? c : c & (0x7f >> n);
        for (std::size_t k = 1; k < n; ++k)
        {
            auto d = static_cast<unsigned char>(s[i + k]);
            if ((d & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (d & 0x3f);
        }
        constexpr std::uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n;
    }
    return true;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view in(reinterpret_cast<const char*>(data), size);
    if (auto d = sandbox::cli::parse_duration(in); !d && d.error().code != sandbox::errc::validation)
        std::abort();
    else if (d && d->count() < 0)
        std::abort();
    if (auto s = sandbox::cli::parse_size(in); !s && s.error().code != sandbox::errc::validation)
        std::abort();
    else if (s && *s < 0)
        std::abort();
    auto clean = sandbox::cli::sanitize_utf8(in);
    if (!valid_utf8(clean) || sandbox::cli::sanitize_utf8(clean) != clean)
        std::abort();
    if (valid_utf8(in) && clean != in)
        std::abort();

    // Arguments split at NUL bytes; --stdin-file is dropped so no file is read.
    std::vector<std::string> words{"sandbox-run"};
    std::string cur;
    for (char c : in)
        if (c == '\0')
            words.push_back(std::exchange(cur, {}));
        else
            cur += c;
    words.push_back(cur);
    std::vector<const char*> argv;
    for (std::size_t i = 0; i < words.size(); ++i)
    {
        if (words[i] == "--stdin-file" || words[i].rfind("--stdin-file=", 0) == 0)
            break;
        argv.push_back(words[i].c_str());
    }
    (void)sandbox::cli::parse_command_line(static_cast<int>(argv.size()), argv.data());
    return 0;
}
