// Initiation never holds the caller's loop: starting, restarting or replacing the supervisor
// helper happens while a timer on the same io_context keeps ticking (issue 20, item 2). The
// helper is found through the service (as containment_test does) and killed or stopped by
// pid between executions.
#include <boost/test/unit_test.hpp>

#include "supervisor/client.hpp"

#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/worker_pool.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>

#include <sys/resource.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

// The old code held the loop for 100 ms on a full control socket (a poll) before it replaced
// a wedged helper, and up to 2 s to reap a killed one; a loop that keeps running ticks every
// millisecond. The bound is far below the old 2 s and leaves room for a loaded machine (2
// cores shared by several builds: a restart's posix_spawn alone took up to 33 ms there) and
// for the sanitizer builds.
constexpr auto max_gap = 250ms;

// Ticks every millisecond on the loop and keeps the longest gap between two ticks.
struct ticker
{
    explicit ticker(asio::io_context& ioc) : t(ioc) {}
    void start()
    {
        last = clock_type::now();
        worst = {};
        stopped = false;
        arm();
    }
    void arm()
    {
        t.expires_after(1ms);
        t.async_wait([this](boost::system::error_code ec) {
            if (ec || stopped)
                return;
            const auto now = clock_type::now();
            worst = std::max(worst, now - last);
            last = now;
            if (on_tick)
                on_tick();
            arm();
        });
    }
    void stop()
    {
        stopped = true;
        t.cancel();
    }
    asio::steady_timer t;
    clock_type::time_point last;
    clock_type::duration worst{};
    bool stopped = true;
    std::function<void()> on_tick; // work of the test's own, a little per tick
};

long ms(clock_type::duration d)
{
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

pid_t helper_pid(asio::io_context& ioc)
{
    return asio::use_service<sandbox::detail::supervisor_service>(ioc).helper_pid();
}

// The helper's children now (its workers).
std::vector<pid_t> children_of(pid_t pid)
{
    std::vector<pid_t> out;
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                    "/children");
    for (pid_t c; f >> c;)
        out.push_back(c);
    return out;
}

// Gone, or dead and not reaped yet.
bool dead(pid_t pid)
{
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(f, line))
        return true;
    const auto close = line.rfind(')');
    return close == std::string::npos || line.compare(close + 2, 1, "Z") == 0;
}

bool wait_dead(pid_t pid)
{
    for (auto until = clock_type::now() + 5s; clock_type::now() < until;
         std::this_thread::sleep_for(1ms))
        if (dead(pid))
            return true;
    return false;
}

sandbox::exec_request true_request()
{
    sandbox::exec_request req;
    req.command = "/bin/true";
    return req;
}

struct done_count
{
    int ok = 0, failed = 0;
    int total() const { return ok + failed; }
};

void start_exec(sandbox::runner& r, done_count& d, sandbox::exec_request req = true_request())
{
    sandbox::async_exec(r, std::move(req),
                        [&d](boost::system::error_code ec, sandbox::exec_result res) {
                            if (!ec && res.exit_code == 0)
                                ++d.ok;
                            else
                                ++d.failed;
                        });
}

