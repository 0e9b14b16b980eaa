// helper/budget.hpp: the sampler's decisions, without I/O (unit-tested on their own).
#ifndef SANDBOX_HELPER_BUDGET_HPP
#define SANDBOX_HELPER_BUDGET_HPP

#include <sandbox/backend/caps.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/sampler.hpp>

#include <chrono>
#include <deque>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace sandbox::detail {

using backend::cap_limits;

/// One sample of a tree.
struct tree_usage
{
    /// The memory the cap judges: the summed RSS of the live members, or their summed PSS
    /// once the RSS sum reached the memory cap and the PSS was read (pss_reader.hpp).
    std::uint64_t footprint_bytes = 0;
    std::chrono::nanoseconds cpu{0};
    std::uint64_t processes = 0;
    std::uint64_t tasks = 0; // threads of all live processes
};

enum class cap_action
{
    keep_going,
    kill_budget,
    kill_unenforceable,
};

struct cap_decision
{
    cap_action action = cap_action::keep_going;
    budget_kind which = budget_kind::none;
    std::int64_t observed = 0;
    std::int64_t configured = 0;
};

/// \brief Decides, sample by sample, whether a tree must be killed.
///
/// Memory is checked first, then cpu, then the process count, then the task count. Memory
/// and cpu trip at "greater or equal" (the cap is a ceiling that must not be reached); the
/// process and task caps trip when the count is above the cap. `max_failures` failed samples in a row kill the
/// tree as unenforceable; a good sample resets the count. Peaks are kept for the result.
class cap_budget
{
public:
    explicit cap_budget(cap_limits l, int max_failures = max_consecutive_sample_failures) noexcept
        : limits_(l), max_failures_(max_failures)
    {
    }

    cap_decision on_sample(const tree_usage& u) noexcept;
    cap_decision on_failure() noexcept;

    const cap_limits& limits() const noexcept { return limits_; }
    std::uint64_t peak_footprint_bytes() const noexcept { return peak_footprint_; }
    std::chrono::nanoseconds cpu_used() const noexcept { return cpu_; }
    std::uint64_t peak_processes() const noexcept { return peak_procs_; }
    /// How close the last good sample came to a cap: the largest of usage / cap over the
    /// caps that are set (0 when none is, or before the first sample).
    double pressure() const noexcept { return pressure_; }
    /// \brief Under a memory cap: the time in which the tree could grow from the last good
    /// sample to `memory_overshoot_bound` times the cap, `parallel` tasks faulting memory in
    /// at `fault_bytes_per_second` each. The sampler looks again within it, so that a fast
    /// allocator is killed before that bound. nanoseconds::max() without a memory cap.
    std::chrono::nanoseconds memory_reach_time(unsigned parallel) const noexcept;
    /// Under a cpu budget: the time in which `parallel` tasks running flat out could use the
    /// rest of it from the last good sample. nanoseconds::max() without a cpu budget.
    std::chrono::nanoseconds cpu_reach_time(unsigned parallel) const noexcept;
    /// The tasks the last good sample counted (at least 1).
    std::uint64_t last_tasks() const noexcept { return last_tasks_; }
    int consecutive_failures() const noexcept { return failures_; }

private:
    cap_limits limits_;
    int max_failures_;
    int failures_ = 0;
    std::uint64_t peak_footprint_ = 0;
    std::uint64_t peak_procs_ = 0;
    std::uint64_t last_footprint_ = 0;
    std::uint64_t last_tasks_ = 1;
    std::chrono::nanoseconds cpu_{0};
    double pressure_ = 0;
};

/// The footprint a memory cap is held below: a tree dirtying memory as fast as
/// `fault_bytes_per_second` allows is killed before this many times its cap.
inline constexpr double memory_overshoot_bound = 1.2;
/// How fast the sampler assumes one task can fault anonymous memory in (4 KiB pages). This
/// VM measures 2-3 GB/s per core; huge pages (THP) fault faster, see docs/architecture.md.
inline constexpr double fault_bytes_per_second = 4.0 * 1024 * 1024 * 1024;
/// The shortest wait between two samples, and the first one's (after the spawn).
inline constexpr std::chrono::nanoseconds min_sample_delay = std::chrono::milliseconds(2);
/// An idle tree far from its caps is sampled down to this many times less often than the
/// configured interval.
inline constexpr int idle_interval_factor = 8;

