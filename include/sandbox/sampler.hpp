// sandbox/sampler.hpp: the shared /proc cap sampler (one per execution context).
#ifndef SANDBOX_SAMPLER_HPP
#define SANDBOX_SAMPLER_HPP

#include <sandbox/config.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstdint>

namespace sandbox {

/// Default sampling interval of the cap sampler.
inline constexpr std::chrono::milliseconds default_sample_interval{50};

/// Consecutive failed samples after which a tree is killed as unenforceable.
inline constexpr int max_consecutive_sample_failures = 3;

/// \brief Counters of the sampler serving one execution context (for tests and monitoring).
struct sampler_stats
{
    /// Trees being watched now.
    std::size_t watched_trees = 0;
    /// Timer ticks so far, and tree samples taken (a tick samples every due tree).
    std::uint64_t ticks = 0;
    std::uint64_t samples = 0;
    /// Samples that failed (a /proc read error on the tree's leader).
    std::uint64_t failed_samples = 0;
    /// Trees killed for a cap, and for repeated sampling failure.
    std::uint64_t budget_kills = 0;
    std::uint64_t unenforceable_kills = 0;
};

/// \brief True when the sampler can read /proc for process stats on this host right now.
///
/// Probed on every call (one read of `/proc/self/stat`, ~10 us), never cached for the life
/// of the process: a passing failure does not disable caps forever.
SANDBOX_DECL bool sampler_usable() noexcept;

/// Statistics of the sampler of `ex`'s execution context (zeros if none was created yet).
SANDBOX_DECL sampler_stats get_sampler_stats(const boost::asio::any_io_executor& ex);

} // namespace sandbox

#endif // SANDBOX_SAMPLER_HPP