// Runs the loop until `n` executions completed (or 20 s passed).
void run_until(asio::io_context& ioc, const done_count& d, int n)
{
    const auto until = clock_type::now() + 20s;
    while (d.total() < n && clock_type::now() < until)
    {
        if (ioc.stopped()) // out of work after the last run: the new executions are queued
            ioc.restart();
        ioc.run_one_for(100ms);
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(initiation)

BOOST_AUTO_TEST_CASE(a_killed_helper_is_restarted_while_the_loop_keeps_ticking)
{
    asio::io_context ioc;
    sandbox::local_runner r(ioc.get_executor());
    ticker tick(ioc);
    done_count d;
    tick.start(); // the first exec starts the helper
    start_exec(r, d);
    run_until(ioc, d, 1);
    tick.stop();
    BOOST_TEST_REQUIRE(d.ok == 1);
    BOOST_TEST(tick.worst < max_gap, "the loop stood still for " << ms(tick.worst) << " ms");

    for (int round = 0; round < 3; ++round)
    {
        const pid_t old = helper_pid(ioc);
        BOOST_TEST_REQUIRE(old > 0);
        const auto workers = children_of(old);
        BOOST_TEST_REQUIRE(::kill(old, SIGKILL) == 0);
        // Its idle workers see the lifeline close and exit: none is handed the next plan.
        BOOST_TEST_REQUIRE(wait_dead(old));
        for (pid_t w : workers)
            BOOST_TEST_REQUIRE(wait_dead(w));

        tick.start();
        start_exec(r, d);
        run_until(ioc, d, round + 2);
        tick.stop();
        BOOST_TEST(d.ok == round + 2, "round " << round << ": " << d.failed << " failed");
        BOOST_TEST(tick.worst < max_gap,
                   "round " << round << ": the loop stood still for " << ms(tick.worst) << " ms");
        const pid_t now = helper_pid(ioc);
        BOOST_TEST((now > 0 && now != old), "round " << round << ": helper " << now);
    }
    ioc.run_for(50ms); // the killed helpers are reaped on the loop
    ioc.restart();
}

BOOST_AUTO_TEST_CASE(a_wedged_helper_is_replaced_while_the_loop_keeps_ticking)
{
    // Enough descriptors for a few hundred executions queued at once (three each).
    rlimit nofile{};
    BOOST_TEST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &nofile) == 0);
    const rlimit saved = nofile;
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 8192);
    BOOST_TEST_REQUIRE(nofile.rlim_cur >= 4096u);
    BOOST_TEST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &nofile) == 0);
    {
        asio::io_context ioc;
        sandbox::local_runner r(ioc.get_executor());
        done_count d;
        start_exec(r, d);
        run_until(ioc, d, 1);
        BOOST_TEST_REQUIRE(d.ok == 1);
        const pid_t old = helper_pid(ioc);
        BOOST_TEST_REQUIRE(old > 0);
        // A stopped helper takes no request: its control socket fills up (a few hundred
        // requests), and the executions after that wait for room, then for a new helper.
        BOOST_TEST_REQUIRE(::kill(old, SIGSTOP) == 0);
        // Started a few per tick, so that no burst of the test's own holds the loop.
        constexpr int n = 800;
        int started = 0;
        ticker tick(ioc);
        tick.on_tick = [&] {
            for (int i = 0; i < 8 && started < n; ++i, ++started)
                start_exec(r, d);
        };
        tick.start();
        run_until(ioc, d, n + 1);
        tick.stop();
        // The ones queued in the stopped helper's socket end with their lost worker; the
        // rest run under its successor.
        BOOST_TEST(d.total() == n + 1);
        BOOST_TEST(d.ok > 1, d.ok << " ran, " << d.failed << " failed");
        // The longest gap is only reported: hundreds of executions ending at once (the lost
        // ones) and the new helper forking hundreds of workers on a loaded 2-core machine
        // starve the loop for tens of milliseconds, as long as the old code's poll held it.
        BOOST_TEST_MESSAGE("longest gap between ticks: " << ms(tick.worst) << " ms");
        const pid_t now = helper_pid(ioc);
        BOOST_TEST((now > 0 && now != old), "helper " << now);
        ioc.run_for(50ms);
        ioc.restart();
    }
    ::setrlimit(RLIMIT_NOFILE, &saved);
}

BOOST_AUTO_TEST_SUITE_END()

// --- idle workers (issue 33, item 10) ---------------------------------------------------

BOOST_AUTO_TEST_SUITE(worker_pool)

namespace {

sandbox::exec_request sleep_request(const char* seconds)
{
    sandbox::exec_request req;
    req.command = "/bin/sleep";
    req.args = {seconds};
    return req;
}

// Waits up to 10 s for `pred`, sleeping between looks (the loop is not needed: the workers
// keep their own time).
bool eventually(const std::function<bool()>& pred)
{
    for (auto until = clock_type::now() + 10s; clock_type::now() < until;
         std::this_thread::sleep_for(5ms))
        if (pred())
            return true;
    return pred();
}

} // namespace

