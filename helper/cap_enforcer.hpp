// helper/cap_enforcer.hpp: what holds the caps of one execution and stops it when one trips.
//
// The worker (worker.cpp) owns an execution's life cycle: it spawns the tree, reaps it, kills
// it, keeps its deadline and reports its end. The caps are held by the enforcers it starts
// with the run, one or both of:
//   - sampled_caps.hpp: /proc listings, the PSS reader, the cpu ledger and the fork gate;
//   - cgroup_caps.hpp: the controllers of the execution's own cgroup (the kernel's caps).
// An enforcer sees the run's phase as the worker sets it, reports a trip through the
// worker's callback (never touching the worker), and adds what it measured to the report.
#ifndef SANDBOX_HELPER_CAP_ENFORCER_HPP
#define SANDBOX_HELPER_CAP_ENFORCER_HPP

#include "helper/budget.hpp"
#include "helper/cgroup.hpp"
#include "helper/worker_phase.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <sys/types.h>

namespace sandbox::detail {

/// What a stop brings besides its reason: the grace, and the decision and text that the
/// report carries when it is the first cause.
struct stop_detail
{
    std::chrono::nanoseconds grace{0};
    cap_decision decision{};
    std::string failure{};
};

/// How an enforcer stops the run: the event the worker feeds (a stop, or a refused fork).
using trip_fn = std::function<void(const worker_event&, const stop_detail&)>;

/// An execution's own cgroup as its enforcers see it.
struct exec_cgroup
{
    cgroup_leaf leaf;
    std::chrono::microseconds cpu_base{0}; // its cpu.stat before this run (a reused leaf)
    cgroup_limits kernel{};                // the caps its controllers hold (0: the sampler's)

    /// This run's cpu time so far (cpu.stat less the base); nullopt when it cannot be read.
    std::optional<std::chrono::nanoseconds> run_cpu() const
    {
        const auto cpu = leaf.cpu();
        if (!cpu)
            return std::nullopt;
        return *cpu - cpu_base;
    }
};

/// What the enforcers add to an exit report.
struct cap_report
{
    /// Members' cpu time that no rusage of the worker's holds (children the kernel reaped):
    /// added to the worker's RUSAGE_CHILDREN.
    std::chrono::nanoseconds lost_cpu{0};
    /// The largest cpu time measured otherwise (the report gives the larger of the two).
    std::chrono::nanoseconds cpu{0};
    std::uint64_t peak_memory_bytes = 0;
    std::uint64_t samples = 0;
    std::uint64_t failed_samples = 0;
    /// The longest time the tree went unseen by the sampler (sampled_caps).
    std::chrono::nanoseconds longest_sample_gap{0};
    std::string last_failure; // the first one an enforcer has
};

/// \brief Holds caps of one execution. Made by the worker once the command runs, started
/// once, stopped once the run is reported; its watchers check the phase before each step.
class cap_enforcer
{
public:
    virtual ~cap_enforcer() = default;

    /// The run's phase, as the worker's transition set it (before its actions).
    void set_phase(worker_phase p) noexcept { phase_ = p; }
    /// The command runs: start watching it.
    virtual void start() = 0;
    /// The worker reaped `pid`, a member of the tree.
    virtual void on_reaped(pid_t) {}
    /// Every member is reaped: the last accounting, just before the report.
    virtual void on_all_reaped() {}
    /// The run is over: every watcher ends now.
    virtual void stop() = 0;
    /// Adds what it measured (called once, as the report is made).
    virtual void add_to(cap_report& r) const = 0;

protected:
    worker_phase phase() const noexcept { return phase_; }

private:
    worker_phase phase_ = worker_phase::idle;
};

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_CAP_ENFORCER_HPP
