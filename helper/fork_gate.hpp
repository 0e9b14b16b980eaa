// helper/fork_gate.hpp: the fork gate, which holds a tree under a process cap to the
// cap as each process is created, not when the sampler next looks.
//
// The worker starts a command with a process cap itself instead of with posix_spawn (with
// clone(CLONE_VM | CLONE_VFORK), as posix_spawn does): the child sets itself up as
// posix_spawn would (spawn.hpp), installs a seccomp filter on itself, hands the filter's user-notification listener to the worker over a socket, and
// execs the command. The filter, which every descendant inherits and none can remove, sends
// each fork, vfork and clone that makes a process (not a thread) to the worker, which lets
// it go on or refuses it with EAGAIN (and then kills the tree as over budget). clone3 fails
// with ENOSYS, so that glibc falls back to clone, whose flags a filter can read. Threads pass
// without a round trip: the task cap counts them (sampled). A program of another
// architecture than the host's (and its 32-bit one) is killed at its first call.
//
// Installing a filter needs CAP_SYS_ADMIN or no_new_privs: without the capability the child
// sets no_new_privs, so a setuid program run under a process cap by an unprivileged caller
// does not gain privileges.
#ifndef SANDBOX_HELPER_FORK_GATE_HPP
#define SANDBOX_HELPER_FORK_GATE_HPP

#include "helper/spawn.hpp"
#include "protocol/protocol.hpp"

#include <sandbox/unique_fd.hpp>

#include <cstdint>

#include <linux/seccomp.h>

namespace sandbox::detail {

/// The seccomp filters a start installs on the command.
struct spawn_filters
{
    bool fork_gate = false;      // fork_filter.hpp: a process cap
    bool connect_broker = false; // connect_filter.hpp: the unix-socket policy
};

/// \brief Starts `a` under the filter `which` names (as spawn_command would; with
/// `a.cgroup_fd`, inside that cgroup from the child's first instruction: clone_into.hpp):
/// the fork gate's (fork_filter.hpp), or the connect filter (connect_filter.hpp), which holds
/// the gate's rules too when both are asked for (one listener per tree). Returns 0 with `pid`
/// and the filter's listener once the command was executed, or the errno of the failure,
/// with `stage` saying whose it was (the filter's: seccomp unavailable, not the command's
/// fault). A child that failed is killed and reaped before the return. Call it from
/// one thread at a time, and from no thread that other threads could be waiting on (the
/// child borrows the caller's memory while the caller is suspended).
int spawn_filtered(const spawn_args& a, spawn_filters which, pid_t& pid,
                   backend::unique_fd& listener, proto::spawn_stage& stage);

/// \brief Installs the gate's real filter, with its listener, on the calling process, as
/// the gated child would: 0, or the errno that would fail every gated start. Only for a
/// process that exits right after (`sandbox-supervisor --probe-fork-gate`): the filter
/// stays on it.
int probe_fork_gate();

/// One fork asking to go ahead.
struct fork_request
{
    std::uint64_t id = 0;
    pid_t pid = 0; // the forking task, in the listener's pid namespace (0 if not visible)
    /// The call as received: under the unix-socket policy too, the same listener sends the
    /// tree's connects (is_fork_call tells them apart), which go to the connect broker.
    seccomp_notif call{};
};

enum class gate_listener
{
    request,   // a fork waits to be received
    idle,      // nothing to receive now
    tree_gone, // no process uses the filter any more, so no request ever will
};
/// What the listener holds, without blocking.
gate_listener gate_state(int listener);

/// Takes the next request; 0, or ENOENT when the task asking was killed meanwhile, or
/// another errno. Call only when the listener is readable (it would block otherwise).
int receive_fork(int listener, fork_request& r);

/// Lets the fork go on, or refuses it with EAGAIN. 0, or ENOENT when the task is gone.
int answer_fork(int listener, const fork_request& r, bool allow);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_FORK_GATE_HPP