BOOST_AUTO_TEST_CASE(workers_beyond_the_kept_ones_retire_without_holding_the_loop)
{
    asio::io_context ioc;
    sandbox::set_worker_pool_options(ioc, {.keep_idle = 2, .max_idle = 64, .retire_after = 2s});
    sandbox::local_runner r(ioc.get_executor());
    done_count d;
    constexpr int burst = 8;
    for (int i = 0; i < burst; ++i) // in flight together: one worker each
        start_exec(r, d, sleep_request("0.3"));
    run_until(ioc, d, burst);
    BOOST_TEST_REQUIRE(d.ok == burst);
    const pid_t helper = helper_pid(ioc);
    BOOST_TEST_REQUIRE(helper > 0);
    BOOST_TEST(sandbox::get_worker_pool_stats(ioc.get_executor()).idle_workers ==
               std::size_t(burst));
    BOOST_TEST(children_of(helper).size() == std::size_t(burst));

    // Nothing of ours is left to wait for on the loop: the retirement waits run in the
    // workers, so run() returns long before they retire.
    ioc.restart();
    const auto t0 = clock_type::now();
    ioc.run();
    BOOST_TEST(ms(clock_type::now() - t0) < 1000,
               "run() returned after " << ms(clock_type::now() - t0) << " ms");

    // The six beyond the kept two retire on their own, with no loop running.
    BOOST_TEST(eventually([&] { return children_of(helper).size() == 2u; }),
               children_of(helper).size() << " workers left");
    const auto st = sandbox::get_worker_pool_stats(ioc.get_executor());
    BOOST_TEST(st.idle_workers == 2u);
    BOOST_TEST(st.retired_workers == std::uint64_t(burst - 2));

    // The kept ones serve the next executions (one at a time), and stay.
    const auto kept = children_of(helper);
    for (int i = 0; i < 3; ++i)
    {
        start_exec(r, d);
        run_until(ioc, d, burst + i + 1);
    }
    BOOST_TEST(d.ok == burst + 3);
    auto now = children_of(helper);
    std::sort(now.begin(), now.end());
    auto before = kept;
    std::sort(before.begin(), before.end());
    BOOST_TEST(now == before, "the kept workers served them");
    BOOST_TEST(sandbox::get_worker_pool_stats(ioc.get_executor()).idle_workers == 2u);
}

BOOST_AUTO_TEST_CASE(without_a_retire_time_idle_workers_stay_up_to_max_idle)
{
    asio::io_context ioc;
    sandbox::set_worker_pool_options(ioc, {.keep_idle = 0, .max_idle = 3, .retire_after = 0s});
    sandbox::local_runner r(ioc.get_executor());
    done_count d;
    for (int i = 0; i < 5; ++i)
        start_exec(r, d, sleep_request("0.2"));
    run_until(ioc, d, 5);
    BOOST_TEST_REQUIRE(d.ok == 5);
    const pid_t helper = helper_pid(ioc);
    // Two found max_idle waiting and went at once; three wait, for good.
    BOOST_TEST(eventually([&] { return children_of(helper).size() == 3u; }),
               children_of(helper).size() << " workers");
    std::this_thread::sleep_for(300ms);
    BOOST_TEST(children_of(helper).size() == 3u);
    const auto st = sandbox::get_worker_pool_stats(ioc.get_executor());
    BOOST_TEST(st.idle_workers == 3u);
    BOOST_TEST(st.retired_workers == 0u);
}

// The library taking a worker and the worker retiring race all the time here: every worker
// comes back with a 2 ms wait, and the next execution asks 0-4 ms later. A worker that
// retires just as its plan is sent would lose the execution; the shared claim lets only one
// of them win, so every execution runs.
BOOST_AUTO_TEST_CASE(a_worker_taken_as_its_wait_runs_out_never_loses_the_execution)
{
    asio::io_context ioc;
    sandbox::set_worker_pool_options(ioc, {.keep_idle = 0, .max_idle = 64, .retire_after = 2ms});
    sandbox::local_runner r(ioc.get_executor());
    done_count d;
    std::mt19937 rng(33);
    std::uniform_int_distribution<int> pause_us(0, 4000);
    constexpr int n = 500;
    for (int i = 0; i < n; ++i)
    {
        start_exec(r, d);
        run_until(ioc, d, i + 1);
        std::this_thread::sleep_for(std::chrono::microseconds(pause_us(rng)));
    }
    BOOST_TEST(d.ok == n, d.failed << " of " << n << " failed");
    const auto st = sandbox::get_worker_pool_stats(ioc.get_executor());
    BOOST_TEST_MESSAGE("retired " << st.retired_workers << " of " << n << " workers");
    BOOST_TEST(st.retired_workers > 0u); // the race did happen both ways
    BOOST_TEST(st.retired_workers < std::uint64_t(n));
}

BOOST_AUTO_TEST_SUITE_END()
