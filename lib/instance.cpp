// lib/instance.cpp: runner::try_open's refusal, runner::open, the front end of async_open,
// the rules of a command in an instance, and the forwarding instance (the local backend's:
// each command runs on its runner, nothing is kept between commands).
#include <sandbox/backend/instance.hpp>

#include "front_end.hpp"
#include "session/session_state.hpp"

#include <sandbox/process_manager.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>

namespace sandbox {

namespace asio = boost::asio;

asio::awaitable<outcome<std::shared_ptr<instance>>> runner::try_open(instance_spec)
{
    co_return make_failure(errc::not_available,
                           "this runner has no instances (a sandbox kept open for many "
                           "commands); the local and bwrap backends and the policy chain "
                           "above them do",
                           "instance");
}

asio::awaitable<std::shared_ptr<instance>> runner::open(instance_spec spec)
{
    outcome<std::shared_ptr<instance>> i = co_await try_open(std::move(spec));
    co_return detail::value_or_throw(std::move(i)); // the edge for callers that prefer exceptions
}

namespace detail {

void async_open_impl(runner* r, instance_spec spec, diagnostics_sink sink,
                     value_handler<std::shared_ptr<instance>> h)
{
    launch(r->get_executor(), r->try_open(std::move(spec)), std::move(sink), std::move(h));
}

} // namespace detail

namespace backend {

std::string next_instance_id()
{
    static std::atomic<std::uint64_t> next{0};
    return "i-" + std::to_string(++next);
}

outcome<> check_instance_spec(const instance_spec& spec)
{
    if (spec.options.input)
        return make_failure(errc::validation,
                            "an instance has no input of its own: give each command its input",
                            "input");
    return {};
}

namespace {

bool default_env(const env_policy& e)
{
    return !e.allow && e.inject.empty();
}

} // namespace

namespace {

// The rules of both kinds of call: what they run with, and their own network hooks.
outcome<> narrow_options(const instance_spec& inst, exec_options& o, bool own_hooks)
{
    if (own_hooks)
        return make_failure(errc::validation,
                            "a command in an instance has no network hooks of its own: the "
                            "instance's network reports to instance_spec::on_net_record and "
                            "instance_spec::http",
                            "net");
    if (o.net == net_policy{})
        o.net = inst.options.net;
    else if (!(o.net == inst.options.net))
        return make_failure(errc::validation,
                            "a command in an instance uses the instance's network, set up "
                            "once when it opened: leave its net policy default or equal to "
                            "the instance's (open another instance for another network)",
                            "net");
    if (o.work_dir.empty())
        o.work_dir = inst.options.work_dir;
    if (default_env(o.env))
        o.env = inst.options.env;
    return {};
}

} // namespace

outcome<> narrow_to_instance(const instance_spec& inst, exec_request& req)
{
    return narrow_options(inst, req.options, req.on_net_record || !req.http.empty());
}

outcome<> narrow_to_instance(const instance_spec& inst, session_spec& spec)
{
    return narrow_options(inst, spec.options, spec.on_net_record || !spec.http.empty());
}

namespace {

// A forwarding instance's sessions: its runner's, narrowed to the instance. Its books hold
// only the sessions started through it (list, find and terminate see no others); the
// instance's close, and its destruction, end those still running. A member of the instance:
// `keep` holds the instance across the waits of a start or a terminate.
class forwarded_sessions final : public process_manager
{
public:
    forwarded_sessions(runner& r, const instance_spec& spec,
                       std::function<std::optional<failure>()> closed,
                       std::function<std::shared_ptr<void>()> keep)
        : r_(r), spec_(spec), closed_(std::move(closed)), keep_(std::move(keep))
    {}
    ~forwarded_sessions() override
    {
        for (const auto& w : started_) // nothing outlives the instance
            if (auto s = w.lock(); s && s->running())
                detail::session_access::state(*s)->child->terminate(std::chrono::nanoseconds(0));
    }

    executor_type get_executor() const noexcept override { return r_.get_executor(); }

    // The thread rule: the books are touched on the runner's executor only.
    asio::awaitable<outcome<std::shared_ptr<session>>> try_start(session_spec spec) override
    {
        return detail::on_executor(get_executor(), start_body(keep_(), this, std::move(spec)));
    }

