// helper/worker.hpp: the per-execution subreaper of the supervisor helper.
//
// A worker is forked by the helper for one channel to the library. It runs one plan at a
// time: spawns the command, samples the caps, obeys kill requests, and when the command is
// done kills and reaps whatever is left of its subtree before it reports. Then it waits for
// the next plan on the same channel. It kills its subtree and exits when the channel closes
// (the library let go of it, or died) or when the helper dies (its lifeline pipe closes).
#ifndef SANDBOX_HELPER_WORKER_HPP
#define SANDBOX_HELPER_WORKER_HPP

#include <sys/resource.h>

namespace sandbox::detail {

/// The helper's cgroup tree as a worker sees it: its directory (-1: none) and the
/// controllers its executions' cgroups get (cgroup_controller bits).
struct worker_cgroup
{
    int tree_fd = -1;
    unsigned controllers = 0;
};

/// Runs a worker on channel `chan` until it is done, then exits the process. Called in the
/// child right after fork; closes every other inherited descriptor first.
[[noreturn]] void run_worker(int chan, int lifeline, const rlimit& command_nofile,
                             worker_cgroup cgroup = {});

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_WORKER_HPP
