// helper/proc.hpp: reading process facts from /proc (parsers are pure functions).
#ifndef SANDBOX_HELPER_PROC_HPP
#define SANDBOX_HELPER_PROC_HPP

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace sandbox::detail {

/// The fields of /proc/<pid>/stat that supervision needs.
struct proc_stat
{
    pid_t pid = 0;
    char state = '?';
    pid_t ppid = 0;
    pid_t pgrp = 0;
    pid_t session = 0;
    std::uint64_t utime = 0;  // clock ticks
    std::uint64_t stime = 0;  // clock ticks
    std::uint64_t cutime = 0; // clock ticks, reaped children
    std::uint64_t cstime = 0; // clock ticks, reaped children
    long num_threads = 1;
    std::uint64_t starttime = 0; // clock ticks after boot; with pid, identifies a process
    std::uint64_t rss_pages = 0;
    std::uint64_t sigignore = 0; // ignored signals 1-64 as a mask (bit N-1: signal N)
    std::uint64_t flags = 0;     // the kernel's PF_* flags of the task (field 9)

    /// Neither a zombie nor dying: a process being killed stays listed for a moment with
    /// PF_EXITING set before it becomes a zombie; it counts against no process cap, unless it
    /// sleeps uninterruptibly in its exit (it could hold its pid there for good). A process
    /// whose main thread ended or is ending while its other threads run is live.
    bool live() const noexcept
    {
        if (main_thread_ended())
            return true;
        return state != 'Z' && state != 'X' && (!exiting() || state == 'D');
    }

    /// Ended for good: a zombie whose threads have all exited (its pid waits to be reaped).
    bool zombie() const noexcept { return state == 'Z' && num_threads <= 1; }

    /// Its main thread has ended, or is ending (PF_EXITING: it may be held up in its exit),
    /// while other threads run: the process may show as a zombie but is alive, its children
    /// hang below those threads, and this record may show no memory (the main thread let go
    /// of it): a running thread's record does (read_running_thread_stat).
    bool main_thread_ended() const noexcept
    {
        return (state == 'Z' || exiting()) && num_threads > 1;
    }

    /// PF_EXITING: the task (this record's thread) is in its exit.
    bool exiting() const noexcept { return (flags & 0x4) != 0; }

    std::uint64_t cpu_ticks() const noexcept { return utime + stime + cutime + cstime; }
    /// SIGCHLD is ignored, so the kernel reaps this process's children itself: their cpu
    /// time reaches no rusage. (SA_NOCLDWAIT does the same and does not show here: see cpu_ledger.)
    bool children_reaped_by_kernel() const noexcept { return (sigignore >> (17 - 1)) & 1u; }
};

/// Parses the text of /proc/<pid>/stat. The command name may hold spaces and parentheses.
std::optional<proc_stat> parse_proc_stat(std::string_view text) noexcept;

/// Parses a whitespace-separated list of pids (the format of .../children).
void parse_pid_list(std::string_view text, std::vector<pid_t>& out);

/// Parses the "Pss:" line of /proc/<pid>/smaps_rollup: the process's proportional share of
/// its resident pages (a page shared by N processes counts 1/N for each), in bytes.
std::optional<std::uint64_t> parse_pss_bytes(std::string_view text) noexcept;

/// Reads the PSS of `pid` (walks its page tables: ~25 us for a small process, milliseconds
/// for a large one). On failure returns nullopt and sets `err` (ENOENT when it is gone).
std::optional<std::uint64_t> read_pss_bytes(pid_t pid, int& err) noexcept;

/// The PSS of one thread's view of `pid`'s memory (/proc/<pid>/task/<tid>/smaps_rollup): the
/// process's own, for a process whose main thread has ended (proc_stat::main_thread_ended).
std::optional<std::uint64_t> read_thread_pss_bytes(pid_t pid, pid_t tid, int& err) noexcept;

/// Parses /proc/<pid>/statm: the resident pages that are neither file-backed nor shared
/// memory (resident - shared), in bytes for pages of `page_bytes`: the process's private
/// anonymous memory.
std::optional<std::uint64_t> parse_statm_anon_bytes(std::string_view text,
                                                    std::uint64_t page_bytes) noexcept;

/// Reads the private anonymous memory of `pid` from its statm (through thread `tid` when it is
/// not 0: a process whose main thread has ended). Read from the memory counters, without the
/// memory-map lock a PSS read takes. On failure returns nullopt and sets `err`.
std::optional<std::uint64_t> read_anon_bytes(pid_t pid, pid_t tid, int& err) noexcept;

/// Parses /proc/<pid>/schedstat: the first number, the nanoseconds its main thread has run.
std::optional<std::uint64_t> parse_schedstat_ns(std::string_view text) noexcept;

/// \brief The cpu time of `pid`'s main thread in nanoseconds (/proc/<pid>/schedstat), exact
/// where `stat`'s utime and stime are whole clock ticks (10 ms), each rounded down. For a
/// single-threaded process it is its whole cpu time. On failure nullopt and `err`.
std::optional<std::uint64_t> read_runtime_ns(pid_t pid, int& err) noexcept;

/// Reads up to `size` bytes of a small /proc file in one read: their count, or -1 with `err`
/// set (ENOENT also when the file is empty: a zombie or a kernel thread has nothing to say).
ssize_t read_small(const char* path, char* buf, std::size_t size, int& err) noexcept;

/// Reads /proc/<pid>/stat. On failure returns nullopt and sets `err` to errno.
std::optional<proc_stat> read_proc_stat(pid_t pid, int& err) noexcept;

/// \brief For a process whose main thread has ended (proc_stat::main_thread_ended): the record
/// of one of its threads that still runs (/proc/<pid>/task/<tid>/stat; `pid` there is the
/// thread's id), which shows the process's memory. On failure, or when no thread is left,
/// nullopt and `err` (ESRCH then).
std::optional<proc_stat> read_running_thread_stat(pid_t pid, int& err) noexcept;

/// Opens /proc/<pid>/stat (O_RDONLY | O_CLOEXEC) for repeated reads with read_proc_stat_at;
/// -1 on failure. The descriptor stays bound to that process: once it has exited, reads
/// fail instead of returning a reused pid's data.
int open_proc_stat(pid_t pid) noexcept;

/// Reads a descriptor from open_proc_stat from offset 0 (one pread).
std::optional<proc_stat> read_proc_stat_at(int fd, int& err) noexcept;

/// Reads a /proc/.../children file from offset 0 and appends the pids.
bool read_children_at(int fd, std::vector<pid_t>& out);

long clock_ticks_per_second() noexcept;
long page_size_bytes() noexcept;

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_PROC_HPP
