// backends/bwrap/instance.cpp: bwrap's instances (see instance.hpp): the open (the tree, its
// readiness), each command (narrowed, then the exec core with a worker inside), the close.
#include "instance.hpp"

#include <sandbox/backend/instance.hpp>
#include <sandbox/backend/launch.hpp>
#include <sandbox/backend/request.hpp>

#include <sandbox/process_manager.hpp>
#include <sandbox/sampler.hpp>

#include "protocol/net_bridge.hpp"
#include "protocol/protocol.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <poll.h>
#include <sys/socket.h>

namespace sandbox::bwrap {

namespace asio = boost::asio;
namespace proto = detail::proto;

namespace {

// Idle workers an instance keeps for its next commands: each a process inside it, counted
// by the instance's own process cap (`instance_spec::options.limits.max_processes`).
constexpr std::size_t max_idle_workers = 4;
// How long a command whose worker was lost waits to learn whether the instance ended.
constexpr std::chrono::seconds end_known_within{2};

// The instance's own tree (bwrap, the init, the workers inside and their commands): how it
// ended, and the signal that kills it. Held by the tree's completion handler too, so it
// outlives the instance's handle while the tree is being killed.
struct tree_state
{
    explicit tree_state(const asio::any_io_executor& ex)
        : end_known(ex, asio::steady_timer::time_point::max())
    {}
    asio::cancellation_signal kill;
    std::optional<exec_outcome> ended;
    asio::steady_timer end_known; // cancelled when `ended` is set
};

// Waits until the tree has ended, or `limit` passed; true when it has. Not cut short by
// the caller's cancellation: it waits for what that cancellation started (the kill).
asio::awaitable<bool> wait_end(std::shared_ptr<tree_state> t, asio::steady_timer::duration limit)
{
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    const auto until = limit == asio::steady_timer::duration::max()
                           ? asio::steady_timer::time_point::max()
                           : asio::steady_timer::clock_type::now() + limit;
    asio::steady_timer bound(t->end_known.get_executor(), until);
    while (!t->ended && asio::steady_timer::clock_type::now() < until)
    {
        // Whichever comes first wakes us: the end (cancels end_known) or the bound. The
        // bound's handler holds the state: it may run after we returned.
        bound.async_wait([t](boost::system::error_code ec) {
            if (!ec)
                t->end_known.cancel();
        });
        co_await t->end_known.async_wait(asio::as_tuple(asio::use_awaitable));
        bound.cancel();
    }
    co_await asio::this_coro::throw_if_cancelled(throws); // the caller's setting again
    co_return t->ended.has_value();
}

// A channel whose worker is still there: nothing to read (no spawn_failed from the init's
// fork, no end of file from a worker that died) and no hang-up.
bool channel_usable(int fd)
{
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0;
}

failure closed_failure(const std::string& id, const exec_outcome* how)
{
    std::string why = "instance " + id + " is closed";
    if (how && how->ec && how->ec != asio::error::operation_aborted)
        why += " (its sandbox ended: " + how->result.diag.message + ")";
    failure f =
        make_failure(errc::instance_closed,
                     why + ": what ran in it was killed and nothing more runs in it", "instance");
    f.diag.backend = "bwrap";
    return f;
}

class bwrap_instance final : public instance, public std::enable_shared_from_this<bwrap_instance>
{
public:
    bwrap_instance(asio::any_io_executor ex, const bwrap_runner_options& opts,
                   std::shared_ptr<bwrap_runner::state> st, instance_spec spec)
        : ex_(std::move(ex)), root_(opts.root), max_output_(opts.default_max_output_bytes),
          sample_interval_(opts.sample_interval), st_(std::move(st)), spec_(std::move(spec)),
          id_(backend::next_instance_id()), tree_(std::make_shared<tree_state>(ex_)), control_(ex_)
    {}

    ~bwrap_instance() override { kill_tree(); }

    executor_type get_executor() const noexcept override { return ex_; }
    enforcement_report enforcement() const override { return enforcement_; }
    const std::string& id() const noexcept override { return id_; }
    bool is_open() const noexcept override { return !closing_ && !tree_->ended; }
    const exec_outcome* ended() const noexcept override
    {
        return tree_->ended ? &*tree_->ended : nullptr;
    }

