// sandbox/enforcement.hpp: what a runner really enforces on this host.
#ifndef SANDBOX_ENFORCEMENT_HPP
#define SANDBOX_ENFORCEMENT_HPP

#include <sandbox/config.hpp>
#include <sandbox/net_policy.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sandbox {

class runner;

/// \brief An honest report of the policies a runner enforces here. Every flag defaults to
/// false, which means "not enforced" (never "unknown").
struct enforcement_report
{
    /// The environment allow-list and injection are applied.
    bool env_allow_list = false;
    /// Network modes the runner can isolate (`net_mode::inherit` is never listed).
    std::vector<net_mode> net_modes{};
    bool socks5 = false;
    bool mitm = false;
    bool unix_socket_policy = false;
    /// Caps by the /proc sampler (memory, cpu time, process count); false when /proc cannot
    /// be read on this host.
    bool memory_cap = false;
    bool cpu_cap = false;
    bool process_cap = false;
    bool task_cap = false;
    bool disk_cap = false;
    /// Writes outside allowed paths are prevented by the kernel (not just checked at start).
    bool filesystem_bounds = false;
    /// The whole process tree is killed on timeout, cancellation and exit, including
    /// descendants that left the process group (double-forked daemons excepted).
    bool tree_kill = false;
    /// The host uid and gid commands run as, where the runner sets them (bwrap: a root
    /// caller's sandbox user, else the caller's own ids); unset: the caller's.
    std::optional<std::uint32_t> command_uid{};
    std::optional<std::uint32_t> command_gid{};
    /// The root and writable paths that user cannot write (a root caller's sandbox user
    /// without write access there): bound as they are, so the command reads them and its
    /// writes there fail (EACCES). Empty when every one is writable.
    std::vector<std::string> unwritable_paths{};
    /// Which mechanism holds each cap and the tree kill: "cgroup" (the kernel, through a
    /// cgroup of its own for each tree: cgroup.kill, cpu.stat, memory.max, pids.max),
    /// "sampler" (/proc samples), "fork_gate" (the process cap: each fork asks the worker);
    /// for the tree kill "subreaper" (listing and killing below the worker). Empty when not
    /// enforced.
    std::string memory_cap_by{};
    std::string cpu_cap_by{};
    std::string process_cap_by{};
    std::string task_cap_by{};
    std::string tree_kill_by{};
    /// The directory the helper's cgroup tree goes under, when the cgroup path is used.
    std::string cgroup{};
    /// Why the cgroup path, or one of its controllers, is not used here (empty: all used).
    std::vector<std::string> cgroup_notes{};
    /// Empty, or why the runner cannot run anything on this host (then every flag is false).
    std::string unavailable{};

    friend bool operator==(const enforcement_report&, const enforcement_report&) = default;
};

/// The runner's report; an all-false report for a null runner.
SANDBOX_DECL enforcement_report enforcement_of(const runner* r);

/// JSON text of the report (Boost.JSON), as printed by `sandbox-run --enforcement`.
SANDBOX_DECL std::string to_json(const enforcement_report& e);

} // namespace sandbox

#endif // SANDBOX_ENFORCEMENT_HPP
