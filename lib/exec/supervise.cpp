// lib/exec/supervise.cpp: one supervised execution, as seen from the caller's executor: its
// life cycle (cancellation, the ending, the result, completion). The class is in
// supervision.hpp; its wire to the worker in worker_wire.cpp, its streams in output.cpp.
// The command runs under a worker of the supervisor helper (lib/supervisor/): we send it
// the plan (with the timeout, which the worker keeps) and the child's ends of the pipes, read
// the output (capped), feed stdin, and turn cancellation into kill requests. The worker
// keeps the deadline, samples the caps, kills and reaps the whole tree and reports; we
// complete once that report is in and both pipes are at EOF.
//
// One exec, from the caller down (each name is a layer):
//   sandbox::async_exec            token adapter (runner.hpp)
//   detail::async_exec_impl        compiled; `launch` co_spawns runner::exec on the runner's
//                                  executor and turns its throws into (error_code, result)
//                                  plus diagnostics (lib/runner.cpp, lib/front_end.hpp)
//   <backend>::exec                the runner: checks the request, builds a spawn_plan
//   backend::exec_plan             the backend-facing entry: a refusal or a failed run
//                                  throws (backend_entry.cpp)
//   backend::async_supervise       token adapter over a plan (also for tests and probes)
//   detail::start_supervised       makes the `supervision` below and starts it; sessions
//                                  call it directly for the returned child_control
// The supervision asks the service for a worker channel (asynchronously: a helper to start
// or replace never holds the caller's loop), sends the plan, and ends in `ending_`.
#include "exec/supervision.hpp"

#include <sandbox/backend/request.hpp>
#include <sandbox/error.hpp>

#include "exec/exit_classification.hpp"
#include "protocol/init_status.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <cstring>

#include <sys/wait.h>
#include <unistd.h>

