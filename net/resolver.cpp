// net/resolver.cpp: see resolver.hpp.
//
// How c-ares runs on the executor: the channel (one per resolver, opened on the first lookup)
// tells us through ARES_OPT_SOCK_STATE_CB which sockets it wants watched for reading or
// writing. Each one gets a posix::stream_descriptor that only borrows the fd (released, never
// closed, when c-ares says it is done with it or the resolver goes) and an async_wait per
// direction whose handler calls ares_process_fd and waits again. One steady_timer follows
// ares_timeout() so that c-ares's retries and its own timeouts fire. Each lookup has a timer
// of its own: its deadline, which is also how the answer wakes the waiting coroutine (the
// c-ares callback stores the result and cancels it). No thread, no blocking call besides
// c-ares reading resolv.conf and /etc/hosts.
#include "resolver.hpp"

#include "host/canonical.hpp"
#include "host/pattern.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <ares.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

namespace sandbox::net {

namespace asio = boost::asio;
using boost::system::error_code;

static_resolver::static_resolver(std::map<std::string, std::vector<asio::ip::address>> pins,
                                 std::shared_ptr<resolver> next)
    : pins_(std::move(pins)), next_(std::move(next))
{
}

asio::awaitable<resolve_result> static_resolver::resolve(std::string name)
{
    ++calls_;
    if (auto it = pins_.find(name); it != pins_.end())
        co_return resolve_result{{}, it->second};
    if (!next_)
        co_return resolve_result{asio::error::host_not_found, {}};
    co_return co_await next_->resolve(std::move(name));
}

namespace {

/// ares_library_init, once per process (it is not thread-safe itself).
int init_cares_library()
{
    static std::once_flag once;
    static int status = ARES_SUCCESS;
    std::call_once(once, [] { status = ::ares_library_init(ARES_LIB_INIT_ALL); });
    return status;
}

/// A c-ares status as the error a lookup reports.
error_code lookup_error(int status)
{
    switch (status)
    {
    case ARES_SUCCESS:
        return {};
    case ARES_ENOTFOUND:
    case ARES_ENODATA:
    case ARES_ENONAME:
        return asio::error::host_not_found;
    case ARES_ETIMEOUT:
        return asio::error::timed_out;
    case ARES_ECONNREFUSED:
        return asio::error::connection_refused;
    case ARES_EDESTRUCTION:
    case ARES_ECANCELLED:
        return asio::error::operation_aborted;
    case ARES_ENOMEM:
        return asio::error::no_memory;
    case ARES_EBADNAME:
        return asio::error::invalid_argument;
    default: // SERVFAIL, REFUSED, FORMERR, a bad response, ...
        return asio::error::host_not_found_try_again;
    }
}

/// "ADDRESS", "ADDRESS:PORT" or "[V6]:PORT" as c-ares's "a.b.c.d:port" / "[v6]:port".
std::optional<std::string> server_entry(std::string_view t)
{
    if (t.find('%') != std::string_view::npos) // zone ids: not for a server list
        return std::nullopt;
    std::string_view host = t;
    std::string_view port = "53";
    bool v6 = false;
    if (!t.empty() && t.front() == '[')
    {
        const auto close = t.find(']');
        if (close == std::string_view::npos)
            return std::nullopt;
        host = t.substr(1, close - 1);
        const auto rest = t.substr(close + 1);
        if (!rest.empty() && (rest.front() != ':' || rest.size() == 1))
            return std::nullopt;
        if (!rest.empty())
            port = rest.substr(1);
        v6 = true;
    }
    else if (const auto colon = t.find(':'); colon != std::string_view::npos)
    {
        v6 = t.find(':', colon + 1) != std::string_view::npos; // a bare IPv6
        if (!v6)
        {
            host = t.substr(0, colon);
            port = t.substr(colon + 1);
        }
    }
    error_code ec;
    std::string text;
    if (v6)
        text = "[" + asio::ip::make_address_v6(std::string(host), ec).to_string() + "]";
    else
        text = asio::ip::make_address_v4(std::string(host), ec).to_string();
    const auto p = parse_port(port);
    if (ec || !p)
        return std::nullopt;
    return text + ":" + std::to_string(*p);
}

/// The addresses of a c-ares answer, in its order.
std::vector<asio::ip::address> answer_addresses(const ares_addrinfo* ai)
{
    std::vector<asio::ip::address> out;
    for (auto* n = ai ? ai->nodes : nullptr; n; n = n->ai_next)
    {
        if (n->ai_family == AF_INET)
        {
            sockaddr_in sa{};
            std::memcpy(&sa, n->ai_addr, sizeof sa);
            out.emplace_back(asio::ip::address_v4(ntohl(sa.sin_addr.s_addr)));
        }
        else if (n->ai_family == AF_INET6)
        {
            sockaddr_in6 sa{};
            std::memcpy(&sa, n->ai_addr, sizeof sa);
            asio::ip::address_v6::bytes_type b{};
            std::memcpy(b.data(), &sa.sin6_addr, b.size());
            out.emplace_back(asio::ip::address_v6(b));
        }
    }
    return out;
}

/// One lookup, shared by the waiting coroutine and (weakly) by the c-ares callback.
struct query_state
{
    explicit query_state(const asio::any_io_executor& ex) : wake(ex) {}
    /// Expires at the lookup's deadline; cancelled early when the lookup ends otherwise.
    asio::steady_timer wake;
    bool done = false;
    resolve_result result{};

