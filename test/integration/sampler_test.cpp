// test/integration/sampler_test.cpp: memory, cpu and process caps enforced by the sampler of
// each execution's supervisor worker; fail-closed sampling; many capped trees on one
// io_context.
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <sandbox/backend/supervise.hpp>
#include <sandbox/sampler.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <cmath>
#include <thread>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

using sbx_test::mib;

using sbx_test::contains;

using sbx_test::ms_since;

/// The facts that explain a cap decision, shown with the first check of a cap test when it
/// fails (a cpu cap under heavy external load is the usual suspect).
std::string describe(const sandbox::exec_result& r)
{
    auto ms = [](std::chrono::nanoseconds d) {
        return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    };
    return "status=" + std::string(sandbox::to_string(r.status)) + " wall=" + ms(r.wall_time) +
           "ms cpu=" + ms(r.cpu_time) + "ms peak=" + std::to_string(r.peak_memory_bytes) +
           " diag: " + sandbox::to_string(r.diag);
}

/// A supervisor plan running the test target with `args` and a memory cap; `faults` is the
/// worker's test seam (how many samples fail first).
sandbox::backend::spawn_plan faulty_plan(std::vector<std::string> args, std::uint32_t faults)
{
    sandbox::backend::spawn_plan p;
    p.executable = sbx_test::target;
    p.argv.push_back(sbx_test::target);
    p.argv.insert(p.argv.end(), args.begin(), args.end());
    p.caps.memory_bytes = static_cast<std::uint64_t>(1024 * mib);
    p.timeout = 30s;
    p.test_sample_faults = faults;
    p.backend_name = "local";
    return p;
}

sbx_test::run_outcome run_plan(boost::asio::io_context& ioc, sandbox::backend::spawn_plan p)
{
    sbx_test::run_outcome out;
    bool done = false;
    sandbox::backend::async_supervise(ioc.get_executor(), std::move(p),
                                      [&](boost::system::error_code ec, sandbox::exec_result r) {
                                          out.ec = ec;
                                          out.result = std::move(r);
                                          done = true;
                                      });
    ioc.run_for(30s);
    BOOST_TEST(done);
    return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sampler)

BOOST_AUTO_TEST_CASE(memory_cap_kills_the_tree)
{
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.limits.memory_bytes = 128 * mib;
    o.timeout = 30s;
    auto req = sbx_test::helper({"alloc", "512"}, o);
    auto [ec, r] = f.run(std::move(req));
    const std::string described_1 = describe(r); // outlives the lazy info
    BOOST_TEST_INFO(described_1);

    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.status == sandbox::exec_status::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::memory);
    BOOST_TEST(contains(r.out.data, "allocating"), "stdout: '" << r.out.data << "'");
    BOOST_TEST(!contains(r.out.data, "allocated 512"), "stdout: '" << r.out.data << "'");
    BOOST_TEST(r.diag.limit == "memory");
    BOOST_TEST(r.peak_memory_bytes >= static_cast<std::uint64_t>(128 * mib));
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(r.wall_time).count() <
               10000);
}

BOOST_AUTO_TEST_CASE(cpu_cap_kills_a_spinner)
{
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    // A budget of 1 s of cpu time in a 20 s window: the cap, not the timeout, must end it,
    // even on a loaded machine where the spinner gets only part of a core.
    o.timeout = 20s;
    o.limits.cpu_millicores = 50;
    auto req = sbx_test::helper({"spin", "0"}, o);
    auto [ec, r] = f.run(std::move(req));
    const std::string described_2 = describe(r); // outlives the lazy info
    BOOST_TEST_INFO(described_2);

    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.status == sandbox::exec_status::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::cpu);
    BOOST_TEST(r.diag.limit == "cpu");
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(r.wall_time).count() <
               15000);
    BOOST_TEST(r.cpu_time >= std::chrono::nanoseconds(1s));
}

BOOST_AUTO_TEST_CASE(cpu_of_exited_children_counts)
{
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.timeout = 20s;
    o.limits.cpu_millicores = 50; // a budget of 1 s; the children burn about 3 s in total
    auto req = sbx_test::helper({"fork-stream", "100", "30"}, o);
    auto [ec, r] = f.run(std::move(req));
    const std::string described_3 = describe(r); // outlives the lazy info
    BOOST_TEST_INFO(described_3);

    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.status == sandbox::exec_status::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::cpu);
    BOOST_TEST(!contains(r.out.data, "forked 100"), "stdout: '" << r.out.data << "'");
}

/// The test target run with `args` under a process cap; its members record the pids of the
/// children they made (read back once it ended).
struct capped_fork_run
{
    boost::system::error_code ec;
    sandbox::exec_result r;
    std::vector<pid_t> pids;
};

capped_fork_run run_under_process_cap(std::vector<std::string> args, std::int64_t cap)
{
    sbx_test::local_fixture f;
    const auto pidfile = f.root.path() / "pids";
    sandbox::exec_options o;
    o.env.inject["SBX_PIDFILE"] = pidfile.string();
    o.timeout = 20s;
    o.limits.max_processes = cap;
    auto out = f.run(sbx_test::helper(std::move(args), o));
    return {out.ec, std::move(out.result), sbx_test::read_pids(pidfile)};
}

