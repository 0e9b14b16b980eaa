// net/tls/inspect.hpp: a tunnel with TLS terminated on both legs. The origin's handshake comes
// first (verified: an origin that does not verify never gets a leaf made for it), then the
// client's, with a leaf for the CONNECT host only; then the plaintext is copied both ways.
// The plaintext is HTTP/1.x, judged request by request (http_inside.hpp).
#ifndef SANDBOX_NET_TLS_INSPECT_HPP
#define SANDBOX_NET_TLS_INSPECT_HPP

#include "http_inside.hpp"
#include "origin_context.hpp"
#include "server_context.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace sandbox::net::tls {

/// Deadlines of an inspected tunnel.
struct inspect_limits
{
    /// Each leg's handshake.
    std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10);
    /// No byte either way for this long ends the tunnel.
    std::chrono::milliseconds idle_timeout = std::chrono::minutes(10);
    /// The close_notify exchange at the end, each leg.
    std::chrono::milliseconds close_timeout = std::chrono::seconds(2);
    /// Inspected tunnels open at once (one inspector: one call). A selected CONNECT past it
    /// is answered 503 with `Retry-After` (SOCKS5: REP 01) before anything is dialled, and
    /// recorded as a `tunnel_cap` decision (rule "max_inspected_tunnels N");
    /// opaque tunnels do not count (an inspected one holds two TLS states and the hooks'
    /// buffers, a relay two sockets).
    std::size_t max_tunnels = 256;
};

/// What an inspected tunnel did.
struct inspect_totals
{
    std::uint64_t up = 0;   ///< plaintext client to origin
    std::uint64_t down = 0; ///< plaintext origin to client
    /// How it ended. Before any byte was relayed: "origin_untrusted" (the origin's certificate
    /// did not verify; `detail` says why), "origin_handshake" (another failure of the origin's
    /// TLS), "handshake_timeout", "sni_mismatch", "bad_sni", "no_leaf", "client_handshake"
    /// (the client refused the leaf or failed otherwise), "internal". After: "closed" (one
    /// side sent close_notify; the other got ours), "truncated" (one side ended its TCP
    /// stream without close_notify; the other's end is as abrupt, never vouched for),
    /// "idle_timeout", "reset", "bad_request" (a request body whose framing broke),
    /// "bad_response" (the origin's), "cut" (a body hook refused a message under way: both
    /// legs closed without close_notify), "stopped" (cancelled).
    std::string reason{};
    std::string detail{};
    std::string sni{};         ///< the client's server name (empty: none)
    std::string origin_alpn{}; ///< what the origin chose ("http/1.1" or none)
    bool leaf_from_cache = false;
    std::chrono::microseconds origin_handshake{};
    std::chrono::microseconds client_handshake{};
};

/// A connected socket and the bytes already read from it (given to TLS before the socket's).
struct leg
{
    boost::asio::ip::tcp::socket socket;
    std::string first{};
};

/// \brief Terminates TLS on `client` (whose CONNECT to `host` was answered 200; `first`: what
/// it sent already, its ClientHello read to decide on inspection) and on `origin` (connected
/// to `host` by the egress, which checked policy; `first`: bytes it sent early), then relays
/// the HTTP requests inside (`relay_http`, told by `http`) until one side closes, the idle
/// timeout, an error or cancellation (terminal: both sockets closed). Both sockets are
/// closed at the end. Runs on the sockets' executor. `sessions`: the origin sessions of the
/// call, offered and kept (null: none).
boost::asio::awaitable<inspect_totals> inspect(leg client, leg origin, canonical_host host,
                                               server_context& server, origin_context& origins,
                                               inspect_limits limits, const http_tunnel& http,
                                               origin_sessions* sessions = nullptr);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_INSPECT_HPP
