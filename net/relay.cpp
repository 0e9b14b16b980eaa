// net/relay.cpp: the byte pump between a client and its destination.
//
// Each direction waits for readability with no buffer, then moves chunks without ever
// keeping bytes the receiver did not take: it peeks at what the source has into the
// thread's scratch buffer, writes what the receiver accepts now, and drops exactly that
// much from the source. What the receiver refuses stays in the source's kernel buffer, so
// a stalled direction holds no memory of the proxy's and TCP's flow control slows the
// sender; the direction then waits for the receiver to be writable. A handler moves at
// most two chunks before it lets the loop run others, so the loop it shares (the caller's)
// stays responsive.
// EOF on one side is passed on as shutdown(send) on the other (half-close per direction).
// One timer, re-armed only when it fires, closes a tunnel with no traffic either way.
#include "relay.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <cerrno>
#include <memory>

#include <sys/socket.h>

namespace sandbox::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t buffer_bytes = 256 * 1024;

/// The copy buffer of this thread: used only between two suspensions (a chunk is peeked,
/// written and dropped in one go), so one per thread serves every tunnel of the loop.
char* scratch_buffer()
{
    thread_local const std::unique_ptr<char[]> buf =
        std::make_unique_for_overwrite<char[]>(buffer_bytes);
    return buf.get();
}

struct relay_state
{
    tcp::socket& client;
    tcp::socket& server;
    clock_type::time_point last = clock_type::now();
    std::string reason{};
    bool stopping = false;
};

/// Ends every direction: the first reason wins; pending operations are cancelled.
void finish(relay_state& st, std::string_view reason)
{
    if (st.reason.empty())
        st.reason = std::string(reason);
    st.stopping = true;
    boost::system::error_code ignored;
    st.client.cancel(ignored);
    st.server.cancel(ignored);
}

/// Chunks one handler moves before it lets the loop run others (a post): 512 KiB, tens of
/// microseconds of copying, so the loop it shares stays responsive.
constexpr int buffers_per_turn = 2;

/// Writes `n` bytes: at once when the receiver has room (no wait, no post), else the rest
/// asynchronously. False when the relay must end. Only for `first`, which the relay already
/// holds (a request's pipelined bytes, an upstream's early bytes: at most a head's size).
asio::awaitable<bool> write_chunk(relay_state& st, tcp::socket& to, const char* data,
                                  std::size_t n, std::uint64_t& count)
{
    boost::system::error_code ec;
    const std::size_t now = to.write_some(asio::buffer(data, n), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again)
    {
        if (!st.stopping)
            finish(st, "reset");
        co_return false;
    }
    count += now;
    if (now == n)
        co_return true;
    auto [wec, written] = co_await asio::async_write(to, asio::buffer(data + now, n - now),
                                                     asio::as_tuple(asio::use_awaitable));
    count += written;
    if (wec)
    {
        if (!st.stopping)
            finish(st, "reset");
        co_return false;
    }
    co_return true;
}

/// Writes `first` (bytes already read for this direction). False when the relay must end.
asio::awaitable<bool> write_first(relay_state& st, tcp::socket& to, std::string first,
                                  std::uint64_t& count)
{
    bool ok = true;
    if (!first.empty())
    {
        // In its own statement: GCC 12 miscompiles this co_await as an if's condition here.
        ok = co_await write_chunk(st, to, first.data(), first.size(), count);
        st.last = clock_type::now();
    }
    co_return ok;
}

/// What a direction waits for next.
enum class next_wait
{
    readable, ///< `from` has nothing more now
    writable, ///< `to` is full: the bytes stay in `from`'s kernel buffer meanwhile
    yield,    ///< moved its share of this turn: let the loop run others
    ended,    ///< EOF passed on, an error, or the relay stopping
};

next_wait broken(relay_state& st)
{
    finish(st, "reset");
    return next_wait::ended;
}

