// lib/exec/exit_classification.cpp: status, error code and diagnostics of an ended run.
#include "exec/exit_classification.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/error.hpp>

#include <sys/wait.h>

namespace sandbox::detail {

namespace {

using proto::end_reason;

void cancelled(const exit_facts& f, exec_outcome& o)
{
    o.result.status = exec_status::cancelled;
    o.ec = boost::asio::error::operation_aborted;
    if (!f.output_stop_text.empty())
    {
        o.result.diag.message = f.output_stop_text + "; process tree killed";
        o.result.diag.limit = "output";
    }
    else
        o.result.diag.message = "cancelled by the caller; process tree killed";
}

void terminated(const exit_facts& f, exec_outcome& o)
{
    if (WIFEXITED(f.wait_status))
    {
        o.result.status = exec_status::exited;
        o.result.exit_code = WEXITSTATUS(f.wait_status);
        o.result.diag.message = "exited by itself after being asked to terminate";
        return;
    }
    o.result.status = exec_status::terminated;
    o.result.diag.message = "terminated on request; process tree killed";
}

void budget(const exit_facts& f, exec_outcome& o)
{
    o.result.status = exec_status::budget_exceeded;
    o.result.budget = f.budget;
    o.ec = make_error_code(errc::budget_exceeded);
    o.result.diag.limit = to_string(f.budget);
    o.result.diag.observed = f.observed;
    o.result.diag.configured = f.configured;
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
    o.result.diag.message = std::string(to_string(f.budget)) + " cap exceeded (" +
                            std::to_string(f.observed) + (procs ? " > " : " >= ") +
                            std::to_string(f.configured) + unit + why + "); process tree killed";
}

void ended_by_itself(const exit_facts& f, exec_outcome& o)
{
    if (f.request == stop_request::cancel)
        return cancelled(f, o);
    if (WIFSIGNALED(f.wait_status))
        o.result.status = exec_status::signaled;
    else
    {
        o.result.status = exec_status::exited;
        o.result.exit_code = WEXITSTATUS(f.wait_status);
    }
    if (f.pipes_abandoned && f.reason == end_reason::natural)
        o.result.diag.message = "output pipes were still held open by a process outside the tree "
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

exec_outcome classify_exit(const exit_facts& f)
{
    exec_outcome o;
    if (WIFSIGNALED(f.wait_status))
        o.result.signal = WTERMSIG(f.wait_status);
    switch (f.reason)
    {
    case end_reason::timed_out:
        o.result.status = exec_status::timed_out;
        o.ec = make_error_code(errc::timeout);
        o.result.diag.message =
            "timed out after " + describe_duration(f.timeout) + "; process tree killed";
        o.result.diag.limit = "timeout";
        o.result.diag.configured = f.timeout.count();
        o.result.diag.observed = f.elapsed.count();
        break;
    case end_reason::cancelled:
        if (f.request == stop_request::terminate)
            terminated(f, o);
        else
            cancelled(f, o);
        break;
    case end_reason::budget: budget(f, o); break;
    case end_reason::unenforceable:
        o.result.status = exec_status::unenforceable;
        o.ec = make_error_code(errc::not_available);
        o.result.diag.message = f.budget == budget_kind::processes // (the fork gate broke)
                                    ? "resource caps became unenforceable: the fork gate failed (" +
                                          f.sample_failure_text + "); process tree killed"
                                    : "resource caps became unenforceable: sampling failed " +
                                          std::to_string(f.sample_failure_limit) +
                                          " times in a row (" + f.sample_failure_text +
                                          "); process tree killed";
        o.result.diag.limit = "sampler";
        break;
    case end_reason::supervisor_lost:
        o.result.status = exec_status::unenforceable;
        o.ec = make_error_code(errc::internal);
        o.result.diag.message = "the supervisor helper died; the execution's worker killed the "
                                "process tree";
        o.result.diag.limit = "supervisor";
        break;
    default: ended_by_itself(f, o); break;
    }
    return o;
}

} // namespace sandbox::detail
