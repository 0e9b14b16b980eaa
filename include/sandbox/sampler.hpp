// sandbox/sampler.hpp: the cap sampler's constants and counters. Each execution's caps are
// sampled from /proc by its worker in the supervisor helper (lib/supervisor/worker.cpp).
#ifndef SANDBOX_SAMPLER_HPP
#define SANDBOX_SAMPLER_HPP

#include <sandbox/config.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>

namespace sandbox {

/// Default sampling interval of the cap sampler. A young tree is sampled sooner (after 2, 4,
/// 8, ... ms, up to the interval), so is one near a cap (a quarter interval from half of it,
/// every 2 ms from 80 %) or one that could pass a memory or cpu cap's bound before the next
/// look; an idle tree far from its caps waits up to 8 intervals, unless a task cap is set.
inline constexpr std::chrono::milliseconds default_sample_interval{50};

/// Consecutive failed samples after which a tree is killed as unenforceable.
inline constexpr int max_consecutive_sample_failures = 3;

/// \brief Counters of the samplers of one execution context's executions (for tests and
/// monitoring). Sample counts arrive with each execution's report, when it ends.
struct sampler_stats
{
    /// Capped executions in flight now.
    std::size_t watched_trees = 0;
    /// Samples taken by finished executions (`ticks` equals `samples`: one tree per worker).
    std::uint64_t ticks = 0;
    std::uint64_t samples = 0;
    /// Samples that failed (a /proc read error other than the process being gone).
    std::uint64_t failed_samples = 0;
    /// The longest time a finished execution's tree went unseen: from the start of one
    /// sample (or of the sampling) to the end of the next (or of the tree). A member's cpu
    /// that no rusage holds (a child the kernel reaped) can be missed for at most that long,
    /// and a cap can be passed unseen for as long: how stale the sampler's view got on this
    /// host, under its load.
    std::chrono::nanoseconds longest_sample_gap{0};
    /// Trees killed for a cap, and for repeated sampling failure.
    std::uint64_t budget_kills = 0;
    std::uint64_t unenforceable_kills = 0;
};

/// \brief True when /proc can be read for process stats on this host right now.
///
/// Probed on every call (one access(2) of `/proc/self/stat`), never cached for the life of
/// the process: a passing failure does not disable caps forever.
SANDBOX_DECL bool sampler_usable() noexcept;

/// \brief True when this host offers what a process cap needs: seccomp user notification
/// that can let a call go on (Linux 5.5 and later), and a `seccomp()` this process may call
/// (a container's filter may forbid it). Probed once, without installing anything: a
/// process cap is held at each fork by a filter the supervisor installs in the command
/// (docs/backends.md); without it, an exec with `max_processes` fails with `not_available`.
SANDBOX_DECL bool fork_gate_usable() noexcept;

/// Statistics of the sampler of `ex`'s execution context (zeros if none was created yet).
SANDBOX_DECL sampler_stats get_sampler_stats(const boost::asio::any_io_executor& ex);

} // namespace sandbox

#endif // SANDBOX_SAMPLER_HPP