BOOST_AUTO_TEST_CASE(process_cap_kills_the_tree)
{
    auto [ec, r, pids] = run_under_process_cap({"fork-procs", "50", "5000"}, 10);
    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.status == sandbox::exec_status::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::processes);
    BOOST_TEST(r.diag.limit == "processes");
    // One parent forking one child at a time: the fork gate counts exactly, so the tenth
    // fork (the eleventh process) is the one refused, and nine children were ever made.
    BOOST_TEST(r.diag.observed == 11);
    BOOST_TEST(r.diag.configured == 10);
    BOOST_TEST(pids.size() == 9u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

BOOST_AUTO_TEST_CASE(fork_bomb_is_held_near_the_process_cap)
{
    // A binary fork tree of 1,022 processes, all of them forking at once: the sampler alone
    // saw 58-160 at its first look (cap 50); the fork gate lets through only forks that fit,
    // give or take a fork in flight when it counted.
    auto [ec, r, pids] =
        run_under_process_cap({"fork-tree", "9", "5000", "--then", "sleep", "10000"}, 50);
    const auto described = describe(r);
    BOOST_TEST_INFO(described);
    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::processes);
    BOOST_TEST_MESSAGE("fork bomb under a cap of 50: " << r.diag.observed << " counted");
    BOOST_TEST(r.diag.observed > 50);
    BOOST_TEST(r.diag.observed <= 62); // the bound is 2x; measured 51-59
    // Independent of our count: every child made was recorded by its parent (the root is
    // the one more), and none exits before the kill.
    BOOST_TEST(pids.size() + 1 <= 62u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

// A process whose main thread has ended shows as a zombie, with no memory in its own /proc
// record, while its other threads run, allocate and fork: neither cap may lose sight of it.

BOOST_AUTO_TEST_CASE(process_cap_counts_children_of_a_process_whose_main_thread_ended)
{
    auto [ec, r, pids] =
        run_under_process_cap({"main-exit", "--then", "fork-procs", "50", "5000"}, 10);
    const auto described = describe(r);
    BOOST_TEST_INFO(described);
    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::processes);
    BOOST_TEST(r.diag.observed == 11);
    BOOST_TEST(pids.size() == 9u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

BOOST_AUTO_TEST_CASE(memory_of_a_process_whose_main_thread_ended_counts)
{
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.limits.memory_bytes = 128 * mib;
    o.timeout = 30s;
    auto [ec, r] = f.run(sbx_test::helper({"main-exit", "--then", "alloc", "512"}, o));
    const std::string described = describe(r);
    BOOST_TEST_INFO(described);
    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::memory);
    BOOST_TEST(contains(r.out.data, "allocating"), "stdout: '" << r.out.data << "'");
    BOOST_TEST(!contains(r.out.data, "allocated 512"), "stdout: '" << r.out.data << "'");
    BOOST_TEST(r.peak_memory_bytes >= static_cast<std::uint64_t>(128 * mib));
    BOOST_TEST(r.peak_memory_bytes < static_cast<std::uint64_t>(160 * mib));
}

BOOST_AUTO_TEST_CASE(a_tree_at_its_process_cap_goes_on_forking_short_children)
{
    // Every fork after the first finds the count at the cap and needs a fresh listing,
    // which shows the last child gone: none of the 100 is refused.
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.timeout = 30s;
    o.limits.max_processes = 2;
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", "i=0; while [ $i -lt 100 ]; do /bin/true || exit 7; i=$((i+1)); done; "
                      "echo $i"};
    req.options = o;
    auto [ec, r] = f.run(std::move(req));
    BOOST_TEST(!ec, r.diag);
    BOOST_TEST(r.out.data == "100\n");
}

BOOST_AUTO_TEST_CASE(forks_that_arrive_together_are_all_answered)
{
    // 30 tasks fork at the same moment, well within the cap: the worker's wake-ups coalesce,
    // and every request must still be answered (a lost one leaves its task waiting until the
    // timeout). Five rounds, since the coalescing depends on timing.
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.timeout = 10s;
    o.limits.max_processes = 200;
    for (int round = 0; round < 5; ++round)
    {
        auto [ec, r] = f.run(sbx_test::helper({"fork-burst", "30"}, o));
        BOOST_TEST_REQUIRE(!ec, "round " << round << ": " << describe(r));
        BOOST_TEST(r.out.data == "burst 30\n");
    }
}

BOOST_AUTO_TEST_CASE(a_process_being_killed_makes_room_at_the_cap)
{
    // At a cap of 2 (the shell and one child) the shell kills its child and forks the next
    // at once: the killed one may still be listed, not yet a zombie, when the fork asks. It
    // is not counted once it is dying, and the gate looks again before refusing.
    sbx_test::local_fixture f;
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", "i=0; while [ $i -lt 30 ]; do /bin/sleep 10 & kill -9 $!; "
                      "/bin/true || exit 7; i=$((i+1)); done; echo $i"};
    req.options.timeout = 30s;
    req.options.limits.max_processes = 2;
    auto [ec, r] = f.run(std::move(req));
    BOOST_TEST(!ec, describe(r));
    BOOST_TEST(r.out.data == "30\n");
}

BOOST_AUTO_TEST_CASE(members_may_fork_during_a_kill_grace)
{
    // A timeout with a grace: SIGTERM first. The shell's trap runs a command to clean up,
    // which takes a fork: within the cap, it is let through as before the timeout.
    sbx_test::local_fixture f;
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", "trap '/bin/echo cleaned; exit 0' TERM; while :; do /bin/sleep 0.05; done"};
    req.options.timeout = 300ms;
    req.options.kill_grace = 3s;
    req.options.limits.max_processes = 10;
    auto [ec, r] = f.run(std::move(req));
    BOOST_TEST(ec == sandbox::errc::timeout, describe(r));
    BOOST_TEST(r.out.data == "cleaned\n");
}

// CAP_SYS_ADMIN in our effective set (bit 21 of CapEff), which the fork gate's filter needs
// unless no_new_privs is set.
bool has_cap_sys_admin()
{
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind("CapEff:", 0) == 0)
            return (std::stoull(line.substr(7), nullptr, 16) >> 21) & 1u;
    return false;
}

