// lib/exec/exec_phase.cpp: the exec core's transition function (see exec_phase.hpp).
#include "exec/exec_phase.hpp"

#include <ostream>

namespace sandbox::detail {

namespace {

using kind = exec_event::kind;

} // namespace

exec_step exec_machine::go(exec_phase next, std::uint32_t actions, kill_request k)
{
    exec_step s{next, actions, k, phase_};
    phase_ = next;
    return s;
}

// A cancellation or terminate: remembered for the classification, then sent, held until the
// plan is out, or (after the worker's end) turned into giving up the pipes.
exec_step exec_machine::stop_asked(const exec_event& ev)
{
    const bool cancel = ev.what == kind::cancel;
    if (cancel)
        request_ = stop_request::cancel;
    else if (request_ == stop_request::none)
        request_ = stop_request::terminate;
    const kill_request k{proto::end_reason::cancelled, ev.grace};
    switch (phase_)
    {
    case exec_phase::acquiring:
    case exec_phase::sending:
        if (!held_ || k.grace < held_->grace)
            held_ = k;
        return go(phase_);
    case exec_phase::running: return go(phase_, act_send_kill, k);
    case exec_phase::draining:
        return cancel ? go(exec_phase::abandoned, act_abandon_pipes) : go(phase_);
    default: return go(phase_);
    }
}

exec_step exec_machine::stream_ended()
{
    if (open_streams_ > 0)
        --open_streams_;
    const bool ended = phase_ == exec_phase::draining || phase_ == exec_phase::abandoned;
    return ended && open_streams_ == 0 ? go(exec_phase::done, act_finish) : go(phase_);
}

// acquiring and sending: the plan is not (all) out yet.
exec_step exec_machine::from_starting(const exec_event& ev)
{
    const bool plan_complete = (ev.what == kind::plan_out && ev.whole) ||
                               (ev.what == kind::rest_out && phase_ == exec_phase::sending);
    if (plan_complete)
    {
        if (!held_)
            return go(exec_phase::running);
        const kill_request k = *held_;
        held_.reset();
        return go(exec_phase::running, act_send_kill, k);
    }
    switch (ev.what)
    {
    case kind::plan_out: return go(exec_phase::sending);
    case kind::failed: return go(exec_phase::done, act_fail);
    case kind::worker_done: return from_running(ev); // lost while the plan was going out
    default: return go(phase_);
    }
}

exec_step exec_machine::from_running(const exec_event& ev)
{
    if (ev.what != kind::worker_done)
        return go(phase_);
    held_.reset();
    // Every process of the tree is gone: the pipes end once drained.
    if (open_streams_ == 0)
        return go(exec_phase::done, act_close_input | act_finish);
    return go(exec_phase::draining, act_close_input | act_arm_drain);
}

// draining and abandoned.
exec_step exec_machine::from_ended(const exec_event& ev)
{
    if (ev.what != kind::drain_limit || phase_ != exec_phase::draining)
        return go(phase_);
    // A stream whose chunk is with the caller is not stuck: the limit starts again.
    return ev.paused ? go(phase_, act_arm_drain) : go(exec_phase::abandoned, act_abandon_pipes);
}

exec_step exec_machine::on(const exec_event& ev) noexcept
{
    if (phase_ == exec_phase::done)
        return go(phase_);
    if (ev.what == kind::cancel || ev.what == kind::terminate)
        return stop_asked(ev);
    if (ev.what == kind::stream_end)
        return stream_ended();
    switch (phase_)
    {
    case exec_phase::acquiring:
    case exec_phase::sending: return from_starting(ev);
    case exec_phase::running: return from_running(ev);
    default: return from_ended(ev);
    }
}

const char* to_string(exec_phase p) noexcept
{
    switch (p)
    {
    case exec_phase::acquiring: return "acquiring";
    case exec_phase::sending: return "sending";
    case exec_phase::running: return "running";
    case exec_phase::draining: return "draining";
    case exec_phase::abandoned: return "abandoned";
    case exec_phase::done: return "done";
    }
    return "?";
}

std::ostream& operator<<(std::ostream& os, exec_phase p)
{
    return os << to_string(p);
}

std::ostream& operator<<(std::ostream& os, const exec_step& s)
{
    os << s.from << " -> " << s.next << " actions=0x" << std::hex << s.actions << std::dec;
    if (s.has(act_send_kill))
        os << " kill(grace=" << s.kill.grace.count() << "ns)";
    return os;
}

} // namespace sandbox::detail
