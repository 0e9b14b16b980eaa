// lib/host/pattern.cpp: see pattern.hpp.
#include "pattern.hpp"

#include "canonical.hpp"

#include <sandbox/utf8.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <string>
#include <utility>

namespace sandbox::detail {
namespace {

constexpr int max_prefix_v4 = 32;
constexpr int max_prefix_v6 = 128;

failure invalid(std::string_view text, std::string_view why)
{
    std::string message = "invalid host pattern ";
    message += quote_for_message(text);
    message += ": ";
    message += why;
    return make_failure(errc::validation, std::move(message));
}

constexpr bool is_domain_char(char lower) noexcept
{
    return (lower >= 'a' && lower <= 'z') || is_digit(lower) || lower == '-' ||
           static_cast<unsigned char>(lower) >= 0x80;
}

bool all_digits(std::string_view s) noexcept
{
    return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

// Checks a domain name (no wildcard) and returns it lower-cased without its trailing dot.
// `whole` is the complete pattern, quoted in messages.
outcome<std::string> check_domain(std::string_view name, std::string_view whole)
{
    if (!name.empty() && name.back() == '.')
        name.remove_suffix(1);
    if (name.empty())
        return invalid(whole, "the domain name is empty");
    const bool ascii = !has_non_ascii(name);
    if (ascii && name.size() > max_name_length)
        return invalid(whole, "the domain name is longer than 253 characters");

    std::string out;
    out.reserve(name.size());
    std::size_t start = 0;
    for (;;)
    {
        const std::size_t dot = name.find('.', start);
        const std::string_view label =
            name.substr(start, dot == std::string_view::npos ? dot : dot - start);
        if (label.empty())
            return invalid(whole, "empty label (a leading dot or two dots in a row)");
        if (ascii && label.size() > max_label_length)
            return invalid(whole, "the label " + quote_for_message(label, 16) +
                                      " is longer than 63 characters");
        if (label.front() == '-' || label.back() == '-')
            return invalid(whole,
                           "the label " + quote_for_message(label) + " starts or ends with '-'");
        for (const char c : label)
        {
            const char lower = to_lower_ascii(c);
            if (!is_domain_char(lower))
                return invalid(whole, "the character " +
                                          quote_for_message(std::string_view(&c, 1)) +
                                          " is not allowed (a domain name has letters, "
                                          "digits, '-' and '.')");
            out += lower;
        }
        if (dot == std::string_view::npos)
            break;
        out += '.';
        start = dot + 1;
    }
    return out;
}

// A checked domain, spelled as every destination host is (A-labels, `net::to_ascii_name`):
// the rules compare the two as they are, and a name IDNA refuses fails validation. Its last
// label is judged after the mapping, which may make a new one (a full-width dot).
outcome<std::string> parse_domain(std::string_view name, std::string_view whole)
{
    auto lower = check_domain(name, whole);
    if (!lower)
        return lower.error();
    auto mapped = net::to_ascii_name(*lower);
    if (!mapped)
        return invalid(whole, mapped.error().diag.message);
    const std::size_t dot = mapped->rfind('.'); // a full-width dot may have made a new label
    if (all_digits(dot == std::string::npos ? *mapped : std::string_view(*mapped).substr(dot + 1)))
        return invalid(whole, "not a valid IPv4 address, and a domain name cannot end in an "
                              "all-numeric label");
    return mapped;
}

// Returns `bytes` with every bit after the first `prefix` bits cleared.
template <std::size_t N>
std::array<unsigned char, N> network_bytes(std::array<unsigned char, N> bytes, int prefix)
{
    for (std::size_t i = 0; i < N; ++i)
    {
        const int kept = std::clamp(prefix - static_cast<int>(i * 8), 0, 8);
        const unsigned keep_mask = (0xFF00u >> kept) & 0xFFu;
        bytes[i] = static_cast<unsigned char>(bytes[i] & keep_mask);
    }
    return bytes;
}

boost::asio::ip::address network_address(const boost::asio::ip::address& a, int prefix)
{
    using namespace boost::asio::ip;
    if (a.is_v4())
        return address_v4(network_bytes(a.to_v4().to_bytes(), prefix));
    return address_v6(network_bytes(a.to_v6().to_bytes(), prefix));
}

outcome<host_pattern> parse_bracketed(std::string_view text)
{
    if (text.size() < 2 || text.back() != ']')
        return invalid(text, "brackets may only enclose a whole IPv6 address, as in '[::1]'");
    const std::string_view inner = text.substr(1, text.size() - 2);
    if (inner.find('%') != std::string_view::npos)
        return invalid(text, "IPv6 zone (scope) ids are not allowed");
    boost::system::error_code ec;
    const auto v6 = boost::asio::ip::make_address_v6(std::string(inner), ec);
    if (ec)
        return invalid(text, "not a valid IPv6 address");
    host_pattern p;
    p.kind = host_kind::ip;
    p.address = v6;
    return p;
}

outcome<host_pattern> parse_cidr(std::string_view text, std::size_t slash)
{
    const std::string_view addr_text = text.substr(0, slash);
    const std::string_view len_text = text.substr(slash + 1);
    if (!addr_text.empty() && addr_text.front() == '[')
        return invalid(text, "write a CIDR block without brackets, as in 'fd00::/8'");
    if (addr_text.find('%') != std::string_view::npos)
        return invalid(text, "IPv6 zone (scope) ids are not allowed");

    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(std::string(addr_text), ec);
    if (ec)
        return invalid(text, "the part before '/' is not an IPv4 or IPv6 address");

    const int max_prefix = address.is_v4() ? max_prefix_v4 : max_prefix_v6;
    const char* family = address.is_v4() ? "IPv4" : "IPv6";
    if (!all_digits(len_text) || len_text.size() > 3 || (len_text.size() > 1 && len_text[0] == '0'))
        return invalid(text, "the prefix length after '/' must be a decimal number "
                             "without sign or leading zeros");
    int prefix = 0;
    for (const char c : len_text)
        prefix = prefix * 10 + (c - '0');
    if (prefix > max_prefix)
        return invalid(text, "prefix length " + std::to_string(prefix) + " is out of range for " +
                                 family + " (0-" + std::to_string(max_prefix) + ")");

    const auto network = network_address(address, prefix);
    if (network != address)
        return invalid(text, "host bits are set after the /" + std::to_string(prefix) +
                                 " prefix; the network is " + network.to_string() + "/" +
                                 std::to_string(prefix));

    host_pattern p;
    p.kind = host_kind::cidr;
    p.address = address;
    p.prefix_length = prefix;
    return p;
}

outcome<host_pattern> parse_ipv6(std::string_view text)
{
    if (text.find('%') != std::string_view::npos)
        return invalid(text, "IPv6 zone (scope) ids are not allowed");
    boost::system::error_code ec;
    const auto v6 = boost::asio::ip::make_address_v6(std::string(text), ec);
    if (ec)
    {
        // One colon is almost certainly "host:port" rather than a mistyped IPv6 address.
        if (std::count(text.begin(), text.end(), ':') == 1)
            return invalid(text, "a host pattern cannot carry a port; use the rule's port field");
        return invalid(text, "not a valid IPv6 address");
    }
    host_pattern p;
    p.kind = host_kind::ip;
    p.address = v6;
    return p;
}

constexpr std::string_view misplaced_star =
    "a '*' is only allowed as the whole first label, as in '*.example.com'";

} // namespace

outcome<host_pattern> parse_host_pattern(std::string_view text)
{
    if (text.empty())
        return invalid(text, "the host is empty");
    for (const char ch : text)
    {
        const auto c = static_cast<unsigned char>(ch);
        if (c <= 0x20 || c == 0x7f)
            return invalid(text, "the host contains whitespace or a control character");
    }
    // Non-ASCII (UTF-8) labels pass here; the rule compiler maps them to A-labels with IDNA
    // (net/rule_set.cpp), which also refuses what IDNA refuses.
    if (sanitize_utf8(text) != text)
        return invalid(text, "the host is not valid UTF-8");

    if (const auto slash = text.find('/'); slash != std::string_view::npos)
        return parse_cidr(text, slash);
    if (text.front() == '[')
        return parse_bracketed(text);
    if (text.find(':') != std::string_view::npos)
        return parse_ipv6(text);

    if (text == "*")
        return invalid(text, "a bare '*' is not a host pattern; use '*.example.com' to match "
                             "the subdomains of a domain");
    if (text.starts_with("*."))
    {
        const std::string_view rest = text.substr(2);
        if (rest.find('*') != std::string_view::npos)
            return invalid(text, misplaced_star);
        auto domain = parse_domain(rest, text);
        if (domain.has_error())
            return domain.error();
        host_pattern p;
        p.kind = host_kind::wildcard_domain;
        p.host = std::move(*domain);
        return p;
    }
    if (text.find('*') != std::string_view::npos)
        return invalid(text, misplaced_star);

    boost::system::error_code ec;
    const auto v4 = boost::asio::ip::make_address_v4(std::string(text), ec);
    if (!ec)
    {
        host_pattern p;
        p.kind = host_kind::ip;
        p.address = v4;
        return p;
    }

    auto domain = parse_domain(text, text);
    if (domain.has_error())
        return domain.error();
    host_pattern p;
    p.kind = host_kind::domain;
    p.host = std::move(*domain);
    return p;
}

} // namespace sandbox::detail

namespace sandbox {

bool is_localhost_name(std::string_view name) noexcept
{
    static constexpr std::string_view localhost = "localhost";
    auto equal_ci = [](std::string_view a, std::string_view b) {
        return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
            return std::tolower(static_cast<unsigned char>(x)) == y;
        });
    };
    if (name.size() < localhost.size() ||
        !equal_ci(name.substr(name.size() - localhost.size()), localhost))
        return false;
    return name.size() == localhost.size() || name[name.size() - localhost.size() - 1] == '.';
}