BOOST_AUTO_TEST_CASE(fork_gate_passes_threads_and_refuses_clone3)
{
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.timeout = 20s;
    // Without a cap, clone3 works; under one it fails with ENOSYS (glibc then uses clone,
    // which the gate can read), and threads still start (glibc falls back the same way).
    // A listener of the tree's own would get its forks before the gate: refused under it.
    auto bare = f.run(sbx_test::helper({"clone3", "--then", "nnp", "--then", "seccomp-listener"}, o));
    BOOST_TEST(!bare.ec, bare.result.diag);
    const std::string nnp_here = "nnp " + std::to_string(::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
    BOOST_TEST(bare.result.out.data == "clone3 ok\n" + nnp_here + "\nlistener ok\n");
    o.limits.max_processes = 3;
    auto gated = f.run(sbx_test::helper({"clone3", "--then", "sleep-threads", "20", "10", "--then",
                                         "nnp", "--then", "seccomp-listener"},
                                        o));
    BOOST_TEST(!gated.ec, gated.result.diag);
    // With CAP_SYS_ADMIN the filter needs no no_new_privs, so setuid programs keep working;
    // without it the tree gets it (fork_gate.hpp).
    const std::string nnp = has_cap_sys_admin() ? nnp_here : "nnp 1";
    BOOST_TEST(gated.result.out.data ==
               "clone3 ENOSYS\nslept 20\n" + nnp + "\nlistener EPERM\n");
}

BOOST_AUTO_TEST_CASE(fork_gate_reports_exec_failures_like_a_plain_start)
{
    // The trampoline executes the command: an interpreter that does not exist fails the
    // exec itself, and is reported the same with and without a process cap.
    sbx_test::local_fixture f;
    const auto script = f.root.path() / "script";
    {
        std::ofstream s(script);
        s << "#!/nonexistent/interpreter\n";
    }
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    sandbox::exec_options o;
    o.timeout = 10s;
    sandbox::exec_request req;
    req.command = script.string();
    req.options = o;
    auto plain = f.run(req);
    req.options.limits.max_processes = 5;
    auto gated = f.run(req);
    BOOST_TEST(plain.ec == sandbox::errc::not_found, plain.ec.message());
    BOOST_TEST(gated.ec == plain.ec, gated.ec.message());
    BOOST_TEST(gated.result.diag.cause == plain.result.diag.cause);
    BOOST_TEST(plain.result.diag.cause.value() == ENOENT, plain.result.diag);
}

BOOST_AUTO_TEST_CASE(task_cap_counts_threads_and_the_process_cap_does_not)
{
    sbx_test::local_fixture f;
    // 40 sleeping threads in one process: within a process cap of 5, over a task cap of 20.
    sandbox::exec_options o;
    o.timeout = 20s;
    o.limits.max_processes = 5;
    auto fine = f.run(sbx_test::helper({"sleep-threads", "40", "300"}, o));
    BOOST_TEST(!fine.ec, fine.result.diag);
    BOOST_TEST(fine.result.out.data == "slept 40\n");

    o.limits.max_tasks = 20;
    auto [ec, r] = f.run(sbx_test::helper({"sleep-threads", "40", "3000"}, o));
    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::tasks);
    BOOST_TEST(r.diag.limit == "tasks");
    BOOST_TEST(r.diag.observed > 20);
    BOOST_TEST(r.diag.configured == 20);
    BOOST_TEST(r.out.data.empty()); // killed before the threads ended

    // Enough room: the same job passes (no kill below the cap).
    o.limits.max_tasks = 64;
    auto room = f.run(sbx_test::helper({"sleep-threads", "40", "300"}, o));
    BOOST_TEST(!room.ec, room.result.diag);
    BOOST_TEST(room.result.out.data == "slept 40\n");
}

BOOST_AUTO_TEST_CASE(failing_sampler_fails_closed)
{
    sbx_test::local_fixture f;
    auto p = faulty_plan({"sleep", "30000"}, 0xffffffffu);
    const auto start = clock_type::now();
    auto [ec, r] = run_plan(f.ioc, std::move(p));
    const auto elapsed = ms_since(start);

    BOOST_TEST(ec == sandbox::errc::not_available);
    BOOST_TEST(r.status == sandbox::exec_status::unenforceable);
    BOOST_TEST(elapsed < 5000);
    BOOST_TEST(contains(r.diag.message, "sampling"), "diag: " << r.diag);
    BOOST_TEST(contains(r.diag.message, "injected"), "diag: " << r.diag);
    const auto stats = sandbox::get_sampler_stats(f.ioc.get_executor());
    BOOST_TEST(stats.unenforceable_kills == 1u);
    BOOST_TEST(stats.failed_samples >= static_cast<std::uint64_t>(
                                           sandbox::max_consecutive_sample_failures));
}

BOOST_AUTO_TEST_CASE(transient_sampling_failures_are_tolerated)
{
    sbx_test::local_fixture f;
    auto p = faulty_plan({"sleep", "600"}, 2);
    p.sample_interval = 10ms;
    auto [ec, r] = run_plan(f.ioc, std::move(p));

    BOOST_TEST(!ec);
    BOOST_TEST(r.status == sandbox::exec_status::exited);
    BOOST_TEST(r.exit_code == 0);
    // The two failures happened, and later good samples reset the count.
    const auto stats = sandbox::get_sampler_stats(f.ioc.get_executor());
    BOOST_TEST(stats.failed_samples == 2u);
    BOOST_TEST(stats.samples > 2u);
    BOOST_TEST(stats.unenforceable_kills == 0u);
}

