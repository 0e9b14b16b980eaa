// test/integration/cap_watch_test.cpp: caps on a process the test starts itself
// (sandbox/backend/cap_watch.hpp, issue 33 item 7): the watch names the cap that tripped,
// kills the tree (a member that called setsid included), leaves a process that ended by
// itself alone, and stops without killing anything when cancelled.
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <sandbox/backend/cap_watch.hpp>
#include <sandbox/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandbox::backend::cap_watch_options;
using sandbox::backend::cap_watch_result;

// A process of the test's own: the test target with `args`, leading its own process group,
// its output to /dev/null, its members' pids recorded in `pidfile` when one is given.
pid_t spawn_target(std::vector<std::string> args, const std::string& pidfile = {})
{
    args.insert(args.begin(), sbx_test::target);
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_text;
    for (char** e = environ; *e; ++e)
        env_text.emplace_back(*e);
    if (!pidfile.empty())
        env_text.push_back("SBX_PIDFILE=" + pidfile);
    std::vector<char*> envp;
    for (auto& e : env_text)
        envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &fa, &at, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    BOOST_TEST_REQUIRE(rc == 0);
    return pid;
}

// The test's child, reaped: its wait status.
int reap(pid_t pid)
{
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR)
    {
    }
    return status;
}

struct watch_outcome
{
    boost::system::error_code ec;
    cap_watch_result result;
    bool done = false;
};

struct fixture
{
    asio::io_context ioc;

