// lib/host/pattern.hpp: the parser of a rule's host pattern (domains, wildcards, IPs, CIDR).
// Its domains are mapped by canonical.hpp's `to_ascii_name`, the mapping every destination
// host gets, so a pattern and the hosts it names are one spelling.
#ifndef SANDBOX_LIB_HOST_PATTERN_HPP
#define SANDBOX_LIB_HOST_PATTERN_HPP

#include <sandbox/failure.hpp>
#include <sandbox/host_port.hpp>

#include "text.hpp"

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
    /// Domain forms: lower-case A-labels (IDNA UTS-46, as `net::to_ascii_name`), trailing dot
    /// removed; for a wildcard the part after "*.".
    /// Empty for the ip and cidr forms.
    std::string host{};
    /// The literal (ip) or the network address (cidr).
    boost::asio::ip::address address{};
    /// The prefix length for cidr, -1 otherwise.
    int prefix_length = -1;
};

/// \brief Parses one host pattern. Nothing is trimmed. Domain labels may be UTF-8; they are
/// mapped to A-labels here, so a name IDNA refuses is refused when the policy is validated.
///
/// Fails with `errc::validation` and a one-line message that quotes the offending text. The
/// failure carries no `limit`: the caller knows which field the text came from.
SANDBOX_DECL outcome<host_pattern> parse_host_pattern(std::string_view text);

// "HOST:PORT" is split by the public sandbox::split_host_port (sandbox/host_port.hpp).
using sandbox::host_and_port;
using sandbox::split_host_port;

} // namespace sandbox::detail

#endif // SANDBOX_LIB_HOST_PATTERN_HPP
