// lib/host/text.cpp: see text.hpp.
#include "text.hpp"

namespace sandbox::detail {

std::string quote_for_message(std::string_view text, std::size_t max_chars)
{
    static constexpr char hex[] = "0123456789abcdef";
    const bool cut = text.size() > max_chars;
    const std::size_t total = text.size();
    if (cut)
        text = text.substr(0, max_chars);

    std::string out = "'";
    for (const char ch : text)
    {
        const auto c = static_cast<unsigned char>(ch);
        if (ch == '\'' || ch == '\\')
        {
            out += '\\';
            out += ch;
        }
        else if (c < 0x20 || c >= 0x7f)
        {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 0x0F];
        }
        else
        {
            out += ch;
        }
    }
    out += '\'';
    if (cut)
        out += "... (" + std::to_string(total) + " bytes)";
    return out;
}

} // namespace sandbox::detail
