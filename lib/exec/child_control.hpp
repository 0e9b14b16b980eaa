// lib/exec/child_control.hpp: what a session asks of the supervised-child core
// (lib/exec/supervision.hpp) besides running the plan: the pid once it runs, the terminal,
// signals for the command's group and a graceful stop. Exec uses the same core without it.
#ifndef SANDBOX_LIB_EXEC_CHILD_CONTROL_HPP
#define SANDBOX_LIB_EXEC_CHILD_CONTROL_HPP

#include <sandbox/backend/supervise.hpp>

#include "exec/input_writer.hpp"

#include <chrono>
#include <functional>
#include <memory>

#include <sys/types.h>

namespace sandbox::detail {

/// \brief Control of one supervised command. Calls after its completion do nothing.
class child_control
{
public:
    virtual ~child_control() = default;
    /// The pseudo-terminal master (stays valid while the supervision runs), or -1 on pipes.
    virtual int terminal_fd() const noexcept = 0;
    /// `signo` to the command's process group, sent by its worker (race-free: the worker
    /// is the parent of the unreaped leader). False when the command is known to be gone.
    virtual bool signal(int signo) = 0;
    /// SIGTERM to the tree, SIGKILL after `grace` (zero: SIGKILL now). The completion says
    /// `exec_status::terminated` unless the command exited with a code of its own.
    virtual void terminate(std::chrono::nanoseconds grace) = 0;
};

// `start_supervised` (declared with `backend::async_supervise`) returns it. Its
// `on_spawned` runs on the executor once the worker reports the pid (output may already
// have been delivered), or never when the spawn fails (then `done` gets the error).

} // namespace sandbox::detail

#endif // SANDBOX_LIB_EXEC_CHILD_CONTROL_HPP
