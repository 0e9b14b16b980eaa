// lib/host/canonical.cpp: see canonical.hpp.
//
// The order of canonicalize_host: byte screening (control bytes, NUL, space, '%', '@', '\',
// '/'), then the bracketed IPv6 form, then a bare IPv6 (any ':'), then every IPv4 spelling
// inet_aton accepts, and only then a name: UTS-46 mapped (libidn2) when it has non-ASCII
// bytes or an A-label, else lower-cased; one trailing dot dropped; label and length limits;
// a name whose last label starts with a digit is refused (it is either a number inet_aton
// rejects, such as `1.2.3.4.5` or `0x1g`, or no name any registry hands out).
#include "canonical.hpp"

#include "text.hpp"

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>
#include <boost/system/error_code.hpp>

#include <idn2.h>

#include <array>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <utility>

namespace sandbox::net {
namespace {

using detail::is_digit;
using detail::max_label_length;
using detail::max_name_length;
using detail::to_lower_ascii;

// Input bound before IDNA (a UTF-8 name can be longer than its A-label form).
constexpr std::size_t max_raw_length = 1024;
constexpr std::uint32_t max_port = 65535;

failure refuse(std::string_view text, std::string_view why)
{
    std::string message = "invalid host ";
    message += detail::quote_for_message(text);
    message += ": ";
    message += why;
    return make_failure(errc::validation, std::move(message));
}

// Bytes that never appear in a host, whatever its form: they smuggle a second meaning
// (zone ids and escapes, userinfo, paths) or break a header or a log line.
const char* forbidden_byte(std::string_view text) noexcept
{
    for (const char ch : text)
    {
        const auto c = static_cast<unsigned char>(ch);
        if (c == 0)
            return "it contains a NUL byte";
        if (c < 0x20 || c == 0x7f)
            return "it contains a control character";
        if (c == ' ')
            return "it contains a space";
        if (c == '%')
            return "'%' is not allowed (zone ids and escapes are refused)";
        if (c == '@' || c == '\\' || c == '/')
            return "'@', '\\' and '/' are not allowed in a host";
    }
    return nullptr;
}

// ---- IPv4 in every form inet_aton accepts ------------------------------------------------

// One part of a numeric IPv4 host: "0x" hex, "0" octal, else decimal (strtoul base 0, which
// is what glibc uses). Returns false when `part` is not entirely such a number or exceeds
// 32 bits.
bool parse_v4_part(std::string_view part, std::uint32_t& value) noexcept
{
    if (part.empty() || !is_digit(part.front()))
        return false;
    unsigned base = 10;
    if (part.size() > 1 && part[0] == '0' && (part[1] == 'x' || part[1] == 'X'))
    {
        base = 16;
        part.remove_prefix(2);
        if (part.empty())
            return false;
    }
    else if (part[0] == '0')
        base = 8;
    std::uint64_t v = 0;
    for (const char c : part)
    {
        const int d = detail::hex_value(c);
        if (d < 0 || static_cast<unsigned>(d) >= base)
            return false;
        v = v * base + static_cast<unsigned>(d);
        if (v > 0xFFFFFFFFu)
            return false;
    }
    value = static_cast<std::uint32_t>(v);
    return true;
}

// "a", "a.b", "a.b.c", "a.b.c.d": every leading part is one byte, the last fills the rest.
std::optional<boost::asio::ip::address_v4> parse_inet_aton(std::string_view text) noexcept
{
    static constexpr std::array<std::uint32_t, 4> last_max = {0xFFFFFFFFu, 0xFFFFFFu, 0xFFFFu,
                                                              0xFFu};
    std::array<std::uint32_t, 4> parts{};
    std::size_t n = 0;
    for (;;)
    {
        if (n == parts.size())
            return std::nullopt;
        const std::size_t dot = text.find('.');
        if (!parse_v4_part(text.substr(0, dot), parts[n++]))
            return std::nullopt;
        if (dot == std::string_view::npos)
            break;
        text.remove_prefix(dot + 1);
    }
    std::uint32_t bits = 0;
    for (std::size_t i = 0; i + 1 < n; ++i)
    {
        if (parts[i] > 0xFFu)
            return std::nullopt;
        bits |= parts[i] << (24 - 8 * i);
    }
    if (parts[n - 1] > last_max[n - 1])
        return std::nullopt;
    return boost::asio::ip::address_v4(bits | parts[n - 1]);
}

// ---- IPv6 ------------------------------------------------------------------------------------

address unmap(const boost::asio::ip::address_v6& v6)
{
    if (v6.is_v4_mapped())
        return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6);
    return v6;
}

outcome<canonical_host> parse_v6(std::string_view inner, std::string_view whole)
{
    boost::system::error_code ec;
    const auto v6 = boost::asio::ip::make_address_v6(std::string(inner), ec);
    if (ec || v6.scope_id() != 0)
        return refuse(whole, "not a valid IPv6 address");
    canonical_host h;
    h.ip = unmap(v6);
    return h;
}

outcome<canonical_host> parse_bracketed(std::string_view text)
{
    if (text.size() < 2 || text.back() != ']')
        return refuse(text, "brackets may only enclose a whole IPv6 address");
    return parse_v6(text.substr(1, text.size() - 2), text);
}

// ---- names -----------------------------------------------------------------------------------

bool has_a_label(std::string_view name) noexcept
{
    std::size_t start = 0;
    for (;;)
    {
        const std::string_view label = name.substr(start, 4);
        if (label.size() == 4 && to_lower_ascii(label[0]) == 'x' &&
            to_lower_ascii(label[1]) == 'n' && label[2] == '-' && label[3] == '-')
            return true;
        const std::size_t dot = name.find('.', start);
        if (dot == std::string_view::npos)
            return false;
        start = dot + 1;
    }
}

outcome<std::string> idna_map(std::string_view name)
{
    char* out = nullptr;
    const int rc =
        ::idn2_to_ascii_8z(std::string(name).c_str(), &out, IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
    const std::unique_ptr<char, decltype(&std::free)> owned(out, &std::free);
    if (rc != IDN2_OK || out == nullptr)
        return refuse(name, std::string("IDNA refuses it (") + ::idn2_strerror(rc) + ")");
    return std::string(out);
}

constexpr bool is_name_char(char c) noexcept
{
    return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_';
}

// Checks a mapped, lower-case name without its trailing dot: ASCII letters, digits, '-'
// and '_', labels of 1 to 63, at most 253 in all.
outcome<void> check_name(std::string_view name, std::string_view whole)
{
    if (name.empty())
        return refuse(whole, "the name is empty");
    if (name.size() > max_name_length)
        return refuse(whole, "the name is longer than 253 characters");
    std::size_t label = 0;
    for (const char c : name)
    {
        if (c == '.')
        {
            if (label == 0)
                return refuse(whole, "empty label");
            label = 0;
            continue;
        }
        if (!is_name_char(c))
            return refuse(whole, "a name has letters, digits, '-', '_' and '.' only");
        if (++label > max_label_length)
            return refuse(whole, "a label is longer than 63 characters");
    }
    if (label == 0)
        return refuse(whole, "empty label");
    return {};
}

std::string_view last_label(std::string_view name) noexcept
{
    const std::size_t dot = name.rfind('.');
    return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

} // namespace

std::string canonical_host::text() const
{
    if (ip)
        return ip->to_string();
    return name;
}

outcome<std::string> to_ascii_name(std::string_view name)
{
    if (name.size() > max_raw_length)
        return refuse(name, "the name is longer than 253 characters");
    if (const char* why = forbidden_byte(name))
        return refuse(name, why);
    std::string mapped;
    if (detail::has_non_ascii(name) || has_a_label(name))
    {
        auto r = idna_map(name);
        if (!r)
            return r.error();
        mapped = std::move(*r);
    }
    else
    {
        mapped.reserve(name.size());
        for (const char c : name)
            mapped += to_lower_ascii(c);
    }
    if (!mapped.empty() && mapped.back() == '.')
        mapped.pop_back();
    if (auto ok = check_name(mapped, name); !ok)
        return ok.error();
    return mapped;
}

outcome<canonical_host> canonicalize_host(std::string_view text)
{
    if (text.empty())
        return refuse(text, "the host is empty");
    if (const char* why = forbidden_byte(text))
        return refuse(text, why);
    if (text.front() == '[')
        return parse_bracketed(text);
    if (text.find(':') != std::string_view::npos)
        return parse_v6(text, text);
    if (const auto v4 = parse_inet_aton(text))
    {
        canonical_host h;
        h.ip = *v4;
        return h;
    }
    auto name = to_ascii_name(text);
    if (!name)
        return name.error();
    if (is_digit(last_label(*name).front()))
        return refuse(text, "it looks like a number but is not a valid IPv4 address");
    canonical_host h;
    h.name = std::move(*name);
    return h;
}

outcome<std::uint16_t> parse_port(std::string_view text)
{
    const auto bad = [&] {
        return make_failure(errc::validation,
                            "invalid port " + detail::quote_for_message(text) +
                                ": decimal digits 1-65535, no sign, space or leading zero");
    };
    if (text.empty() || text.size() > 5 || text.front() == '0')
        return bad();
    std::uint32_t v = 0;
    for (const char c : text)
    {
        if (!is_digit(c))
            return bad();
        v = v * 10 + static_cast<std::uint32_t>(c - '0');
    }
    if (v > max_port)
        return bad();
    return static_cast<std::uint16_t>(v);
}

namespace {

// Splits "host", "host:port", "[v6]" or "[v6]:port" into host and the port text (empty
// when absent); `has_port` says whether a ':' introduced one.
outcome<std::pair<std::string_view, std::string_view>> split_authority(std::string_view text,
                                                                       bool& has_port)
{
    std::size_t host_end = text.size();
    if (!text.empty() && text.front() == '[')
    {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos)
            return refuse(text, "'[' without ']'");
        host_end = close + 1;
        if (host_end < text.size() && text[host_end] != ':')
            return refuse(text, "only ':port' may follow ']'");
    }
    else
    {
        const std::size_t first = text.find(':');
        if (first != std::string_view::npos && text.find(':', first + 1) != std::string_view::npos)
            return refuse(text, "an IPv6 address needs brackets, as in '[::1]:443'");
        host_end = first == std::string_view::npos ? text.size() : first;
    }
    has_port = host_end < text.size();
    const std::string_view port = has_port ? text.substr(host_end + 1) : std::string_view{};
    return std::pair{text.substr(0, host_end), port};
}

} // namespace

outcome<authority> parse_authority(std::string_view text, std::optional<std::uint16_t> default_port)
{
    bool has_port = false;
    auto parts = split_authority(text, has_port);
    if (!parts)
        return parts.error();
    const auto [host_text, port_text] = *parts;
    if (host_text.empty())
        return refuse(text, "the host is empty");
    auto host = canonicalize_host(host_text);
    if (!host)
        return host.error();
    authority a;
    a.host = std::move(*host);
    if (has_port)
    {
        auto port = parse_port(port_text);
        if (!port)
            return port.error();
        a.port = *port;
    }
    else if (default_port)
        a.port = *default_port;
    else
        return refuse(text, "no port");
    return a;
}

std::string format_authority(const canonical_host& h, std::uint16_t port,
                             std::uint16_t default_port)
{
    std::string out;
    if (h.ip && h.ip->is_v6())
        out.append("[").append(h.ip->to_string()).append("]"); // (no '+': GCC 12's -Wrestrict)
    else
        out = h.text();
    if (port != default_port)
    {
        out += ':';
        out += std::to_string(port);
    }
    return out;
}

} // namespace sandbox::net
