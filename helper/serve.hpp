// helper/serve.hpp: the loop that forks a worker (worker.hpp) for each channel handed over
// a control socket, and kills what dead workers leave. The helper runs it on its control
// socket (fd 3, from the library); an instance's init runs it inside the sandbox on the
// socket the library keeps for that instance (status_init.hpp, --serve).
//
// It makes the calling process a child subreaper; every worker holds the read end of a
// lifeline pipe, so workers notice our death. Orphans of a worker that died (killed by its
// own tree) fall to us and die. When the control socket closes (the library let go, or its
// process died) every worker and every process below them is killed and reaped, then we
// exit. With a pidfd of the caller, we do the same when that process ends.
#ifndef SANDBOX_HELPER_SERVE_HPP
#define SANDBOX_HELPER_SERVE_HPP

#include <string>

namespace sandbox::detail {

/// Serves `control` until it closes (or `caller`, a pidfd, ends; -1: not watched), then
/// exits the process. `cgroup_dir`: where the executions' cgroups go (empty: none).
/// `kill_stopped`: a worker that stops (SIGSTOP and the like) is killed at once, its tree
/// with it: inside an instance a command runs as its worker's user and could otherwise
/// stop the worker that keeps its deadline.
[[noreturn]] void serve_workers(int control, int caller, const std::string& cgroup_dir,
                                bool kill_stopped = false);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_SERVE_HPP