namespace sandbox::backend {

namespace {

constexpr std::chrono::seconds default_partial_grace{2};

// The reasons a command cannot start, from the worker's posix_spawn errno.
failure spawn_failure(int err, const std::string& executable)
{
    std::string why = err == ENOEXEC ? "not an executable format (no #! line, no ELF header)"
                                     : std::strerror(err);
    // Only what concerns the command names it: EMFILE or a protocol error is ours.
    const errc code = errc_from_errno(err);
    failure f = make_failure(code, "cannot execute " + executable + ": " + why,
                             code == errc::internal ? "" : "command");
    f.diag.path = executable;
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

} // namespace

void supervision::on_cancel(asio::cancellation_type t)
{
    if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
        asio::cancellation_type::none)
        return;
    // Asked before completion, so it completes as cancelled unless the worker already
    // stopped the tree for another cause (timeout, cap): a command that ended by itself
    // meanwhile counts as cancelled too. After the worker's end only the pipes are left.
    const bool terminal =
        (t & asio::cancellation_type::terminal) != asio::cancellation_type::none;
    const std::chrono::nanoseconds partial_grace =
        plan_.kill_grace > plan_.kill_grace.zero() ? plan_.kill_grace : default_partial_grace;
    feed({detail::exec_event::kind::cancel, false, false,
          terminal ? partial_grace.zero() : partial_grace});
}

// Every event goes through the machine; its actions are performed in the order listed.
void supervision::feed(const detail::exec_event& ev)
{
    const detail::exec_step s = machine_.on(ev);
    if (s.has(detail::act_send_kill))
        send_kill(s.kill);
    if (s.has(detail::act_abandon_pipes))
        abandon_pipes();
    if (s.has(detail::act_close_input))
        close_input();
    if (s.has(detail::act_arm_drain))
        arm_drain_timer();
    if (s.has(detail::act_finish))
        finish(s.from == detail::exec_phase::abandoned);
}

void supervision::finish(bool pipes_abandoned)
{
    if (drain_timer_)
        drain_timer_->cancel();
    exec_outcome o = ended(pipes_abandoned);
    o.result.wall_time = clock::now() - started_;
    o.result.out = std::move(out_.cap);
    o.result.err = std::move(err_.cap);
    o.result.diag.backend = plan_.backend_name;
    const auto* rep = report();
    if (capped())
        svc_.on_capped_end(rep);
    // The worker said the tree is gone (or nothing was spawned), unless it was lost.
    const bool tree_gone = rep ? rep->reason != end_reason::supervisor_lost
                               : std::holds_alternative<not_spawned>(ending_);
    // A worker that reported is idle again and serves the next execution.
    if (tree_gone && plan_.release_channel)
        plan_.release_channel(unique_fd(channel_.release()));
    else if (tree_gone)
        svc_.release(unique_fd(channel_.release()));
    else if (plan_.explain_lost)
        plan_.explain_lost(o);
    boost::system::error_code ignored;
    channel_.close(ignored);
    auto settle = std::move(plan_.settle);
    if (!settle || !tree_gone)
        return complete(std::move(o));
    // The backend's records about the tree (the proxy's `closed` ones) come first.
    auto held = std::make_shared<exec_outcome>(std::move(o));
    settle([self = shared_from_this(), held] { self->complete(std::move(*held)); });
}

namespace {

// The unix-socket policy's filter did not install on the command.
failure connect_filter_unavailable(int err)
{
    failure f = make_failure(errc::not_available,
                             std::string("the unix-socket policy cannot be held: its seccomp "
                                         "filter did not install (") +
                                 std::strerror(err) + ")",
                             "net.unix_sockets");
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

// The worker could not make the execution's cgroup (a cgroup directory was required).
failure cgroup_unavailable(int err, const std::string& cgroup)
{
    failure f = make_failure(errc::not_available,
                             "cannot run the command in a cgroup of its own under " + cgroup +
                                 ": " + std::strerror(err),
                             "cgroup");
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

// An instance's worker could not enter the work directory, in the sandbox's view.
failure work_dir_unusable(int err, const std::string& dir)
{
    failure f = make_failure(errc_from_errno(err),
                             "cannot enter the work directory " + dir +
                                 " inside the instance: " + std::strerror(err),
                             "work_dir");
    f.diag.path = dir;
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

} // namespace

// The result the ending stands for. Once the worker has said the tree is gone (a report, or
// nothing spawned), the backend's resources for it go; after a lost worker they stay until
// the helper is reaped (the destructor hands them over).
exec_outcome supervision::ended(bool pipes_abandoned)
{
    if (const auto* n = std::get_if<not_spawned>(&ending_))
    {
        plan_.tree_resources.reset();
        failure f = n->stage == proto::stage_fork_gate ? fork_gate_unavailable(n->err)
                    : n->stage == proto::stage_cgroup  ? cgroup_unavailable(n->err, plan_.cgroup)
                    : n->stage == proto::stage_connect_filter ? connect_filter_unavailable(n->err)
                    : n->stage == proto::stage_work_dir
                        ? work_dir_unusable(n->err, plan_.inside_work_dir.value_or(""))
                        : spawn_failure(n->err, plan_.executable);
        return not_run(f.code, std::move(f.diag));
    }
    if (report())
    {
        plan_.tree_resources.reset();
        return plan_.inner_status ? wrapped_outcome(err_.cap.data, pipes_abandoned)
                                  : outcome_from_report(pipes_abandoned);
    }
    exec_outcome o;
    o.ec = make_error_code(errc::internal);
    o.result.status = exec_status::unenforceable;
    o.result.diag.limit = "supervisor";
    o.result.diag.message = "the supervisor worker of this execution died before it reported "
                            "(the command may have killed it); the helper killed what was "
                            "left of the tree";
    return o;
}

// A wrapped command (bwrap): the status init inside says how the command itself ended. The
// tree is gone by now, so whatever the init wrote is in the pipe.
exec_outcome supervision::wrapped_outcome(const std::string& err, bool pipes_abandoned)
{
    const bool cancel_requested = machine_.request() == detail::stop_request::cancel;
    std::string text;
    char buf[256];
    for (ssize_t n; (n = ::read(plan_.inner_status.get(), buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<std::size_t>(n));
    const auto said = detail::parse_init_report(text);
    const auto& rep = *report();
    const bool by_itself = rep.reason == end_reason::natural && !cancel_requested;
    if (by_itself && said.exec_errno)
    {
        failure f = spawn_failure(*said.exec_errno, plan_.inner_command);
        if (!said.unreachable_path.empty())
        {
            f.diag.message += " (the command's user cannot search these PATH entries, skipped:";
            for (const auto& dir : said.unreachable_path)
                f.diag.message += " " + dir;
            f.diag.message += ")";
        }
        return not_run(f.code, std::move(f.diag));
    }
    if (rep.reason == end_reason::timed_out && !said.started && !cancel_requested)
        return setup_timed_out();
    if (by_itself && !said.started)
    {
        // The wrapper ended before the init ran: it could not set the sandbox up. Its
        // message is all there is on stderr (unless the output was streamed).
        std::string why = err.substr(0, 400);
        while (!why.empty() && (why.back() == '\n' || why.back() == '\r'))
            why.pop_back();
        const int code = WIFEXITED(rep.wait_status) ? WEXITSTATUS(rep.wait_status) : -1;
        failure f = make_failure(errc::not_available,
                                 plan_.backend_name + " could not set up the sandbox" +
                                     (why.empty() ? " (exit status " + std::to_string(code) + ")"
                                                  : ": " + why),
                                 "backend");
        return not_run(f.code, std::move(f.diag)); // the command never ran
    }
    return outcome_from_report(pipes_abandoned, said.wait_status);
}

// The set-up's own bound ran out before the init said "started": the command never ran.
exec_outcome supervision::setup_timed_out()
{
    exec_outcome o;
    o.ec = make_error_code(errc::timeout);
    auto& r = o.result;
    r.status = exec_status::timed_out;
    r.diag.limit = "setup_timeout";
    r.diag.configured = plan_.setup_timeout.count();
    r.diag.observed = (clock::now() - started_).count();
    r.diag.message = plan_.backend_name + " did not set the sandbox up within " +
                     detail::describe_duration(plan_.setup_timeout) +
                     " (its set-up bound); the command never started and the tree was killed";
    return o;
}

exec_outcome supervision::outcome_from_report(bool pipes_abandoned, std::optional<int> wait_status)
{
    const auto& rep = *report();
    detail::exit_facts f;
    f.reason = rep.reason;
    f.wait_status = wait_status.value_or(rep.wait_status);
    f.budget = static_cast<budget_kind>(rep.budget_which);
    f.observed = rep.observed;
    f.configured = rep.configured;
    f.request = machine_.request();
    f.output_stop_text = output_stop_text_;
    f.pipes_abandoned = pipes_abandoned;
    f.timeout = plan_.timeout;
    f.elapsed = clock::now() - started_;
    f.sample_failure_limit = max_consecutive_sample_failures;
    f.sample_failure_text = failure_text_;
    exec_outcome o = detail::classify_exit(f);
    o.result.cpu_time = std::chrono::nanoseconds(rep.cpu_ns);
    o.result.peak_memory_bytes = rep.peak_memory_bytes;
    o.result.in_cgroup = (rep.flags & proto::report_in_cgroup) != 0;
    return o;
}

// Nothing was spawned: the plan never reached a worker.
void supervision::fail(failure f)
{
    if (!machine_.on({detail::exec_event::kind::failed}).has(detail::act_fail))
        return;
    plan_.tree_resources.reset();
    plan_.settle = nullptr; // it may hold them too (bwrap's releases the stand-ins)
    exec_outcome o = not_run(f.code, std::move(f.diag));
    o.result.diag.backend = plan_.backend_name;
    // Posted: the initiating function has not returned yet.
    deliver(std::move(o), [this](auto fn) { asio::post(ex_, std::move(fn)); });
}

void supervision::complete(exec_outcome o)
{
    deliver(std::move(o), [this](auto fn) { asio::dispatch(ex_, std::move(fn)); });
}

// Hands the result to the handler once, on its own executor, through `schedule` (post or
// dispatch on ours); the handler's cancellation slot is cleared first.
template <class Schedule> void supervision::deliver(exec_outcome o, Schedule schedule)
{
    auto h = std::move(handler_);
    auto work = std::move(handler_work_);
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected())
        slot.clear();
    auto hex = asio::get_associated_executor(h, ex_);
    schedule(asio::bind_executor(hex, [h = std::move(h), o = std::move(o)]() mutable {
        std::move(h)(o.ec, std::move(o.result));
    }));
}

} // namespace sandbox::backend

namespace sandbox::detail {

namespace asio = boost::asio;

std::shared_ptr<child_control> start_supervised(asio::any_io_executor ex,
                                                backend::spawn_plan plan, spawned_fn on_spawned,
                                                backend::supervise_handler done)
{
    auto& svc = asio::use_service<supervisor_service>(asio::query(ex, asio::execution::context));
    auto s = std::make_shared<backend::supervision>(ex, std::move(plan), std::move(done), svc,
                                           std::move(on_spawned));
    s->track_handler_work();
    s->start();
    return s;
}

} // namespace sandbox::detail
