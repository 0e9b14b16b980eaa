// sandbox/backend/cap_watch.hpp: caps for a process a backend started itself.
//
// A backend that spawns its commands through `supervise` gets caps, the tree kill and the
// exit classification with them. One that spawns a process itself (its own fork, a
// container runtime's client, a process another library started) can still hold memory,
// cpu and process caps on it: `async_watch_caps` hands the process to a worker of the
// supervisor helper, which samples it and its descendants from /proc with the same sampler
// as an exec (PSS once the RSS sum reaches the memory cap, the cpu time of reaped members),
// kills them when a cap trips, and says which cap it was.
#ifndef SANDBOX_BACKEND_CAP_WATCH_HPP
#define SANDBOX_BACKEND_CAP_WATCH_HPP

#include <sandbox/backend/caps.hpp>
#include <sandbox/config.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/sampler.hpp>
#include <sandbox/session.hpp>
#include <sandbox/with_diagnostics.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstdint>

#include <sys/types.h>

namespace sandbox::backend {

/// What a watch holds.
struct cap_watch_options
{
    /// The caps (zero: none; at least one must be set). `max_processes` and `max_tasks` are
    /// judged by sample here (the fork gate that holds an exec's process cap at each fork
    /// needs the helper's own spawn), so a burst of forks between two samples is seen, and
    /// killed, at the next one.
    cap_limits caps{};
    /// The pace of the samples (as an exec's: sooner while the tree is young or near a cap).
    std::chrono::nanoseconds sample_interval = default_sample_interval;
};

/// How a watch ended.
struct cap_watch_result
{
    /// The cap that tripped (the tree was SIGKILLed), or `none`: the process ended first.
    budget_kind exceeded = budget_kind::none;
    std::int64_t observed = 0;   ///< the usage that tripped it (bytes, ns, processes, tasks)
    std::int64_t configured = 0; ///< its cap, in the same unit
    std::uint64_t peak_memory_bytes = 0; ///< the largest footprint a sample saw
    std::chrono::nanoseconds cpu{0};     ///< the tree's cpu time at the last sample
    std::uint64_t samples = 0;
    std::uint64_t killed = 0; ///< processes signalled when the cap tripped
};

} // namespace sandbox::backend

namespace sandbox::detail {
template <>
inline constexpr bool resumes_with_exception<backend::cap_watch_result> = true;
} // namespace sandbox::detail

namespace sandbox::backend {

namespace detail {
SANDBOX_DECL void async_watch_caps_impl(boost::asio::any_io_executor ex, pid_t pid,
                                        cap_watch_options options,
                                        sandbox::detail::diagnostics_sink sink,
                                        sandbox::detail::value_handler<cap_watch_result> h);
} // namespace detail

/// \brief Holds `options.caps` on process `pid` and its descendants until a cap trips or
/// the process ends.
///
/// `pid` must be a process the caller may signal, normally one it started (its own child,
/// leading its own process group). The watch pins it with a pidfd at the call, so a pid
/// recycled later is never watched or killed. When a cap trips, the process, every
/// descendant a sample can find, and the process's group (while the process leads one and
/// lives) are SIGKILLed; the caller still reaps its child as usual. When the process ends by
/// itself the watch completes with `exceeded == none` and nothing is killed.
///
/// \par Limits
/// A watch sees the tree from /proc: a member that leaves it (a double fork hands it to
/// another reaper, a `setsid` that also leaves the group) is neither counted nor killed.
/// Only an exec, whose tree the helper starts under a subreaper of its own, holds every
/// member (docs/security.md). The caller must not reap the process while the watch runs
/// if it wants the watch to end when it ends: a reaped pid ends the watch the same way.
///
/// \par Completion signature
/// `void(boost::system::error_code, cap_watch_result)`.
///
/// \par Errors
/// `errc::validation` (no cap set, a pid below 1), `errc::not_found` (no such process, or
/// it ended before the watch began), `errc::not_available` (the helper program is missing;
/// or sampling failed three times in a row: the tree was killed, as an exec's would be, and
/// `diag.message` says why), `errc::internal` (the helper could not be reached),
/// `operation_aborted` when cancelled.
///
/// \par Per-operation cancellation
/// `terminal` and `partial`: the watch stops and nothing is killed (the caps no longer
/// hold). `total` is not supported.
///
/// \par Executor and threads
/// Runs on `ex`; the sampling runs in the helper's worker, never on the caller's loop. The
/// handler runs on its associated executor and never inside this function.
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_watch_caps(boost::asio::any_io_executor ex, pid_t pid,
                                    cap_watch_options options, CompletionToken&& token = {})
{
    return sandbox::detail::initiate_erased<void(boost::system::error_code, cap_watch_result)>(
        &detail::async_watch_caps_impl, std::forward<CompletionToken>(token), std::move(ex), pid,
        std::move(options));
}

} // namespace sandbox::backend

#endif // SANDBOX_BACKEND_CAP_WATCH_HPP
