// sandbox/exec_result.hpp: what one execution produced and how it ended.
#ifndef SANDBOX_EXEC_RESULT_HPP
#define SANDBOX_EXEC_RESULT_HPP

#include <sandbox/config.hpp>
#include <sandbox/diagnostics.hpp>

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <boost/system/error_code.hpp>

namespace sandbox {

/// \brief How an execution ended.
enum class exec_status : int
{
    /// Refused or failed before the command ran (the error says why).
    not_started = 0,
    /// The command exited by itself; `exit_code` holds its status (zero or not).
    exited,
    /// Killed by a signal the library did not send; `signal` holds it.
    signaled,
    /// The timeout elapsed and the tree was killed (`errc::timeout`).
    timed_out,
    /// A cap fired and the tree was killed; `budget` says which (`errc::budget_exceeded`).
    budget_exceeded,
    /// The cap sampler failed repeatedly, so the tree was killed rather than run unguarded
    /// (`errc::not_available`).
    unenforceable,
    /// The caller cancelled; the tree was killed (`boost::asio::error::operation_aborted`).
    cancelled,
    /// Sessions only: `session::terminate()` or `close()` stopped the command (no error);
    /// `signal` holds the signal it died of. A command that catches SIGTERM and exits with a
    /// code of its own is `exited` instead.
    terminated,
};

/// \brief Which cap ended an execution.
enum class budget_kind : int
{
    none = 0,
    memory,
    cpu,
    processes,
    tasks,
};

SANDBOX_DECL const char* to_string(exec_status s) noexcept;
SANDBOX_DECL const char* to_string(budget_kind b) noexcept;
SANDBOX_DECL std::optional<exec_status> parse_exec_status(std::string_view s) noexcept;
SANDBOX_DECL std::ostream& operator<<(std::ostream& os, exec_status s);
SANDBOX_DECL std::ostream& operator<<(std::ostream& os, budget_kind b);

/// \brief One captured stream: the head that fit under the cap, and what was dropped.
struct stream_capture
{
    /// The first `max_output_bytes` bytes the child wrote (binary-safe).
    std::string data{};
    /// True when bytes were dropped because of the cap.
    bool truncated = false;
    /// How many bytes were read and discarded after the cap was reached.
    std::uint64_t dropped_bytes = 0;

    std::uint64_t total_bytes() const noexcept { return data.size() + dropped_bytes; }
};

/// \brief The outcome of one execution. A non-zero exit code is a result, not an error.
///
/// Note: the captured streams are named `out` and `err` because `stdout` and `stderr` are
/// macros in C. Their JSON names are `stdout` and `stderr`.
struct exec_result
{
    /// The exit status when `status == exited`; -1 otherwise.
    int exit_code = -1;
    stream_capture out{};
    stream_capture err{};
    exec_status status = exec_status::not_started;
    /// The signal that killed the leader, when `status == signaled` (and, for information,
    /// the signal the library used when it killed the tree).
    int signal = 0;
    budget_kind budget = budget_kind::none;
    /// From spawn to reap.
    std::chrono::nanoseconds wall_time{0};
    /// Largest memory footprint seen: when a memory cap was set and sampled, the footprint
    /// the cap judged (the summed RSS of the tree while under the cap, the summed PSS once
    /// that sum reached it, so shared pages count once); and at least the leader's own peak
    /// RSS as the kernel reports it (its ru_maxrss, which includes the supervisor worker's
    /// own RSS at the exec: a few MiB; where a footprint was sampled, it counts only when
    /// above the worker's own peak).
    std::uint64_t peak_memory_bytes = 0;
    /// CPU time (user + system) of the whole tree: every process reaped by its parent or by
    /// the supervisor counts once; children reaped by the kernel (a parent ignoring SIGCHLD)
    /// are added from the samples when caps are set.
    std::chrono::nanoseconds cpu_time{0};
    /// The tree ran in a cgroup of its own: it was killed with cgroup.kill, its cpu time is
    /// the cgroup's (every process of it, however it was reaped), and the caps the cgroup's
    /// controllers hold were held by the kernel (`enforcement()` says which).
    bool in_cgroup = false;
    /// Why it ended, when it did not simply exit (set together with the error code).
    diagnostics diag{};
};

/// \brief How an exec ended, as a value: what `runner::try_exec` returns, and the two
/// arguments the handlers of `async_exec` receive.
///
/// `ec` is clear when the command ran to its own end (a non-zero exit is a result, not an
/// error). When it is set, `result` is the partial result: the output captured before a
/// timeout, a budget kill or a cancellation, or status `not_started` when nothing ran; and
/// `result.diag` says why. `auto [ec, r] = co_await runner.try_exec(req);` takes it apart.
struct exec_outcome
{
    boost::system::error_code ec{};
    exec_result result{};
};

/// An outcome for a call that ran nothing (status `not_started`): `ec` and the diagnostics
/// that say why (moved into `result.diag`).
SANDBOX_DECL exec_outcome not_run(boost::system::error_code ec, diagnostics diag);

/// \brief One JSON object (no trailing newline) describing an execution: the shape
/// `sandbox-run --json` prints and `sandboxd` answers with.
///
/// Keys: `exit_code` (-1 unless it exited), `stdout`, `stderr` (valid UTF-8:
/// `sanitize_utf8`), `stdout_truncated`, `stderr_truncated`, `stdout_dropped_bytes`,
/// `stderr_dropped_bytes`, `status`, `signal`, `budget` (only when a cap fired),
/// `duration_ms`, `peak_memory_bytes`, `cpu_time_ms`, `in_cgroup`, `backend` (when `backend`
/// is not empty: the backend that ran the command, or refused it), and when `ec` is set
/// `error: {code, message}` (`error_name(ec)`, the diagnostics' text), with `limit` and
/// `errno` when the diagnostics hold them. Numbers are plain: integers, and milliseconds
/// as a decimal with one to six places (`"duration_ms":1003.2`, `1000.0`), never an
/// exponent (which is why this is a string, not a `boost::json::value`: Boost.JSON 1.81
/// writes 1003.2 as `1.0032E3`).
SANDBOX_DECL std::string to_json(const exec_result& r, const boost::system::error_code& ec = {},
                                 std::string_view backend = {});

/// \brief `to_json`'s object read back: the error code (by its `errc` name; a code of
/// another category reads as `errc::internal`) and the result: exit code, signal, status,
/// the captured streams (as written: sanitized UTF-8) with their truncation and drop counts,
/// and diagnostics whose `message` is the written text (`to_string` of the original
/// diagnostics, details in brackets included), with `limit` and `cause` (the errno) set
/// again for code that classifies them. Not JSON, or not an object:
/// `errc::internal` with a message saying so.
SANDBOX_DECL std::pair<boost::system::error_code, exec_result>
exec_result_from_json(std::string_view json);

} // namespace sandbox

#endif // SANDBOX_EXEC_RESULT_HPP