    std::vector<session_info> list() const override
    {
        std::vector<session_info> rows =
            r_.sessions() ? r_.sessions()->list() : std::vector<session_info>{};
        std::erase_if(rows, [this](const session_info& i) { return !ours(i.id); });
        return rows;
    }

    std::shared_ptr<session> find(std::string_view id) const override { return ours(id); }

    asio::awaitable<exec_result> terminate(std::string id, std::chrono::nanoseconds grace) override
    {
        return detail::on_executor(get_executor(),
                                   terminate_body(keep_(), this, std::move(id), grace));
    }

    // Ends every session started here that still runs, and waits for each one's end (one
    // that another caller is closing meanwhile is that caller's to wait for). Never throws.
    asio::awaitable<void> terminate_all()
    {
        for (const auto& w : std::vector(started_))
            if (auto s = w.lock(); s && s->running())
            {
                detail::session_access::state(*s)->child->terminate(std::chrono::nanoseconds(0));
                try
                {
                    co_await s->wait();
                }
                catch (const std::exception&)
                {}
            }
    }

private:
    // By value: the instance (`keep`) owns `self`; a start may wait long (a chain's approval
    // on the runner's manager, the spawn).
    static asio::awaitable<outcome<std::shared_ptr<session>>>
    start_body([[maybe_unused]] std::shared_ptr<void> keep, forwarded_sessions* self,
               session_spec spec)
    {
        if (auto f = self->closed_())
            co_return std::move(*f);
        process_manager* pm = self->r_.sessions();
        if (!pm)
            co_return make_failure(errc::not_available, "the runner has no sessions");
        if (auto n = narrow_to_instance(self->spec_, spec); !n)
            co_return std::move(n).error();
        auto s = co_await pm->try_start(std::move(spec));
        if (!s)
            co_return s;
        if (auto f = self->closed_()) // closed while it started: it goes too
        {
            co_await (*s)->close();
            co_return std::move(*f);
        }
        std::erase_if(self->started_, [](const auto& w) { return w.expired(); });
        self->started_.push_back(*s);
        co_return s;
    }

    static asio::awaitable<exec_result> terminate_body([[maybe_unused]] std::shared_ptr<void> keep,
                                                       forwarded_sessions* self, std::string id,
                                                       std::chrono::nanoseconds grace)
    {
        auto s = self->ours(id);
        if (!s)
            detail::throw_failure(errc::not_found, "no session \"" + id + "\" in this instance",
                                  "id");
        co_return co_await s->terminate(grace);
    }

    std::shared_ptr<session> ours(std::string_view id) const
    {
        process_manager* pm = r_.sessions();
        auto s = pm ? pm->find(id) : nullptr;
        for (const auto& w : started_)
            if (s && w.lock() == s)
                return s;
        return nullptr;
    }

