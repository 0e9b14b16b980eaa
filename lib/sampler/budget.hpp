// lib/sampler/budget.hpp: the sampler's decisions, without I/O (unit-tested on their own).
#ifndef SANDBOX_LIB_SAMPLER_BUDGET_HPP
#define SANDBOX_LIB_SAMPLER_BUDGET_HPP

#include <sandbox/backend/caps.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/sampler.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>

#include <sys/types.h>

namespace sandbox::detail {

using backend::cap_limits;

/// One sample of a tree.
struct tree_usage
{
    std::uint64_t rss_bytes = 0;
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
    std::uint64_t peak_rss_bytes() const noexcept { return peak_rss_; }
    std::chrono::nanoseconds cpu_used() const noexcept { return cpu_; }
    std::uint64_t peak_processes() const noexcept { return peak_procs_; }
    /// How close the last good sample came to a cap: the largest of usage / cap over the
    /// caps that are set (0 when none is, or before the first sample).
    double pressure() const noexcept { return pressure_; }
    int consecutive_failures() const noexcept { return failures_; }

private:
    cap_limits limits_;
    int max_failures_;
    int failures_ = 0;
    std::uint64_t peak_rss_ = 0;
    std::uint64_t peak_procs_ = 0;
    std::chrono::nanoseconds cpu_{0};
    double pressure_ = 0;
};

/// \brief Finds cpu time that no rusage will ever show: members reaped by the kernel.
///
/// A process's cpu time normally moves into its reaper's "children" time when it is waited
/// for (our own RUSAGE_CHILDREN for members we reap; a live member's cutime/cstime for the
/// ones it reaps), so summing those with the live members' own time counts each process once.
/// A child of a parent that ignores SIGCHLD is reaped by the kernel instead and its time is
/// lost. Sample by sample this class compares what members that ended had used (when last
/// seen) with how much their parent's children time grew, and keeps the shortfall.
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
    };

    /// Takes one sample: the members alive now, and the sampling process's own children
    /// time (`self` is its pid). `ended(pid, starttime)` confirms that a member missing from
    /// this sample has really ended (a listing can miss a live process). Returns the lost
    /// time found so far.
    std::chrono::nanoseconds update(std::span<const member> live, pid_t self,
                                    std::chrono::nanoseconds self_reaped,
                                    const std::function<bool(pid_t, std::uint64_t)>& ended);

    std::chrono::nanoseconds lost() const noexcept { return lost_; }

private:
    std::unordered_map<pid_t, member> last_;
    // Ended members whose parent a listing missed: judged once the parent is seen again.
    std::unordered_map<pid_t, member> carried_;
    std::chrono::nanoseconds last_self_reaped_{0};
    std::chrono::nanoseconds lost_{0};
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SAMPLER_BUDGET_HPP
