// lib/policy/policy_runner.cpp: the steps of the chain (defaults, gate, approval) for execs
// and session starts, and the audit records of each call.
#include "policy/policy_runner.hpp"

#include "front_end.hpp"

#include <sandbox/backend/instance.hpp>
#include <sandbox/policy/predicates.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <functional>

namespace sandbox::detail {

namespace asio = boost::asio;

namespace {

[[noreturn]] void refuse(errc code, std::string message)
{
    diagnostics d;
    d.message = std::move(message);
    throw error(make_error_code(code), std::move(d));
}

// Records how a session ends, without keeping the caller waiting.
asio::awaitable<void> audit_session_end(std::shared_ptr<session> s, trail t)
{
    try
    {
        exec_result r = co_await s->wait();
        t.ended(&r, {}, {});
    }
    catch (...)
    {
        t.ended(std::current_exception());
    }
}

} // namespace

/// Sessions through the same steps as exec; everything after the start is the inner
/// manager's (the session object returned is the inner one). The runner's, or an
/// instance's: then each spec is narrowed to the instance first (as its commands are) and
/// its records name the instance.
class policy_runner::gated_sessions final : public process_manager
{
public:
    explicit gated_sessions(policy_runner& owner)
        : owner_(owner), target_([&owner] { return owner.inner_->sessions(); })
    {}
    // An instance's: `keep` holds the instance (which owns this manager) across a start.
    gated_sessions(policy_runner& owner, instance& inner, const instance_spec& narrowed_to,
                   std::function<std::shared_ptr<void>()> keep)
        : owner_(owner), target_([&inner] { return inner.sessions(); }), instance_(&inner),
          narrowed_to_(&narrowed_to), instance_id_(inner.id()), keep_(std::move(keep))
    {}

    executor_type get_executor() const noexcept override { return owner_.get_executor(); }

    // The thread rule: the chain's state (call count, approvals) is touched on its executor.
    asio::awaitable<outcome<std::shared_ptr<session>>> try_start(session_spec spec) override
    {
        return on_executor(get_executor(), start_here(keep_ ? keep_() : nullptr, std::move(spec)));
    }

    std::vector<session_info> list() const override { return inner().list(); }
    std::shared_ptr<session> find(std::string_view id) const override { return inner().find(id); }
    asio::awaitable<exec_result> terminate(std::string id, std::chrono::nanoseconds grace) override
    {
        return inner().terminate(std::move(id), grace);
    }

private:
    asio::awaitable<outcome<std::shared_ptr<session>>>
    start_here([[maybe_unused]] std::shared_ptr<void> keep, session_spec spec)
    {
        process_manager* pm = target_(); // nobody is asked for what cannot start
        if (!pm)
            co_return make_failure(errc::not_available, "the inner runner has no sessions");
        if (instance_ && !instance_->is_open())
            co_return make_failure(
                errc::instance_closed,
                "instance " + instance_id_ + " is closed: nothing more runs in it", "instance");
        if (narrowed_to_)
            if (auto n = backend::narrow_to_instance(*narrowed_to_, spec); !n)
                co_return std::move(n).error();
        // In its own statement: GCC 12 mishandles braced temporaries inside co_await.
        call_ref call{call_kind::session, spec.command, spec.args, spec.options,
                      spec.tty,           spec.id,      true,      spec.requested_by,
                      instance_id_};
        outcome<trail> admitted = co_await owner_.admit(call);
        if (!admitted)
            co_return std::move(admitted).error();
        trail t = std::move(*admitted);
        if (!narrowed_to_) // an instance's network reports to the instance's own trail
            spec.on_net_record = t.net_handler(std::move(spec.on_net_record));
        // An inner manager of the caller's may throw.
        auto s = co_await catching(pm->try_start(std::move(spec)), failure_of);
        if (!s)
        {
            t.ended(nullptr, s.error().code, to_string(s.error().diag));
            co_return s;
        }
        if (t.active())
        {
            t.started((*s)->id());
            asio::co_spawn((*s)->get_executor(), audit_session_end(*s, std::move(t)),
                           asio::detached);
        }
        co_return s;
    }

