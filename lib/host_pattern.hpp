// lib/host_pattern.hpp: private parser for network host patterns (domains, wildcards, IPs, CIDR).
#ifndef SANDBOX_LIB_HOST_PATTERN_HPP
#define SANDBOX_LIB_HOST_PATTERN_HPP

#include <sandbox/failure.hpp>
#include <sandbox/host_port.hpp>

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

// "HOST:PORT" is split by the public sandbox::split_host_port (sandbox/host_port.hpp).
using sandbox::host_and_port;
using sandbox::split_host_port;

/// \brief Quotes user-supplied text for a diagnostics message.
///
/// Wraps it in single quotes, escapes quotes, backslashes, control and non-ASCII bytes as
/// `\xNN`, and shortens text longer than `max_chars` with a trailing "...", so that the
/// message stays on one line and safe to log.
SANDBOX_DECL std::string quote_for_message(std::string_view text, std::size_t max_chars = 80);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_HOST_PATTERN_HPP
