// test/integration/local_runner_test.cpp: the local backend against real processes: the
// reference's LocalRunner behaviours, and the fixes this library makes.
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <csignal>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace std::chrono_literals;
using sandbox::errc;
using sandbox::exec_status;
using sbx_test::helper;

namespace {

void write_file(const std::filesystem::path& p, const std::string& text, mode_t mode)
{
    std::ofstream(p) << text;
    ::chmod(p.c_str(), mode);
}

sandbox::exec_request cmd(std::string command, std::vector<std::string> args,
                          sandbox::exec_options o = {})
{
    sandbox::exec_request r;
    r.command = std::move(command);
    r.args = std::move(args);
    r.options = std::move(o);
    return r;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(local_runner, sbx_test::local_fixture)

BOOST_AUTO_TEST_CASE(happy_path)
{
    auto [ec, r] = run(cmd("echo", {"hello"}));
    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST((r.status == exec_status::exited));
    BOOST_TEST(r.out.data == "hello\n");
    BOOST_TEST(r.wall_time.count() > 0);
    BOOST_TEST(r.peak_memory_bytes > 0u);
}

BOOST_AUTO_TEST_CASE(non_zero_exit_is_a_result)
{
    auto [ec, r] = run(helper({"eprint", "oops", "--then", "exit", "42"}));
    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 42);
    BOOST_TEST(r.err.data == "oops");
    BOOST_TEST(r.out.data.empty());
}

BOOST_AUTO_TEST_CASE(command_not_found)
{
    auto [ec, r] = run(cmd("definitely-not-a-command-sbx", {}));
    BOOST_TEST(ec == errc::not_found);
    BOOST_TEST((r.status == exec_status::not_started));
    BOOST_TEST(r.diag.path == "definitely-not-a-command-sbx");
    // A path that does not exist is not_found too (the reference said internal).
    auto [ec2, r2] = run(cmd("/nonexistent/tool", {}));
    BOOST_TEST(ec2 == errc::not_found);
}

BOOST_AUTO_TEST_CASE(timeout_kills_and_reports)
{
    sandbox::exec_options o;
    o.timeout = 10ms;
    auto [ec, r] = run(helper({"sleep", "5000"}, o));
    BOOST_TEST(ec == errc::timeout);
    BOOST_TEST(ec == sandbox::condition::limit_reached);
    BOOST_TEST((r.status == exec_status::timed_out));
    BOOST_TEST(r.diag.limit == "timeout");
    BOOST_TEST(r.signal == SIGKILL);
    BOOST_TEST(r.wall_time < 5s);
}

BOOST_AUTO_TEST_CASE(work_dir_escape_is_forbidden)
{
    for (std::string dir : {std::string("/tmp"), std::string("../../../tmp"),
                            root.path().parent_path().string(), root.str() + "X"})
    {
        sandbox::exec_options o;
        o.work_dir = dir;
        auto [ec, r] = run(helper({"exit", "0"}, o));
        BOOST_TEST(ec == errc::forbidden, dir);
        BOOST_TEST(r.diag.path == dir);
        BOOST_TEST((r.status == exec_status::not_started));
    }
    // An escape to a path that does not exist is still forbidden, not not_found.
    sandbox::exec_options o;
    o.work_dir = "../no-such-dir-sbx";
    BOOST_TEST(run(helper({"exit", "0"}, o)).ec == errc::forbidden);
}

BOOST_AUTO_TEST_CASE(work_dir_symlink_escape_is_forbidden)
{
    sbx_test::temp_dir outside;
    std::filesystem::create_directory_symlink(outside.path(), root.path() / "link");
    for (std::string dir : {std::string("link"), (root.path() / "link").string()})
    {
        sandbox::exec_options o;
        o.work_dir = dir;
        BOOST_TEST(run(helper({"exit", "0"}, o)).ec == errc::forbidden);
    }
}

BOOST_AUTO_TEST_CASE(work_dir_inside_root)
{
    std::filesystem::create_directories(root.path() / "child" / "deeper");
    std::filesystem::create_directory_symlink(root.path() / "child" / "deeper",
                                              root.path() / "inlink");
    sandbox::exec_options o;
    o.work_dir = "child";
    BOOST_TEST(run(helper({"print-cwd"}, o)).result.out.data ==
               (root.path() / "child").string() + "\n");
    o.work_dir = "";
    BOOST_TEST(run(helper({"print-cwd"}, o)).result.out.data == root.str() + "\n");
    // The child runs in the resolved directory: the one that was checked.
    o.work_dir = "inlink";
    BOOST_TEST(run(helper({"print-cwd"}, o)).result.out.data ==
               (root.path() / "child" / "deeper").string() + "\n");
    o.work_dir = (root.path() / "child").string();
    BOOST_TEST(run(helper({"print-cwd"}, o)).result.out.data ==
               (root.path() / "child").string() + "\n");
}

BOOST_AUTO_TEST_CASE(work_dir_missing_or_not_a_directory)
{
    sandbox::exec_options o;
    o.work_dir = "missing";
    auto [ec, r] = run(helper({"exit", "0"}, o));
    BOOST_TEST(ec == errc::not_found);
    BOOST_TEST(r.diag.path == "missing");
    write_file(root.path() / "file", "x", 0644);
    o.work_dir = "file";
    auto [ec2, r2] = run(helper({"exit", "0"}, o));
    BOOST_TEST(ec2 == errc::not_found); // ENOTDIR: no such directory (errc_from_errno)
    BOOST_TEST(r2.diag.limit == "work_dir");
    BOOST_TEST(r2.diag.cause == boost::system::error_code(ENOTDIR, boost::system::system_category()));
}

BOOST_AUTO_TEST_CASE(output_cap_per_call_and_runner_default)
{
    sandbox::exec_options o;
    o.limits.max_output_bytes = 100;
    auto r = run(helper({"spam", "500"}, o)).result;
    BOOST_TEST(r.out.data.size() == 100u);
    BOOST_TEST(r.out.truncated);
    BOOST_TEST(r.out.dropped_bytes == 400u);
    BOOST_TEST(r.out.data == std::string("0123456789abcdef0123456789abcdef0123456789abcdef"
                                         "0123456789abcdef0123456789abcdef0123456789abcdef0123"));

    boost::asio::io_context ioc2;
    sandbox::local_runner small(ioc2.get_executor(),
                                {.root = root.str(), .default_max_output_bytes = 50});
    auto r2 = sbx_test::run(ioc2, small, helper({"spam", "500"})).result;
    BOOST_TEST(r2.out.data.size() == 50u);
    auto r3 = sbx_test::run(ioc2, small, helper({"spam", "500"}, o)).result;
    BOOST_TEST(r3.out.data.size() == 100u);
    o.limits.max_output_bytes = 200;
    auto r4 = sbx_test::run(ioc2, small, helper({"spam", "500", "both"}, o)).result;
    BOOST_TEST(r4.out.data.size() == 200u);
    BOOST_TEST(r4.err.data.size() == 200u);
    BOOST_TEST(r4.err.dropped_bytes == 300u);
    // Under the cap nothing is flagged.
    auto r5 = run(helper({"spam", "500"})).result;
    BOOST_TEST(r5.out.data.size() == 500u);
    BOOST_TEST(!r5.out.truncated);
    BOOST_TEST(r5.out.dropped_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(large_output_is_drained_with_bounded_memory)
{
    sandbox::exec_options o;
    o.limits.max_output_bytes = 1 << 20;
    auto [ec, r] = run(helper({"spam", std::to_string(64 << 20)}, o));
    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.out.data.size() == (1u << 20));
    BOOST_TEST(r.out.dropped_bytes == (63u << 20));
}

BOOST_AUTO_TEST_CASE(binary_output_is_kept_exactly)
{
    auto r = run(cmd("printf", {"a\\000b\\377"})).result;
    BOOST_TEST(r.out.data == std::string("a\0b\xff", 4));
}

BOOST_AUTO_TEST_CASE(env_unset_allow_inherits)
{
    ::setenv("SBX_TEST_HOST_VAR", "visible", 1);
    auto r = run(helper({"print-env", "SBX_TEST_HOST_VAR"})).result;
    BOOST_TEST(r.out.data == "SBX_TEST_HOST_VAR=visible\n");
}

BOOST_AUTO_TEST_CASE(env_empty_allow_inherits_nothing)
{
    ::setenv("SBX_TEST_HOST_VAR", "visible", 1);
    sandbox::exec_options o;
    o.env = sandbox::env_policy::empty();
    auto r = run(helper({"print-env-all"}, o)).result;
    BOOST_TEST(r.out.data == "count=0\n");
}

BOOST_AUTO_TEST_CASE(env_allow_filters_and_inject_overrides)
{
    ::setenv("KEEP", "yes", 1);
    ::setenv("DROP", "no", 1);
    ::setenv("OVER", "host", 1);
    sandbox::exec_options o;
    o.env.allow = std::vector<std::string>{"PATH", "KEEP", "OVER"};
    o.env.inject = {{"OVER", "injected"}};
    auto r = run(helper({"print-env", "KEEP", "DROP", "OVER", "PATH"}, o)).result;
    BOOST_TEST(r.out.data == "KEEP=yes\nDROP=<unset>\nOVER=injected\nPATH=" +
                                 std::string(::getenv("PATH")) + "\n");
    ::unsetenv("KEEP");
    ::unsetenv("DROP");
    ::unsetenv("OVER");
}

BOOST_AUTO_TEST_CASE(command_is_looked_up_on_the_childs_path)
{
    sbx_test::temp_dir bin;
    write_file(bin.path() / "sbx-only-here", "#!/bin/sh\necho found $0\n", 0755);
    auto [ec, r] = run(cmd("sbx-only-here", {}));
    BOOST_TEST(ec == errc::not_found);
    sandbox::exec_options o;
    o.env.inject = {{"PATH", bin.str() + ":/usr/bin:/bin"}};
    auto r2 = run(cmd("sbx-only-here", {}, o));
    BOOST_TEST(!r2.ec);
    BOOST_TEST(r2.result.out.data == "found " + (bin.path() / "sbx-only-here").string() + "\n");
    // No PATH in the child's environment: the system default path is searched.
    o.env = sandbox::env_policy::empty();
    BOOST_TEST(run(cmd("true", {}, o)).result.exit_code == 0);
    BOOST_TEST(run(cmd("sbx-only-here", {}, o)).ec == errc::not_found);
}

BOOST_AUTO_TEST_CASE(relative_command_runs_from_the_work_dir)
{
    std::filesystem::create_directories(root.path() / "w");
    write_file(root.path() / "w" / "tool", "#!/bin/sh\necho tool ran\n", 0755);
    sandbox::exec_options o;
    o.work_dir = "w";
    auto r = run(cmd("./tool", {}, o));
    BOOST_TEST(!r.ec);
    BOOST_TEST(r.result.out.data == "tool ran\n");
}

BOOST_AUTO_TEST_CASE(start_errors_are_classified)
{
    write_file(root.path() / "noexec", "#!/bin/sh\necho hi\n", 0644);
    auto [ec, r] = run(cmd((root.path() / "noexec").string(), {}));
    BOOST_TEST(ec == errc::forbidden);
    BOOST_TEST(r.diag.limit == "command");
    BOOST_TEST(r.diag.cause == boost::system::error_code(EACCES, boost::system::system_category()));
    // Exists, may be executed, but the kernel refuses its format: forbidden, like the above.
    write_file(root.path() / "garbage", "\x7f" "ELF this is not a program", 0755);
    auto [ec2, r2] = run(cmd((root.path() / "garbage").string(), {}));
    BOOST_TEST(ec2 == errc::forbidden);
    BOOST_TEST(r2.diag.limit == "command");
    BOOST_TEST(r2.diag.cause == boost::system::error_code(ENOEXEC, boost::system::system_category()));
    BOOST_TEST(run(cmd(root.str(), {})).ec == errc::forbidden); // a directory
}

BOOST_AUTO_TEST_CASE(invalid_input_is_refused_before_anything_runs)
{
    BOOST_TEST(run(cmd("", {})).ec == errc::validation);
    BOOST_TEST(run(cmd("echo", {std::string("a\0b", 3)})).ec == errc::validation);
    BOOST_TEST(run(cmd(std::string("ec\0ho", 5), {})).ec == errc::validation);
    sandbox::exec_options o;
    o.env.inject = {{"A=B", "x"}};
    BOOST_TEST(run(cmd("true", {}, o)).ec == errc::validation);
    o = {};
    o.limits.memory_bytes = -1;
    BOOST_TEST(run(cmd("true", {}, o)).ec == errc::validation);
}

BOOST_AUTO_TEST_CASE(net_and_disk_policies_are_refused_not_downgraded)
{
    sandbox::exec_options o;
    o.net.mode = sandbox::net_mode::deny_all;
    auto [ec, r] = run(helper({"exit", "0"}, o));
    BOOST_TEST(ec == errc::not_available);
    BOOST_TEST(r.diag.limit == "net.mode");
    o = {};
    o.limits.disk_bytes = 1 << 20;
    BOOST_TEST(run(helper({"exit", "0"}, o)).ec == errc::not_available);
    o = {};
    o.limits.cpu_millicores = 100;
    BOOST_TEST(run(helper({"exit", "0"}, o)).ec == errc::not_available);
    // Rules under the default mode are an inconsistent policy, not silently ignored.
    o = {};
    o.net.rules.push_back({sandbox::net_action::allow, "example.com", 443});
    BOOST_TEST(run(helper({"exit", "0"}, o)).ec == errc::validation);
}

BOOST_AUTO_TEST_CASE(stdin_present_absent_and_empty)
{
    sandbox::exec_options o;
    o.input = std::string("line one\n\0binary", 16);
    BOOST_TEST(run(helper({"cat"}, o)).result.out.data == *o.input);
    o.input.reset(); // /dev/null
    auto r = run(helper({"cat", "--then", "print", "done"}, o)).result;
    BOOST_TEST(r.out.data == "done");
    o.input = std::string(); // a pipe closed at once
    r = run(helper({"cat", "--then", "print", "done"}, o)).result;
    BOOST_TEST(r.out.data == "done");
}

BOOST_AUTO_TEST_CASE(large_stdin_is_fed_asynchronously)
{
    sandbox::exec_options o;
    std::string in;
    for (int i = 0; in.size() < (4u << 20); ++i)
        in += std::to_string(i) + "\n";
    o.input = in;
    o.limits.max_output_bytes = 8 << 20;
    auto r = run(helper({"cat"}, o)).result;
    BOOST_TEST(r.out.data.size() == in.size());
    BOOST_TEST((r.out.data == in));
}

BOOST_AUTO_TEST_CASE(stdin_unread_by_the_child_does_not_raise_sigpipe)
{
    sandbox::exec_options o;
    o.input = std::string(4 << 20, 'x');
    auto [ec, r] = run(helper({"exit", "0"}, o));
    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 0);
}

BOOST_AUTO_TEST_CASE(argv_is_not_wrapped_in_a_shell)
{
    auto r = run(cmd("sh", {"-c", "printf %s \"$0\""})).result;
    BOOST_TEST(r.out.data == "sh");
    auto r2 = run(helper({"print-args", "a b", "", "$HOME", "--then", "exit", "0"})).result;
    BOOST_TEST(r2.out.data == "a b\n\n$HOME\n");
}

// A plan larger than one message to the worker (32 KiB each; this argv is ~1 MiB) goes out in
// chunks as the worker's socket takes them, and the command gets every argument, in order,
// with the plan's timeout still kept.
BOOST_AUTO_TEST_CASE(a_plan_larger_than_one_message_arrives_whole)
{
    std::vector<std::string> args{"print-args"};
    std::string want;
    for (int i = 0; i < 2000; ++i)
    {
        std::string a = std::to_string(i) + ":" + std::string(500, static_cast<char>('a' + i % 26));
        want += a + "\n";
        args.push_back(std::move(a));
    }
    args.insert(args.end(), {"--then", "sleep", "60000"});
    sandbox::exec_options o;
    o.timeout = 500ms;
    auto [ec, r] = run(helper(args, o));
    BOOST_TEST(ec == sandbox::errc::timeout);
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    BOOST_TEST(r.out.data.size() == want.size());
    BOOST_TEST((r.out.data == want));
}

BOOST_AUTO_TEST_CASE(limits_preserve_args_and_exit_code)
{
    sandbox::exec_options o;
    o.limits.memory_bytes = 256 << 20;
    o.limits.cpu_millicores = 1000;
    o.limits.max_processes = 64;
    o.timeout = 5s;
    auto [ec, r] = run(helper({"print", "payload", "--then", "exit", "7"}, o));
    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 7);
    BOOST_TEST(r.out.data == "payload");
}

