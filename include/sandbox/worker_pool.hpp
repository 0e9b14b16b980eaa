// sandbox/worker_pool.hpp: how many idle supervisor workers an execution context keeps, and
// for how long.
//
// Every execution runs under a worker of the supervisor helper: a small process (about
// 1.4 MB, with an empty cgroup of its own on the cgroup path) that spawns the command,
// holds its caps and reaps its tree. A worker that finished an execution waits, idle, for
// the next one, so that a warm context never waits for a fork. After a burst of N
// executions in flight, N workers wait; the ones beyond `keep_idle` are retired (they exit)
// once they have been idle for `retire_after`.
#ifndef SANDBOX_WORKER_POOL_HPP
#define SANDBOX_WORKER_POOL_HPP

#include <sandbox/config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace sandbox {

/// \brief The idle workers of one execution context.
///
/// The newest idle worker serves the next execution. A worker that comes back while
/// `keep_idle` others wait keeps its own retirement time: it exits after `retire_after`
/// unless an execution takes it first (a word shared with the library decides which comes
/// first, so no execution is ever handed to a worker that is leaving). The wait runs in the
/// worker's process: nothing of it keeps the caller's io_context from running out of work.
/// The helper reaps a retired worker and removes its cgroup. An execution that finds no
/// idle worker asks the helper for a new one (a fork, see docs/benchmarks.md).
struct worker_pool_options
{
    /// Idle workers kept however long they wait.
    std::size_t keep_idle = 4;
    /// The most idle workers kept at all: a worker that finds this many waiting exits at
    /// once. `keep_idle` above it counts as `max_idle`.
    std::size_t max_idle = 64;
    /// How long a worker that came back beyond `keep_idle` may wait before it retires. Zero
    /// or less: never (up to `max_idle` wait for as long as the context lives).
    std::chrono::nanoseconds retire_after = std::chrono::seconds(10);
};

/// Counters of one execution context's workers (for tests and monitoring).
struct worker_pool_stats
{
    /// Workers waiting for an execution now.
    std::size_t idle_workers = 0;
    /// Workers that retired after waiting `retire_after` (since the context's first execution).
    std::uint64_t retired_workers = 0;
};

/// \brief Sets the worker pool of `ctx`'s supervisor (the execution context every runner on
/// it shares). The bounds apply to the workers that come back from now on; idle workers
/// beyond the new `max_idle` exit now (the oldest first). Thread-safe.
SANDBOX_DECL void set_worker_pool_options(boost::asio::execution_context& ctx,
                                          const worker_pool_options& options);

/// The pool options of `ctx` (the defaults until set).
SANDBOX_DECL worker_pool_options get_worker_pool_options(boost::asio::execution_context& ctx);

/// The workers of `ex`'s execution context (zeros when it never ran an execution).
SANDBOX_DECL worker_pool_stats get_worker_pool_stats(const boost::asio::any_io_executor& ex);

} // namespace sandbox

#endif // SANDBOX_WORKER_POOL_HPP