    runner& r_;
    const instance_spec& spec_;
    std::function<std::optional<failure>()> closed_;
    std::function<std::shared_ptr<void>()> keep_;
    std::vector<std::weak_ptr<session>> started_;
};

// One runner's commands, narrowed to the spec; close() cancels those running (their trees
// are killed, as for any cancelled exec) and refuses the rest.
class forwarding_instance final : public instance,
                                  public std::enable_shared_from_this<forwarding_instance>
{
public:
    forwarding_instance(runner& r, instance_spec spec)
        : r_(r), spec_(std::move(spec)), id_(next_instance_id()),
          idle_(r.get_executor(), asio::steady_timer::time_point::max()),
          sessions_(
              r, spec_,
              [this]() -> std::optional<failure> {
                  if (ended_)
                      return closed_failure();
                  return std::nullopt;
              },
              [this] { return std::shared_ptr<void>(shared_from_this()); })
    {}

    executor_type get_executor() const noexcept override { return r_.get_executor(); }
    enforcement_report enforcement() const override { return r_.enforcement(); }
    const std::string& id() const noexcept override { return id_; }
    bool is_open() const noexcept override { return !ended_; }
    const exec_outcome* ended() const noexcept override { return ended_ ? &*ended_ : nullptr; }
    process_manager* sessions() noexcept override { return r_.sessions() ? &sessions_ : nullptr; }

    // The command runs with a cancellation signal of ours, which the caller's cancellation
    // (terminal and partial) and close() both reach; a command cut by close() keeps what it
    // printed.
    asio::awaitable<exec_outcome> try_exec(exec_request req) override
    {
        if (ended_)
            co_return closed_outcome();
        if (auto n = narrow_to_instance(spec_, req); !n)
            co_return not_run(n.error().code, std::move(n.error().diag));
        asio::cancellation_state cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none)
            co_return not_run(asio::error::operation_aborted,
                              diagnostics{.message = "cancelled before it started"});
        // Whatever ends the call (a value, an exception), it is no longer running.
        struct running_guard
        {
            std::shared_ptr<forwarding_instance> self;
            std::shared_ptr<asio::cancellation_signal> sig;
            asio::cancellation_slot slot;
            ~running_guard()
            {
                if (slot.is_connected())
                    slot.clear();
                std::erase(self->running_, sig);
                if (self->running_.empty())
                    self->idle_.cancel();
            }
        } guard{shared_from_this(), std::make_shared<asio::cancellation_signal>(), cs.slot()};
        if (guard.slot.is_connected())
            guard.slot.assign([sig = guard.sig](asio::cancellation_type t) { sig->emit(t); });
        running_.push_back(guard.sig);
        exec_outcome o = co_await asio::co_spawn(
            r_.get_executor(), detail::accept_cancellation(r_.try_exec(std::move(req))),
            asio::bind_cancellation_slot(guard.sig->slot(), asio::use_awaitable));
        if (ended_)
        {
            failure f = closed_failure();
            o.ec = f.code;
            o.result.diag = std::move(f.diag);
        }
        co_return o;
    }

    asio::awaitable<void> close() override
    {
        auto keep = shared_from_this();
        if (!ended_)
        {
            exec_outcome o;
            o.ec = asio::error::operation_aborted;
            o.result.status = exec_status::cancelled;
            o.result.diag.message = "the instance was closed";
            ended_ = std::move(o);
            for (const auto& sig : std::vector(running_))
                sig->emit(asio::cancellation_type::terminal);
        }
        const bool throws = co_await asio::this_coro::throw_if_cancelled();
        co_await asio::this_coro::throw_if_cancelled(false); // never fails
        while (!running_.empty())
            co_await idle_.async_wait(asio::as_tuple(asio::use_awaitable));
        co_await sessions_.terminate_all();
        co_await asio::this_coro::throw_if_cancelled(throws);
    }

private:
    failure closed_failure() const
    {
        return make_failure(errc::instance_closed,
                            "instance " + id_ +
                                " is closed: its commands were killed and "
                                "nothing more runs in it",
                            "instance");
    }

    exec_outcome closed_outcome() const
    {
        failure f = closed_failure();
        return not_run(f.code, std::move(f.diag));
    }

    runner& r_;
    instance_spec spec_;
    std::string id_;
    asio::steady_timer idle_;
    std::vector<std::shared_ptr<asio::cancellation_signal>> running_;
    std::optional<exec_outcome> ended_;
    forwarded_sessions sessions_;
};

} // namespace

outcome<std::shared_ptr<instance>> open_forwarding_instance(runner& r, instance_spec spec)
{
    if (auto c = check_instance_spec(spec); !c)
        return c.error();
    const auto& o = spec.options;
    if (o.limits.has_sampled_caps() || o.limits.max_output_bytes != 0 || o.timeout.count() != 0)
        return make_failure(errc::not_available,
                            "this runner's instances hold no limits or timeout over the "
                            "instance as a whole (its commands share no tree): put them on "
                            "each command",
                            "instance");
    if (o.net.mode != net_mode::inherit)
    {
        const auto modes = r.enforcement().net_modes;
        if (std::find(modes.begin(), modes.end(), o.net.mode) == modes.end())
            return make_failure(errc::not_available,
                                "this runner does not enforce the instance's net mode", "net");
    }
    return std::shared_ptr<instance>(std::make_shared<forwarding_instance>(r, std::move(spec)));
}

} // namespace backend

} // namespace sandbox
