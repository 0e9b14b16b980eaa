// helper/sampled_caps.hpp: the caps held by watching the tree from /proc (cap_enforcer.hpp).
//
// A sampler lists the tree at a pace its caps need (budget.hpp's sample_pacer), reads its
// footprint's PSS off the loop once its RSS sum reaches the memory cap (pss_reader.hpp),
// counts the cpu time of members the kernel reaped (cpu_ledger), and judges each sample
// (cap_budget); the cpu time comes from the execution's cgroup when it has one. Under a
// process cap, the fork gate's listener (fork_gate.hpp) is answered here too.
#ifndef SANDBOX_HELPER_SAMPLED_CAPS_HPP
#define SANDBOX_HELPER_SAMPLED_CAPS_HPP

#include "helper/cap_enforcer.hpp"

#include <sandbox/unique_fd.hpp>

#include <boost/asio/io_context.hpp>

#include "helper/subtree.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <linux/seccomp.h>

namespace sandbox::detail {

/// The cpu time of every child this process has reaped so far (RUSAGE_CHILDREN).
std::chrono::nanoseconds children_cpu();

/// What a sampler holds and where it looks.
struct sampled_setup
{
    cap_limits limits;                      ///< the caps not held by the kernel
    std::chrono::nanoseconds interval{0};   ///< the plan's sample interval (1 ms at least)
    std::uint32_t faults = 0;               ///< samples to fail on purpose (the plan's)
    std::chrono::nanoseconds children_base{0}; ///< children_cpu() at the spawn
    backend::unique_fd gate;                ///< the fork gate's listener (under a process cap)
    /// With `gate` under the unix-socket policy: where the listener's other calls (connects)
    /// go (the connect broker; the listener is one per tree).
    std::function<void(const seccomp_notif&)> other_calls{};
    std::shared_ptr<const exec_cgroup> cgroup; ///< the execution's, if any: its cpu time
    /// How the tree is listed: list_subtree (the worker's own) unless set (a cap watch
    /// lists a tree it did not start, list_tree_of).
    std::function<int(std::vector<subtree_member>&)> list{};
};

/// The sampler of one execution; `trip` stops it.
std::shared_ptr<cap_enforcer> make_sampled_caps(boost::asio::io_context& ctx,
                                                sampled_setup setup, trip_fn trip);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_SAMPLED_CAPS_HPP
