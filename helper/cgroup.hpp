// helper/cgroup.hpp: the helper's cgroup v2 tree and the per-execution cgroups in it.
//
//   <site>/sbx-PID-START/            the helper's tree (PID, START: the helper's)
//       supervisor/                   the helper and its idle workers (a leaf: the
//                                     no-internal-processes rule keeps processes out of
//                                     the tree's own directory)
//       x-WORKERPID-N/                one per execution: the command is spawned into it
//                                     (clone3 CLONE_INTO_CGROUP), killed with cgroup.kill,
//                                     its cpu.stat is the tree's cpu time
//
// Every call returns 0 or an errno and never throws; `why` texts say which file failed.
// Paths are relative to descriptors (openat, mkdirat, unlinkat), so the unit tests run all
// of it against a plain directory tree standing in for cgroupfs.
#ifndef SANDBOX_HELPER_CGROUP_HPP
#define SANDBOX_HELPER_CGROUP_HPP

#include "kernel/cgroup_site.hpp"

#include <sandbox/unique_fd.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace sandbox::detail {

/// The kernel-held limits of one execution's cgroup (0: not set). Only those whose
/// controller the tree has are written.
struct cgroup_limits
{
    std::uint64_t memory_bytes = 0; // memory.max, with memory.swap.max 0, memory.oom.group 1
    std::uint64_t max_tasks = 0;    // pids.max (the pids controller counts threads: tasks)
};

/// What an execution's cgroup says about it (read from its files; absent files read as 0).
struct cgroup_reading
{
    bool populated = false;          // cgroup.events populated
    std::chrono::microseconds cpu{0}; // cpu.stat usage_usec
    std::uint64_t memory_peak = 0;   // memory.peak (Linux 5.19), else memory.current
    std::uint64_t oom_kills = 0;     // memory.events oom_kill + oom_group_kill
    std::uint64_t pids_refused = 0;  // pids.events max
};

/// \brief One execution's cgroup: made by the worker before the spawn, removed after the
/// report. Move-only; the destructor removes nothing (call `remove`).
class cgroup_leaf
{
public:
    cgroup_leaf() = default;

    /// Makes `<tree>/name` and sets `limits`. 0 or the errno (`why` says which step).
    static int make(int tree_fd, std::string_view name, const cgroup_limits& limits,
                    unsigned controllers, cgroup_leaf& out, std::string& why);

    /// As `make`, for a directory `<tree>/name` that exists already (the unit tests' stand-in,
    /// whose control files a test made: mkdir cannot make them there). Removes nothing.
    static int adopt(int tree_fd, std::string_view name, const cgroup_limits& limits,
                     unsigned controllers, cgroup_leaf& out, std::string& why);

    explicit operator bool() const noexcept { return static_cast<bool>(dir_); }
    /// The directory (O_RDONLY | O_DIRECTORY): clone3's `cgroup` for CLONE_INTO_CGROUP.
    int fd() const noexcept { return dir_.get(); }
    const std::string& name() const noexcept { return name_; }

    /// Kills every process in it at once: `cgroup.kill`, or where that is missing, freeze,
    /// SIGKILL each pid of `cgroup.procs`, thaw (the frozen ones die as they thaw). 0 or
    /// the errno.
    int kill();
    /// Reads the files above; nullopt when `cgroup.events` cannot be read.
    std::optional<cgroup_reading> read() const;
    /// `cgroup.events populated` alone; nullopt when it cannot be read.
    std::optional<bool> populated() const;
    /// `cpu.stat usage_usec` alone (the cheap read of a cpu budget's sample).
    std::optional<std::chrono::microseconds> cpu() const;
    /// A descriptor that becomes readable (inotify) when `cgroup.events`, `memory.events` or
    /// `pids.events` change: the worker waits on it for "empty", an OOM kill, a refused fork.
    int events_fd() const noexcept { return events_.get(); }
    /// Drains the inotify descriptor after it was readable.
    void clear_events() const;
    /// rmdir; EBUSY while a process is still in it.
    int remove(int tree_fd);

private:
    // `name` read from the start: through `kept` (open for the leaf's life, read with
    // pread at offset 0, which makes the kernel render the file afresh) when it is open.
    int read_file(const unique_fd& kept, const char* name, std::string& out) const;

    unique_fd dir_;
    unique_fd events_; // inotify
    // cgroup.events and cpu.stat, opened once: an exec's end reads each a few times, and
    // each open of a cgroup file costs the kernel an allocation of its own (measured: the
    // open/read/close of both per read made the cgroup path's sequential exec 5 % slower).
    unique_fd events_file_;
    unique_fd cpu_file_;
    std::string name_;
};

/// \brief The helper's tree. `open` makes it and moves the calling process (the helper) into
/// its `supervisor` leaf; the workers the helper forks afterwards are born there.
class cgroup_tree
{
public:
    cgroup_tree() = default;

    /// Makes `<site.parent>/<tree_name(getpid(), own start time)>` with its `supervisor`
    /// leaf, moves the calling process there, and enables in the tree's
    /// `cgroup.subtree_control` the controllers of `site.controllers` (only those the parent
    /// already enables for its children: the parent's files are never written). A controller
    /// the tree refuses is left out (`why` says so) and open still succeeds. 0 or the errno;
    /// on failure nothing is left behind and the caller stays where it was.
    static int open(const cgroup_site& site, cgroup_tree& out, std::string& why);

    explicit operator bool() const noexcept { return static_cast<bool>(dir_); }
    int fd() const noexcept { return dir_.get(); }
    const std::string& path() const noexcept { return path_; }
    unsigned controllers() const noexcept { return controllers_; }

    /// Kills every execution cgroup of the tree (not the supervisor leaf), waits (at most
    /// `wait`) until they are empty, removes them, moves the caller back to the site's
    /// parent and removes the tree. For the helper's exit.
    void tear_down(std::chrono::milliseconds wait);

    /// Removes the trees under `site_parent` whose helper is gone (no process with that pid
    /// and start time): each is killed (cgroup.kill on the tree: recursive), waited for (at
    /// most `wait` each) and removed, leaves first. Returns how many were removed.
    static int sweep_stale(const std::string& site_parent, std::chrono::milliseconds wait);

private:
    unique_fd dir_;
    std::string path_;
    std::string parent_;
    unsigned controllers_ = 0;
};

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_CGROUP_HPP
