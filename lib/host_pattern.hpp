// lib/host_pattern.hpp: private parser for network host patterns (domains, wildcards, IPs, CIDR).
#ifndef SANDBOX_LIB_HOST_PATTERN_HPP
#define SANDBOX_LIB_HOST_PATTERN_HPP

#include <sandbox/failure.hpp>

#include <boost/asio/ip/address.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace sandbox::detail {

/// \brief The syntactic form of a host pattern.
enum class host_kind
{
    /// `example.com`: the domain and all of its subdomains.
    domain,
    /// `*.example.com`: subdomains only, at any depth.
    wildcard_domain,
    /// An IPv4 or IPv6 literal (IPv6 optionally in brackets).
    ip,
    /// An address block such as `10.0.0.0/8` or `fd00::/8`.
    cidr,
};

/// \brief A parsed, normalised host pattern.
struct host_pattern
{
    host_kind kind = host_kind::domain;
    /// Domain forms: lower-case, trailing dot removed; for a wildcard the part after "*.".
    /// Empty for the ip and cidr forms.
    std::string host{};
    /// The literal (ip) or the network address (cidr).
    boost::asio::ip::address address{};
    /// The prefix length for cidr, -1 otherwise.
    int prefix_length = -1;
};

/// \brief Parses one host pattern. Nothing is trimmed. Domain labels may be UTF-8 (kept as
/// given, lower-cased in ASCII only; the rule compiler maps them to A-labels with IDNA).
///
/// Fails with `errc::validation` and a one-line message that quotes the offending text. The
/// failure carries no `limit`: the caller knows which field the text came from.
SANDBOX_DECL outcome<host_pattern> parse_host_pattern(std::string_view text);

/// \brief A host pattern with an optional port: `HOST`, `HOST:PORT`, `[V6]:PORT`.
struct host_and_port
{
    std::string_view host{};
    /// 0 when no port was given.
    int port = 0;
};

/// \brief Splits an allow-list entry as `sandbox-run --allow-host` and documents write it: a
/// port follows the only ':' of a name or IPv4 literal, or the ']' of a bracketed IPv6
/// literal; a bare IPv6 literal has no port. An empty host, an empty port or one outside 1 to
/// 65535 is `errc::validation` (no `limit`). The host part is not checked here.
SANDBOX_DECL outcome<host_and_port> split_host_port(std::string_view text);

/// \brief Quotes user-supplied text for a diagnostics message.
///
/// Wraps it in single quotes, escapes quotes, backslashes, control and non-ASCII bytes as
/// `\xNN`, and shortens text longer than `max_chars` with a trailing "...", so that the
/// message stays on one line and safe to log.
SANDBOX_DECL std::string quote_for_message(std::string_view text, std::size_t max_chars = 80);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_HOST_PATTERN_HPP
