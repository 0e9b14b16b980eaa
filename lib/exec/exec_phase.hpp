// lib/exec/exec_phase.hpp: the exec core's life cycle (supervision.hpp) as one state machine,
// without I/O: the library-side twin of the worker's (helper/worker_phase.hpp).
//
// The core's I/O (the worker channel, the pipes, the drain timer) and the caller's requests
// (cancellation, a session's terminate) only report what happened here as an event;
// `exec_machine::on` answers with the next phase and the actions to take, which the core
// performs in the order the bits are listed. What the phase implies is not kept anywhere else:
// whether the plan is out, whether a kill can be sent or must wait, whether the pipes were
// given up, whether the run is over. Unit-tested as a table (test/unit/exec_phase_test.cpp).
#ifndef SANDBOX_LIB_EXEC_EXEC_PHASE_HPP
#define SANDBOX_LIB_EXEC_EXEC_PHASE_HPP

#include "protocol/protocol.hpp"

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>

namespace sandbox::detail {

/// Where one execution is, seen from the caller's side.
enum class exec_phase : std::uint8_t
{
    acquiring, ///< waiting for a worker channel: nothing was sent
    sending,   ///< the first part of a large plan is out; the rest follows as the socket drains
    running,   ///< the worker holds the whole plan: kill and signal requests go out at once
    draining,  ///< the worker said its last word (or is gone): the pipes are read to their end
    abandoned, ///< draining, but a process outside the tree holds the pipes: reading stopped
    done,      ///< the result is decided (and, once the backend settled, delivered)
};

/// What the caller asked for, which decides how a stop reads; a cancellation outranks a
/// session's terminate.
enum class stop_request : std::uint8_t
{
    none,
    terminate, ///< a session's terminate() or close(): `terminated` unless it exited itself
    cancel,    ///< the operation's cancellation (or the output handler's stop)
};

/// A kill request for the worker: the cause it claims and the grace before SIGKILL.
struct kill_request
{
    proto::end_reason why = proto::end_reason::cancelled;
    std::chrono::nanoseconds grace{0};
    friend bool operator==(const kill_request&, const kill_request&) = default;
};

/// What happened.
struct exec_event
{
    enum class kind : std::uint8_t
    {
        plan_out,    ///< the plan's first message went out; `whole` when it was all of it
        rest_out,    ///< the rest of a large plan went out
        failed,      ///< no worker, or the plan could not be handed over: nothing runs
        cancel,      ///< the operation's cancellation, with `grace` (zero: kill at once)
        terminate,   ///< a session's terminate(), with `grace`
        worker_done, ///< the worker's last word on the plan (exit report, spawn failure) or
                     ///< its loss: no process of the tree is left
        stream_end,  ///< one of the command's output streams ended (or was given up)
        drain_limit, ///< the drain timer ran out; `paused`: a chunk is still with the caller
    };
    kind what = kind::plan_out;
    bool whole = false;
    bool paused = false;
    std::chrono::nanoseconds grace{0};
};

/// What to do, in this order.
enum exec_action : std::uint32_t
{
    act_none = 0,
    act_send_kill = 1u << 0,     ///< send `exec_step::kill` to the worker
    act_abandon_pipes = 1u << 1, ///< stop reading the pipes (their waits are cancelled)
    act_close_input = 1u << 2,   ///< stop writing the command's stdin
    act_arm_drain = 1u << 3,     ///< (re)start the drain timer
    act_finish = 1u << 4,        ///< decide the result from the ending and complete
    act_fail = 1u << 5,          ///< complete with the failure: nothing ran
};

struct exec_step
{
    exec_phase next = exec_phase::acquiring;
    std::uint32_t actions = act_none; ///< exec_action bits
    kill_request kill{};              ///< with act_send_kill
    /// The phase the event found (with act_finish, `abandoned` says the pipes were given up).
    exec_phase from = exec_phase::acquiring;

    bool has(exec_action a) const noexcept { return (actions & a) != 0; }
    friend bool operator==(const exec_step&, const exec_step&) = default;
};

/// \brief The one transition function, with the little state the phase needs beside it.
///
/// A kill asked for before the whole plan is out waits and goes out with it (the harder of
/// two waiting ones: the shorter grace). A cancellation once the worker is done gives up
/// the pipes (the tree is gone; only reading is left); a terminate then does nothing. The
/// drain timer gives up the pipes unless a chunk is still with the caller. The result is
/// decided once the worker is done and every stream has ended. Nothing moves after `done`,
/// so a timer or a request that crossed the end does nothing.
class exec_machine
{
public:
    /// `streams`: the output streams to wait for (2 on pipes, 1 on a terminal).
    explicit exec_machine(int streams = 2) noexcept : open_streams_(streams) {}

    exec_step on(const exec_event& ev) noexcept;

    exec_phase phase() const noexcept { return phase_; }
    stop_request request() const noexcept { return request_; }

private:
    exec_step from_starting(const exec_event& ev);
    exec_step from_running(const exec_event& ev);
    exec_step from_ended(const exec_event& ev);
    exec_step stop_asked(const exec_event& ev);
    exec_step stream_ended();
    exec_step go(exec_phase next, std::uint32_t actions = act_none, kill_request k = {});

    exec_phase phase_ = exec_phase::acquiring;
    stop_request request_ = stop_request::none;
    std::optional<kill_request> held_; // asked for before the whole plan was out
    int open_streams_;
};

/// The plan is out and the worker may take requests.
constexpr bool plan_out(exec_phase p) noexcept
{
    return p == exec_phase::running || p == exec_phase::draining || p == exec_phase::abandoned;
}
/// The worker still runs the tree: a signal or a kill can reach it.
constexpr bool tree_running(exec_phase p) noexcept
{
    return p == exec_phase::running;
}
/// The worker is done with the plan (or gone), the pipes may still be open.
constexpr bool worker_done(exec_phase p) noexcept
{
    return p == exec_phase::draining || p == exec_phase::abandoned || p == exec_phase::done;
}

const char* to_string(exec_phase p) noexcept;
std::ostream& operator<<(std::ostream& os, exec_phase p);
std::ostream& operator<<(std::ostream& os, const exec_step& s);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_EXEC_EXEC_PHASE_HPP
