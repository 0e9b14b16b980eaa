// lib/utf8.cpp: sanitize_utf8.
#include <sandbox/utf8.hpp>

namespace sandbox {

std::string sanitize_utf8(std::string_view s)
{
    static constexpr std::string_view replacement = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(s.size());
    std::size_t i = 0;
    while (i < s.size())
    {
        const auto b = static_cast<unsigned char>(s[i]);
        if (b < 0x80)
        {
            out += s[i++];
            continue;
        }
        // Continuation bytes needed, and the allowed range of the first one (Unicode table
        // 3-7, "well-formed UTF-8 byte sequences").
        int need = 0;
        unsigned char lo = 0x80;
        unsigned char hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF)
            need = 1;
        else if (b >= 0xE0 && b <= 0xEF)
            need = 2;
        else if (b >= 0xF0 && b <= 0xF4)
            need = 3;
        if (b == 0xE0)
            lo = 0xA0; // no overlong 3-byte forms
        else if (b == 0xED)
            hi = 0x9F; // no surrogates
        else if (b == 0xF0)
            lo = 0x90; // no overlong 4-byte forms
        else if (b == 0xF4)
            hi = 0x8F; // nothing above U+10FFFF
        if (need == 0)
        {
            out += replacement; // a stray continuation byte, C0, C1 or F5..FF
            ++i;
            continue;
        }
        std::size_t j = i + 1;
        int got = 0;
        while (got < need && j < s.size())
        {
            const auto c = static_cast<unsigned char>(s[j]);
            if (c < (got == 0 ? lo : 0x80) || c > (got == 0 ? hi : 0xBF))
                break;
            ++got;
            ++j;
        }
        if (got == need)
            out.append(s.substr(i, j - i));
        else
            out += replacement; // the maximal subpart s[i, j) is replaced as one unit
        i = j;
    }
    return out;
}

} // namespace sandbox