    process_manager& inner() const
    {
        process_manager* pm = target_();
        if (!pm)
            refuse(errc::not_available, "the inner runner has no sessions");
        return *pm;
    }
    policy_runner& owner_;
    std::function<process_manager*()> target_;
    instance* instance_ = nullptr;
    const instance_spec* narrowed_to_ = nullptr;
    std::string instance_id_;
    std::function<std::shared_ptr<void>()> keep_;
};

policy_runner::policy_runner(std::unique_ptr<runner> inner, chain_layers layers)
    : inner_(std::move(inner)), layers_(std::move(layers))
{
    if (!inner_)
        refuse(errc::validation, "a policy decorator needs a runner to wrap");
    if (layers_.approval && layers_.approval->deadline <= std::chrono::nanoseconds::zero())
        refuse(errc::validation, "the approval deadline must be positive");
    if (layers_.allowed)
        for (const auto& name : *layers_.allowed)
        {
            if (name.empty())
                refuse(errc::validation, "an allowed command name is empty");
            if (layers_.match == command_match::base_name && name.find('/') != std::string::npos)
                refuse(errc::validation, "allowed command \"" + name +
                                             "\" has a '/', but the gate compares base names");
        }
    sessions_ = std::make_unique<gated_sessions>(*this);
}

policy_runner::~policy_runner() = default;

process_manager* policy_runner::sessions() noexcept
{
    return inner_->sessions() ? sessions_.get() : nullptr;
}

trail policy_runner::open_trail(const call_ref& call)
{
    const std::uint64_t n = layers_.call_numbers ? ++*layers_.call_numbers : ++calls_;
    if (!layers_.audit)
        return {};
    trail t(layers_.audit, n, call.kind, call.command, call.args, call.options.work_dir,
            call.tty.has_value(), call.session_id);
    t.name(layers_.name);
    t.requested_by(call.requested_by);
    t.instance(call.instance_id);
    return t;
}

// The thread rule: the chain's state is touched on its executor, whoever calls.
asio::awaitable<exec_outcome> policy_runner::try_exec(exec_request req)
{
    return on_executor(get_executor(), exec_here(std::move(req), *inner_));
}

asio::awaitable<exec_outcome> policy_runner::exec_here(exec_request req, runner& target,
                                                       std::string instance_id)
{
    const bool own_stdin = req.stdin_fd != nullptr || req.tty.has_value();
    const std::string no_session;
    call_ref call{call_kind::exec, req.command, req.args,         req.options, req.tty,
                  no_session,      own_stdin,   req.requested_by, instance_id};
    outcome<trail> admitted = co_await admit(call);
    if (!admitted)
    {
        failure f = std::move(admitted).error();
        co_return not_run(f.code, std::move(f.diag));
    }
    trail t = std::move(*admitted);
    if (!instance_id.empty()) // its network's records are the instance's own trail's
        req.on_net_record = nullptr;
    else
        req.on_net_record = t.net_handler(std::move(req.on_net_record));
    // An inner runner of the caller's may throw.
    exec_outcome o = co_await catching(target.try_exec(std::move(req)), outcome_of);
    t.ended(&o.result, o.ec, o.ec ? to_string(o.result.diag) : std::string{});
    co_return o;
}

/// An instance of the inner runner whose commands go through the chain; its open and close
/// are recorded in the trail of the open.
class policy_runner::gated_instance final : public instance,
                                            public std::enable_shared_from_this<gated_instance>
{
public:
    gated_instance(policy_runner& owner, std::shared_ptr<instance> inner, trail t,
                   exec_options options)
        : owner_(owner), inner_(std::move(inner)), trail_(std::move(t))
    {
        spec_.options = std::move(options);
        sessions_ = std::make_unique<gated_sessions>(
            owner_, *inner_, spec_, [this] { return std::shared_ptr<void>(shared_from_this()); });
    }
    ~gated_instance() override { note_closed(); }

    executor_type get_executor() const noexcept override { return inner_->get_executor(); }
    enforcement_report enforcement() const override { return inner_->enforcement(); }
    const std::string& id() const noexcept override { return inner_->id(); }
    bool is_open() const noexcept override { return inner_->is_open(); }
    const exec_outcome* ended() const noexcept override { return inner_->ended(); }
    process_manager* sessions() noexcept override
    {
        return inner_->sessions() ? sessions_.get() : nullptr;
    }

    asio::awaitable<exec_outcome> try_exec(exec_request req) override
    {
        // The chain's executor: its state (call numbers, approvals) is touched there.
        return on_executor(owner_.get_executor(), exec_in(shared_from_this(), std::move(req)));
    }
    asio::awaitable<void> close() override
    {
        auto keep = shared_from_this();
        const bool throws = co_await asio::this_coro::throw_if_cancelled();
        co_await asio::this_coro::throw_if_cancelled(false); // never fails
        co_await inner_->close();
        co_await asio::this_coro::throw_if_cancelled(throws);
        note_closed();
    }

private:
    // Narrowed to the instance first, so that the gate and the predicates judge what runs
    // (the instance's network, with its sockets and injected headers; its defaults).
    static asio::awaitable<exec_outcome> exec_in(std::shared_ptr<gated_instance> self,
                                                 exec_request req)
    {
        if (auto n = backend::narrow_to_instance(self->spec_, req); !n)
            co_return not_run(n.error().code, std::move(n.error().diag));
        co_return co_await self->owner_.exec_here(std::move(req), *self->inner_,
                                                  self->inner_->id());
    }
    void note_closed()
    {
        if (closed_noted_ || !trail_.active())
            return;
        closed_noted_ = true;
        trail_.note(audit_event::instance_closed, "backend");
    }

    policy_runner& owner_;
    std::shared_ptr<instance> inner_;
    instance_spec spec_; // its options, as opened (the defaults merged in)
    std::unique_ptr<gated_sessions> sessions_;
    trail trail_;
    bool closed_noted_ = false;
};

asio::awaitable<outcome<std::shared_ptr<instance>>> policy_runner::try_open(instance_spec spec)
{
    return on_executor(get_executor(), open_here(std::move(spec)));
}

asio::awaitable<outcome<std::shared_ptr<instance>>> policy_runner::open_here(instance_spec spec)
{
    // What the sandbox is made of comes from the defaults too (network, environment, work
    // directory); the defaults' timeout, caps and input are each command's, not the
    // instance's.
    if (layers_.defaults)
    {
        exec_options merged = merge_defaults(spec.options, *layers_.defaults);
        spec.options.net = std::move(merged.net);
        spec.options.env = std::move(merged.env);
        spec.options.work_dir = std::move(merged.work_dir);
    }
    const std::uint64_t n = layers_.call_numbers ? ++*layers_.call_numbers : ++calls_;
    trail t;
    if (layers_.audit)
    {
        const std::vector<std::string> no_args;
        t = trail(layers_.audit, n, call_kind::instance, {}, no_args, spec.options.work_dir, false,
                  {});
        t.name(layers_.name);
    }
    spec.on_net_record = t.net_handler(std::move(spec.on_net_record));
    exec_options options = spec.options;
    auto opened = co_await catching(inner_->try_open(std::move(spec)), failure_of);
    if (!opened)
    {
        t.ended(nullptr, opened.error().code, to_string(opened.error().diag));
        co_return std::move(opened).error();
    }
    t.instance((*opened)->id());
    if (auto refused = t.vouch(audit_event::instance_opened, "backend")) // fail closed
        co_return std::move(*refused); // the instance goes with `opened`: killed
    co_return std::shared_ptr<instance>(std::make_shared<gated_instance>(
        *this, std::move(*opened), std::move(t), std::move(options)));
}

asio::awaitable<outcome<trail>> policy_runner::admit(call_ref call)
{
    apply_defaults(call);
    trail t = open_trail(call); // after the merge: the effective work dir is recorded
    if (call.command.empty())
    {
        t.note(audit_event::refused, "chain", "empty command", make_error_code(errc::validation));
        co_return make_failure(errc::validation, "the command is empty");
    }
    // The gate first: nobody is asked about a call that would be refused anyway, and
    // approval can never pass a command the gate refuses.
    std::optional<failure> refused = gate(call, t);
    if (!refused)
    {
        // A cancellation or failure no step recorded.
        refused = co_await catching(approve(call, t), failure_of);
    }
    if (!refused)
        refused = t.vouch(audit_event::allowed, "chain");
    if (!refused)
        co_return t;
    if (!t.closed()) // a failure no step recorded: an exception, a record that failed
        t.ended(nullptr, refused->code, to_string(refused->diag));
    co_return std::move(*refused);
}

void policy_runner::apply_defaults(call_ref& call) const
{
    if (!layers_.defaults)
        return;
    auto input = call.own_stdin ? std::move(call.options.input) : std::nullopt;
    call.options = merge_defaults(std::move(call.options), *layers_.defaults);
    if (call.own_stdin)
        call.options.input = std::move(input);
}

std::optional<failure> policy_runner::gate(const call_ref& call, trail& t) const
{
    if (!layers_.allowed)
        return std::nullopt;
    const auto& list = *layers_.allowed;
    const std::string key = layers_.match == command_match::base_name
                                ? command_base_name(call.command)
                                : call.command;
    if (std::find(list.begin(), list.end(), key) == list.end())
        return t.deny("gate", "command \"" + call.command + "\" is not on the command allow-list");
    return std::nullopt;
}

// Each predicate in turn; the first that asks decides (one call, one decision).
asio::awaitable<std::optional<failure>> policy_runner::approve(const call_ref& call, trail& t)
{
    if (!layers_.approval || layers_.approval->predicates.empty())
        co_return std::nullopt;
    const approval_options& a = *layers_.approval;
    // One copy for the predicates and the approver; what runs is the request itself.
    call_snapshot snap{call.kind, call.command,    call.args,        call.options,
                       call.tty,  call.session_id, call.requested_by};
    for (const predicate& p : a.predicates)
    {
        if (!p)
            co_return t.deny("approval", "an empty predicate is configured: every call is denied");
        std::optional<std::string> why;
        std::string failed; // what a predicate that threw said
        try
        {
            why = p(snap);
        }
        catch (const std::exception& e)
        {
            failed = std::string("a predicate failed (") + e.what() + "): the call is denied";
        }
        catch (...)
        {
            failed = "a predicate failed: the call is denied";
        }
        if (!failed.empty())
            co_return t.deny("approval", std::move(failed));
        if (!why)
            continue;
        if (!a.ask)
            co_return t.deny("approval", *why + " (no approver configured)");
        // Built in its own statement: GCC 12 destroys a braced temporary inside a co_await
        // expression twice.
        approval_request question{std::move(snap), *why, layers_.name};
        asked answer = co_await ask_within(a.ask, std::move(question), a.deadline);
        co_return judge_answer(call, t, *why, std::move(answer));
    }
    co_return std::nullopt;
}

std::optional<failure> policy_runner::judge_answer(const call_ref& call, trail& t,
                                                   const std::string& why, asked answer)
{
    if (answer.cancelled)
    {
        const auto ec = make_error_code(asio::error::operation_aborted);
        t.note(audit_event::denied, "approval", "cancelled while waiting for approval", ec);
        failure f;
        f.code = ec;
        f.diag.message =
            "cancelled while waiting for approval of \"" + call.command + "\"; nothing ran";
        f.diag.rule = "approval";
        return f;
    }
    if (!answer.decision)
        return t.deny("approval", "approval of \"" + call.command + "\" failed (" + answer.failure +
                                      "): nothing ran");
    const approval_decision& d = *answer.decision;
    std::string said = d.reason.empty() ? why : why + "; approver: " + d.reason;
    if (!d.allow)
        return t.deny("approval", "running \"" + call.command + "\" was denied: " + said);
    return t.vouch(audit_event::approved, "approval", said);
}

} // namespace sandbox::detail
