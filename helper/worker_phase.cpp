// helper/worker_phase.cpp: the worker's transition function (see worker_phase.hpp).
#include "helper/worker_phase.hpp"

#include <ostream>

namespace sandbox::detail {

namespace {

using kind = worker_event::kind;
using proto::end_reason;

constexpr std::uint32_t end_now = act_kill_tree | act_report;

worker_step stay(worker_phase p, std::uint32_t actions = act_none) { return {p, actions}; }

worker_step claim(worker_phase next, std::uint32_t actions, end_reason why)
{
    return {next, act_claim | actions, why};
}

worker_step from_idle(const worker_event& ev)
{
    switch (ev.what)
    {
    case kind::plan: return stay(worker_phase::idle, act_start);
    case kind::spawned: return stay(worker_phase::running);
    // Nothing runs; whatever a run may have left (nothing, normally) goes with the worker.
    case kind::channel_lost: return stay(worker_phase::idle, act_kill_tree | act_exit);
    default: return stay(worker_phase::idle); // crossed the report: nothing runs any more
    }
}

worker_step from_running(const worker_event& ev)
{
    constexpr auto idle = worker_phase::idle;
    switch (ev.what)
    {
    case kind::plan: return stay(worker_phase::running, act_refuse_busy);
    case kind::stop:
        if (ev.graceful)
            return claim(worker_phase::grace, act_sigterm_tree | act_arm_grace, ev.reason);
        return claim(idle, end_now, ev.reason);
    case kind::fork_refused: return claim(idle, end_now, ev.reason);
    // Whatever the command left behind goes now: exec never waits on a background job.
    case kind::leader_reaped: return claim(idle, end_now, end_reason::natural);
    case kind::channel_lost: return claim(idle, end_now | act_exit, ev.reason);
    default: return stay(worker_phase::running);
    }
}

// grace and draining: the first cause is claimed already.
worker_step from_stopping(worker_phase from, const worker_event& ev)
{
    constexpr auto idle = worker_phase::idle;
    switch (ev.what)
    {
    case kind::plan: return stay(from, act_refuse_busy);
    case kind::stop: return ev.graceful ? stay(from) : stay(idle, end_now);
    case kind::grace_over: return stay(idle, end_now);
    case kind::leader_reaped: return stay(worker_phase::draining);
    // Members got the rest of their grace and are all gone early.
    case kind::tree_empty:
        return from == worker_phase::draining ? stay(idle, act_report) : stay(from);
    case kind::channel_lost: return stay(idle, end_now | act_exit);
    default: return stay(from); // a refused fork: the refusal is all
    }
}

} // namespace

worker_step transition(worker_phase from, const worker_event& ev) noexcept
{
    switch (from)
    {
    case worker_phase::idle: return from_idle(ev);
    case worker_phase::running: return from_running(ev);
    case worker_phase::grace:
    case worker_phase::draining: return from_stopping(from, ev);
    }
    return stay(from);
}

const char* to_string(worker_phase p) noexcept
{
    switch (p)
    {
    case worker_phase::idle: return "idle";
    case worker_phase::running: return "running";
    case worker_phase::grace: return "grace";
    case worker_phase::draining: return "draining";
    }
    return "?";
}

std::ostream& operator<<(std::ostream& os, worker_phase p) { return os << to_string(p); }

std::ostream& operator<<(std::ostream& os, const worker_step& s)
{
    return os << '{' << s.next << ", actions 0x" << std::hex << s.actions << std::dec
              << ", cause " << static_cast<std::uint32_t>(s.cause) << '}';
}

} // namespace sandbox::detail