BOOST_AUTO_TEST_CASE(an_idle_tree_is_sampled_less_often_unless_a_task_cap_needs_it)
{
    // A sleeping tree far from its caps: after the young ramp the waits grow past the 50 ms
    // interval, to 400 ms (about 11 samples in 2 s, against 44 at a steady 50 ms). Under a
    // task cap, which no bound covers, it stays at the interval.
    auto samples_of = [](sandbox::exec_options o) {
        sbx_test::local_fixture f;
        o.timeout = 20s;
        o.limits.memory_bytes = 64 * 1024 * mib; // far: 19 s to its 1.2x bound at 4 GiB/s
        auto [ec, r] = f.run(sbx_test::helper({"sleep", "2000"}, o));
        BOOST_TEST(!ec);
        BOOST_TEST(r.status == sandbox::exec_status::exited);
        return sandbox::get_sampler_stats(f.ioc.get_executor()).samples;
    };
    sandbox::exec_options idle;
    const auto quiet = samples_of(idle);
    sandbox::exec_options tasks;
    tasks.limits.max_tasks = 100;
    const auto steady = samples_of(tasks);
    BOOST_TEST_MESSAGE("samples in 2 s: idle " << quiet << ", under a task cap " << steady);
    BOOST_TEST(quiet >= 6u);
    BOOST_TEST(quiet <= 20u);
    BOOST_TEST(steady >= 30u);
}

BOOST_AUTO_TEST_CASE(threads_started_after_an_idle_wait_do_not_overrun_the_cpu_budget)
{
    // Idle, one task: the waits grow. Then two threads spin at once (threads pass no gate):
    // an idle wait is never longer than every cpu would take to use the rest of the budget,
    // so the sample after the burst finds at most the budget used. Measured before that
    // bound: up to 2x (a wait of 400 ms, two cpus). The bursts start 10, 90 and 170 ms after
    // a sample of 400 ms waits (the waits after the ramp: 2, 4, ..., 256 ms, then 400).
    for (const char* idle_ms : {"1320", "1400", "1480"})
    {
        BOOST_TEST_CONTEXT("idle for " << idle_ms << " ms")
        {
            sbx_test::local_fixture f;
            sandbox::exec_options o;
            o.timeout = 8s;
            o.limits.cpu_millicores = 50; // 400 ms of cpu
            auto [ec, r] = f.run(
                sbx_test::helper({"sleep", idle_ms, "--then", "spin-threads", "2", "5000"}, o));
            const std::string described = describe(r);
            BOOST_TEST_INFO(described);
            BOOST_TEST(ec == sandbox::errc::budget_exceeded);
            BOOST_TEST(r.budget == sandbox::budget_kind::cpu);
            BOOST_TEST(r.cpu_time >= std::chrono::nanoseconds(400ms));
            BOOST_TEST(r.cpu_time < std::chrono::nanoseconds(440ms));
        }
    }
}

// Runner options for a test of the sampler itself (the cgroup path off).
sandbox::local_runner_options sampler_path()
{
    sandbox::local_runner_options o;
    o.cgroup = "off";
    return o;
}

BOOST_AUTO_TEST_CASE(a_member_that_ignores_sigchld_is_sampled_fast_even_without_children)
{
    // Its children are reaped by the kernel: one forked just after a sample and gone before
    // the next would never be seen, so the tree is sampled every 2 ms while such a member
    // lives, child or not (about 300 samples in a second, against about 10 idle). Only on
    // the sampler path: on the cgroup path, cpu.stat counts such children without samples.
    sbx_test::local_fixture f(sampler_path());
    sandbox::exec_options o;
    o.timeout = 20s;
    o.limits.memory_bytes = 1024 * mib;
    auto [ec, r] = f.run(sbx_test::helper({"ignore-chld", "--then", "sleep", "1000"}, o));
    BOOST_TEST(!ec);
    const auto samples = sandbox::get_sampler_stats(f.ioc.get_executor()).samples;
    BOOST_TEST_MESSAGE("samples in 1 s: " << samples);
    BOOST_TEST(samples > 150u);
}

BOOST_AUTO_TEST_CASE(one_sampler_watches_many_trees)
{
    sbx_test::local_fixture f;
    constexpr std::size_t n = 5;
    std::array<sbx_test::run_outcome, n> outs{};
    std::size_t done = 0;
    for (std::size_t i = 0; i < n; ++i)
    {
        sandbox::exec_options o;
        o.limits.memory_bytes = 1024 * mib;
        o.timeout = 30s;
        // Long enough that all five are still running at the check below, even on a slow host.
        auto req = sbx_test::helper({"sleep", "1000"}, o);
        sandbox::async_exec(f.runner, std::move(req),
                            [&outs, &done, i](boost::system::error_code ec,
                                              sandbox::exec_result r) {
                                outs[i].ec = ec;
                                outs[i].result = std::move(r);
                                ++done;
                            });
    }
    std::size_t watched_while_running = 0;
    std::size_t done_at_check = n;
    boost::asio::steady_timer t(f.ioc, 150ms);
    t.async_wait([&](boost::system::error_code) {
        watched_while_running = sandbox::get_sampler_stats(f.ioc.get_executor()).watched_trees;
        done_at_check = done;
    });
    // Bounded, but returns as soon as the work runs out: the sampler must not keep the
    // io_context alive once the executions are over.
    f.ioc.run_for(30s);

    BOOST_TEST(f.ioc.stopped());
    BOOST_TEST(done == n);
    BOOST_TEST(done_at_check == 0u);
    BOOST_TEST(watched_while_running == n);
    for (const auto& out : outs)
    {
        BOOST_TEST(!out.ec);
        BOOST_TEST(out.result.exit_code == 0);
    }
    const auto stats = sandbox::get_sampler_stats(f.ioc.get_executor());
    BOOST_TEST(stats.watched_trees == 0u);
    BOOST_TEST(stats.samples > 0u);
}

BOOST_AUTO_TEST_CASE(no_caps_means_no_sampling)
{
    sbx_test::local_fixture f;
    auto req = sbx_test::helper({"sleep", "100"});
    auto [ec, r] = f.run(std::move(req));

    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 0);
    const auto stats = sandbox::get_sampler_stats(f.ioc.get_executor());
    BOOST_TEST(stats.samples == 0u);
    BOOST_TEST(stats.ticks == 0u);
    BOOST_TEST(stats.watched_trees == 0u);
}