bool is_loopback_host(std::string_view host) noexcept
{
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    if (is_localhost_name(host))
        return true;
    boost::system::error_code ec;
    const auto a = boost::asio::ip::make_address(host, ec);
    if (ec)
        return false;
    if (a.is_v6() && a.to_v6().is_v4_mapped())
        return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6())
            .is_loopback();
    return a.is_loopback();
}

outcome<host_and_port> split_host_port(std::string_view text)
{
    auto refuse = [&](const char* why) -> failure {
        return make_failure(errc::validation,
                            "host " + detail::quote_for_message(text) + ": " + why);
    };
    host_and_port out{text, 0};
    std::string_view port;
    if (!text.empty() && text.front() == '[')
    {
        if (const auto close = text.find("]:"); close != std::string_view::npos)
            out.host = text.substr(0, close + 1), port = text.substr(close + 2);
        else
            return out;
        if (port.empty())
            return refuse("empty port after ':'");
    }
    else if (std::count(text.begin(), text.end(), ':') == 1)
    {
        const auto colon = text.find(':');
        out.host = text.substr(0, colon), port = text.substr(colon + 1);
        if (port.empty())
            return refuse("empty port after ':'");
    }
    if (out.host.empty())
        return refuse("empty host");
    if (port.empty())
        return out;
    int value = 0;
    for (char c : port)
    {
        if ((c < '0' || c > '9') || value > 65535)
            return refuse("the port must be 1 to 65535");
        value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535)
        return refuse("the port must be 1 to 65535");
    out.port = value;
    return out;
}

} // namespace sandbox
