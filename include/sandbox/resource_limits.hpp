// sandbox/resource_limits.hpp: caps on what the child's process tree may consume.
#ifndef SANDBOX_RESOURCE_LIMITS_HPP
#define SANDBOX_RESOURCE_LIMITS_HPP

#include <sandbox/config.hpp>

#include <cstdint>

namespace sandbox {

/// Runner default for `resource_limits::max_output_bytes` (per stream): 10 MiB.
inline constexpr std::int64_t default_max_output_bytes = 10 * 1024 * 1024;

/// \brief Resource caps. Zero means "no cap" (or "runner default" for output); negative
/// values are refused with `errc::validation`.
struct resource_limits
{
    /// Cap on the memory footprint of the whole process tree: the summed RSS of its processes
    /// (sampled), confirmed with their summed PSS once that sum reaches the cap, so pages
    /// shared between processes count once. Sampled: a tree faulting memory in at full speed
    /// is killed below about 1.2x the cap (docs/security.md says when it can pass that).
    std::int64_t memory_bytes = 0;
    /// CPU budget as a share of the wall timeout: the tree may use
    /// `timeout * cpu_millicores / 1000` of cpu time in total (a budget, not a rate).
    /// Needs a timeout.
    std::int64_t cpu_millicores = 0;
    /// Disk quota. No backend can enforce it yet: any non-zero value is refused.
    std::int64_t disk_bytes = 0;
    /// Bytes kept per stream (stdout and stderr separately); the rest is drained and
    /// counted, the child is not disturbed. 0: the runner's default.
    std::int64_t max_output_bytes = 0;
    /// Cap on live processes in the tree (a fork-bomb guard). Threads are not counted: a
    /// process with 500 threads is one process; use `max_tasks` for threads. Held as each
    /// process is made, not only sampled: a fork that would pass the cap fails with EAGAIN
    /// and the tree is killed (`budget_exceeded`). Under this cap the tree runs under a
    /// seccomp filter (`clone3` fails with ENOSYS, so the C library uses `clone`), and, when
    /// the caller lacks CAP_SYS_ADMIN, with no_new_privs (setuid programs do not gain
    /// privileges). Where that filter cannot be installed (Linux before 5.5, a container
    /// that forbids `seccomp()`), the exec fails with `not_available`. See docs/backends.md.
    std::int64_t max_processes = 0;
    /// Cap on live tasks in the tree: every thread of every process (a single-threaded
    /// process is one task; zombies count none). A thread-bomb guard, and the unit the
    /// kernel's pids controller and RLIMIT_NPROC count in.
    std::int64_t max_tasks = 0;

    bool has_sampled_caps() const noexcept
    {
        return memory_bytes > 0 || cpu_millicores > 0 || max_processes > 0 || max_tasks > 0;
    }
};

} // namespace sandbox

#endif // SANDBOX_RESOURCE_LIMITS_HPP
