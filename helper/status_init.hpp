// helper/status_init.hpp: `sandbox-supervisor --init`, which runs inside a sandbox
// (bwrap) as its pid 1, starts the command, reaps the orphans, and reports how the command
// really ended: bwrap folds a signal death into exit 128+N and its own set-up failures into
// exit 1, so its exit status cannot tell them apart from the command's.
//
//   sandbox-supervisor --init FD [--net-bridge FD2] -- COMMAND [ARG...]
//
// FD is the write end of the status pipe (the library holds the read end); its lines are
// described in protocol/init_status.hpp. In short:
//   "started"          first, before the command is looked up: the sandbox was set up
//   "exec ERRNO"       the command could not be executed (looked up on the PATH inside)
//   "status WSTATUS"   the command's raw wait status
// The job signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) are ignored by the
// wrapper above (the supervisor spawns it so); the command gets them back at their default
// actions, so it is the only one they end when the worker signals the group. The init
// catches them and passes them on to the command's group if the command has left ours
// (setsid, setpgid, a job-control shell), so they reach it wherever it went. The
// init is not dumpable, so the command can neither ptrace it nor read its memory; as pid 1
// it cannot be killed from inside; when it exits, the kernel kills the rest of the namespace.
// Before it says "started", the init puts the set-id filter (setid_filter.hpp) on itself,
// which the command and everything below it inherit; when it cannot, it exits 125 without
// "started" (the sandbox could not be set up).
// With --net-bridge (a sandbox whose network goes through the host's egress proxy), before
// "started" it creates the proxy's listeners in the sandbox's network namespace, hands them
// to the host over FD2 and closes FD2 (protocol/net_bridge.hpp), and the command gets the
// proxy variables; a failure there is exit 125 without "started", too.
//
//   sandbox-supervisor --init FD [--net-bridge FD2] --serve FD3
//
// An instance's init (backends/bwrap/instance.hpp): the same set-up and "started", then,
// instead of a command, "ready" on the control socket FD3 (with the proxy's port when
// bridged) and the helper's serve loop on it (serve.hpp): a worker inside the sandbox for
// each channel the library hands over; a worker that stops is killed. The job signals are
// not caught: as pid 1 the init then ignores them from inside. When FD3 closes, every
// worker's tree is killed and the init exits, which ends the namespace.
#ifndef SANDBOX_HELPER_STATUS_INIT_HPP
#define SANDBOX_HELPER_STATUS_INIT_HPP

#include "protocol/init_status.hpp"

namespace sandbox::detail {

/// The `--init` program; never returns.
[[noreturn]] void run_status_init(int argc, char** argv);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_STATUS_INIT_HPP
