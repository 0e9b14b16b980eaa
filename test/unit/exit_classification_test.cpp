// test/unit/exit_classification_test.cpp: status, code and diagnostics of an ended run,
// decided from the facts alone (a table; no process involved).
#include "exec/exit_classification.hpp"
#include "protocol/init_status.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <csignal>

using namespace std::chrono_literals;
using sandbox::budget_kind;
using sandbox::errc;
using sandbox::exec_status;
using sandbox::detail::classify_exit;
using sandbox::detail::exit_facts;
using sandbox::detail::stop_request;
using sandbox::detail::proto::end_reason;

namespace {

// Raw wait(2) statuses.
int exited_with(int code) { return (code & 0xff) << 8; }
int killed_by(int sig) { return sig & 0x7f; }

} // namespace

BOOST_AUTO_TEST_SUITE(exit_classification)

BOOST_AUTO_TEST_CASE(the_table)
{
    struct row
    {
        const char* name;
        end_reason reason;
        int wait_status;
        bool cancel_requested;
        exec_status status;
        boost::system::error_code ec;
        int exit_code;
        int signal;
        const char* limit;
    };
    const boost::system::error_code none;
    const boost::system::error_code aborted = boost::asio::error::operation_aborted;
    const row table[] = {
        {"exit 0", end_reason::natural, exited_with(0), false, exec_status::exited, none, 0, 0, ""},
        {"exit 3", end_reason::natural, exited_with(3), false, exec_status::exited, none, 3, 0, ""},
        {"foreign signal", end_reason::natural, killed_by(SIGSEGV), false, exec_status::signaled,
         none, -1, SIGSEGV, ""},
        {"timeout", end_reason::timed_out, killed_by(SIGKILL), false, exec_status::timed_out,
         errc::timeout, -1, SIGKILL, "timeout"},
        {"timeout beats a cancel", end_reason::timed_out, killed_by(SIGKILL), true,
         exec_status::timed_out, errc::timeout, -1, SIGKILL, "timeout"},
        {"cancelled", end_reason::cancelled, killed_by(SIGKILL), true, exec_status::cancelled,
         aborted, -1, SIGKILL, ""},
        {"cancel asked, exited meanwhile", end_reason::natural, exited_with(0), true,
         exec_status::cancelled, aborted, -1, 0, ""},
        {"budget", end_reason::budget, killed_by(SIGKILL), false, exec_status::budget_exceeded,
         errc::budget_exceeded, -1, SIGKILL, "memory"},
        {"unenforceable", end_reason::unenforceable, killed_by(SIGKILL), false,
         exec_status::unenforceable, errc::not_available, -1, SIGKILL, "sampler"},
        {"helper lost", end_reason::supervisor_lost, killed_by(SIGKILL), false,
         exec_status::unenforceable, errc::internal, -1, SIGKILL, "supervisor"},
    };
    for (const row& r : table)
    {
        BOOST_TEST_CONTEXT(r.name)
        {
            exit_facts f;
            f.reason = r.reason;
            f.wait_status = r.wait_status;
            f.request = r.cancel_requested ? stop_request::cancel : stop_request::none;
            f.budget = r.reason == end_reason::budget ? budget_kind::memory : budget_kind::none;
            f.observed = 200;
            f.configured = 100;
            f.timeout = 2s;
            f.elapsed = 2001ms;
            auto o = classify_exit(f);
            BOOST_TEST(o.result.status == r.status);
            BOOST_TEST(o.ec == r.ec);
            BOOST_TEST(o.result.exit_code == r.exit_code);
            BOOST_TEST(o.result.signal == r.signal);
            BOOST_TEST(o.result.diag.limit == r.limit);
            BOOST_TEST(o.result.diag.message.empty() == !o.ec); // every failure says why
        }
    }
}

BOOST_AUTO_TEST_CASE(a_session_terminate_is_terminated_unless_the_command_exits_itself)
{
    struct row
    {
        const char* name;
        end_reason reason;
        int wait_status;
        exec_status status;
        int exit_code;
        int signal;
    };
    const row table[] = {
        {"SIGTERM took it", end_reason::cancelled, killed_by(SIGTERM), exec_status::terminated,
         -1, SIGTERM},
        {"SIGKILL after the grace", end_reason::cancelled, killed_by(SIGKILL),
         exec_status::terminated, -1, SIGKILL},
        {"caught SIGTERM, exit 3", end_reason::cancelled, exited_with(3), exec_status::exited, 3,
         0},
        {"exited before the stop", end_reason::natural, exited_with(0), exec_status::exited, 0, 0},
        {"a timeout stays a timeout", end_reason::timed_out, killed_by(SIGKILL),
         exec_status::timed_out, -1, SIGKILL},
    };
    for (const row& r : table)
    {
        BOOST_TEST_CONTEXT(r.name)
        {
            exit_facts f;
            f.reason = r.reason;
            f.wait_status = r.wait_status;
            f.request = stop_request::terminate;
            auto o = classify_exit(f);
            BOOST_TEST(o.result.status == r.status);
            BOOST_TEST(o.result.exit_code == r.exit_code);
            BOOST_TEST(o.result.signal == r.signal);
            BOOST_TEST(!o.ec == (r.status != exec_status::timed_out));
        }
    }
}

