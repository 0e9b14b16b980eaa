// lib/net/relay.cpp: the byte pump between a client and its destination.
//
// Each direction waits for readability with no buffer, then borrows a buffer from a small
// per-thread free list, reads without blocking and writes what it read, until the socket
// would block; then the buffer goes back. An idle tunnel therefore holds no buffer. A write
// is tried at once (the receiver usually has room) and awaited only when it would block; a
// handler moves at most four buffers before it lets the loop run others, so the loop it
// shares (the caller's) stays responsive.
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

#include <memory>
#include <vector>

namespace sandbox::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t buffer_bytes = 256 * 1024;
constexpr std::size_t pool_keep = 32;

/// The free list of copy buffers of this thread (the proxy's loop runs on one thread at a
/// time; a buffer goes back to the list of the thread that frees it).
std::vector<std::unique_ptr<char[]>>& free_buffers()
{
    thread_local std::vector<std::unique_ptr<char[]>> list;
    return list;
}

/// A buffer borrowed while bytes move.
class buffer_lease
{
public:
    buffer_lease()
    {
        auto& list = free_buffers();
        if (list.empty())
            p_ = std::make_unique_for_overwrite<char[]>(buffer_bytes);
        else
        {
            p_ = std::move(list.back());
            list.pop_back();
        }
    }
    ~buffer_lease()
    {
        auto& list = free_buffers();
        if (list.size() < pool_keep)
            list.push_back(std::move(p_));
    }
    buffer_lease(const buffer_lease&) = delete;
    buffer_lease& operator=(const buffer_lease&) = delete;

    char* data() const noexcept { return p_.get(); }

private:
    std::unique_ptr<char[]> p_;
};

struct relay_state
{
    tcp::socket& client;
    tcp::socket& server;
    clock_type::time_point last = clock_type::now();
    std::string reason{};
    bool stopping = false;
};

/// Ends every direction: the first reason wins; pending operations are cancelled.
void finish(relay_state& st, const char* reason)
{
    if (st.reason.empty())
        st.reason = reason;
    st.stopping = true;
    boost::system::error_code ignored;
    st.client.cancel(ignored);
    st.server.cancel(ignored);
}

/// Buffers one handler moves before it lets the loop run others (a post): 256 KiB, tens of
/// microseconds of copying, so the loop it shares stays responsive.
constexpr int buffers_per_turn = 2;

/// Writes `n` bytes: at once when the receiver has room (no wait, no post), else the rest
/// asynchronously. False when the relay must end.
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

/// Moves what `from` has now to `to`, with one borrowed buffer, yielding to the loop every
/// few buffers. False when the direction ended (EOF passed on, an error, or the relay
/// stopping).
asio::awaitable<bool> move_ready(relay_state& st, tcp::socket& from, tcp::socket& to,
                                 std::uint64_t& count)
{
    buffer_lease buf;
    for (int turn = 1; !st.stopping; ++turn)
    {
        boost::system::error_code ec;
        const std::size_t n = from.read_some(asio::buffer(buf.data(), buffer_bytes), ec);
        if (ec == asio::error::would_block || ec == asio::error::try_again)
            co_return true;
        if (ec == asio::error::eof)
        {
            to.shutdown(tcp::socket::shutdown_send, ec);
            co_return false;
        }
        if (ec)
        {
            finish(st, "reset");
            co_return false;
        }
        st.last = clock_type::now();
        if (!co_await write_chunk(st, to, buf.data(), n, count))
            co_return false;
        if (turn % buffers_per_turn == 0)
            co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    }
    co_return false;
}

/// One direction, until EOF (passed on), an error or the relay stopping.
asio::awaitable<void> pump(relay_state& st, tcp::socket& from, tcp::socket& to,
                           std::string first, std::uint64_t& count)
{
    if (!co_await write_first(st, to, std::move(first), count))
        co_return;
    while (!st.stopping)
    {
        auto [ec] = co_await from.async_wait(tcp::socket::wait_read,
                                             asio::as_tuple(asio::use_awaitable));
        if (ec)
        {
            if (!st.stopping && ec != asio::error::operation_aborted)
                finish(st, "reset");
            co_return;
        }
        if (!co_await move_ready(st, from, to, count))
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

asio::awaitable<relay_totals> relay(tcp::socket& client, tcp::socket& server,
                                    std::string to_server, std::string to_client,
                                    std::chrono::milliseconds idle_timeout)
{
    using namespace asio::experimental::awaitable_operators;
    relay_totals t;
    relay_state st{client, server};
    make_non_blocking(client);
    make_non_blocking(server);
    t.reason = co_await run_relay(st,
                                  pump(st, client, server, std::move(to_server), t.up) &&
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