BOOST_AUTO_TEST_CASE(two_threads_share_one_sampler)
{
    // One io_context run by two threads, one runner per strand: capped execs from both
    // strands share the context's sampler (its state is locked; no data race under TSan in
    // an ad-hoc run) and each completes with the right outcome.
    sbx_test::temp_dir root;
    boost::asio::io_context ioc;
    sandbox::local_runner_options ro;
    ro.root = root.str();
    ro.sample_interval = 5ms;
    ro.cgroup = sbx_test::cgroup_setting(); // as the fixtures: integration_sampled runs "off"
    sandbox::local_runner a(boost::asio::make_strand(ioc), ro), b(boost::asio::make_strand(ioc), ro);
    std::atomic<int> ok{0}, done{0};
    for (int i = 0; i < 16; ++i)
    {
        sandbox::exec_options o;
        o.limits.memory_bytes = 1 << 30;
        o.timeout = i % 2 ? 10s : 100ms;
        auto req = i % 2 ? sbx_test::helper({"sleep", "30", "--then", "print", "x"}, o)
                         : sbx_test::helper({"sleep", "60000"}, o);
        sandbox::async_exec(i % 4 < 2 ? a : b, std::move(req),
                            [&ok, &done, i](boost::system::error_code ec, sandbox::exec_result r) {
                                bool good = i % 2 ? (!ec && r.out.data == "x")
                                                  : ec == sandbox::errc::timeout;
                                ok += good ? 1 : 0;
                                ++done;
                            });
    }
    std::thread second([&] { ioc.run_for(30s); });
    ioc.run_for(30s);
    second.join();
    BOOST_TEST(done.load() == 16);
    BOOST_TEST(ok.load() == 16);
    BOOST_TEST(sandbox::get_sampler_stats(ioc.get_executor()).watched_trees == 0u);
    BOOST_TEST(sbx_test::helper_processes().empty());
}


// ---- cpu accounting: the reported cpu time against the same job run bare -------------------

namespace {

/// Runs `argv` as a plain child of this process and returns its RUSAGE cpu (user + system),
/// which covers every descendant as long as each was waited for by its parent.
std::chrono::nanoseconds bare_cpu(const std::vector<std::string>& argv)
{
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    BOOST_REQUIRE(::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) == 0);
    int status = 0;
    struct rusage ru{};
    BOOST_REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
    BOOST_REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    auto tv = [](const timeval& t) {
        return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
    };
    return tv(ru.ru_utime) + tv(ru.ru_stime);
}

/// A 3-level tree with a fixed amount of cpu work (each leaf burns its own cpu clock, so the
/// amount does not depend on the machine's load): sh → two targets → three children each.
std::vector<std::string> three_level_job()
{
    const std::string t = sbx_test::target;
    return {"/bin/sh", "-c",
            t + " cpu-stream 3 120 & " + t + " cpu-stream 3 120; wait"};
}

/// The children's cpu (user + system) that a shell's `times` printed last in `out`:
/// "<shell user> <shell sys>\n<children user> <children sys>\n", as 0m0.390000s.
std::chrono::nanoseconds shell_children_cpu(const std::string& out)
{
    std::istringstream in(out);
    std::string line, user, sys;
    std::vector<std::string> lines;
    while (std::getline(in, line))
        lines.push_back(line);
    BOOST_REQUIRE_MESSAGE(lines.size() >= 2, "times: " << out);
    std::istringstream last(lines.back());
    BOOST_REQUIRE_MESSAGE(static_cast<bool>(last >> user >> sys), "times: " << out);
    auto secs = [](const std::string& t) {
        auto m = t.find('m');
        return std::stod(t.substr(0, m)) * 60 + std::stod(t.substr(m + 1));
    };
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(secs(user) + secs(sys)));
}

/// Within `tolerance` (a fraction) of the bare figure, plus 15 ms for the exec and start-up
/// noise of a few processes.
void check_close(std::chrono::nanoseconds ours, std::chrono::nanoseconds bare,
                 double tolerance = 0.05)
{
    const double o = std::chrono::duration<double, std::milli>(ours).count();
    const double b = std::chrono::duration<double, std::milli>(bare).count();
    BOOST_TEST_MESSAGE("cpu: ours " << o << " ms, bare " << b << " ms");
    BOOST_TEST(std::abs(o - b) <= tolerance * b + 15.0,
               "ours " << o << " ms vs bare " << b << " ms");
}

} // namespace

BOOST_AUTO_TEST_CASE(cpu_time_of_a_three_level_tree_matches_a_bare_run)
{
    const auto job = three_level_job();
    const auto bare = bare_cpu(job);
    BOOST_TEST(bare >= std::chrono::nanoseconds(700ms)); // 6 × 120 ms of work, plus start-up

    for (bool sampled : {false, true})
    {
        BOOST_TEST_CONTEXT("sampled " << sampled)
        {
            sbx_test::local_fixture f;
            sandbox::exec_options o;
            o.timeout = 30s;
            if (sampled)
                o.limits.memory_bytes = 1024 * mib; // never trips; turns sampling on
            sandbox::exec_request req;
            req.command = job[0];
            req.args.assign(job.begin() + 1, job.end());
            req.options = o;
            auto [ec, r] = f.run(std::move(req));
            BOOST_TEST(!ec, describe(r));
            BOOST_TEST(r.exit_code == 0);
            check_close(r.cpu_time, bare);
        }
    }
}