    /// Ends the lookup once; later endings (a late answer) are ignored.
    void finish(resolve_result r)
    {
        if (done)
            return;
        done = true;
        result = std::move(r);
        wake.cancel();
    }
};

/// The c-ares callback's argument: owned by c-ares until it calls back (it always does,
/// at the latest from ares_destroy).
using query_ref = std::weak_ptr<query_state>;

void on_answer(void* arg, int status, int /*timeouts*/, ares_addrinfo* ai)
{
    std::unique_ptr<query_ref> ref(static_cast<query_ref*>(arg));
    if (auto q = ref->lock())
        q->finish(resolve_result{lookup_error(status), answer_addresses(ai)});
    if (ai)
        ::ares_freeaddrinfo(ai);
}

/// c-ares settings for a lookup bounded by `timeout` over `servers` servers: two tries each,
/// the second twice as long (c-ares doubles per round), rounded up so that c-ares gives up
/// just after the lookup's own deadline, which therefore decides.
struct retry_plan
{
    int tries = 2;
    int per_try_ms = 0;
};

retry_plan plan_retries(std::chrono::milliseconds timeout, int servers)
{
    retry_plan p;
    const auto rounds = static_cast<long long>(std::max(servers, 1)) * 3; // 1 + 2 per server
    const long long per_try = (timeout.count() + rounds) / rounds;
    p.per_try_ms = static_cast<int>(std::clamp<long long>(per_try, 1, 1 << 28)); // c-ares shifts it
    return p;
}

/// The number of servers c-ares would use from resolv.conf (a channel that sends nothing).
int resolv_conf_servers()
{
    ares_channel probe = nullptr;
    if (::ares_init(&probe) != ARES_SUCCESS)
        return 1;
    int n = 0;
    ares_addr_port_node* list = nullptr;
    if (::ares_get_servers_ports(probe, &list) == ARES_SUCCESS)
        for (auto* s = list; s; s = s->next)
            ++n;
    ::ares_free_data(list);
    ::ares_destroy(probe);
    return std::max(n, 1);
}

class cares_resolver final : public resolver,
                             public std::enable_shared_from_this<cares_resolver>
{
public:
    cares_resolver(asio::any_io_executor ex, std::chrono::milliseconds timeout,
                   std::string servers_csv, int servers)
        : ex_(std::move(ex)), timeout_(timeout), servers_csv_(std::move(servers_csv)),
          servers_(servers), timer_(ex_)
    {
    }
    ~cares_resolver() override;

    asio::awaitable<resolve_result> resolve(std::string name) override;

private:
    /// A socket c-ares asked us to watch; the fd stays c-ares's.
    struct watcher
    {
        watcher(const asio::any_io_executor& ex, int f) : sd(ex), fd(f) {}
        asio::posix::stream_descriptor sd;
        int fd;
        bool want[2] = {false, false}; ///< read, write: what c-ares asks for now
        bool busy[2] = {false, false}; ///< an async_wait is pending
        bool closed = false;
    };
    using wait_type = asio::posix::descriptor_base::wait_type;

    int open_channel();
    error_code start(const std::string& name, const std::shared_ptr<query_state>& q);
    static void on_sock_state(void* self, ares_socket_t fd, int readable, int writable);
    void watch(int fd, bool readable, bool writable);
    void forget(int fd);
    void arm(const std::shared_ptr<watcher>& w, int dir);
    void on_ready(const std::shared_ptr<watcher>& w, int dir);
    void rearm_timer();

    asio::any_io_executor ex_;
    std::chrono::milliseconds timeout_;
    std::string servers_csv_; ///< empty: resolv.conf
    int servers_;             ///< 0: count resolv.conf's when the channel opens
    ares_channel channel_ = nullptr;
    std::map<int, std::shared_ptr<watcher>> watchers_;
    asio::steady_timer timer_;
    /// Lookups not yet ended, ended with operation_aborted when the resolver goes.
    std::vector<std::weak_ptr<query_state>> pending_;
};

cares_resolver::~cares_resolver()
{
    for (auto& p : pending_)
        if (auto q = p.lock())
            q->finish(resolve_result{asio::error::operation_aborted, {}});
    if (channel_)
        ::ares_destroy(channel_); // every callback runs now (ignored); sockets reported closed
    for (auto& [fd, w] : watchers_)
    {
        w->closed = true;
        w->sd.release();
    }
}

int cares_resolver::open_channel()
{
    if (servers_ == 0)
        servers_ = resolv_conf_servers();
    const retry_plan plan = plan_retries(timeout_, servers_);
    ares_options o{};
    o.sock_state_cb = &cares_resolver::on_sock_state;
    o.sock_state_cb_data = this;
    o.timeout = plan.per_try_ms;
    o.tries = plan.tries;
    o.domains = nullptr; // no search list: the name the rules judged is the name looked up
    o.ndomains = 0;
    const int mask = ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
                     ARES_OPT_DOMAINS;
    int status = ::ares_init_options(&channel_, &o, mask);
    if (status == ARES_SUCCESS && !servers_csv_.empty())
        status = ::ares_set_servers_ports_csv(channel_, servers_csv_.c_str());
    if (status != ARES_SUCCESS && channel_)
    {
        ::ares_destroy(channel_);
        channel_ = nullptr;
    }
    return status;
}

error_code cares_resolver::start(const std::string& name, const std::shared_ptr<query_state>& q)
{
    if (!channel_)
        if (const int status = open_channel(); status != ARES_SUCCESS)
            return lookup_error(status);
    std::erase_if(pending_, [](const std::weak_ptr<query_state>& p) {
        auto s = p.lock();
        return !s || s->done;
    });
    pending_.push_back(q);
    q->wake.expires_after(timeout_);
    ares_addrinfo_hints hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = ARES_AI_NOSORT; // the server's order, no source-address probing
    ::ares_getaddrinfo(channel_, name.c_str(), nullptr, &hints, &on_answer, new query_ref(q));
    rearm_timer();
    return {};
}

asio::awaitable<resolve_result> cares_resolver::resolve(std::string name)
{
    auto q = std::make_shared<query_state>(ex_);
    if (const error_code ec = start(name, q))
        co_return resolve_result{ec, {}};
    // From here on only `q` is used: the resolver may be gone when the wait ends.
    if (!q->done)
    {
        auto [ec] = co_await q->wake.async_wait(asio::as_tuple(asio::use_awaitable));
        q->finish(resolve_result{ec ? error_code(asio::error::operation_aborted)
                                    : error_code(asio::error::timed_out),
                                 {}});
    }
    co_return std::move(q->result);
}

void cares_resolver::on_sock_state(void* self, ares_socket_t fd, int readable, int writable)
{
    static_cast<cares_resolver*>(self)->watch(fd, readable != 0, writable != 0);
}

void cares_resolver::watch(int fd, bool readable, bool writable)
{
    if (!readable && !writable)
        return forget(fd);
    auto it = watchers_.find(fd);
    if (it == watchers_.end())
    {
        auto fresh = std::make_shared<watcher>(ex_, fd);
        error_code ec;
        fresh->sd.assign(fd, ec); // called from C: no exception may leave
        if (ec)
            return; // unwatched: c-ares's own timeouts end its queries
        it = watchers_.emplace(fd, std::move(fresh)).first;
    }
    const auto w = it->second;
    w->want[0] = readable;
    w->want[1] = writable;
    for (int dir : {0, 1})
        if (w->want[dir])
            arm(w, dir);
}

void cares_resolver::forget(int fd)
{
    const auto it = watchers_.find(fd);
    if (it == watchers_.end())
        return;
    it->second->closed = true;
    it->second->sd.release(); // pending waits end with operation_aborted; c-ares closes the fd
    watchers_.erase(it);
}

void cares_resolver::arm(const std::shared_ptr<watcher>& w, int dir)
{
    if (w->busy[dir])
        return;
    w->busy[dir] = true;
    const auto type = dir == 0 ? wait_type::wait_read : wait_type::wait_write;
    w->sd.async_wait(type, [self = weak_from_this(), w, dir](error_code ec) {
        w->busy[dir] = false;
        if (ec || w->closed)
            return;
        if (auto s = self.lock())
            s->on_ready(w, dir);
    });
}

void cares_resolver::on_ready(const std::shared_ptr<watcher>& w, int dir)
{
    ::ares_process_fd(channel_, dir == 0 ? w->fd : ARES_SOCKET_BAD,
                      dir == 1 ? w->fd : ARES_SOCKET_BAD);
    if (!w->closed && w->want[dir])
        arm(w, dir);
    rearm_timer();
}

void cares_resolver::rearm_timer()
{
    timeval tv{};
    if (!::ares_timeout(channel_, nullptr, &tv))
    {
        timer_.cancel();
        return;
    }
    timer_.expires_after(std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec));
    timer_.async_wait([self = weak_from_this()](error_code ec) {
        if (ec)
            return;
        if (auto s = self.lock())
        {
            ::ares_process_fd(s->channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
            s->rearm_timer();
        }
    });
}

} // namespace

outcome<std::shared_ptr<resolver>> make_cares_resolver(asio::any_io_executor ex, cares_options o)
{
    if (o.timeout.count() <= 0)
        return make_failure(errc::validation, "the DNS timeout must be positive", "dns_timeout");
    std::string csv;
    for (std::size_t i = 0; i < o.servers.size(); ++i)
    {
        const auto entry = server_entry(o.servers[i]);
        if (!entry)
            return make_failure(errc::validation,
                                "a DNS server is ADDRESS, ADDRESS:PORT or [V6]:PORT, not " +
                                    detail::quote_for_message(o.servers[i]),
                                "dns_servers[" + std::to_string(i) + "]");
        csv += (csv.empty() ? "" : ",") + *entry;
    }
    if (const int status = init_cares_library(); status != ARES_SUCCESS)
        return make_failure(errc::internal,
                            std::string("c-ares cannot start: ") + ::ares_strerror(status));
    return std::make_shared<cares_resolver>(std::move(ex), o.timeout, std::move(csv),
                                            static_cast<int>(o.servers.size()));
}

namespace {

using pin_map = std::map<std::string, std::vector<asio::ip::address>>;

/// Adds the pins of `resolve` to `pins` (canonical names to addresses, in the order given),
/// `field[i]` naming a bad one.
outcome<void> add_pins(pin_map& pins,
                       const std::vector<std::pair<std::string, std::string>>& resolve,
                       const std::string& field)
{
    for (std::size_t i = 0; i < resolve.size(); ++i)
    {
        const std::string limit = field + "[" + std::to_string(i) + "]";
        auto name = canonicalize_host(resolve[i].first);
        if (!name || name->is_ip())
            return make_failure(errc::validation,
                                "a pinned name must be a host name: " +
                                    detail::quote_for_message(resolve[i].first),
                                limit);
        auto ip = canonicalize_host(resolve[i].second);
        if (!ip || !ip->is_ip())
            return make_failure(errc::validation,
                                "a pinned name maps to an IP address, not " +
                                    detail::quote_for_message(resolve[i].second),
                                limit);
        pins[name->name].push_back(*ip->ip);
    }
    return {};
}

} // namespace

outcome<std::shared_ptr<resolver>>
make_resolver(asio::any_io_executor ex, const proxy_options& o,
              const std::vector<std::pair<std::string, std::string>>& call_pins)
{
    pin_map pins, runner_pins;
    if (auto r = add_pins(pins, call_pins, "net.resolve"); !r)
        return r.error();
    if (auto r = add_pins(runner_pins, o.resolve, "resolve"); !r)
        return r.error();
    pins.merge(runner_pins); // a name the call pins keeps the call's addresses only
    cares_options c;
    c.timeout = o.limits.dns_timeout;
    c.servers = o.dns_servers;
    auto next = make_cares_resolver(std::move(ex), std::move(c));
    if (!next)
        return next.error();
    return std::make_shared<static_resolver>(std::move(pins), std::move(*next));
}

} // namespace sandbox::net