BOOST_AUTO_TEST_CASE(diagnostics_carry_the_figures)
{
    exit_facts f;
    f.reason = end_reason::budget;
    f.wait_status = killed_by(SIGKILL);
    f.budget = budget_kind::processes;
    f.observed = 9;
    f.configured = 8;
    auto o = classify_exit(f);
    BOOST_TEST(o.result.budget == budget_kind::processes);
    BOOST_TEST(o.result.diag.observed == 9);
    BOOST_TEST(o.result.diag.configured == 8);
    BOOST_TEST(o.result.diag.message ==
               "processes cap exceeded (9 > 8 processes); process tree killed");

    f.budget = budget_kind::tasks;
    f.observed = 41;
    f.configured = 20;
    BOOST_TEST(classify_exit(f).result.diag.message ==
               "tasks cap exceeded (41 > 20 tasks); process tree killed");

    f = {};
    f.reason = end_reason::timed_out;
    f.timeout = 1ns;
    f.elapsed = 3ms;
    o = classify_exit(f);
    BOOST_TEST(o.result.diag.message == "timed out after 1 ns; process tree killed");
    BOOST_TEST(o.result.diag.configured == 1);
    BOOST_TEST(o.result.diag.observed == 3'000'000);

    f = {};
    f.reason = end_reason::unenforceable;
    f.sample_failure_limit = 3;
    f.sample_failure_text = "EMFILE";
    BOOST_TEST(classify_exit(f).result.diag.message.find("3 times in a row (EMFILE)") !=
               std::string::npos);
    // The fork gate's listener failed: no sampling is involved.
    f.budget = budget_kind::processes;
    f.sample_failure_text = "answering a fork failed: EBADF";
    BOOST_TEST(classify_exit(f).result.diag.message ==
               "resource caps became unenforceable: the fork gate failed (answering a fork "
               "failed: EBADF); process tree killed");
}

BOOST_AUTO_TEST_CASE(an_output_handler_stop_is_named)
{
    exit_facts f;
    f.reason = end_reason::cancelled;
    f.wait_status = killed_by(SIGKILL);
    f.request = stop_request::cancel;
    f.output_stop_text = "the output handler stopped the run";
    auto o = classify_exit(f);
    BOOST_TEST(o.result.status == exec_status::cancelled);
    BOOST_TEST(o.result.diag.limit == "output");
    BOOST_TEST(o.result.diag.message == "the output handler stopped the run; process tree killed");
}

BOOST_AUTO_TEST_CASE(abandoned_pipes_are_mentioned_only_for_a_natural_end)
{
    exit_facts f;
    f.reason = end_reason::natural;
    f.pipes_abandoned = true;
    BOOST_TEST(classify_exit(f).result.diag.message.find("held open") != std::string::npos);
    BOOST_TEST(!classify_exit(f).ec);
    f.request = stop_request::cancel;
    BOOST_TEST(classify_exit(f).result.diag.message.find("held open") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(durations_are_described_in_a_unit_that_shows_them)
{
    using sandbox::detail::describe_duration;
    BOOST_TEST(describe_duration(0ns) == "0 ms");
    BOOST_TEST(describe_duration(1ns) == "1 ns");
    BOOST_TEST(describe_duration(999ns) == "999 ns");
    BOOST_TEST(describe_duration(400us) == "400 us");
    BOOST_TEST(describe_duration(2s) == "2000 ms");
}

// What the status init inside a bwrap sandbox writes, read back.
BOOST_AUTO_TEST_CASE(status_init_reports)
{
    using sandbox::detail::parse_init_report;
    auto none = parse_init_report("");
    BOOST_TEST(!none.started); // bwrap never got to run the init: a set-up failure
    BOOST_TEST(!none.wait_status.has_value());
    auto ended = parse_init_report("started\nstatus 10\n");
    BOOST_TEST(ended.started);
    BOOST_TEST_REQUIRE(ended.wait_status.has_value());
    BOOST_TEST(*ended.wait_status == 10); // raw wait status: killed by SIGUSR1
    auto missing = parse_init_report("started\nexec 2\nstatus 32512\n");
    BOOST_TEST_REQUIRE(missing.exec_errno.has_value());
    BOOST_TEST(*missing.exec_errno == 2);
    BOOST_TEST(missing.unreachable_path.empty());
    auto skipped = parse_init_report("started\nunreachable /root/.pyenv/shims\n"
                                     "unreachable /root/my dir\nexec 2\nunreachable /late");
    BOOST_TEST((skipped.unreachable_path ==
                std::vector<std::string>{"/root/.pyenv/shims", "/root/my dir"}));
    // Cut short or malformed lines count for nothing.
    auto cut = parse_init_report("started\nstatus 25");
    BOOST_TEST(cut.started);
    BOOST_TEST(!cut.wait_status.has_value());
    for (const char* bad : {"status -1\n", "status 70000\n", "status 1x\n", "exec 0\n",
                            "exec 99999\n", "statu 1\n", "started now\n"})
    {
        auto r = parse_init_report(bad);
        BOOST_TEST((!r.started && !r.wait_status && !r.exec_errno), bad);
    }
}

BOOST_AUTO_TEST_SUITE_END()