/// Runs `job` through a local runner (unsampled, and sampled through a memory cap that never
/// trips) and compares its cpu time with bare runs of the same job: after a warm-up run,
/// `rounds` interleaved rounds, medians compared.
void check_job_cpu(const std::vector<std::string>& job, int rounds, double tolerance)
{
    bare_cpu(job); // warm-up
    std::vector<std::chrono::nanoseconds> bare, plain, sampled;
    for (int i = 0; i < rounds; ++i)
    {
        bare.push_back(bare_cpu(job));
        for (bool sample : {false, true})
        {
            sbx_test::local_fixture f;
            sandbox::exec_request req;
            req.command = job[0];
            req.args.assign(job.begin() + 1, job.end());
            req.options.timeout = 60s;
            if (sample)
                req.options.limits.memory_bytes = 4096 * mib;
            auto [ec, r] = f.run(std::move(req));
            BOOST_TEST(!ec, describe(r));
            BOOST_TEST(r.exit_code == 0, r.err.data);
            (sample ? sampled : plain).push_back(r.cpu_time);
        }
    }
    auto median = [](std::vector<std::chrono::nanoseconds> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    BOOST_TEST_CONTEXT("unsampled") { check_close(median(plain), median(bare), tolerance); }
    BOOST_TEST_CONTEXT("sampled") { check_close(median(sampled), median(bare), tolerance); }
}

BOOST_AUTO_TEST_CASE(cpu_time_of_many_short_waited_children_matches_its_own_rusage)
{
    // Twelve parents side by side, each waiting for 25 short children one after another,
    // sampled every 2 ms: many a child ends between the listing's read of its parent and its
    // own turn in the walk. Counting it as lost, or in the listing and in its parent's
    // children time at once, made the count 4-15 % high in about half of the runs (and once
    // 22 % in CI, in the three-level test above).
    const std::string t = sbx_test::target;
    std::string script;
    for (int i = 0; i < 12; ++i)
        script += t + " cpu-stream 25 3 & ";
    script += "wait; times";
    for (int round = 0; round < 3; ++round)
        BOOST_TEST_CONTEXT("run " << round)
        {
            sandbox::local_runner_options ro;
            ro.sample_interval = 2ms;
            sbx_test::local_fixture f(ro);
            sandbox::exec_request req;
            req.command = "/bin/sh";
            req.args = {"-c", script};
            req.options.timeout = 60s;
            req.options.limits.memory_bytes = 4096 * mib; // never trips; turns sampling on
            auto [ec, r] = f.run(std::move(req));
            BOOST_TEST_REQUIRE(!ec, describe(r));
            // Held to the same run's own rusage (the shell waited for every parent, each
            // parent for its children), not to a bare run taken at another moment: the
            // job's cpu drifts by more than the tolerance between moments on a busy host.
            check_close(r.cpu_time, shell_children_cpu(r.out.data));
        }
}

BOOST_AUTO_TEST_CASE(cpu_time_of_a_compiler_driver_matches_its_own_rusage)
{
    // g++ forks cc1plus and as and waits for them: a real build step. Its cpu time is
    // bimodal from run to run on this VM (about 400 or 600 ms), so each run is compared with
    // itself: the shell that ran it prints its children's times (`times`, 10 ms ticks).
    sbx_test::temp_dir dir;
    {
        std::ofstream src(dir.path() / "unit.cpp");
        src << "#include <map>\n#include <string>\n"
               "int count(const std::map<std::string, int>& m) { return (int)m.size(); }\n";
    }
    const std::string script = "/usr/bin/g++ -O2 -c " + (dir.path() / "unit.cpp").string() +
                               " -o " + (dir.path() / "unit.o").string() + " && times";
    for (bool sampled : {false, true})
    {
        BOOST_TEST_CONTEXT("sampled " << sampled)
        {
            sbx_test::local_fixture f;
            sandbox::exec_request req;
            req.command = "/bin/sh";
            req.args = {"-c", script};
            req.options.timeout = 60s;
            if (sampled)
                req.options.limits.memory_bytes = 4096 * mib;
            auto [ec, r] = f.run(std::move(req));
            BOOST_TEST_REQUIRE(!ec, describe(r));
            const auto inner = shell_children_cpu(r.out.data);
            BOOST_TEST(inner >= std::chrono::nanoseconds(100ms));
            // The 15 ms of check_close cover the shell itself and the 10 ms ticks.
            check_close(r.cpu_time, inner);
        }
    }
}

BOOST_AUTO_TEST_CASE(cpu_time_of_a_multithreaded_process_matches_a_bare_run)
{
    check_job_cpu({sbx_test::target, "spin-threads", "4", "200"}, 1, 0.05);
}

BOOST_AUTO_TEST_CASE(no_cpu_kill_before_the_budget_is_used)
{
    // The job's real cpu is measured bare in this very build (the sanitizers make it dearer),
    // then given a budget it uses about 90 % of: it must run to its end, its time counted.
    const std::vector<std::string> job{sbx_test::target, "cpu-stream", "3", "280"};
    bare_cpu(job); // warm-up
    const auto bare = bare_cpu(job);
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.timeout = 10s; // budget = 10 s × millicores / 1000
    o.limits.cpu_millicores = static_cast<std::int64_t>(
        std::ceil(std::chrono::duration<double>(bare).count() / 0.9 * 100.0));
    auto req = sbx_test::helper({"cpu-stream", "3", "280"}, o);
    auto [ec, r] = f.run(std::move(req));
    const std::string described = describe(r); // outlives the lazy info
    BOOST_TEST_INFO(described);
    BOOST_TEST_MESSAGE("bare " << bare.count() / 1'000'000 << " ms, budget "
                               << o.limits.cpu_millicores * 10 << " ms");
    BOOST_TEST(!ec);
    BOOST_TEST(r.status == sandbox::exec_status::exited);
    BOOST_TEST(r.cpu_time >= bare * 85 / 100);
}

/// Runs the test target with `job` under a memory cap that never trips (so the tree is
/// sampled, at the default interval) and checks its reported cpu time within 5 % of the bare
/// run of `bare_job` (whose rusage is exact); returns the samples taken. `job` has
/// `kernel_reaped` children that no rusage holds, whose time is what the sampler read when it
/// last saw them: each may have run unseen for as long as the sampler's longest gap before it
/// ended, which the lower bound allows besides the 5 % (under ASan on a loaded CI host 6 of
/// them lost 53 ms of 1,032; quiet, 4 lost 23 ms with a 4.4 ms gap).
std::uint64_t check_cpu_against_bare(const std::vector<std::string>& job,
                                     const std::vector<std::string>& bare_job, int kernel_reaped,
                                     sandbox::local_runner_options lo = {})
{
    std::vector<std::string> bare_argv{sbx_test::target};
    bare_argv.insert(bare_argv.end(), bare_job.begin(), bare_job.end());
    const auto bare = bare_cpu(bare_argv);
    sbx_test::local_fixture f(std::move(lo));
    sandbox::exec_options o;
    o.timeout = 30s;
    o.limits.memory_bytes = 1024 * mib;
    auto [ec, r] = f.run(sbx_test::helper(job, o));
    const std::string described = describe(r); // outlives the lazy info
    BOOST_TEST_INFO(described);
    BOOST_TEST(!ec);
    BOOST_TEST(r.exit_code == 0);
    const auto ms = [](std::chrono::nanoseconds d) {
        return std::chrono::duration<double, std::milli>(d).count();
    };
    const auto stats = sandbox::get_sampler_stats(f.ioc.get_executor());
    const double unseen = kernel_reaped * ms(stats.longest_sample_gap);
    BOOST_TEST_MESSAGE("cpu: ours " << ms(r.cpu_time) << " ms, bare " << ms(bare)
                                    << " ms, longest sample gap " << ms(stats.longest_sample_gap)
                                    << " ms");
    BOOST_TEST(stats.longest_sample_gap > std::chrono::nanoseconds(0));
    BOOST_TEST(ms(r.cpu_time) >= ms(bare) * 0.95 - unseen);
    BOOST_TEST(ms(r.cpu_time) <= ms(bare) * 1.05);
    return stats.samples;
}

BOOST_AUTO_TEST_CASE(cpu_time_of_kernel_reaped_children_is_counted_while_sampled)
{
    // The parent ignores SIGCHLD: its children's cpu reaches no rusage. The worker sees the
    // parent's ignored SIGCHLD in its stat and samples the tree every 2 ms (not the default
    // 50 ms) while it lives, and its ledger adds what each child had used when last seen:
    // each child can lose at most one short interval. The reference is the same job with
    // SIGCHLD at its default. (On the cgroup path cpu.stat counts those children whatever
    // the samples: the test of the sampler's ledger is on the sampler path.)
    const auto samples = check_cpu_against_bare({"ignore-chld", "--then", "cpu-stream", "4", "250"},
                                                {"cpu-stream", "4", "250"}, 4, sampler_path());
    // Sampled fast while the ignoring parent lived: about a second at 2 ms, far more than
    // the ~20 samples the default interval would take.
    BOOST_TEST(samples > 100u);
}

BOOST_AUTO_TEST_CASE(cpu_of_kernel_reaped_children_counts_when_their_parent_ends_with_them)
{
    // Each parent ignores SIGCHLD, and ends the moment its child does: no parent is left
    // whose children time could be compared. Before, the ledger called nothing lost and
    // 3.0 s of cpu was reported as 0.39 s; the reference is the same job with parents that
    // wait.
    check_cpu_against_bare({"parent-stream", "6", "150", "ignore"},
                           {"parent-stream", "6", "150", "wait"}, 6);
}

BOOST_AUTO_TEST_CASE(cpu_of_orphans_a_member_reaps_is_not_counted_twice)
{
    // The same parents, but each child outlives its parent by a moment and falls to a member
    // that made itself a subreaper, which waits for it: its time is in that member's
    // children time, not lost (a pid namespace's init does the same under bwrap). Counted as
    // lost as well, it made 300 ms of cpu 590. The last orphan's reaper may wait for it, and
    // end, after the last listing: then only our own children time shows it (709 ms for
    // 600 in 1 run of 12, until the ledger settled at the end: cpu_ledger::finish). How long each
    // orphan burns on depends on the host's load, so the run is held to its own rusage (the shell's
    // `times`), not to a bare run taken at another moment (at load 8: 867 ms against a quiet bare
    // 706 ms).
    const std::string script =
        std::string(sbx_test::target) + " orphan-stream 6 100 >/dev/null && times";
    sbx_test::local_fixture f;
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", script};
    req.options.timeout = 30s;
    req.options.limits.memory_bytes = 1024 * mib; // sampled: the ledger is what is tested
    auto [ec, r] = f.run(std::move(req));
    BOOST_TEST_REQUIRE(!ec, describe(r));
    const auto inner = shell_children_cpu(r.out.data);
    // 6 orphans × 100 ms at least, as `times` shows it: user and system time each in whole
    // 10 ms ticks rounded down, so up to 2 ticks short (590 ms in 7 of 25 runs here).
    BOOST_TEST(inner >= std::chrono::nanoseconds(580ms));
    check_close(r.cpu_time, inner);
}

/// How far past its cap a fast allocator may get. The helper aims at 1.2x, but it can only
/// look when it gets a cpu, and here the allocating threads fill both cores: in isolation 60
/// runs of two allocating threads reached at most 1.19x, inside a full ctest run one reached
/// 1.28x. The check is 1.35x (without the reach-time pacing: 2.3x, so it still catches that);
/// a sanitized helper is several times slower to list, judge and kill (1.29x in isolation),
/// so that build is held to 1.5x. The hard bound is the memory controller's (cgroup path).
#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t overshoot_bound_percent = 150;
#else
constexpr std::uint64_t overshoot_bound_percent = 135;
#endif

/// Runs the test target with `args` under a 128 MiB memory cap and checks that the cap
/// kills it before the bound above: its peak is the kernel's own high-water mark of the
/// leader (ru_maxrss), not a sample.
void check_killed_below_the_bound(const std::vector<std::string>& args)
{
    sbx_test::local_fixture f;
    sandbox::exec_options o;
    o.limits.memory_bytes = 128 * mib;
    o.timeout = 30s;
    auto [ec, r] = f.run(sbx_test::helper(args, o));
    const std::string described = describe(r); // outlives the lazy info
    BOOST_TEST_INFO(described);
    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::memory);
    BOOST_TEST(r.peak_memory_bytes >= static_cast<std::uint64_t>(128 * mib));
    BOOST_TEST(r.peak_memory_bytes <
               static_cast<std::uint64_t>(128 * mib) * overshoot_bound_percent / 100);
}

