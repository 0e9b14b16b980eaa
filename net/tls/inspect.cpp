// net/tls/inspect.cpp: the two handshakes and the plaintext relay of an inspected tunnel.
#include "inspect.hpp"

#include "tls_leg.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <openssl/ssl.h>

#include <array>
#include <memory>

namespace sandbox::net::tls {

namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// Sleeps `d`; the loser of a race (cancelled) ends quietly.
asio::awaitable<void> sleep_for(std::chrono::milliseconds d)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(use_tuple);
}

// One leg's handshake within `limit`: its error, or timed_out.
asio::awaitable<boost::system::error_code> handshake(tls_leg& leg, std::chrono::milliseconds limit)
{
    auto first = co_await (leg.handshake() || sleep_for(limit));
    if (first.index() == 1)
        co_return asio::error::timed_out;
    co_return std::get<0>(first);
}

// Ends once nothing moved for `idle`.
asio::awaitable<std::string> idle_watch(const steady::time_point& last,
                                        std::chrono::milliseconds idle)
{
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (;;)
    {
        t.expires_at(last + idle);
        co_await t.async_wait(use_tuple);
        if (steady::now() - last >= idle)
            co_return "idle_timeout";
    }
}

// Reads and drops what the peer still sends until its end (at most 1 MiB): a socket closed
// with bytes unread sends a reset, which can destroy the answer it was just given (a 400 or
// 403 to a client still sending its request).
asio::awaitable<void> drain(asio::ip::tcp::socket& s)
{
    std::array<char, 4096> sink;
    for (std::size_t total = 0; total < 1024 * 1024;)
    {
        auto [ec, n] = co_await s.async_read_some(asio::buffer(sink), use_tuple);
        if (ec)
            co_return;
        total += n;
    }
}

// close_notify to a peer that is still there, then its end, within `limit`.
asio::awaitable<void> close_leg(tls_leg& leg, std::chrono::milliseconds limit)
{
    co_await (leg.shutdown() || sleep_for(limit));
    boost::system::error_code ignored;
    leg.socket().shutdown(tcp::socket::shutdown_send, ignored);
    co_await (drain(leg.socket()) || sleep_for(limit));
    leg.socket().close(ignored);
}

std::chrono::microseconds since(steady::time_point t0)
{
    return std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - t0);
}

// The origin's leg: false (and `t` says why) when it did not verify or failed.
asio::awaitable<bool> open_origin(tls_leg& o, inspect_totals& t, std::chrono::milliseconds limit)
{
    const auto t0 = steady::now();
    const auto ec = co_await handshake(o, limit);
    t.origin_handshake = since(t0);
    if (!ec)
    {
        const unsigned char* proto = nullptr;
        unsigned int len = 0;
        SSL_get0_alpn_selected(o.native_handle(), &proto, &len);
        t.origin_alpn.assign(reinterpret_cast<const char*>(proto), len);
        co_return true;
    }
    t.detail = verify_failure(o.native_handle());
    t.reason = ec == asio::error::timed_out ? "handshake_timeout"
               : t.detail.empty()           ? "origin_handshake"
                                            : "origin_untrusted";
    if (t.detail.empty())
        t.detail = ec.message();
    co_return false;
}

// Whether a coroutine's cancellation state says it was cancelled (the proxy stopping). Read
// with `co_await this_coro::cancellation_state`, which never throws; an awaitable of ours
// would, under Asio's default throw_if_cancelled.
bool cancelled(const asio::cancellation_state& cs)
{
    return cs.cancelled() != asio::cancellation_type::none;
}

// An SSL that could not be made ends the tunnel as "internal".
bool failed(const outcome<SSL*>& ssl, inspect_totals& t)
{
    if (ssl)
        return false;
    t.reason = "internal";
    t.detail = ssl.error().diag.message;
    return true;
}

} // namespace

asio::awaitable<inspect_totals> inspect(leg client, leg origin, canonical_host host,
                                        server_context& server, origin_context& origins,
                                        inspect_limits limits, const http_tunnel& http,
                                        origin_sessions* sessions)
{
    inspect_totals t;
    auto origin_ssl = origins.new_connection(host, sessions);
    if (failed(origin_ssl, t))
        co_return t;
    tls_leg o(std::move(origin.socket), *origin_ssl, std::move(origin.first));
    if (!co_await open_origin(o, t, limits.handshake_timeout))
    {
        // The proxy stopped during the handshake.
        if (cancelled(co_await asio::this_coro::cancellation_state))
            t.reason = "stopped";
        co_return t; // no leaf for an origin that did not verify: the client sees the close
    }
    client_hello_state st;
    st.connect_host = std::move(host);
    auto client_ssl = server.new_connection(st);
    if (failed(client_ssl, t))
        co_return t;
    tls_leg c(std::move(client.socket), *client_ssl, std::move(client.first));
    const auto t0 = steady::now();
    const auto ec = co_await handshake(c, limits.handshake_timeout);
    t.client_handshake = since(t0);
    t.sni = st.sni;
    t.leaf_from_cache = st.leaf_from_cache;
    if (ec)
    {
        t.reason = ec == asio::error::timed_out ? "handshake_timeout"
                   : st.refused.empty()         ? "client_handshake"
                                                : st.refused;
        if (cancelled(co_await asio::this_coro::cancellation_state))
            t.reason = "stopped";
        t.detail = ec.message();
        co_return t;
    }
    http_counters n;
    auto ended = co_await (relay_http(c, o, http, n) || idle_watch(n.last, limits.idle_timeout));
    std::visit([&](std::string& why) { t.reason = std::move(why); }, ended);
    t.up = n.up;
    t.down = n.down;
    if (cancelled(co_await asio::this_coro::cancellation_state))
    {
        t.reason = "stopped";
        co_return t;
    }
    if (t.reason != "closed") // a truncated or broken leg: the other sees its end as abrupt
    {                         // (a close_notify would vouch for a body cut short)
        boost::system::error_code ignored;
        c.socket().close(ignored);
        o.socket().close(ignored);
        co_return t;
    }
    co_await (close_leg(c, limits.close_timeout) && close_leg(o, limits.close_timeout));
    co_return t;
}

} // namespace sandbox::net::tls