    asio::awaitable<outcome<void>> start(const bwrap_runner_options& opts, enforcement_report e)
    {
        // Its failure is a value, a cancellation's too: nothing in it throws for one.
        const bool throws = co_await asio::this_coro::throw_if_cancelled();
        co_await asio::this_coro::throw_if_cancelled(false);
        auto r = co_await start_tree(opts, std::move(e));
        co_await asio::this_coro::throw_if_cancelled(throws);
        co_return r;
    }
    asio::awaitable<exec_outcome> try_exec(exec_request req) override;
    process_manager* sessions() noexcept override { return sessions_.get(); }
    void open_sessions(session_registry_options o);
    // Never fails, a cancelled caller's close included: the wait is for the kill it asked.
    asio::awaitable<void> close() override
    {
        auto keep = shared_from_this();
        kill_tree();
        const bool throws = co_await asio::this_coro::throw_if_cancelled();
        co_await asio::this_coro::throw_if_cancelled(false);
        co_await wait_end(tree_, asio::steady_timer::duration::max());
        co_await asio::this_coro::throw_if_cancelled(throws);
    }

private:
    asio::awaitable<outcome<void>> start_tree(const bwrap_runner_options& opts,
                                              enforcement_report e);
    outcome<backend::spawn_plan> command_plan(exec_request& req);
    void acquire(std::function<void(outcome<unique_fd>)> take);
    void release(unique_fd channel);
    outcome<std::uint16_t> read_ready();

    void kill_tree()
    {
        closing_ = true;
        idle_.clear();
        boost::system::error_code ignored;
        control_.close(ignored); // the init kills every worker's tree and exits
        if (!tree_->ended)
            tree_->kill.emit(asio::cancellation_type::terminal);
    }

    asio::any_io_executor ex_;
    std::string root_;
    std::int64_t max_output_;
    std::chrono::nanoseconds sample_interval_;
    std::shared_ptr<bwrap_runner::state> st_;
    instance_spec spec_;
    std::string id_;
    std::shared_ptr<tree_state> tree_;
    asio::posix::stream_descriptor control_;
    std::vector<unique_fd> idle_;
    std::unique_ptr<session_registry> sessions_; // its destructor kills the sessions running
    std::uint16_t port_ = 0;
    std::vector<std::pair<std::string, std::string>> trust_env_;
    enforcement_report enforcement_;
    bool closing_ = false;
};

// Starts the tree and waits for the init's "ready" (or the tree's end: it could not be set
// up). The caller's cancellation kills the tree.
asio::awaitable<outcome<void>> bwrap_instance::start_tree(const bwrap_runner_options& opts,
                                                          enforcement_report e)
{
    enforcement_ = std::move(e);
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0)
        co_return make_os_failure(errc::internal, "cannot create the instance's control socket",
                                  errno);
    control_.assign(sv[0]);
    instance_parts parts;
    parts.init_end = unique_fd(sv[1]);
    exec_request req;
    req.command = "sandbox-init";
    req.options = spec_.options;
    req.on_net_record = std::move(spec_.on_net_record);
    req.http = std::move(spec_.http);
    auto plan = prepare_instance_tree(ex_, req, opts, *st_, parts);
    if (!plan)
        co_return plan.error();
    plan->backend_name = "bwrap";
    trust_env_ = std::move(parts.trust_env);
    auto tree = tree_;
    backend::async_supervise(
        ex_, std::move(*plan),
        asio::bind_cancellation_slot(tree->kill.slot(),
                                     [tree](boost::system::error_code ec, exec_result r) {
                                         exec_outcome o;
                                         o.ec = ec;
                                         o.result = std::move(r);
                                         tree->ended = std::move(o);
                                         tree->end_known.cancel();
                                     }));
    auto [ec] = co_await control_.async_wait(asio::posix::stream_descriptor::wait_read,
                                             asio::as_tuple(asio::use_awaitable));
    if (ec)
    {
        kill_tree();
        co_await wait_end(tree_, asio::steady_timer::duration::max());
        co_return failure{ec, {}};
    }
    auto port = read_ready();
    if (port && (*port != 0 || !parts.bridged))
    {
        port_ = *port;
        co_return outcome<void>{};
    }
    // The init ended (or spoke garbage) before it was ready: the tree's outcome says why.
    kill_tree();
    co_await wait_end(tree_, asio::steady_timer::duration::max());
    const exec_outcome& how = *tree_->ended;
    if (how.ec)
        co_return failure{how.ec, how.result.diag};
    co_return port ? make_failure(errc::internal, "the instance's init sent no proxy port", "net")
                   : port.error();
}

// The init's first message: "ready", with the proxy's port when the network is bridged.
outcome<std::uint16_t> bwrap_instance::read_ready()
{
    proto::message m;
    bool eof = false;
    const int rc = proto::receive_message(control_.native_handle(), m, eof);
    if (rc != 0 || eof || m.head.type != proto::msg_type::ready)
        return make_failure(errc::internal, "the instance's init ended before it was ready",
                            "backend");
    if (m.payload.empty())
        return std::uint16_t{0};
    auto port = detail::parse_net_bridge_body(m.payload);
    if (!port)
        return make_failure(errc::internal, "the instance's init named no valid proxy port", "net");
    return *port;
}

// A channel to a worker inside: an idle one, or a new one the init forks for it (the plan
// can go at once: it waits in the channel until the worker reads it).
void bwrap_instance::acquire(std::function<void(outcome<unique_fd>)> take)
{
    // Posted; a channel the instance closed meanwhile is its close, said so.
    auto give = [this, take = std::move(take)](outcome<unique_fd> c) mutable {
        auto held = std::make_shared<outcome<unique_fd>>(std::move(c));
        std::weak_ptr<bwrap_instance> w = weak_from_this();
        asio::post(ex_, [w, take = std::move(take), held] {
            auto self = w.lock();
            if (*held && (!self || !self->is_open()))
                *held = closed_failure(self ? self->id_ : "", self ? self->ended() : nullptr);
            take(std::move(*held));
        });
    };
    if (!is_open())
        return give(closed_failure(id_, ended()));
    while (!idle_.empty())
    {
        unique_fd c = std::move(idle_.back());
        idle_.pop_back();
        if (channel_usable(c.get())) // its worker may have died (a command can kill it)
            return give(std::move(c));
    }
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0)
        return give(make_os_failure(errc::internal, "cannot create a worker channel", errno));
    unique_fd ours(sv[0]), theirs(sv[1]);
    const int fds[1] = {theirs.get()};
    const int rc =
        proto::send_message(control_.native_handle(), proto::msg_type::spawn_worker, 0, {}, fds);
    if (rc == EAGAIN)
        return give(make_failure(errc::internal,
                                 "the instance's init takes no new command (its control socket "
                                 "is full: the init is stopped or overwhelmed)",
                                 "instance"));
    if (rc != 0)
        return give(closed_failure(id_, ended()));
    give(std::move(ours));
}

