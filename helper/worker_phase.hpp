// helper/worker_phase.hpp: the worker's life cycle as one state machine, without I/O.
//
// The worker's coroutines (channel, lifeline, reaping, deadline, grace, sampling, fork gate)
// only perform I/O and feed what they saw here as an event; `transition` answers with the next
// phase and the actions to take, which the worker performs in the order the bits are listed.
// Unit-tested as a table (test/unit/worker_phase_test.cpp).
#ifndef SANDBOX_HELPER_WORKER_PHASE_HPP
#define SANDBOX_HELPER_WORKER_PHASE_HPP

#include "protocol/protocol.hpp"

#include <cstdint>
#include <iosfwd>

namespace sandbox::detail {

/// Where a worker is with the execution it runs.
enum class worker_phase
{
    idle,     ///< no execution: waiting for a plan
    running,  ///< the command runs: deadline, caps and fork gate are kept
    grace,    ///< a graceful stop: the tree has had SIGTERM and has until the grace ends
    draining, ///< a graceful stop whose command was reaped: the rest of the tree still has
              ///< the rest of the grace, and the run ends early once it is all gone
};

/// What happened.
struct worker_event
{
    enum class kind
    {
        plan,          ///< a whole plan arrived
        spawned,       ///< its command runs
        stop,          ///< the tree must stop: `reason`, with a grace when `graceful`
        fork_refused,  ///< the fork gate refused a fork at the process cap
        grace_over,    ///< the grace of a graceful stop ran out
        leader_reaped, ///< the command itself was reaped
        tree_empty,    ///< no member of the tree is left
        channel_lost,  ///< the library or the helper is gone (`reason` says which)
    };
    kind what = kind::plan;
    proto::end_reason reason = proto::end_reason::none;
    bool graceful = false;
};

/// What to do, in this order.
enum worker_action : std::uint32_t
{
    act_none = 0,
    act_refuse_busy = 1u << 0, ///< answer the plan with EBUSY: one runs already
    act_start = 1u << 1,       ///< spawn the plan's command
    act_claim = 1u << 2,       ///< the event's cause becomes the end reason (the first wins)
    act_sigterm_tree = 1u << 3,
    act_arm_grace = 1u << 4,   ///< start the grace timer
    act_kill_tree = 1u << 5,   ///< SIGKILL and reap every member
    act_report = 1u << 6,      ///< send the one exit report; the execution is over
    act_exit = 1u << 7,        ///< the worker process exits
};

struct worker_step
{
    worker_phase next = worker_phase::idle;
    std::uint32_t actions = act_none; ///< worker_action bits
    /// With act_claim: the end reason claimed (the event's; `natural` for the command's end).
    proto::end_reason cause = proto::end_reason::none;

    bool has(worker_action a) const noexcept { return (actions & a) != 0; }
    friend bool operator==(const worker_step&, const worker_step&) = default;
};

/// \brief The one transition function.
///
/// The first cause of a stop is claimed and stands; a later stop gets through only when it
/// is harder (no grace during a graceful stop), and then ends the run under the first cause.
/// A refused fork kills the tree as over budget while it runs; during a graceful stop the
/// refusal is all (the grace's end kills). Events an idle worker cannot use are dropped, so
/// a timer or a request that crossed the report does nothing.
worker_step transition(worker_phase from, const worker_event& ev) noexcept;

/// The command has not been reaped yet (a signal for its group can still be sent).
constexpr bool leader_alive(worker_phase p) noexcept
{
    return p == worker_phase::running || p == worker_phase::grace;
}
/// Forks are decided by the cap (the fork gate answers them) in every phase of a run.
constexpr bool judges_forks(worker_phase p) noexcept { return p != worker_phase::idle; }
/// The sampler keeps the caps only while nothing has stopped the tree yet.
constexpr bool samples(worker_phase p) noexcept { return p == worker_phase::running; }

const char* to_string(worker_phase p) noexcept;
std::ostream& operator<<(std::ostream& os, worker_phase p);
std::ostream& operator<<(std::ostream& os, const worker_step& s);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_WORKER_PHASE_HPP
