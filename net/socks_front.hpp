// net/socks_front.hpp: the SOCKS5 side of the proxy's port (RFC 1928 CONNECT, address
// types IPv4, domain, IPv6; no authentication). BIND and UDP ASSOCIATE answer 07.
#ifndef SANDBOX_LIB_NET_SOCKS_FRONT_HPP
#define SANDBOX_LIB_NET_SOCKS_FRONT_HPP

#include "egress.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <string>

namespace sandbox::net {

/// \brief Serves one SOCKS5 client to its end: handshake (within
/// `socks_handshake_timeout`), the request, `egress::open`, the reply, the relay, the
/// `closed` record. `first` holds the bytes the proxy already read (the version byte at
/// least). `over_cap`: the connection cap that is reached (empty: none); the request is
/// answered REP 01 and recorded as `tunnel_cap` with it as the rule. Terminal cancellation (the proxy's stop) closes it.
boost::asio::awaitable<void> serve_socks5(std::shared_ptr<egress> gate,
                                          boost::asio::ip::tcp::socket client,
                                          std::string first, std::string over_cap);

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_SOCKS_FRONT_HPP
