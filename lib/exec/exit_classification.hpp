// lib/exec/exit_classification.hpp: how an execution ended, decided from facts alone (the
// worker's report and what the library asked for). Pure: unit-tested with a table, shared by
// every runner through the supervised-child core.
#ifndef SANDBOX_LIB_EXEC_EXIT_CLASSIFICATION_HPP
#define SANDBOX_LIB_EXEC_EXIT_CLASSIFICATION_HPP

#include "exec/exec_phase.hpp"
#include "protocol/protocol.hpp"

#include <sandbox/exec_result.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <string>

namespace sandbox::detail {

/// Everything the classification looks at.
struct exit_facts
{
    /// The worker's report: raw wait status, first cause, the cap that fired.
    proto::end_reason reason = proto::end_reason::none;
    int wait_status = 0;
    budget_kind budget = budget_kind::none;
    std::int64_t observed = 0;
    std::int64_t configured = 0;
    /// What the library asked for: a cancellation (the operation's, or the output
    /// handler's stop), or a session's terminate() or close() (the worker says `cancelled`).
    stop_request request = stop_request::none;
    /// Set when the output handler stopped the run: why (handler said stop, or threw).
    std::string output_stop_text{};
    bool pipes_abandoned = false;
    std::chrono::nanoseconds timeout{0};
    std::chrono::nanoseconds elapsed{0};
    int sample_failure_limit = 3;
    std::string sample_failure_text{};
};

/// \brief Decides status, error code and diagnostics.
///
/// The worker's first cause wins (timed_out, cancelled, budget, unenforceable,
/// supervisor_lost). A stop that a session's terminate() asked for is `terminated` without
/// an error, or `exited` when the command caught SIGTERM and exited with its own code. When it says
/// the command ended by itself, a cancellation requested before completion still makes it
/// `cancelled` (with `diag.limit == "output"` when the output handler asked for it); otherwise a
/// signal death is `signaled` and an exit is `exited`. The outcome's `result` has `status`,
/// `exit_code`, `signal`, `budget` and `diag` (message, limit, observed, configured) filled in;
/// `ec` is empty for `exited`, `signaled` and `terminated`.
exec_outcome classify_exit(const exit_facts& f);

/// "2000 ms"; below a millisecond in the unit that shows it ("400 us", "1 ns").
std::string describe_duration(std::chrono::nanoseconds d);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_EXEC_EXIT_CLASSIFICATION_HPP