BOOST_AUTO_TEST_CASE(child_gets_only_fds_0_to_2_a_clean_signal_state_and_its_own_group)
{
    // An inheritable descriptor in the parent must not reach the child.
    int leak = ::open("/dev/null", O_RDONLY);
    BOOST_REQUIRE(leak >= 0);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    ::pthread_sigmask(SIG_BLOCK, &block, &old);
    auto old_int = ::signal(SIGINT, SIG_IGN);
    auto r = run(helper({"print-fds", "--then", "print-proc"})).result;
    ::signal(SIGINT, old_int);
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    ::close(leak);
    std::istringstream lines(r.out.data);
    std::string fds, pid, pgid, blk, ign;
    std::getline(lines, fds);
    lines >> pid >> pgid >> blk >> ign;
    BOOST_TEST(fds == "0 1 2");
    BOOST_TEST(pid == pgid);
    BOOST_TEST(blk == "0000000000000000");
    // Only glibc's internal signals (32, 33) may stay ignored after posix_spawn.
    BOOST_TEST(ign == "0000000180000000");
}

BOOST_AUTO_TEST_CASE(foreign_signal_is_a_result)
{
    auto [ec, r] = run(helper({"kill-self", "15"}));
    BOOST_TEST(!ec);
    BOOST_TEST((r.status == exec_status::signaled));
    BOOST_TEST(r.signal == 15);
    BOOST_TEST(r.exit_code == -1);
}