/// Moves one chunk without ever holding bytes the receiver did not take: peeks at what
/// `from` has (MSG_PEEK), writes what `to` takes now, then drops exactly that much from
/// `from` (MSG_TRUNC discards on TCP without a copy). Whatever `to` refuses stays in the
/// kernel's receive buffer of `from`, so a stalled direction holds no memory of ours, and
/// the sender is slowed by TCP's own flow control. The buffer is the thread's one scratch
/// buffer, never held across a suspension.
next_wait move_chunk(relay_state& st, tcp::socket& from, tcp::socket& to, std::uint64_t& count)
{
    char* buf = scratch_buffer();
    ssize_t n;
    while ((n = ::recv(from.native_handle(), buf, buffer_bytes, MSG_PEEK | MSG_DONTWAIT)) < 0 &&
           errno == EINTR)
    {
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return next_wait::readable;
    if (n == 0)
    {
        boost::system::error_code ec;
        to.shutdown(tcp::socket::shutdown_send, ec);
        return next_wait::ended;
    }
    if (n < 0)
        return broken(st);
    boost::system::error_code ec;
    const std::size_t wrote = to.write_some(asio::buffer(buf, static_cast<std::size_t>(n)), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again)
        return broken(st);
    if (wrote > 0)
    {
        ssize_t dropped;
        while ((dropped = ::recv(from.native_handle(), nullptr, wrote, MSG_TRUNC | MSG_DONTWAIT)) <
                   0 &&
               errno == EINTR)
        {
        }
        if (dropped != static_cast<ssize_t>(wrote))
            return broken(st);
        count += wrote;
        st.last = clock_type::now();
    }
    return wrote < static_cast<std::size_t>(n) ? next_wait::writable : next_wait::yield;
}

/// Moves what `from` has now, a few chunks per turn. Returns what to wait for.
next_wait move_ready(relay_state& st, tcp::socket& from, tcp::socket& to, std::uint64_t& count)
{
    for (int turn = 0; turn < buffers_per_turn; ++turn)
    {
        if (st.stopping)
            return next_wait::ended;
        const next_wait w = move_chunk(st, from, to, count);
        if (w != next_wait::yield)
            return w;
    }
    return next_wait::yield;
}

/// Waits for what `w` names. False when the relay is ending.
asio::awaitable<bool> wait_for(relay_state& st, next_wait w, tcp::socket& from, tcp::socket& to)
{
    if (w == next_wait::yield)
    {
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        co_return !st.stopping;
    }
    tcp::socket& s = w == next_wait::readable ? from : to;
    const auto what = w == next_wait::readable ? tcp::socket::wait_read : tcp::socket::wait_write;
    auto [ec] = co_await s.async_wait(what, asio::as_tuple(asio::use_awaitable));
    if (ec)
    {
        if (!st.stopping && ec != asio::error::operation_aborted)
            finish(st, "reset");
        co_return false;
    }
    co_return !st.stopping;
}

/// Runs `check` on the first bytes of `from` (added to `first`): false when it ended the
/// relay, or the relay is ending.
asio::awaitable<bool> judge_first(relay_state& st, tcp::socket& from, std::string& first,
                                  const first_flight& check)
{
    if (!check)
        co_return true;
    if (st.stopping)
        co_return false;
    const std::string refusal = co_await check(from, first, st.stopping);
    if (!refusal.empty() && !st.stopping)
        finish(st, refusal);
    co_return !st.stopping;
}

/// One direction, until EOF (passed on), an error or the relay stopping; `check` first.
asio::awaitable<void> pump(relay_state& st, tcp::socket& from, tcp::socket& to, std::string first,
                           std::uint64_t& count, const first_flight& check = {})
{
    if (!co_await judge_first(st, from, first, check))
        co_return;
    if (!co_await write_first(st, to, std::move(first), count))
        co_return;
    next_wait w = next_wait::readable;
    while (co_await wait_for(st, w, from, to))
    {
        w = move_ready(st, from, to, count);
        if (w == next_wait::ended)
            co_return;
    }
}

/// Returns when the tunnel was idle for `timeout` (ending the relay), or when cancelled.
asio::awaitable<void> watch_idle(relay_state& st, std::chrono::milliseconds timeout)
{
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (!st.stopping)
    {
        timer.expires_at(st.last + timeout);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;
        if (clock_type::now() >= st.last + timeout)
        {
            finish(st, "idle_timeout");
            co_return;
        }
    }
}

void close_sockets(relay_state& st, bool close_client)
{
    boost::system::error_code ignored;
    if (close_client)
        st.client.close(ignored);
    st.server.close(ignored);
}

/// Runs `directions` against the idle watch and works out why it ended.
template <class Directions>
asio::awaitable<std::string> run_relay(relay_state& st, Directions directions,
                                       std::chrono::milliseconds idle_timeout, bool close_client)
{
    using namespace asio::experimental::awaitable_operators;
    bool thrown = false;
    try
    {
        co_await (std::move(directions) || watch_idle(st, idle_timeout));
    }
    catch (const boost::system::system_error&)
    {
        thrown = true;
    }
    const auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
        st.reason = "stopped";
    else if (thrown && st.reason.empty())
        st.reason = "reset";
    else if (st.reason.empty())
        st.reason = "eof";
    close_sockets(st, close_client);
    co_return st.reason;
}

void make_non_blocking(tcp::socket& s)
{
    boost::system::error_code ignored;
    s.non_blocking(true, ignored);
}

} // namespace

asio::awaitable<relay_totals> relay(tcp::socket& client, tcp::socket& server, std::string to_server,
                                    std::string to_client, std::chrono::milliseconds idle_timeout,
                                    first_flight check)
{
    using namespace asio::experimental::awaitable_operators;
    relay_totals t;
    relay_state st{client, server};
    make_non_blocking(client);
    make_non_blocking(server);
    t.reason = co_await run_relay(st,
                                  pump(st, client, server, std::move(to_server), t.up, check) &&
                                      pump(st, server, client, std::move(to_client), t.down),
                                  idle_timeout, true);
    co_return t;
}

asio::awaitable<relay_totals> relay_one_way(tcp::socket& from, tcp::socket& to,
                                            std::string first,
                                            std::chrono::milliseconds idle_timeout)
{
    relay_totals t;
    relay_state st{to, from};
    make_non_blocking(from);
    t.reason = co_await run_relay(st, pump(st, from, to, std::move(first), t.down), idle_timeout,
                                  false);
    co_return t;
}

} // namespace sandbox::net
