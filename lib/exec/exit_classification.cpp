// lib/exec/exit_classification.cpp: status, error code and diagnostics of an ended run.
#include "exec/exit_classification.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/error.hpp>

#include <sys/wait.h>

namespace sandbox::detail {

namespace {

using proto::end_reason;

void cancelled(const exit_facts& f, exit_outcome& o)
{
    o.r.status = exec_status::cancelled;
    o.ec = boost::asio::error::operation_aborted;
    if (!f.output_stop_text.empty())
    {
        o.r.diag.message = f.output_stop_text + "; process tree killed";
        o.r.diag.limit = "output";
    }
    else
        o.r.diag.message = "cancelled by the caller; process tree killed";
}

void terminated(const exit_facts& f, exit_outcome& o)
{
    if (WIFEXITED(f.wait_status))
    {
        o.r.status = exec_status::exited;
        o.r.exit_code = WEXITSTATUS(f.wait_status);
        o.r.diag.message = "exited by itself after being asked to terminate";
        return;
    }
    o.r.status = exec_status::terminated;
    o.r.diag.message = "terminated on request; process tree killed";
}

void budget(const exit_facts& f, exit_outcome& o)
{
    o.r.status = exec_status::budget_exceeded;
    o.r.budget = f.budget;
    o.ec = make_error_code(errc::budget_exceeded);
    o.r.diag.limit = to_string(f.budget);
    o.r.diag.observed = f.observed;
    o.r.diag.configured = f.configured;
    // Counts trip above the cap, amounts at it.
    const bool procs = f.budget == budget_kind::processes || f.budget == budget_kind::tasks;
    const char* unit = f.budget == budget_kind::memory      ? " bytes"
                       : f.budget == budget_kind::processes ? " processes"
                       : f.budget == budget_kind::tasks     ? " tasks"
                                                            : " ns of cpu";
    // (the worker says why, when the memory cap had to judge the RSS sum without its PSS)
    const std::string why = f.budget == budget_kind::memory && !f.sample_failure_text.empty()
                                ? "; " + f.sample_failure_text
                                : "";
    o.r.diag.message = std::string(to_string(f.budget)) + " cap exceeded (" +
                       std::to_string(f.observed) + (procs ? " > " : " >= ") +
                       std::to_string(f.configured) + unit + why + "); process tree killed";
}

void ended_by_itself(const exit_facts& f, exit_outcome& o)
{
    if (f.cancel_requested)
        return cancelled(f, o);
    if (WIFSIGNALED(f.wait_status))
        o.r.status = exec_status::signaled;
    else
    {
        o.r.status = exec_status::exited;
        o.r.exit_code = WEXITSTATUS(f.wait_status);
    }
    if (f.pipes_abandoned && f.reason == end_reason::natural)
        o.r.diag.message = "output pipes were still held open by a process outside the tree "
                           "after it ended; stopped reading them";
}

} // namespace

std::string describe_duration(std::chrono::nanoseconds d)
{
    using namespace std::chrono;
    if (d >= 1ms || d == 0ns)
        return std::to_string(duration_cast<milliseconds>(d).count()) + " ms";
    if (d >= 1us)
        return std::to_string(duration_cast<microseconds>(d).count()) + " us";
    return std::to_string(d.count()) + " ns";
}

exit_outcome classify_exit(const exit_facts& f)
{
    exit_outcome o;
    if (WIFSIGNALED(f.wait_status))
        o.r.signal = WTERMSIG(f.wait_status);
    switch (f.reason)
    {
    case end_reason::timed_out:
        o.r.status = exec_status::timed_out;
        o.ec = make_error_code(errc::timeout);
        o.r.diag.message =
            "timed out after " + describe_duration(f.timeout) + "; process tree killed";
        o.r.diag.limit = "timeout";
        o.r.diag.configured = f.timeout.count();
        o.r.diag.observed = f.elapsed.count();
        break;
    case end_reason::cancelled:
        if (f.terminate_requested && !f.cancel_requested)
            terminated(f, o);
        else
            cancelled(f, o);
        break;
    case end_reason::budget: budget(f, o); break;
    case end_reason::unenforceable:
        o.r.status = exec_status::unenforceable;
        o.ec = make_error_code(errc::not_available);
        o.r.diag.message = f.budget == budget_kind::processes // (the fork gate broke)
                               ? "resource caps became unenforceable: the fork gate failed (" +
                                     f.sample_failure_text + "); process tree killed"
                               : "resource caps became unenforceable: sampling failed " +
                                     std::to_string(f.sample_failure_limit) +
                                     " times in a row (" + f.sample_failure_text +
                                     "); process tree killed";
        o.r.diag.limit = "sampler";
        break;
    case end_reason::supervisor_lost:
        o.r.status = exec_status::unenforceable;
        o.ec = make_error_code(errc::internal);
        o.r.diag.message = "the supervisor helper died; the execution's worker killed the "
                           "process tree";
        o.r.diag.limit = "supervisor";
        break;
    default: ended_by_itself(f, o); break;
    }
    return o;
}

} // namespace sandbox::detail
