// net/proxy.cpp: the egress proxy's listeners and connections. Everything runs on the
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
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <functional>
#include <list>
#include <map>
#include <utility>
#include <vector>

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
    /// Connections holding a share of every budget; the others are being refused.
    std::size_t admitted = 0;
    std::size_t refusing = 0;
    bool stopped = false;
    /// Called (each once) when the last connection ends after `stop`.
    std::vector<std::shared_ptr<std::function<void()>>> on_drained{};

    /// Runs the `on_drained` waiters once stopped and no connection is left.
    void maybe_drained()
    {
        if (!stopped || !connections.empty())
            return;
        auto waiters = std::move(on_drained);
        on_drained.clear();
        for (auto& w : waiters)
            if (auto f = std::exchange(*w, nullptr))
                f();
    }
};

namespace {

using state_ptr = std::shared_ptr<egress_proxy::state>;

/// Reads the first byte, then hands the connection to its front.
asio::awaitable<void> serve_connection(state_ptr st, tcp::socket client, std::string over_cap)
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
            co_await serve_socks5(st->gate, std::move(client), std::string(1, first),
                                  std::move(over_cap));
        else
            co_await serve_http(st->gate, std::move(client), std::string(1, first),
                                std::move(over_cap), deadline);
    }
    catch (const boost::system::system_error&)
    {
    }
}

/// Takes a share of each budget for a new connection: this exec's cap, its sandbox's
/// budget, the process's. Returns the cap that is spent ("max_tunnels 512"; nothing is
/// taken then), or "" when admitted.
std::string admit(egress_proxy::state& st)
{
    const auto& cfg = st.gate->config();
    if (st.admitted >= cfg.limits.max_tunnels)
        return "max_tunnels " + std::to_string(cfg.limits.max_tunnels);
    tunnel_budget* sandbox = cfg.sandbox_budget.get();
    if (sandbox && !sandbox->try_acquire())
        return "max_sandbox_tunnels " + std::to_string(sandbox->limit());
    tunnel_budget& process = process_tunnel_budget();
    if (!process.try_acquire())
    {
        if (sandbox)
            sandbox->release();
        return "process descriptor budget " + std::to_string(process.limit());
    }
    ++st.admitted;
    return {};
}

void release(egress_proxy::state& st)
{
    --st.admitted;
    if (auto* sandbox = st.gate->config().sandbox_budget.get())
        sandbox->release();
    process_tunnel_budget().release();
}

void start_connection(const state_ptr& st, tcp::socket client)
{
    const std::uint64_t id = st->next_id++;
    auto signal = std::make_shared<asio::cancellation_signal>();
    st->connections.emplace(id, signal);
    std::string over_cap = admit(*st);
    const bool admitted = over_cap.empty();
    if (!admitted)
        ++st->refusing;
    asio::co_spawn(st->gate->get_executor(),
                   serve_connection(st, std::move(client), std::move(over_cap)),
                   asio::bind_cancellation_slot(signal->slot(), [st, id, signal, admitted](std::exception_ptr) {
                       st->connections.erase(id);
                       if (admitted)
                           release(*st);
                       else
                           --st->refusing;
                       st->maybe_drained();
                   }));
}

/// Waits a little after an accept error that is not the end (EMFILE, ENFILE, ENOBUFS).
asio::awaitable<void> back_off()
{
    asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(50));
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
}

/// Connections past a cap are still accepted, to be answered 503 (SOCKS: 01) with a record
/// once their request is read; with this many being refused, accepting pauses until one
/// ends (the kernel's backlog holds the rest), so a flood holds at most this many head
/// buffers and descriptors more per exec.
constexpr std::size_t over_cap_answered = 64;

asio::awaitable<void> accept_loop(state_ptr st, tcp::acceptor& acceptor)
{
    while (!st->stopped && acceptor.is_open())
    {
        if (st->refusing >= over_cap_answered)
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

void egress_proxy::stop(std::function<void()> drained, std::chrono::milliseconds bound)
{
    stop();
    auto timer = std::make_shared<asio::steady_timer>(st_->gate->get_executor(), bound);
    // Whichever comes first, the last connection's end or the bound, calls `drained`.
    auto once = std::make_shared<std::function<void()>>([timer, f = std::move(drained)] {
        timer->cancel();
        f();
    });
    st_->on_drained.push_back(once);
    timer->async_wait([once](boost::system::error_code) {
        if (auto f = std::exchange(*once, nullptr))
            f();
    });
    asio::post(st_->gate->get_executor(), [st = st_] { st->maybe_drained(); });
}

std::size_t egress_proxy::connections() const noexcept
{
    return st_->connections.size();
}

} // namespace sandbox::net