void bwrap_instance::release(unique_fd channel)
{
    if (is_open() && idle_.size() < max_idle_workers && channel_usable(channel.get()))
        idle_.push_back(std::move(channel));
}

// A command's plan: narrowed to the instance, its work directory resolved under the root on
// the host (the same path inside: the root is bound where it is), its environment as a
// cold exec's plus the proxy's variables, its worker from the instance.
outcome<backend::spawn_plan> bwrap_instance::command_plan(exec_request& req)
{
    if (auto n = backend::narrow_to_instance(spec_, req); !n)
        return n.error();
    // Two fork gates on one tree: the kernel asks only the newest, so a command's own
    // process cap would stand in for the instance's instead of narrowing it. One no
    // stricter than the instance's is the instance's already (a chain's defaults give every
    // command one); a stricter one cannot be held.
    auto& cap = req.options.limits.max_processes;
    const auto instance_cap = spec_.options.limits.max_processes;
    if (cap != 0 && instance_cap != 0 && cap >= instance_cap)
        cap = 0;
    if (cap != 0 && instance_cap != 0)
        return make_failure(errc::not_available,
                            "a command's own process cap (" + std::to_string(cap) +
                                ") cannot be held inside an instance that has one (" +
                                std::to_string(instance_cap) + "): only the instance's holds",
                            "limits.max_processes");
    const exec_options& o = req.options;
    const bool sampler_ok = !o.limits.has_sampled_caps() || sampler_usable();
    if (auto r = backend::check_request(req, sampler_ok); !r)
        return r.error();
    auto dir = backend::open_work_dir(root_, o.work_dir);
    if (!dir)
        return dir.error();
    backend::spawn_plan plan;
    plan.inside_work_dir = path_of_fd(dir->get());
    if (plan.inside_work_dir->empty())
        return make_failure(errc::internal, "cannot name the work directory", "work_dir");
    plan.envp = command_environment(o, st_->user.has_value(), trust_env_);
    if (port_ != 0)
        plan.envp = detail::proxy_environment(std::move(plan.envp), port_);
    plan.executable = req.command;
    plan.argv.push_back(req.command);
    plan.argv.insert(plan.argv.end(), req.args.begin(), req.args.end());
    backend::take_pass_through(req, max_output_, "bwrap", plan);
    plan.sample_interval = sample_interval_;
    std::weak_ptr<bwrap_instance> w = weak_from_this();
    plan.acquire_channel = [w](std::function<void(outcome<unique_fd>)> take) {
        if (auto self = w.lock())
            return self->acquire(std::move(take));
        failure f = make_failure(errc::instance_closed, "the instance is closed", "instance");
        take(std::move(f)); // not reached in practice: the exec holds the instance
    };
    plan.release_channel = [w](unique_fd c) {
        if (auto self = w.lock())
            self->release(std::move(c));
    };
    plan.explain_lost = [w, id = id_](exec_outcome& o) { // a session has no try_exec
        auto self = w.lock();
        if (self && self->is_open())
            return; // (an end by its own caps may not be known yet: try_exec waits for it)
        failure f = closed_failure(id, self ? self->ended() : nullptr);
        o.ec = f.code;
        if (o.result.status != exec_status::not_started)
            o.result.status = exec_status::cancelled;
        o.result.diag = std::move(f.diag);
    };
    return plan;
}

