// lib/net/proxy.cpp: the egress proxy's listeners and connections. Everything runs on the
// egress's executor (the caller's loop): no thread of ours. Each accepted connection is a
// coroutine bound to its own cancellation signal; `stop` closes the acceptors and emits
// terminal cancellation on every signal, so each connection ends with its `closed` record
// ("stopped"). The coroutines hold the shared state, so destroying the proxy mid-flight is
// safe. The first byte picks the protocol: 0x05 is SOCKS5, anything else HTTP.
#include "proxy.hpp"

#include "http_front.hpp"
#include "socks_front.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <list>
#include <map>

namespace sandbox::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

struct egress_proxy::state : std::enable_shared_from_this<egress_proxy::state>
{
    explicit state(std::shared_ptr<egress> g) : gate(std::move(g)) {}

    std::shared_ptr<egress> gate;
    std::list<tcp::acceptor> acceptors{};
    /// The cancellation signal of each open connection.
    std::map<std::uint64_t, std::shared_ptr<asio::cancellation_signal>> connections{};
    std::uint64_t next_id = 1;
    bool stopped = false;
};

namespace {

using state_ptr = std::shared_ptr<egress_proxy::state>;

/// Reads the first byte, then hands the connection to its front.
asio::awaitable<void> serve_connection(state_ptr st, tcp::socket client, bool over_cap)
{
    const auto deadline = clock_type::now() + st->gate->limits().head_timeout;
    try
    {
        char first = 0;
        boost::system::error_code ec;
        const std::size_t n = co_await read_before(client, asio::buffer(&first, 1), deadline, ec);
        if (ec || n != 1)
            co_return;
        if (first == 0x05)
            co_await serve_socks5(st->gate, std::move(client), std::string(1, first), over_cap);
        else
            co_await serve_http(st->gate, std::move(client), std::string(1, first), over_cap,
                                deadline);
    }
    catch (const boost::system::system_error&)
    {
    }
}

void start_connection(const state_ptr& st, tcp::socket client)
{
    const std::uint64_t id = st->next_id++;
    auto signal = std::make_shared<asio::cancellation_signal>();
    st->connections.emplace(id, signal);
    const bool over_cap = st->connections.size() > st->gate->limits().max_tunnels;
    asio::co_spawn(st->gate->get_executor(), serve_connection(st, std::move(client), over_cap),
                   asio::bind_cancellation_slot(signal->slot(), [st, id, signal](std::exception_ptr) {
                       st->connections.erase(id);
                   }));
}

/// Waits a little after an accept error that is not the end (EMFILE, ENFILE, ENOBUFS).
asio::awaitable<void> back_off()
{
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(50));
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
}

/// Connections over `max_tunnels` are still accepted, to be answered 503 (SOCKS: 01) once
/// their request is read; beyond this many more, accepting pauses until one ends (the
/// kernel's backlog holds the rest), so a flood holds at most this many head buffers more.
constexpr std::size_t over_cap_answered = 64;

asio::awaitable<void> accept_loop(state_ptr st, tcp::acceptor& acceptor)
{
    while (!st->stopped && acceptor.is_open())
    {
        if (st->connections.size() >= st->gate->limits().max_tunnels + over_cap_answered)
        {
            co_await back_off();
            continue;
        }
        auto [ec, client] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
        if (st->stopped || ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor)
            co_return;
        if (ec)
        {
            co_await back_off();
            continue;
        }
        start_connection(st, std::move(client));
    }
}

} // namespace

egress_proxy::egress_proxy(std::shared_ptr<egress> gate) : st_(std::make_shared<state>(std::move(gate)))
{
}

egress_proxy::~egress_proxy()
{
    stop();
}

void egress_proxy::add_listener(tcp::acceptor listener)
{
    if (st_->stopped)
        return;
    auto& a = st_->acceptors.emplace_back(std::move(listener));
    asio::co_spawn(st_->gate->get_executor(), accept_loop(st_, a), asio::detached);
}

void egress_proxy::stop()
{
    if (!st_ || st_->stopped)
        return;
    st_->stopped = true;
    boost::system::error_code ignored;
    for (auto& a : st_->acceptors)
        a.close(ignored);
    // Emitting may complete a connection and erase it: work on a copy.
    auto open = st_->connections;
    for (auto& [id, signal] : open)
        signal->emit(asio::cancellation_type::terminal);
}

std::size_t egress_proxy::connections() const noexcept
{
    return st_->connections.size();
}

} // namespace sandbox::net