BOOST_AUTO_TEST_CASE(enforcement_report_is_honest)
{
    auto e = runner.enforcement();
    BOOST_TEST(e.env_allow_list);
    BOOST_TEST(e.memory_cap == sandbox::sampler_usable());
    BOOST_TEST(e.cpu_cap == sandbox::sampler_usable());
    BOOST_TEST(e.process_cap == sandbox::sampler_usable());
    BOOST_TEST(e.net_modes.empty());
    BOOST_TEST(!e.filesystem_bounds);
    BOOST_TEST(!e.disk_cap);
    BOOST_TEST(!e.socks5);
    BOOST_TEST(!e.mitm);
    BOOST_TEST(e.tree_kill);
    BOOST_TEST((sandbox::enforcement_of(&runner) == e));
    BOOST_TEST((sandbox::enforcement_of(nullptr) == sandbox::enforcement_report{}));
    BOOST_TEST(sandbox::to_json(e).find("\"memory_cap\":true") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(timeout_while_stdin_is_still_being_fed)
{
    // The child never reads: our writer is parked on a full pipe when the timeout fires.
    sandbox::exec_options o;
    o.input = std::string(8 << 20, 'x');
    o.timeout = 200ms;
    auto [ec, r] = run(helper({"sleep", "60000"}, o));
    BOOST_TEST(ec == errc::timeout);
    BOOST_TEST(r.wall_time < 10s);
}

BOOST_AUTO_TEST_CASE(closed_output_with_a_running_child)
{
    // Both pipes reach EOF long before the leader exits: exec waits for the exit code.
    auto [ec, r] = run(helper({"print", "early", "--then", "close-out", "--then", "sleep", "300",
                               "--then", "exit", "5"}));
    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 5);
    BOOST_TEST(r.out.data == "early");
    BOOST_TEST(r.wall_time >= 300ms);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(local_runner_errors, sbx_test::local_fixture)

// HTTP hooks run in inspected tunnels only: without net.mitm they are a validation error
// whatever the backend; with it, this backend cannot run them (no proxy, no inspection).
BOOST_AUTO_TEST_CASE(http_hooks_are_refused_with_their_reason)
{
    sandbox::exec_request req = sbx_test::helper({"exit", "0"});
    req.http.on_request =
        [](const sandbox::http_request_info&) -> boost::asio::awaitable<sandbox::http_verdict> {
        co_return sandbox::http_verdict::allowed();
    };
    auto [ec, r] = run(req);
    BOOST_TEST(ec == errc::validation);
    BOOST_TEST(r.diag.limit == "http");
    req.options.net.mode = sandbox::net_mode::allow_list;
    req.options.net.allow_hosts = {"example.com"};
    req.options.net.mitm = sandbox::mitm_policy{};
    req.options.net.mitm->enabled = true;
    auto [ec2, r2] = run(req);
    BOOST_TEST(ec2 == errc::not_available);
    // Whole bodies go to a head hook whose direction has no body hook: with only body
    // hooks, inspect_bodies would show nothing to anyone.
    req.options.net.mitm->inspect_bodies = true;
    req.http.on_request_body =
        [](const sandbox::http_body_chunk&) -> boost::asio::awaitable<sandbox::http_verdict> {
        co_return sandbox::http_verdict::allowed();
    };
    auto [ec3, r3] = run(req);
    BOOST_TEST(ec3 == errc::validation);
    BOOST_TEST(r3.diag.limit == "net.mitm.inspect_bodies");
    req.http.on_response =
        [](const sandbox::http_response_info&) -> boost::asio::awaitable<sandbox::http_verdict> {
        co_return sandbox::http_verdict::allowed();
    };
    auto [ec4, r4] = run(std::move(req)); // the response hook sees response bodies whole
    BOOST_TEST(ec4 == errc::not_available);
}

BOOST_AUTO_TEST_CASE(oversized_requests_are_validation_errors)
{
    // More argument bytes than the kernel accepts: the request cannot work, whatever runs it.
    sandbox::exec_request req = sbx_test::helper({"exit", "0"});
    req.args.push_back(std::string(3 << 20, 'a'));
    auto [ec, r] = run(std::move(req));
    BOOST_TEST(ec == errc::validation);
    BOOST_TEST(r.diag.cause == boost::system::error_code(E2BIG, boost::system::system_category()));
    BOOST_TEST((r.status == exec_status::not_started));
    // A path through a regular file: not_found, with the OS error attached.
    write_file(root.path() / "plain", "x", 0644);
    auto [ec2, r2] = run(cmd((root.path() / "plain" / "tool").string(), {}));
    BOOST_TEST(ec2 == errc::not_found);
}

BOOST_AUTO_TEST_SUITE_END()