// Sessions inside the instance: the shared registry, each plan made as a command's (narrowed
// to the instance, its worker from it). Once the instance is closed a start fails with
// `instance_closed` (no worker to be had).
void bwrap_instance::open_sessions(session_registry_options o)
{
    std::weak_ptr<bwrap_instance> w = weak_from_this();
    sessions_ = std::make_unique<session_registry>(
        ex_,
        [w](const session_spec& spec) -> outcome<backend::spawn_plan> {
            auto self = w.lock();
            if (!self)
                return make_failure(errc::instance_closed, "the instance is closed", "instance");
            exec_request req = backend::request_of(spec);
            return self->command_plan(req);
        },
        o);
}

// A command: the exec core with a worker inside the instance. A worker lost because the
// instance ended (closed, its caps, its timeout) is the instance's end, said so.
asio::awaitable<exec_outcome> bwrap_instance::try_exec(exec_request req)
{
    auto keep = shared_from_this();
    if (!is_open())
    {
        failure f = closed_failure(id_, ended());
        co_return not_run(f.code, std::move(f.diag));
    }
    exec_outcome out = co_await backend::exec_plan(ex_, command_plan(req), "bwrap");
    const bool lost =
        out.result.status == exec_status::unenforceable && out.result.diag.limit == "supervisor";
    if (!lost && out.ec != errc::instance_closed)
        co_return out;
    // The outcome is a value, also for a caller that cancelled meanwhile.
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    const bool instance_ended = closing_ || co_await wait_end(tree_, end_known_within);
    co_await asio::this_coro::throw_if_cancelled(throws);
    if (!instance_ended)
        co_return out; // the instance lives on: the command's tree took its worker down
    failure f = closed_failure(id_, ended());
    out.ec = f.code;
    if (out.result.status != exec_status::not_started) // it ran: killed with the instance
        out.result.status = exec_status::cancelled;
    out.result.diag = std::move(f.diag);
    co_return out;
}

} // namespace

asio::awaitable<outcome<std::shared_ptr<instance>>>
open_instance(asio::any_io_executor ex, const bwrap_runner_options& opts,
              std::shared_ptr<bwrap_runner::state> st, enforcement_report e, instance_spec spec)
{
    if (auto c = backend::check_instance_spec(spec); !c)
        co_return c.error();
    auto i = std::make_shared<bwrap_instance>(ex, opts, st, std::move(spec));
    i->open_sessions(opts.sessions);
    if (auto r = co_await i->start(opts, std::move(e)); !r)
    {
        failure f = std::move(r).error();
        if (f.diag.backend.empty())
            f.diag.backend = "bwrap";
        co_return f;
    }
    co_return std::shared_ptr<instance>(std::move(i));
}

} // namespace sandbox::bwrap
