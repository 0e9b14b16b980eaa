// net/tls/http_inside.hpp: HTTP/1.x between the two terminated legs of an inspected tunnel.
// Each request is parsed strictly (Boost.Beast's parser) before any byte of it reaches the
// origin: its Host must be the CONNECT host (421 otherwise), the request rules judge it (403
// naming the rule), the proxy's headers are added; then its body, and the origin's response,
// are copied as they arrive, framing checked by the parser and bytes as sent. An upgraded
// connection (101) is relayed as it is from then on.
#ifndef SANDBOX_NET_TLS_HTTP_INSIDE_HPP
#define SANDBOX_NET_TLS_HTTP_INSIDE_HPP

#include "request_policy.hpp"
#include "tls_leg.hpp"

#include <sandbox/http_hooks.hpp>
#include <sandbox/net_proxy.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace sandbox::net::tls {

/// What the HTTP side of one inspected tunnel is told.
struct http_tunnel
{
    /// The call's request rules and headers (null: every request passes as it is).
    const request_policy* policy = nullptr;
    /// The CONNECT host and port: what a request's Host must name.
    canonical_host host{};
    std::uint16_t port = 0;
    /// The caller's hooks (null: none), and the tunnel's number they are told.
    const http_hooks* hooks = nullptr;
    std::uint64_t connection = 0;
    /// Bodies the hooks see whole, at most this many bytes (0: heads only).
    std::size_t body_cap = 0;
    /// Gets one record per request: allowed or not, why (net_record::http's reasons), and
    /// what was seen. May be empty.
    std::function<void(bool allowed, std::string reason, net_http_record)> on_request{};
};

/// Byte counts and the time of the last move, shared with the tunnel's idle watch.
struct http_counters
{
    std::uint64_t up = 0;   ///< plaintext written to the origin
    std::uint64_t down = 0; ///< plaintext written to the client
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
};

/// \brief Relays requests and responses until the tunnel ends: "closed" (an orderly end: a
/// close_notify, a `Connection: close`, or a request the proxy answered itself and closed
/// after), "truncated" (a TCP end without close_notify), "reset", "cut" (a body hook refused a
/// message under way), "bad_response" (the origin's
/// response does not parse; the client got 502 if nothing of it was sent yet).
boost::asio::awaitable<std::string> relay_http(tls_leg& client, tls_leg& origin,
                                               const http_tunnel& t, http_counters& n);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_HTTP_INSIDE_HPP