BOOST_AUTO_TEST_CASE(memory_overshoot_of_a_fast_allocator_is_bounded)
{
    // The allocator starts after the young-tree samples, at full speed: the sampler looks
    // again before the tree could pass 1.2x the cap (without that bound: up to 1.39x).
    check_killed_below_the_bound({"sleep", "300", "--then", "alloc", "4096", "0"});
}

BOOST_AUTO_TEST_CASE(memory_overshoot_of_threads_allocating_at_once_is_bounded)
{
    // Two threads fault memory in twice as fast as one (without the bound: 2.3x measured).
    // Their process's private memory alone settles the sample that sees the RSS sum at the
    // cap: the PSS read waited behind the faulting threads' memory-map lock (1.30x seen).
    for (int round = 0; round < 3; ++round)
        check_killed_below_the_bound({"sleep", "300", "--then", "alloc-threads", "2", "2048"});
}

BOOST_AUTO_TEST_CASE(a_member_that_holds_up_the_pss_read_holds_up_nothing)
{
    // 100 MiB shared with a child: the RSS sum (200 MiB) reaches the 150 MiB cap, the PSS
    // (100 MiB) would not. But a thread keeps the memory-map lock taken for seconds and
    // another keeps asking for it, so the PSS read waits behind them. Read on the worker's
    // loop it held the whole worker up (no timeout, no gate, no sample; then the PSS passed);
    // now the read is late once held up for 100 ms and the tree is judged by its RSS sum.
    sbx_test::local_fixture f;
    const auto pidfile = f.root.path() / "pids";
    sandbox::exec_options o;
    o.env.inject["SBX_PIDFILE"] = pidfile.string();
    o.limits.memory_bytes = 150 * mib;
    o.timeout = 20s;
    auto [ec, r] = f.run(sbx_test::helper({"map-stall", "100", "64"}, o));
    const std::string described = describe(r);
    BOOST_TEST_INFO(described);
    BOOST_TEST(ec == sandbox::errc::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::memory);
    // Which rule ends it is a race, so it is not checked: the late PSS read that leaves the
    // RSS sum to judge ("judged by the RSS sum" in the diagnostic, most runs), or the rule
    // that settles a tree on one member's private memory without any PSS read (about 1 run
    // in 4 here in isolation, and under ASan, whose shadow and quarantine inflate it). What
    // the test is about holds either way: the stall lasts seconds, and the tree is killed
    // at the cap in under 2 s and is gone.
    // Judged by the RSS sum, which counts the shared 100 MiB twice: it reached the cap while
    // the PSS (about 100 MiB) could not. How far past the cap it got before the sample that
    // saw it depends on when that sample ran (175 MiB in one CI run, up to 200): at the cap
    // is what holds.
    BOOST_TEST(r.diag.observed >= 150 * mib);
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(r.wall_time).count() < 2000);
    BOOST_TEST(sbx_test::wait_gone(sbx_test::read_pids(pidfile), 5000ms));
}

