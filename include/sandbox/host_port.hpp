// sandbox/host_port.hpp: "HOST:PORT" as allow rules, config documents and the tools take it.
#ifndef SANDBOX_HOST_PORT_HPP
#define SANDBOX_HOST_PORT_HPP

#include <sandbox/config.hpp>
#include <sandbox/failure.hpp>

#include <string_view>

namespace sandbox {

/// A host and the port that followed it.
struct host_and_port
{
    std::string_view host{}; ///< a view into the text split
    /// 0 when no port was given.
    int port = 0;
};

/// \brief Splits "HOST:PORT" (`[V6]:PORT` for an IPv6 literal), the form `allow_hosts`,
/// `sandbox-run --allow-host` and config documents take.
///
/// The port follows the only ':' of a name or IPv4 literal, or the ']' of a bracketed IPv6
/// literal; a bare IPv6 literal has no port. An empty host, an empty port or one outside 1 to
/// 65535 is `errc::validation` (no `limit`: the caller knows which field it read). The host
/// part is not checked here (`net_policy` validation does that).
SANDBOX_DECL outcome<host_and_port> split_host_port(std::string_view text);

/// \brief True for `localhost` and every name under `.localhost`, in any case (RFC 6761:
/// they resolve to loopback on common stacks, so the egress proxy classes them as loopback
/// without a lookup).
SANDBOX_DECL bool is_localhost_name(std::string_view name) noexcept;

/// \brief True for a localhost name (`is_localhost_name`) or a loopback address literal:
/// 127.0.0.0/8, ::1, or an IPv4-mapped 127.x address, bare or in brackets (`[::1]`).
SANDBOX_DECL bool is_loopback_host(std::string_view host) noexcept;

} // namespace sandbox

#endif // SANDBOX_HOST_PORT_HPP