/// What a sample tells its pacer besides the usage.
struct pace_input
{
    /// cap_budget::pressure (1.0: sample as often as can be).
    double pressure = 0;
    /// How soon a cap's bound could be passed at the pace of the tree's own tasks.
    std::chrono::nanoseconds time_to_bound = std::chrono::nanoseconds::max();
    /// The same if every cpu ran for the tree: what bounds an idle tree's longer waits, since
    /// threads can be made at any moment without the fork gate.
    std::chrono::nanoseconds time_to_bound_all_cpus = std::chrono::nanoseconds::max();
    /// How long the sample itself took: the next wait is at least as long (a tree so large
    /// that listing it takes longer than a wait costs the sampler half a cpu at most).
    std::chrono::nanoseconds took{0};
};

/// \brief Paces the samples of one tree: when to look next.
///
/// A young tree is sampled often (2, 4, 8, ... ms after the spawn), then every `interval`. A
/// tree at half of a cap is sampled every quarter interval, at 80 % (`pressure` 0.8) every
/// 2 ms. An idle tree (a sample that shows the same processes and tasks as the one before,
/// its footprint within 1 MiB, and less than 1 % of one cpu used since) is sampled less and
/// less often, down to `idle_interval_factor` times the interval, as long as no cap's bound
/// could be passed meanwhile even with every cpu running for it (`time_to_bound_all_cpus`), and unless
/// `may_idle` is false (under a task cap, which no bound covers). Any other sample brings the
/// interval back. Whatever the rule says, the next sample comes no later than `time_to_bound` and no
/// sooner than 2 ms (or the interval, when that is shorter) nor than the sample took.
class sample_pacer
{
public:
    using time_point = std::chrono::steady_clock::time_point;

    sample_pacer(std::chrono::nanoseconds interval, bool may_idle) noexcept
        : interval_(interval), may_idle_(may_idle), last_(floor())
    {
    }

    /// The wait before the first sample.
    std::chrono::nanoseconds first() const noexcept { return floor(); }
    /// The next wait after a good sample `u` taken at `now`.
    std::chrono::nanoseconds after_sample(const tree_usage& u, time_point now,
                                          const pace_input& in) noexcept;
    /// The next wait after a failed sample (never an idle one).
    std::chrono::nanoseconds after_failure(const pace_input& in) noexcept;

private:
    std::chrono::nanoseconds floor() const noexcept { return std::min(min_sample_delay, interval_); }
    std::chrono::nanoseconds pace(bool idle, const pace_input& in) noexcept;
    bool idle_since_last(const tree_usage& u, time_point now) const noexcept;

    std::chrono::nanoseconds interval_;
    bool may_idle_;
    std::chrono::nanoseconds last_;
    std::optional<std::pair<tree_usage, time_point>> previous_;
};

/// \brief Finds cpu time that no rusage will ever show: members reaped by the kernel.
///
/// A process's cpu time normally moves into its reaper's "children" time when it is waited
/// for (our own RUSAGE_CHILDREN for members we reap; a live member's cutime/cstime for the
/// ones it reaps), so summing those with the live members' own time counts each process once.
/// A child of a parent that ignores SIGCHLD is reaped by the kernel instead and its time is
/// lost. Sample by sample this class takes what such children had used when last seen, less
/// any growth of their parent's children time (a parent may also have waited for a child
/// that ended before it ignored SIGCHLD), and keeps the shortfall.
///
/// A parent that ignored SIGCHLD when last seen and has ended since took the children that
/// ended with it along unwaited: their time is lost (unless the subreaper reaped them, having
/// outlived their parent). If such a parent set SIGCHLD back and waited for them within the
/// last sample interval, their time is counted twice; that only brings a kill nearer.
///
/// Only children of a parent seen ignoring SIGCHLD are judged. A listing reads a parent's
/// record before it reaches the parent's children, and the parent may wait for a child in
/// between (the child is gone, the record does not show it yet) or just after (the record
/// shows it, the listing still lists the child): the growth of a waiting parent's children
/// time cannot be matched with its children sample by sample, and judging it would call
/// waited-for time lost and count it twice. A parent that reaps through SA_NOCLDWAIT, which
/// /proc does not show, is not detected.
/// How many samples orphaned time counted lost waits for a reaper's growth to explain it. A
/// member that reaps orphans waits for them when it is scheduled next, which on a busy host
/// is more than one 2 ms sample later (one sample counted 100 ms of 600 twice in 1 run of 12).
/// 8 samples (16 ms) still fell short under `ctest -j2` on 2 cores, where the orphans burning
/// cpu kept the reaper waiting (once: 735 ms counted for 620). The time counts as lost at
/// once (a cap sees it without delay); the window only bounds how late a repayment may come.
inline constexpr int orphan_debt_samples = 64;

