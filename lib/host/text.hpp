// lib/host/text.hpp: what the two host readers of this room share: the DNS limits, the
// character classes, and the quoting of user text in their messages. A rule's host pattern
// (pattern.hpp) and a destination's host (canonical.hpp) are read by one set of rules.
#ifndef SANDBOX_LIB_HOST_TEXT_HPP
#define SANDBOX_LIB_HOST_TEXT_HPP

#include <sandbox/config.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace sandbox::detail {

/// A name's length and a label's, as DNS has them (after IDNA mapping).
inline constexpr std::size_t max_name_length = 253;
inline constexpr std::size_t max_label_length = 63;

constexpr char to_lower_ascii(char c) noexcept
{
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

constexpr bool is_digit(char c) noexcept
{
    return c >= '0' && c <= '9';
}

/// A hexadecimal digit's value, or -1.
constexpr int hex_value(char c) noexcept
{
    if (is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

constexpr bool has_non_ascii(std::string_view s) noexcept
{
    for (const char c : s)
        if (static_cast<unsigned char>(c) >= 0x80)
            return true;
    return false;
}

/// \brief Quotes user-supplied text for a diagnostics message.
///
/// Wraps it in single quotes, escapes quotes, backslashes, control and non-ASCII bytes as
/// `\xNN`, and shortens text longer than `max_chars` with a trailing "...", so that the
/// message stays on one line and safe to log.
SANDBOX_DECL std::string quote_for_message(std::string_view text, std::size_t max_chars = 80);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_HOST_TEXT_HPP