BOOST_AUTO_TEST_CASE(a_slow_pss_read_of_a_tree_that_shares_memory_is_waited_for)
{
    // Twelve processes sharing 64 MiB: an RSS sum of 768 MiB, a footprint of about 70 MiB,
    // under a 300 MiB cap. Every sample reads the PSS, a pass of 7-25 ms here; a 20 ms
    // deadline made some of them late and killed the tree for its RSS sum. A pass that works
    // is waited for.
    for (int round = 0; round < 3; ++round)
    {
        sbx_test::local_fixture f;
        sandbox::exec_options o;
        o.limits.memory_bytes = 300 * mib;
        o.timeout = 20s;
        auto [ec, r] = f.run(sbx_test::helper({"share-children", "11", "64", "1500"}, o));
        const std::string described = describe(r);
        BOOST_TEST_INFO(described);
        BOOST_TEST(!ec);
        BOOST_TEST(r.status == sandbox::exec_status::exited);
        BOOST_TEST(r.peak_memory_bytes < static_cast<std::uint64_t>(300 * mib));
    }
}

BOOST_AUTO_TEST_CASE(memory_cap_judges_shared_pages_once)
{
    // 40 `sleep` processes share their libc and binary pages: their RSS sum is several
    // times their proportional footprint (PSS). A cap between the two must let them run;
    // a cap below the footprint must still fire.
    const std::vector<std::string> args{
        "-c", "i=0; while [ $i -lt 40 ]; do /bin/sleep 1 & i=$((i+1)); done; wait"};
    for (std::int64_t cap_mib : {16, 1})
    {
        BOOST_TEST_CONTEXT("cap " << cap_mib << " MiB")
        {
            sandbox::local_runner_options ro;
            ro.sample_interval = 20ms;
            sbx_test::local_fixture f(ro);
            sandbox::exec_request req;
            req.command = "/bin/sh";
            req.args = args;
            req.options.timeout = 30s;
            req.options.limits.memory_bytes = cap_mib * mib;
            auto [ec, r] = f.run(std::move(req));
            const std::string described_7 = describe(r); // outlives the lazy info
            BOOST_TEST_INFO(described_7);
            if (cap_mib == 16)
            {
                BOOST_TEST(!ec);
                BOOST_TEST(r.status == sandbox::exec_status::exited);
                BOOST_TEST(r.peak_memory_bytes < static_cast<std::uint64_t>(16 * mib));
            }
            else
            {
                BOOST_TEST(ec == sandbox::errc::budget_exceeded);
                BOOST_TEST(r.budget == sandbox::budget_kind::memory);
            }
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
