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

/// Options that make the helper record child pids in `file`.
sandbox::exec_options pid_options(const std::filesystem::path& file)
{
    sandbox::exec_options o;
    o.env.inject["SBX_PIDFILE"] = file.string();
    return o;
}

bool contains(const std::string& haystack, const std::string& needle)
{
    return haystack.find(needle) != std::string::npos;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(tree, sbx_test::local_fixture)

BOOST_AUTO_TEST_CASE(background_children_die_on_timeout)
{
    const auto pidfile = root.path() / "pids";
    auto o = pid_options(pidfile);
    o.timeout = 2s; // room for the setup on a loaded host (ASan)
    auto req = sbx_test::helper({"children", "2", "60000", "--then", "sleep", "60000"}, o);
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 2u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

BOOST_AUTO_TEST_CASE(group_members_die_on_normal_exit_and_exec_returns_promptly)
{
    const auto pidfile = root.path() / "pids";
    auto req = sbx_test::helper({"children", "1", "60000", "--then", "exit", "0"},
                                pid_options(pidfile));
    const auto start = clock_type::now();
    auto [ec, r] = run(std::move(req));
    const auto elapsed = clock_type::now() - start;

    BOOST_TEST(!ec);
    BOOST_TEST(r.status == sandbox::exec_status::exited);
    BOOST_TEST(r.exit_code == 0);
    // The background child holds the output pipes: exec must not wait for it (nor give up on
    // the pipes after a delay); it kills the group as soon as the leader has exited.
    BOOST_TEST(r.diag.message.empty());
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() < 1500);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 1u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

BOOST_AUTO_TEST_CASE(setsid_child_holding_stdout_is_killed_after_exit)
{
    const auto pidfile = root.path() / "pids";
    auto req = sbx_test::helper({"setsid-child", "60000", "hold", "--then", "exit", "0"},
                                pid_options(pidfile));
    const auto start = clock_type::now();
    auto [ec, r] = run(std::move(req));
    const auto elapsed = clock_type::now() - start;

    BOOST_TEST(!ec);
    BOOST_TEST(r.status == sandbox::exec_status::exited);
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() < 5000);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 1u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

BOOST_AUTO_TEST_CASE(setsid_child_with_detached_stdio_dies_on_timeout)
{
    const auto pidfile = root.path() / "pids";
    auto o = pid_options(pidfile);
    o.timeout = 2s; // room for the setup on a loaded host (ASan)
    auto req = sbx_test::helper({"setsid-child", "60000", "detach", "--then", "sleep", "60000"}, o);
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 1u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

BOOST_AUTO_TEST_CASE(setpgid_child_dies_on_timeout)
{
    const auto pidfile = root.path() / "pids";
    auto o = pid_options(pidfile);
    o.timeout = 2s; // room for the setup on a loaded host (ASan)
    auto req = sbx_test::helper({"setpgid-child", "60000", "--then", "sleep", "60000"}, o);
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 1u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

// A daemon that double-forked, detached its stdio and was reparented away from the leader is
// still part of the tree: it must be dead when exec completes after a normal exit.
BOOST_AUTO_TEST_CASE(double_forked_daemon_is_killed_on_normal_exit)
{
    const auto pidfile = root.path() / "pids";
    auto req = sbx_test::helper({"double-fork", "60000", "--then", "exit", "0"},
                                pid_options(pidfile));
    auto [ec, r] = run(std::move(req));

    BOOST_TEST(!ec);
    BOOST_TEST(r.status == sandbox::exec_status::exited);
    BOOST_TEST(r.exit_code == 0);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 1u);
    // Checked at completion; 200 ms only cover SIGKILL delivery and reaping by a new parent.
    BOOST_TEST(sbx_test::wait_gone(pids, 200ms), "the double-forked daemon escaped");
    for (pid_t p : pids) // clean up after a failure; the fixture reports any helper left
        if (p > 1 && sbx_test::alive(p))
            ::kill(p, SIGKILL);
    sbx_test::wait_gone(pids, 5000ms);
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
