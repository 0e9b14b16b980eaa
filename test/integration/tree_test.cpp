// test/integration/tree_test.cpp: the whole process tree is killed on timeout and on exit,
// including members that left the process group and a double-forked daemon; kill grace and
// foreign signals. (containment_test.cpp has the adversarial cases.)
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include <signal.h>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

using sbx_test::pid_options;

using sbx_test::contains;

/// The tree of one run and the pids its members recorded.
struct tree_fixture : sbx_test::local_fixture
{
    std::filesystem::path pidfile = root.path() / "pids";

    /// Runs the test target with `args` (whose members record their pids) under a 2 s
    /// timeout, which it must hit; then its `members` recorded members must be gone.
    void expect_timeout_kills(std::vector<std::string> args, std::size_t members)
    {
        auto o = pid_options(pidfile);
        o.timeout = 2s; // room for the setup on a loaded host (ASan)
        auto [ec, r] = run(sbx_test::helper(std::move(args), o));
        BOOST_TEST(ec == sandbox::errc::timeout);
        BOOST_TEST(r.status == sandbox::exec_status::timed_out);
        expect_gone(members, 5000ms);
    }

    /// Runs the test target with `args`, which exits 0 while members it started live on;
    /// returns how long the exec took. Its `members` recorded members must be gone within
    /// `grace` of the completion.
    clock_type::duration expect_exit_kills(std::vector<std::string> args, std::size_t members,
                                           std::chrono::milliseconds grace = 5000ms)
    {
        const auto start = clock_type::now();
        auto [ec, r] = run(sbx_test::helper(std::move(args), pid_options(pidfile)));
        const auto elapsed = clock_type::now() - start;
        BOOST_TEST(!ec);
        BOOST_TEST(r.status == sandbox::exec_status::exited);
        BOOST_TEST(r.exit_code == 0);
        // The members hold the output pipes: exec must not wait for them (nor give up on the
        // pipes after a delay), and say nothing of them.
        BOOST_TEST(r.diag.message.empty());
        expect_gone(members, grace);
        return elapsed;
    }

    void expect_gone(std::size_t members, std::chrono::milliseconds grace)
    {
        const auto pids = sbx_test::read_pids(pidfile);
        BOOST_TEST(pids.size() == members);
        BOOST_TEST(sbx_test::wait_gone(pids, grace), "a member outlived its exec");
        for (pid_t p : pids) // clean up after a failure; the fixture reports any helper left
            if (p > 1 && sbx_test::alive(p))
                ::kill(p, SIGKILL);
        sbx_test::wait_gone(pids, 5000ms);
    }
};

long long ms_of(clock_type::duration d)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(tree, tree_fixture)

BOOST_AUTO_TEST_CASE(background_children_die_on_timeout)
{
    expect_timeout_kills({"children", "2", "60000", "--then", "sleep", "60000"}, 2);
}

BOOST_AUTO_TEST_CASE(group_members_die_on_normal_exit_and_exec_returns_promptly)
{
    // The exec completes as soon as the leader has exited: the group is killed then.
    const auto took = expect_exit_kills({"children", "1", "60000", "--then", "exit", "0"}, 1);
    BOOST_TEST(ms_of(took) < 1500);
}

BOOST_AUTO_TEST_CASE(setsid_child_holding_stdout_is_killed_after_exit)
{
    const auto took =
        expect_exit_kills({"setsid-child", "60000", "hold", "--then", "exit", "0"}, 1);
    BOOST_TEST(ms_of(took) < 5000);
}

BOOST_AUTO_TEST_CASE(setsid_child_with_detached_stdio_dies_on_timeout)
{
    expect_timeout_kills({"setsid-child", "60000", "detach", "--then", "sleep", "60000"}, 1);
}

BOOST_AUTO_TEST_CASE(setpgid_child_dies_on_timeout)
{
    expect_timeout_kills({"setpgid-child", "60000", "--then", "sleep", "60000"}, 1);
}

// A daemon that double-forked, detached its stdio and was reparented away from the leader is
// still part of the tree: it must be dead when exec completes after a normal exit (200 ms
// only cover SIGKILL delivery and reaping by a new parent).
BOOST_AUTO_TEST_CASE(double_forked_daemon_is_killed_on_normal_exit)
{
    expect_exit_kills({"double-fork", "60000", "--then", "exit", "0"}, 1, 200ms);
}

BOOST_AUTO_TEST_CASE(kill_grace_sends_sigterm_first)
{
    sandbox::exec_options o;
    o.timeout = 2s; // room for the setup on a loaded host (ASan)
    o.kill_grace = 2s;
    auto req = sbx_test::helper({"trap-term", "7", "--then", "sleep", "60000"}, o);
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    BOOST_TEST(contains(r.out.data, "got TERM"), "stdout: '" << r.out.data << "'");
}

BOOST_AUTO_TEST_CASE(no_kill_grace_means_immediate_sigkill)
{
    sandbox::exec_options o;
    o.timeout = 2s; // room for the setup on a loaded host (ASan)
    auto req = sbx_test::helper({"trap-term", "7", "--then", "sleep", "60000"}, o);
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    BOOST_TEST(!contains(r.out.data, "got TERM"), "stdout: '" << r.out.data << "'");
}

BOOST_AUTO_TEST_CASE(sigterm_ignored_is_followed_by_sigkill_after_grace)
{
    sandbox::exec_options o;
    // Long enough for the target to ignore SIGTERM before it arrives, even under ASan on a
    // loaded machine.
    o.timeout = 1s;
    o.kill_grace = 300ms;
    auto req = sbx_test::helper({"ignore-term", "--then", "sleep", "60000"}, o);
    const auto start = clock_type::now();
    auto [ec, r] = run(std::move(req), std::chrono::seconds(10));
    const auto elapsed = clock_type::now() - start;

    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    BOOST_TEST(r.signal == SIGKILL);
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() < 5000);
}

BOOST_AUTO_TEST_CASE(foreign_signal_is_reported_as_signaled)
{
    auto req = sbx_test::helper({"kill-self", "15"});
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(!ec);
    BOOST_TEST(r.status == sandbox::exec_status::signaled);
    BOOST_TEST(r.signal == 15);
    BOOST_TEST(r.exit_code == -1);
}

BOOST_AUTO_TEST_CASE(partial_output_is_kept_on_timeout)
{
    sandbox::exec_options o;
    o.timeout = 2s; // room for the setup on a loaded host (ASan)
    auto req = sbx_test::helper({"print", "partial", "--then", "sleep", "60000"}, o);
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    BOOST_TEST(r.out.data == "partial");
}

BOOST_AUTO_TEST_SUITE_END()
