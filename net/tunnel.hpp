// net/tunnel.hpp: what the HTTP CONNECT and SOCKS5 fronts share once a request names a
// destination: whether the call inspects it (a place among its inspected tunnels taken
// before anything is dialled), and the tunnel's body once connected: inspected, or relayed
// with its server name checked (`net_policy::sni_check`).
#ifndef SANDBOX_NET_TUNNEL_HPP
#define SANDBOX_NET_TUNNEL_HPP

#include "egress.hpp"
#include "relay.hpp"
#include "tls/inspector.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <string>

namespace sandbox::net {

/// Whether a tunnel is inspected, and its place among the call's inspected tunnels.
struct tunnel_choice
{
    bool inspected = false;
    /// Held while the tunnel runs (inspected only).
    tls::tunnel_slot slot{};
    /// Inspected, but the call's inspected tunnels are all open: refused and recorded
    /// (`tunnel_cap`); the front answers 503 with Retry-After, or SOCKS5 REP 01.
    bool over_cap = false;
};

/// \brief Chooses for `target` before it is dialled; past the cap, records the refusal.
tunnel_choice choose_tunnel(egress& gate, net_protocol protocol, const std::string& requested,
                            const authority& target);

/// \brief The body of a connected tunnel (`op`, the destination answered to the client
/// already): inspected when `inspected`, else relayed with the call's server-name check.
/// `rest`: bytes the client sent after its request. The totals go to `egress::closed`;
/// both sockets are closed at the end.
boost::asio::awaitable<relay_totals> carry_tunnel(egress& gate,
                                                  boost::asio::ip::tcp::socket& client, opened& op,
                                                  const authority& target, std::string rest,
                                                  bool inspected);

} // namespace sandbox::net

#endif // SANDBOX_NET_TUNNEL_HPP