class cpu_ledger
{
public:
    struct member
    {
        pid_t pid = 0;
        pid_t ppid = 0;
        std::uint64_t starttime = 0;
        std::chrono::nanoseconds own{0};    // utime + stime
        std::chrono::nanoseconds reaped{0}; // cutime + cstime
        bool kernel_reaps = false;          // ignores SIGCHLD: its children vanish unwaited
    };

    /// Takes one sample: the members alive now. `ended(pid, starttime)` confirms that a
    /// member missing from this sample has really ended (a listing can miss a live process);
    /// `reaped_by_us(pid)` tells a member the subreaper reaped since the last sample (one
    /// that outlived its parent). Returns the lost time found so far.
    std::chrono::nanoseconds update(std::span<const member> live,
                                    const std::function<bool(pid_t, std::uint64_t)>& ended,
                                    const std::function<bool(pid_t)>& reaped_by_us = {});

    /// The last sample, taken once the whole tree is reaped: `grown` is what our own
    /// children time grew by since the last `update`. Every member last seen has ended; the
    /// growth settles the orphaned time still waiting for a reaper's growth (a reaper that
    /// waited for an orphan after the last listing and then ended: its growth shows only in
    /// ours). Returns the lost time, final.
    std::chrono::nanoseconds finish(std::chrono::nanoseconds grown);

    std::chrono::nanoseconds lost() const noexcept { return lost_; }

private:
    std::unordered_map<pid_t, member> last_;
    // Ended members whose parent a listing missed: judged once the parent is seen again.
    std::unordered_map<pid_t, member> carried_;
    std::chrono::nanoseconds lost_{0};
    // Orphaned time counted lost that a reaper's growth may still explain within the next
    // `orphan_debt_samples` samples (each with the samples it has left, oldest first), and a
    // reaper's growth that an orphan seen gone at the next sample may explain.
    std::deque<std::pair<std::chrono::nanoseconds, int>> debts_;
    std::chrono::nanoseconds credit_{0};

    using by_pid = std::unordered_map<pid_t, member>;
    using used_by_parent = std::unordered_map<pid_t, std::chrono::nanoseconds>;
    used_by_parent departed_since(by_pid& now,
                                  const std::function<bool(pid_t, std::uint64_t)>& ended,
                                  const std::function<bool(pid_t)>& reaped_by_us);
    void match_orphans(const by_pid& now, const used_by_parent& departed);
    void settle_orphans(std::chrono::nanoseconds orphaned, std::chrono::nanoseconds unexplained);
};

/// \brief Decides each fork of a tree under a process cap, as the fork happens (the worker's
/// seccomp fork gate asks; see supervisor/fork_gate.hpp).
///
/// It keeps the live process count of the last listing plus the forks admitted since. While
/// that stays within the cap a fork is admitted without any /proc read; once the next fork
/// would pass the cap, the caller lists the tree again (`on_listing`) and asks once more, so
/// processes that ended in between make room.
///
/// A fork admitted just now may not show in a listing yet (its task has not run since), and
/// one missed that way would let one more through. So before listing, the caller waits
/// until `settle` has passed since the last fork that may still be under way: one whose task
/// has not asked again since (a task is in one call at a time, so its asking again means
/// its earlier fork is done). A tree at its cap that forks from one task, such as a shell
/// running one command after another, never waits.
class process_gate
{
public:
    using time_point = std::chrono::steady_clock::time_point;

    process_gate(std::uint64_t cap, std::chrono::nanoseconds settle) noexcept
        : cap_(cap), settle_(settle)
    {
    }

    /// A fresh count of the live processes.
    void on_listing(std::uint64_t live) noexcept
    {
        listed_ = live;
        admitted_ = 0;
        in_flight_.clear(); // waited for (see above) or seen
    }
    /// True when the count is at the cap: admitting one more fork would pass it, so the
    /// caller should list the tree first (ended processes may make room).
    bool at_cap() const noexcept { return count() + 1 > cap_; }
    /// Before a listing for task `tid`'s fork at `now`: when to list (nullopt: at once).
    std::optional<time_point> list_after(pid_t tid, time_point now);
    /// Admits (and counts) task `tid`'s fork at `now`, or refuses it when the count would
    /// pass the cap.
    bool admit(pid_t tid, time_point now);
    /// The processes there would be with the fork asked for.
    std::uint64_t wanted() const noexcept { return count() + 1; }
    std::uint64_t cap() const noexcept { return cap_; }

private:
    std::uint64_t count() const noexcept { return listed_ + admitted_; }
    std::uint64_t cap_;
    std::chrono::nanoseconds settle_;
    std::uint64_t listed_ = 0;
    std::uint64_t admitted_ = 0;
    std::vector<std::pair<pid_t, time_point>> in_flight_; // admitted since the listing
};

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_BUDGET_HPP
