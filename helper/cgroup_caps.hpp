// helper/cgroup_caps.hpp: the caps the kernel holds in an execution's own cgroup
// (cap_enforcer.hpp).
//
// Where the tree's cgroup has the memory controller, `memory.max` holds the memory cap and
// an OOM kill in the group (memory.events) is its trip; where it has the pids controller,
// `pids.max` holds the task cap and a refused fork (pids.events max) is its trip: the same
// decisions the sampler would have made. Both are watched, not polled (the leaf's inotify
// descriptor). Whatever the controllers, the cgroup's cpu.stat holds the cpu time of every
// member, however it was reaped, and memory.peak the memory the kernel charged: the report
// takes them from here.
#ifndef SANDBOX_HELPER_CGROUP_CAPS_HPP
#define SANDBOX_HELPER_CGROUP_CAPS_HPP

#include "helper/cap_enforcer.hpp"

#include <boost/asio/io_context.hpp>

#include <memory>

namespace sandbox::detail {

/// The kernel's caps of the execution in `cgroup` (its leaf made, its `kernel` limits set);
/// `trip` stops it.
std::shared_ptr<cap_enforcer> make_cgroup_caps(boost::asio::io_context& ctx,
                                               std::shared_ptr<const exec_cgroup> cgroup,
                                               trip_fn trip);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_CGROUP_CAPS_HPP
