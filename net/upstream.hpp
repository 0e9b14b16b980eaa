// net/upstream.hpp: the client side of the configured upstream proxy (net_mode::proxy):
// an HTTP CONNECT (Basic credentials) or a SOCKS5 CONNECT (RFC 1928, RFC 1929 credentials)
// on a socket already connected to the upstream. Errors come back as an `open_status`.
#ifndef SANDBOX_LIB_NET_UPSTREAM_HPP
#define SANDBOX_LIB_NET_UPSTREAM_HPP

#include "egress.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstddef>
#include <string>

namespace sandbox::net {

/// \brief What the upstream said to a CONNECT.
struct upstream_reply
{
    open_status status = open_status::upstream_failed;
    /// One line for the client when `status != connected` (never a credential).
    std::string message{};
    /// Bytes the upstream sent after its reply head (HTTP only; SOCKS5 reads exact sizes).
    std::string early_bytes{};
};

/// The largest HTTP response head accepted from an upstream.
inline constexpr std::size_t max_upstream_head = 64 * 1024;

/// "Basic base64(user:password)" for `u`, or empty when it has no user.
std::string basic_authorization(const upstream_proxy& u);

/// \brief Sends `CONNECT target HTTP/1.1` (Host, and Proxy-Authorization when `u` has a user)
/// and reads the response head: 200 is `connected`, 407 and every other status
/// `upstream_refused`, a broken or oversized head or an early close `upstream_failed`.
boost::asio::awaitable<upstream_reply>
http_connect(boost::asio::ip::tcp::socket& s, const upstream_proxy& u, const authority& target);

/// \brief RFC 1928 client: offers no authentication (and username/password, RFC 1929, when `u`
/// has a user), then CONNECTs to `target` (a name as ATYP 03: the upstream resolves it).
/// REP 05 is `dial_refused`, 03/04 `dial_failed`, 06 `dial_timeout`, any other refusal
/// `upstream_refused`; a protocol violation or close `upstream_failed`.
boost::asio::awaitable<upstream_reply>
socks5_connect(boost::asio::ip::tcp::socket& s, const upstream_proxy& u, const authority& target);

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_UPSTREAM_HPP