    watch_outcome watch(pid_t pid, cap_watch_options o, std::chrono::seconds limit = 20s)
    {
        watch_outcome w;
        sandbox::backend::async_watch_caps(ioc.get_executor(), pid, o,
                                           [&w](boost::system::error_code ec, cap_watch_result r) {
                                               w = {ec, r, true};
                                           });
        ioc.run_for(limit);
        ioc.restart();
        return w;
    }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(cap_watch, fixture)

BOOST_AUTO_TEST_CASE(a_memory_cap_trips_names_itself_and_kills_the_process)
{
    const pid_t pid = spawn_target({"alloc", "256", "--then", "sleep", "30000"});
    cap_watch_options o;
    o.caps.memory_bytes = 64ull << 20;
    const auto w = watch(pid, o);
    BOOST_TEST_REQUIRE(w.done);
    BOOST_TEST(!w.ec, w.ec.message());
    BOOST_TEST(w.result.exceeded == sandbox::budget_kind::memory);
    BOOST_TEST(w.result.configured == std::int64_t(64) << 20);
    BOOST_TEST(w.result.observed >= w.result.configured);
    BOOST_TEST(w.result.samples > 0u);
    const int st = reap(pid);
    BOOST_TEST((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL), "status " << st);
}

BOOST_AUTO_TEST_CASE(a_cpu_cap_trips_on_a_spinning_process)
{
    const pid_t pid = spawn_target({"spin", "20000"});
    cap_watch_options o;
    o.caps.cpu = 300ms;
    const auto w = watch(pid, o);
    BOOST_TEST_REQUIRE(w.done);
    BOOST_TEST(!w.ec, w.ec.message());
    BOOST_TEST(w.result.exceeded == sandbox::budget_kind::cpu);
    BOOST_TEST(w.result.cpu >= 300ms);
    const int st = reap(pid);
    BOOST_TEST((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL), "status " << st);
}

// A member that calls setsid leaves the group but not the tree: it is counted and killed.
BOOST_AUTO_TEST_CASE(a_process_cap_kills_descendants_a_setsid_member_included)
{
    sbx_test::temp_dir dir;
    const std::string pidfile = (dir.path() / "pids").string();
    const pid_t pid = spawn_target({"setsid-child", "30000", "--then", "children", "8", "30000",
                                    "--then", "sleep", "30000"},
                                   pidfile);
    cap_watch_options o;
    o.caps.max_processes = 5;
    const auto w = watch(pid, o);
    BOOST_TEST_REQUIRE(w.done);
    BOOST_TEST(!w.ec, w.ec.message());
    BOOST_TEST(w.result.exceeded == sandbox::budget_kind::processes);
    BOOST_TEST(w.result.configured == 5);
    BOOST_TEST(w.result.killed >= 6u);
    const int st = reap(pid);
    BOOST_TEST((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL), "status " << st);
    // The trip needed 6 processes (the leader and 5 children); the leader records a child
    // after its fork returns, so the last one may be missing from the file.
    const auto members = sbx_test::read_pids(pidfile);
    BOOST_TEST(members.size() >= 4u);
    BOOST_TEST(sbx_test::wait_gone(members), "a member of the watched tree survived");
}

BOOST_AUTO_TEST_CASE(a_process_that_ends_first_is_left_alone)
{
    const pid_t pid = spawn_target({"spin-cpu", "300"}); // 300 ms of cpu, not of wall time
    cap_watch_options o;
    o.caps.memory_bytes = 1ull << 30;
    const auto w = watch(pid, o);
    BOOST_TEST_REQUIRE(w.done);
    BOOST_TEST(!w.ec, w.ec.message());
    BOOST_TEST(w.result.exceeded == sandbox::budget_kind::none);
    // Its whole cpu time, read from its record once it ended (the last sample was 10-50 ms
    // before; clock ticks are 10 ms).
    BOOST_TEST(w.result.cpu >= 290ms, w.result.cpu.count() << " ns");
    const int st = reap(pid);
    BOOST_TEST((WIFEXITED(st) && WEXITSTATUS(st) == 0), "status " << st);
    // The worker is idle again: the next watch gets it.
    const pid_t next = spawn_target({"sleep", "100"});
    BOOST_TEST(!watch(next, o).ec);
    reap(next);
}

BOOST_AUTO_TEST_CASE(a_cancelled_watch_stops_and_kills_nothing)
{
    const pid_t pid = spawn_target({"alloc", "8", "--then", "sleep", "30000"});
    asio::cancellation_signal cancel;
    watch_outcome w;
    cap_watch_options o;
    o.caps.memory_bytes = 1ull << 30;
    sandbox::backend::async_watch_caps(
        ioc.get_executor(), pid, o,
        asio::bind_cancellation_slot(cancel.slot(),
                                     [&w](boost::system::error_code ec, cap_watch_result r) {
                                         w = {ec, r, true};
                                     }));
    asio::steady_timer t(ioc, 200ms);
    t.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
    ioc.run_for(10s);
    ioc.restart();
    BOOST_TEST_REQUIRE(w.done);
    BOOST_TEST(w.ec == asio::error::operation_aborted, w.ec.message());
    std::this_thread::sleep_for(100ms);
    BOOST_TEST(sbx_test::alive(pid), "a cancelled watch must not kill");
    ::kill(pid, SIGKILL);
    reap(pid);
}

BOOST_AUTO_TEST_CASE(bad_watches_are_refused_with_their_class)
{
    cap_watch_options none;
    const pid_t pid = spawn_target({"sleep", "5000"});
    auto w = watch(pid, none);
    BOOST_TEST(w.ec == sandbox::errc::validation, w.ec.message());
    cap_watch_options o;
    o.caps.memory_bytes = 1ull << 30;
    BOOST_TEST(watch(0, o).ec == sandbox::errc::validation);
    ::kill(pid, SIGKILL);
    reap(pid);
    // Reaped: no such process any more.
    BOOST_TEST(watch(pid, o).ec == sandbox::errc::not_found);
    // The default token throws with the diagnostics.
    bool threw = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            try
            {
                co_await sandbox::backend::async_watch_caps(ioc.get_executor(), 0, o);
            }
            catch (const sandbox::error& e)
            {
                threw = e.code() == sandbox::errc::validation && e.diag().limit == "pid";
            }
        },
        asio::detached);
    ioc.run_for(5s);
    ioc.restart();
    BOOST_TEST(threw);
}

BOOST_AUTO_TEST_SUITE_END()
