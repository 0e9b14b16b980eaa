// bench/exec_bench.cpp: the library against a raw floor, side by side in one run.
//
// Cases (each prints a table and one JSON line per figure; ratio = value / baseline):
//   seq_true               sequential /bin/true, stdout+stderr captured: median and p99 us
//   seq_true_bwrap         the same inside bwrap, against the local backend: median us
//   seq_true_instance      sequential /bin/true in one bwrap instance (opened once, not
//                          timed), against the raw floor of seq_true: median us
//   conc64_true_instance   the same with 64 in flight, against the raw concurrent floor
//   seq_true_bwrap_pool    one-shot /bin/true on a bwrap runner with warm = 2, each call
//                          started with a warm sandbox ready (the wait for its replacement
//                          not timed), against the raw floor of seq_true; and back to back
//                          (the replacements open while the calls run), against cold
//                          bwrap execs: median us
//   workload_instance      a git + build sequence (8 commands: git status, add, commit, cc,
//                          the program, git log, ls) in one instance, its open included,
//                          against the same commands as cold bwrap execs: ms per sequence
//   seq_true_chain         the same through the policy chain (defaults, approval whose
//                          predicates do not match, command gate), against the bare local
//                          runner: median us
//   proc_cap               the same request under a task cap (sampler only) and with
//                          max_processes too (the fork gate): /bin/true, a shell forking 100
//                          /bin/true far from the cap, and at a cap of 2: median us
//   conc64_true            /bin/true with 64 in flight on one thread: execs/s
//   seq_true_cgroup, conc64_true_cgroup   the same two on the cgroup path (each tree in a
//                          cgroup of its own: clone3 into it, cgroup.kill, cpu.stat), against
//                          the same raw floor (every other case runs with the cgroup off)
//   out512_discard         `head -c 512MiB /dev/zero`, max_output_bytes = 1: MB/s
//   out512_cap1m           the same with a 1 MiB cap: MB/s, and peak RSS of the process
//   sampler_1tree_10ms     one capped `sleep 6` sampled every 10 ms: our CPU vs fork-ps
//   sampler_100trees_50ms  100 capped `sleep 8` at the default 50 ms: CPU per tree-sample
//   sampler_1tree_reaper   one tree whose parent ignores SIGCHLD while its child lives (the
//                          sampler's 2 ms fast mode) against the same tree without: CPU %
//   idle_workers           after a burst with 64 in flight, the supervisor workers still
//                          alive and their PSS once the pool's retire time passed (keep 4),
//                          against a pool that never retires; and the burst's rate with the
//                          default pool (the retire claim per returned worker) against it
//
// Floors and ours alternate within each round; figures are medians over rounds. The
// out512 "ours" runs each happen in a fresh process of this program (hidden flag
// `--child-case NAME --bytes B`), so that its VmHWM is the peak of that case alone.
//
// Exit status: 0 when every run was correct (targets missed are reported, not fatal),
// 1 when a result was wrong (lost bytes, a failed exec, a sampler that did not sample, a
// leftover child), 2 on a floor syscall failure, 64 on a usage error.
#include "bwrap_args.hpp"
#include "common.hpp"
#include "raw_floor.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/instance.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/policy.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/sampler.hpp>
#include <sandbox/worker_pool.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/session.hpp>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using raw_floor::command;

constexpr std::uint64_t mib = 1024 * 1024;

// ---------------------------------------------------------------- configuration

struct config
{
    bool quick = false;
    int n = 2000;
    int rounds = 3;
    std::uint64_t out_bytes = 512 * mib;
    double window_s = 5.0;
    std::set<std::string> cases;

    bool want(const std::string& name) const { return cases.empty() || cases.count(name) > 0; }
};

const char* const all_cases[] = {"seq_true",
                                 "conc64_true",
                                 "seq_true_cgroup",
                                 "conc64_true_cgroup",
                                 "out512_discard",
                                 "out512_cap1m",
                                 "sampler_1tree_10ms",
                                 "sampler_100trees_50ms",
                                 "seq_true_bwrap",
                                 "seq_true_chain",
                                 "proc_cap",
                                 "sampler_1tree_reaper",
                                 "idle_workers",
                                 "seq_true_instance",
                                 "seq_true_bwrap_pool",
                                 "conc64_true_instance",
                                 "workload_instance"};

[[noreturn]] void fail(const std::string& what)
{
    std::fflush(stdout);
    std::fprintf(stderr, "exec_bench: FAILED: %s\n", what.c_str());
    std::exit(1);
}

// ---------------------------------------------------------------- statistics

using bench::percentile;

using bench::median;

double seconds_since(clock_type::time_point t0)
{
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// ---------------------------------------------------------------- reporting

std::string fmt_value(double v)
{
    char b[64];
    std::snprintf(b, sizeof b, std::fabs(v) >= 100 ? "%.1f" : "%.4g", v);
    return b;
}

std::string fmt_ratio(double v)
{
    char b[64];
    std::snprintf(b, sizeof b, "%.4g", v);
    return b;
}

std::string range_text(const std::vector<double>& v)
{
    if (v.empty())
        return "-";
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    return fmt_value(*lo) + ".." + fmt_value(*hi);
}

struct figure
{
    std::string json_case;
    std::string label;
    std::string unit;
    double value = 0;    // ours
    double baseline = 0; // floor / reference
    const char* better = "lower";
    std::string target{}; // human text, empty when none
    std::optional<bool> pass{};
    bench::rounds rounds{}; // ours and the baseline of each round

    double ratio() const { return baseline != 0 ? value / baseline : 0; }
};

std::vector<std::string> g_missed;

void print_block(const std::string& title, const std::string& base_name,
                 const std::vector<figure>& figs, const std::vector<std::string>& notes)
{
    std::printf("\n== %s\n", title.c_str());
    std::printf("   %-28s %-10s %12s %12s %9s  %-7s %-22s %s\n", "figure", "unit", "ours",
                base_name.c_str(), "ratio", "better", "target", "verdict");
    for (const auto& f : figs)
    {
        const char* verdict = !f.pass ? "-" : *f.pass ? "PASS" : "MISS";
        std::printf("   %-28s %-10s %12s %12s %9s  %-7s %-22s %s\n", f.label.c_str(),
                    f.unit.c_str(), fmt_value(f.value).c_str(), fmt_value(f.baseline).c_str(),
                    fmt_ratio(f.ratio()).c_str(), f.better,
                    f.target.empty() ? "-" : f.target.c_str(), verdict);
        if (f.pass && !*f.pass)
            g_missed.push_back(f.json_case + " (" + f.target + ")");
    }
    for (const auto& f : figs)
        if (f.rounds.ours.size() > 1 || f.rounds.base.size() > 1)
            std::printf("   rounds %-21s ours %s | %s %s\n", f.label.c_str(),
                        range_text(f.rounds.ours).c_str(), base_name.c_str(),
                        range_text(f.rounds.base).c_str());
    for (const auto& n : notes)
        std::printf("   %s\n", n.c_str());
    for (const auto& f : figs)
        bench::print_json("exec_bench", f.json_case, f.value, f.unit, f.baseline);
    std::fflush(stdout);
}

// ---------------------------------------------------------------- machine facts


// ---------------------------------------------------------------- our library

sandbox::exec_request make_request(std::string cmd, std::vector<std::string> args)
{
    sandbox::exec_request r;
    r.command = std::move(cmd);
    r.args = std::move(args);
    r.options.env.allow = raw_floor::env_allow_names(); // the same env the floor passes
    return r;
}

void check_exited(const boost::system::error_code& ec, const sandbox::exec_result& r,
                  const char* what)
{
    if (ec || r.status != sandbox::exec_status::exited || r.exit_code != 0)
        fail(std::string(what) + ": " + (ec ? ec.message() : "no error code") + "; status " +
             sandbox::to_string(r.status) + ", exit " + std::to_string(r.exit_code) + ": " +
             r.diag.message);
}

// The sampler path ("off") unless a case asks for the cgroup path ("auto").
sandbox::local_runner_options runner_options(std::chrono::nanoseconds interval,
                                             const std::string& cgroup = "off")
{
    sandbox::local_runner_options o;
    o.root = "/";
    o.sample_interval = interval;
    o.cgroup = cgroup;
    return o;
}

// Why the cgroup path is not used here (empty: it is).
std::string cgroup_path_missing()
{
    asio::io_context ioc;
    sandbox::local_runner r(ioc.get_executor(), runner_options(sandbox::default_sample_interval,
                                                               "auto"));
    const auto e = r.enforcement();
    if (e.tree_kill_by == "cgroup")
        return {};
    return e.cgroup_notes.empty() ? "not used" : e.cgroup_notes.front();
}

// A chain: each completion handler starts the next exec. Per-exec microseconds.
std::vector<double> sequential_on(asio::io_context& ioc, sandbox::runner& runner,
                                  const sandbox::exec_request& proto, int n);

std::vector<double> ours_sequential(const sandbox::exec_request& proto, int n,
                                    const std::string& cgroup = "off")
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(),
                                 runner_options(sandbox::default_sample_interval, cgroup));
    return sequential_on(ioc, runner, proto, n);
}

// Two execs taken in turn on one io_context, exec by exec, so host drift falls on both
// alike: `a` on `ra`, then `b` on `rb`, n times each. Per-exec microseconds: {a, b}.
std::pair<std::vector<double>, std::vector<double>> alternating_on(
    asio::io_context& ioc, sandbox::runner& ra, const sandbox::exec_request& a,
    sandbox::runner& rb, const sandbox::exec_request& b, int n, const char* what)
{
    std::vector<double> ta, tb;
    ta.reserve(static_cast<std::size_t>(n));
    tb.reserve(static_cast<std::size_t>(n));
    std::function<void()> next = [&] {
        const bool second = ta.size() > tb.size();
        auto& out = second ? tb : ta;
        auto t0 = clock_type::now();
        sandbox::async_exec(second ? rb : ra, second ? b : a,
                            [&, t0](boost::system::error_code ec, sandbox::exec_result r) {
                                out.push_back(seconds_since(t0) * 1e6);
                                check_exited(ec, r, what);
                                if (static_cast<int>(tb.size()) < n)
                                    next();
                            });
    };
    next();
    ioc.run();
    return {std::move(ta), std::move(tb)};
}

// The local runner and the whole policy chain over another local runner (defaults that
// merge, three approval predicates that do not match /bin/true, the command gate), in
// turn. Per-exec microseconds: {bare, chain}.
std::pair<std::vector<double>, std::vector<double>> chain_alternating(
    const sandbox::exec_request& proto, int n)
{
    asio::io_context ioc;
    sandbox::local_runner bare(ioc.get_executor(), runner_options(sandbox::default_sample_interval));
    sandbox::local_policy p;
    p.defaults.timeout = std::chrono::minutes(10);
    p.defaults.env.inject = {{"SANDBOX_CHAIN", "1"}};
    p.defaults.limits.max_processes = 1024;
    p.allowed_commands = std::vector<std::string>{"/bin/true"};
    p.approval.predicates = {sandbox::command_patterns({"rm", "mkfs*", "dd"}),
                             sandbox::net_non_default(), sandbox::work_dir_outside_root("/")};
    auto chain = sandbox::compose_local(
        std::make_unique<sandbox::local_runner>(ioc.get_executor(),
                                                runner_options(sandbox::default_sample_interval)),
        std::move(p));
    return alternating_on(ioc, bare, proto, *chain, proto, n, "seq_true_chain /bin/true");
}

// The same request under a task cap (the sampler alone) and under a process cap (the
// sampler and the fork gate: a seccomp filter installed at the start, a worker round trip
// per fork), on one local runner, in turn: what the gate adds.
std::pair<std::vector<double>, std::vector<double>> proc_cap_alternating(
    const sandbox::exec_request& proto, std::uint64_t cap, int n)
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(),
                                 runner_options(sandbox::default_sample_interval));
    auto sampled = proto, gated = proto;
    sampled.options.limits.max_tasks = 4096;
    gated.options.limits.max_tasks = 4096;
    gated.options.limits.max_processes = cap;
    return alternating_on(ioc, runner, sampled, runner, gated, n, "proc_cap");
}

// The same chain on the bwrap backend (root /tmp: the bench writes nothing).
// The bwrap benchmark's root: under /var/tmp (the sandbox's /tmp is its own), holding every
// built-in write-deny path (as directories, but .git/config: the bench runs no git), so the
// read-only binds name the same existing paths on every run, the bare command line included
// (a stand-in for a missing one would be gone once the session that showed the line ends).
const std::string& bwrap_root()
{
    static const std::string root = [] {
        std::string dir = "/var/tmp/sbx-exec-bench-" + std::to_string(::getpid());
        std::string cmd = "mkdir -p " + dir + "/.git && touch " + dir + "/.git/config";
        for (const auto& e : sandbox::bwrap::default_write_deny())
            if (e.relative != ".git/config")
                cmd += " && mkdir -p " + dir + "/" + e.relative;
        // A root caller's commands run as the sandbox user, which must own the root.
        if (::geteuid() == 0)
            cmd += " && { chown -R nobody:nogroup " + dir + " 2>/dev/null || chown -R 65534:65534 " +
                   dir + "; }";
        if (std::system(cmd.c_str()) != 0)
            fail("cannot make the bwrap benchmark root " + dir);
        // Removed at exit by a copy: the static string itself is gone by then.
        static std::string remove = "rm -rf " + dir;
        std::atexit([] { (void)std::system(remove.c_str()); });
        return dir;
    }();
    return root;
}

sandbox::bwrap_runner_options bwrap_options()
{
    sandbox::bwrap_runner_options o;
    o.root = bwrap_root();
    return o;
}

std::vector<double> bwrap_sequential(const sandbox::exec_request& proto, int n)
{
    asio::io_context ioc;
    sandbox::bwrap_runner runner(ioc.get_executor(), bwrap_options());
    return sequential_on(ioc, runner, proto, n);
}

// `body(ioc, instance)` in a bwrap instance opened before it (not timed) and closed after.
// The body runs the loop itself until its work is done (the open instance keeps the loop
// busy: ioc.run() would not return).
template <class Body> auto in_instance(Body body)
{
    asio::io_context ioc;
    sandbox::bwrap_runner runner(ioc.get_executor(), bwrap_options());
    std::shared_ptr<sandbox::instance> inst;
    asio::co_spawn(ioc, runner.open({}),
                   [&](std::exception_ptr e, std::shared_ptr<sandbox::instance> i) {
                       if (e)
                           fail("cannot open a bwrap instance");
                       inst = std::move(i);
                   });
    while (!inst && ioc.run_one() > 0)
    {}
    auto out = body(ioc, *inst);
    asio::co_spawn(ioc, inst->close(), [&](std::exception_ptr) { inst.reset(); });
    ioc.run();
    return out;
}

// `n` execs of `proto` in an instance with `inflight` at a time: each one's microseconds
// (sequential), and the wall seconds of all.
std::pair<std::vector<double>, double> instance_runs(const sandbox::exec_request& proto, int n,
                                                     int inflight)
{
    return in_instance([&](asio::io_context& ioc, sandbox::instance& inst) {
        std::vector<double> us;
        us.reserve(static_cast<std::size_t>(n));
        int launched = 0;
        std::function<void()> start = [&] {
            if (launched >= n)
                return;
            ++launched;
            auto t0 = clock_type::now();
            sandbox::async_exec(inst, proto,
                                [&, t0](boost::system::error_code ec, sandbox::exec_result r) {
                                    us.push_back(seconds_since(t0) * 1e6);
                                    check_exited(ec, r, "ours /bin/true in an instance");
                                    start();
                                });
        };
        const auto t0 = clock_type::now();
        for (int i = 0; i < inflight; ++i)
            start();
        while (static_cast<int>(us.size()) < n && ioc.run_one() > 0)
        {}
        return std::pair{us, seconds_since(t0)};
    });
}

// `n` one-shot execs of `proto` on a bwrap runner with a warm pool of 2: each one's
// microseconds. With `ready`, each call starts once both warm sandboxes are ready (the wait
// is not timed); without, back to back. The pool keeps the loop busy until the runner goes.
std::vector<double> pool_runs(const sandbox::exec_request& proto, int n, bool ready)
{
    asio::io_context ioc;
    auto o = bwrap_options();
    o.warm = 2;
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(n));
    {
        sandbox::bwrap_runner runner(ioc.get_executor(), o);
        bool done = false;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                (void)co_await runner.check(); // bwrap known to work: the pool fills
                asio::steady_timer t(ioc);
                for (int i = 0; i < n; ++i)
                {
                    for (int w = 0; w < 20000 && (i == 0 || ready) && runner.warm_ready() < 2; ++w)
                    {
                        t.expires_after(std::chrono::microseconds(500));
                        co_await t.async_wait(asio::use_awaitable);
                    }
                    auto t0 = clock_type::now();
                    auto [ec, r] = co_await sandbox::async_exec(
                        runner, proto, asio::as_tuple(asio::use_awaitable));
                    us.push_back(seconds_since(t0) * 1e6);
                    check_exited(ec, r, "ours one-shot /bin/true from a warm pool");
                }
                done = true;
            },
            [](std::exception_ptr e) {
                if (e)
                    fail("the warm pool's calls failed");
            });
        while (!done && ioc.run_one() > 0)
        {}
    }
    ioc.run(); // the runner's end killed its warm sandboxes: their ends complete
    return us;
}

// The runner's own bwrap command line for `/bin/true`, read from /proc while a session of
// it runs, made bare: bwrap's own init instead of ours, `/bin/true` at once.
std::vector<std::string> bare_bwrap_line()
{
    asio::io_context ioc;
    sandbox::bwrap_runner runner(ioc.get_executor(), bwrap_options());
    std::string cmdline;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            sandbox::session_spec spec;
            spec.command = "/bin/sh";
            spec.args = {"-c", "echo ready; read x"};
            auto s = co_await runner.sessions()->start(spec);
            // Once the command inside writes, bwrap's exec is long complete (right after the
            // spawn, its command line may not be set up yet).
            (void)co_await s->read(0, 64);
            std::ifstream f("/proc/" + std::to_string(s->pid()) + "/cmdline");
            cmdline.assign(std::istreambuf_iterator<char>(f), {});
            co_await s->close();
        },
        [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        });
    ioc.run();
    std::vector<std::string> a;
    for (std::size_t start = 0; start < cmdline.size();)
    {
        std::size_t end = cmdline.find('\0', start);
        a.push_back(cmdline.substr(start, end - start));
        start = end == std::string::npos ? cmdline.size() : end + 1;
    }
    auto init = std::find(a.begin(), a.end(), "/proc/self/fd/4");
    if (a.empty() || init == a.end() || init == a.begin() || *(init - 1) != "--")
        fail("cannot read the bwrap command line of a session: " + cmdline);
    a.erase(init, a.end());
    a.push_back("/bin/true");
    a.erase(std::remove(a.begin(), a.end(), "--as-pid-1"), a.end());
    a.front() = "/usr/bin/bwrap";
    return a;
}

std::vector<double> sequential_on(asio::io_context& ioc, sandbox::runner& runner,
                                  const sandbox::exec_request& proto, int n)
{
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(n));
    std::function<void()> next = [&] {
        auto t0 = clock_type::now();
        sandbox::async_exec(runner, proto,
                            [&, t0](boost::system::error_code ec, sandbox::exec_result r) {
                                us.push_back(seconds_since(t0) * 1e6);
                                check_exited(ec, r, "ours sequential /bin/true");
                                if (static_cast<int>(us.size()) < n)
                                    next();
                            });
    };
    next();
    ioc.run();
    return us;
}

// `inflight` chains on one io_context run by this thread. Wall seconds for all `n`.
double ours_concurrent(const sandbox::exec_request& proto, int n, int inflight,
                       const std::string& cgroup = "off")
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(),
                                 runner_options(sandbox::default_sample_interval, cgroup));
    int launched = 0, done = 0;
    std::function<void()> start = [&] {
        if (launched >= n)
            return;
        ++launched;
        sandbox::async_exec(runner, proto,
                            [&](boost::system::error_code ec, sandbox::exec_result r) {
                                check_exited(ec, r, "ours conc64_true");
                                ++done;
                                start();
                            });
    };
    auto t0 = clock_type::now();
    for (int i = 0; i < inflight; ++i)
        start();
    ioc.run();
    double wall = seconds_since(t0);
    if (done != n)
        fail("ours conc64_true: " + std::to_string(done) + " of " + std::to_string(n) + " done");
    return wall;
}

std::uint64_t vm_hwm_kb()
{
    std::ifstream st("/proc/self/status");
    for (std::string line; std::getline(st, line);)
        if (line.rfind("VmHWM:", 0) == 0)
            return std::strtoull(line.c_str() + 6, nullptr, 10);
    return 0;
}

std::uint64_t cap_of(const std::string& child_case)
{
    return child_case == "out512_discard" ? 1 : mib;
}

// Hidden mode: one `ours` run of an out512 case in this fresh process; one line on stdout.
int run_child_case(const std::string& name, std::uint64_t bytes)
{
    if (name != "out512_discard" && name != "out512_cap1m")
    {
        std::printf("error=unknown-child-case\n");
        return 64;
    }
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(), runner_options(sandbox::default_sample_interval));
    auto req = make_request("/usr/bin/head", {"-c", std::to_string(bytes), "/dev/zero"});
    req.options.limits.max_output_bytes = static_cast<std::int64_t>(cap_of(name));
    boost::system::error_code ec;
    sandbox::exec_result res;
    double wall = 0;
    auto t0 = clock_type::now();
    sandbox::async_exec(runner, std::move(req),
                        [&](boost::system::error_code e, sandbox::exec_result r) {
                            wall = seconds_since(t0);
                            ec = e;
                            res = std::move(r);
                        });
    ioc.run();
    std::printf("case=%s wall_s=%.9f kept=%zu dropped=%" PRIu64 " err_bytes=%" PRIu64
                " status=%s exit=%d vmhwm_kb=%" PRIu64 " ec=%d\n",
                name.c_str(), wall, res.out.data.size(), res.out.dropped_bytes,
                res.err.total_bytes(), sandbox::to_string(res.status), res.exit_code,
                vm_hwm_kb(), ec.value());
    return ec ? 1 : 0;
}

struct child_figures
{
    double wall_s = 0;
    std::uint64_t kept = 0, dropped = 0, err_bytes = 0, vmhwm_kb = 0;
};

child_figures ours_out_in_child(const std::string& name, std::uint64_t bytes)
{
    command cmd({"/proc/self/exe", "--child-case", name, "--bytes", std::to_string(bytes)});
    int status = 0;
    std::string err;
    std::string line = raw_floor::run_and_read(cmd, status, &err);
    std::map<std::string, std::string> kv;
    std::istringstream in(line);
    for (std::string tok; in >> tok;)
        if (auto p = tok.find('='); p != std::string::npos)
            kv[tok.substr(0, p)] = tok.substr(p + 1);
    if (!raw_floor::exited_ok(status) || kv["status"] != "exited" || kv["exit"] != "0")
        fail("ours " + name + " (child process, status " + std::to_string(status) + "): " + line +
             err);
    child_figures f;
    f.wall_s = std::strtod(kv["wall_s"].c_str(), nullptr);
    f.kept = std::strtoull(kv["kept"].c_str(), nullptr, 10);
    f.dropped = std::strtoull(kv["dropped"].c_str(), nullptr, 10);
    f.err_bytes = std::strtoull(kv["err_bytes"].c_str(), nullptr, 10);
    f.vmhwm_kb = std::strtoull(kv["vmhwm_kb"].c_str(), nullptr, 10);
    const std::uint64_t cap = cap_of(name);
    if (f.kept != cap || f.dropped != bytes - cap || f.err_bytes != 0)
        fail("ours " + name + ": kept " + std::to_string(f.kept) + " (want " +
             std::to_string(cap) + "), dropped " + std::to_string(f.dropped) + " (want " +
             std::to_string(bytes - cap) + "), stderr bytes " + std::to_string(f.err_bytes));
    if (f.wall_s <= 0)
        fail("ours " + name + ": no wall time in '" + line + "'");
    return f;
}


void check_no_children(const char* what)
{
    auto kids = bench::my_children();
    if (!kids.empty())
        fail(std::string(what) + ": " + std::to_string(kids.size()) +
             " child process(es) left after the case, first pid " + std::to_string(kids[0]));
}

struct sampler_run
{
    double cpu_ms = 0;
    double wall_s = 0;
    std::uint64_t ticks = 0, samples = 0, failed = 0;
    std::size_t watched = 0;
};

// CPU ms used so far by `pid` itself (utime + stime), 0 when it cannot be read.
// The cpu time of every thread of `pid` in ms, exact (schedstat's nanoseconds): `stat`'s
// utime + stime are whole clock ticks, and a worker that samples for 30 us at a time rounds
// to none of them (100 workers over 5 s read as 6 ms).
double proc_cpu_ms(pid_t pid)
{
    double total = 0;
    const std::string task_dir = "/proc/" + std::to_string(pid) + "/task";
    DIR* d = ::opendir(task_dir.c_str());
    if (!d)
        return 0;
    while (dirent* e = ::readdir(d))
    {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        std::ifstream st(task_dir + "/" + e->d_name + "/schedstat");
        unsigned long long ns = 0;
        if (st >> ns)
            total += static_cast<double>(ns) / 1e6;
    }
    ::closedir(d);
    return total;
}

double supervision_cpu_ms()
{
    double total = raw_floor::cpu_ms(RUSAGE_SELF);
    for (pid_t helper : bench::my_children())
    {
        total += proc_cpu_ms(helper);
        std::ifstream kids("/proc/" + std::to_string(helper) + "/task/" + std::to_string(helper) +
                           "/children");
        pid_t w;
        while (kids >> w)
            total += proc_cpu_ms(w);
    }
    return total;
}

// `trees` capped `sleep SECS` watched by their workers' samplers; CPU of this process, the
// helper and the workers over the window. Every tree is then cancelled (terminal: the worker
// SIGKILLs and reaps it); the samples come with the workers' reports.
// `steady`: with a task cap too (one that never trips), under which an idle tree is still
// sampled at the interval (without it the sampler lets an idle tree wait up to 8x longer).
sampler_run ours_sampler(int trees, sandbox::exec_request req, std::chrono::nanoseconds interval,
                         std::chrono::nanoseconds window, bool steady = true)
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(), runner_options(interval));
    const asio::any_io_executor ex = ioc.get_executor();
    req.options.limits.memory_bytes = 1LL << 30; // 1 GiB: never trips
    if (steady)
        req.options.limits.max_tasks = 1 << 20;
    std::vector<asio::cancellation_signal> sigs(static_cast<std::size_t>(trees));
    int done = 0;
    std::string bad;
    for (auto& sig : sigs)
        sandbox::async_exec(runner, req,
                            asio::bind_cancellation_slot(
                                sig.slot(), [&](boost::system::error_code ec, sandbox::exec_result r) {
                                    ++done;
                                    if (ec != asio::error::operation_aborted ||
                                        r.status != sandbox::exec_status::cancelled)
                                        bad = ec.message() + ", status " +
                                              sandbox::to_string(r.status) + ": " + r.diag.message;
                                }));
    auto deadline = clock_type::now() + 20s;
    while (sandbox::get_sampler_stats(ex).watched_trees < static_cast<std::size_t>(trees))
    {
        if (clock_type::now() > deadline || done > 0)
            fail("ours sampler: trees not watched (" + bad + ")");
        ioc.run_for(1ms);
    }
    sampler_run r;
    const auto life0 = clock_type::now();
    const double c0 = supervision_cpu_ms();
    const auto t0 = clock_type::now();
    ioc.run_for(window);
    r.wall_s = seconds_since(t0);
    r.cpu_ms = supervision_cpu_ms() - c0;
    r.watched = sandbox::get_sampler_stats(ex).watched_trees;
    if (done > 0)
        fail("ours sampler: a tree ended inside the window (" + bad + ")");
    for (auto& sig : sigs)
        sig.emit(asio::cancellation_type::terminal);
    deadline = clock_type::now() + 20s;
    while (done < trees)
    {
        if (clock_type::now() > deadline)
            fail("ours sampler: cancelled trees did not complete");
        ioc.run_for(10ms);
    }
    if (!bad.empty())
        fail("ours sampler: unexpected completion: " + bad);
    // Samples are reported per tree when it ends: count those of the window pro rata (the
    // trees ran from just before life0 until now, sampled at a steady rate after the
    // first few fast samples).
    const auto s1 = sandbox::get_sampler_stats(ex);
    const double share = r.wall_s / std::max(seconds_since(life0), r.wall_s);
    r.samples = static_cast<std::uint64_t>(static_cast<double>(s1.samples) * share);
    r.ticks = static_cast<std::uint64_t>(static_cast<double>(s1.ticks) * share);
    r.failed = s1.failed_samples;
    return r;
}

// ---------------------------------------------------------------- cases

// A time per exec measured in rounds: the median and the p99 figure of the same runs.
struct per_exec_figures
{
    figure med, p99;

    explicit per_exec_figures(const std::string& name, const std::string& what = "per exec")
        : med{name, "median " + what, "us"}, p99{name + "_p99", "p99 " + what, "us"}
    {
    }

    // One round of times, the baseline's and ours.
    void add_round(const std::vector<double>& base, const std::vector<double>& ours)
    {
        med.rounds.add(percentile(ours, 50), percentile(base, 50));
        p99.rounds.add(percentile(ours, 99), percentile(base, 99));
    }

    // Each figure: the median over its rounds.
    void settle()
    {
        for (auto* f : {&med, &p99})
        {
            f->value = f->rounds.ours_median();
            f->baseline = f->rounds.base_median();
        }
    }

    // The median held to `max_ratio`.
    std::vector<figure> with_target(double max_ratio)
    {
        char text[32];
        std::snprintf(text, sizeof text, "ratio <= %.2f", max_ratio);
        med.target = text;
        med.pass = med.ratio() <= max_ratio;
        return {med, p99};
    }
};

// `rounds` rounds of `one_round()`, which returns {the baseline's times, ours}; settled.
template <class F>
per_exec_figures per_exec_rounds(const std::string& name, int rounds, F one_round,
                                 const std::string& what = "per exec")
{
    per_exec_figures f(name, what);
    for (int r = 0; r < rounds; ++r)
    {
        const auto [base, ours] = one_round(r);
        f.add_round(base, ours);
    }
    f.settle();
    return f;
}

void case_seq_true(const config& cfg, const std::string& cgroup = "off")
{
    const std::string name = cgroup == "off" ? "seq_true" : "seq_true_cgroup";
    const command floor_cmd({"/bin/true"});
    const auto req = make_request("/bin/true", {});
    const int warm = std::max(10, cfg.n / 20);
    raw_floor::run_sequential(floor_cmd, warm);
    ours_sequential(req, warm, cgroup);
    auto figs = per_exec_rounds(name, cfg.rounds, [&](int) {
        auto f = raw_floor::run_sequential(floor_cmd, cfg.n);
        return std::pair{f, ours_sequential(req, cfg.n, cgroup)};
    });
    print_block(name + ": sequential /bin/true, stdout+stderr captured, N=" +
                    std::to_string(cfg.n) + " x " + std::to_string(cfg.rounds) +
                    " rounds (time per exec: lower is better; ratio = ours/floor; cgroup " +
                    cgroup + ")",
                "floor", figs.with_target(1.10),
                {"floor: posix_spawn (own pgroup, pipes on 1 and 2) + pidfd_open + epoll(pipes, "
                 "pidfd) + waitid(P_PIDFD)",
                 "ours: async_exec chain, the next started from the completion handler, one "
                 "io_context"});
}

// `bare` run as a root caller's runner runs it: through the helper's --as, as the sandbox
// user (the runner's report names it).
std::vector<std::string> as_user_line(const std::vector<std::string>& bare)
{
    asio::io_context ioc;
    sandbox::bwrap_runner runner(ioc.get_executor(), bwrap_options());
    const auto e = runner.enforcement();
    std::vector<std::string> a{SBX_SUPERVISOR, "--as",
                               std::to_string(e.command_uid.value_or(65534)),
                               std::to_string(e.command_gid.value_or(65534)), "--"};
    a.insert(a.end(), bare.begin(), bare.end());
    return a;
}

// What the backend adds to bwrap itself: the bwrap runner's chain against the bare bwrap
// command line with the same flags (the runner's own, read back), in the same run.
void case_seq_true_bwrap(const config& cfg)
{
    const auto req = make_request("/bin/true", {});
    const int n = std::max(10, cfg.n / 4); // each bwrap start builds six namespaces
    const command bare(bare_bwrap_line());
    raw_floor::run_sequential(bare, 5);
    bwrap_sequential(req, 5);
    auto main = per_exec_rounds("seq_true_bwrap", cfg.rounds, [&](int r) {
        // Alternate which goes first, so neither always runs on a warmer or cooler host.
        std::vector<double> f, o;
        if (r % 2 == 0)
            f = raw_floor::run_sequential(bare, n), o = bwrap_sequential(req, n);
        else
            o = bwrap_sequential(req, n), f = raw_floor::run_sequential(bare, n);
        return std::pair{f, o};
    });
    auto figs = main.with_target(1.10);
    // A root caller's sandbox runs as the sandbox user: the bare line through the helper's
    // --as (one more exec, three id calls and checks) against the bare line as root.
    if (::geteuid() == 0)
    {
        const command as_user(as_user_line(bare.args()));
        auto as = per_exec_rounds(
            "seq_true_bwrap_as_user", cfg.rounds,
            [&](int) {
                auto o = raw_floor::run_sequential(as_user, n);
                return std::pair{raw_floor::run_sequential(bare, n), o};
            },
            "--as vs bare");
        figs.insert(figs.end(), {as.med, as.p99});
    }
    print_block("seq_true_bwrap: sequential /bin/true inside bwrap, N=" + std::to_string(n) +
                    " x " + std::to_string(cfg.rounds) +
                    " rounds (time per exec; ratio = bwrap runner/bare bwrap)",
                "bare", figs,
                {"bare: the runner's own bwrap command line (read from /proc), /bin/true under "
                 "bwrap's init, spawned like the seq_true floor",
                 "--as (root callers only): the bare line through sandbox-supervisor --as, as "
                 "the sandbox user, against the bare line as root",
                 "ours: the chain on bwrap_runner: also the supervisor, the status init as pid 1 "
                 "(one more exec and fork), write-deny resolution"});
}

// A bwrap instance's commands against the plain spawn floor of seq_true, alternating which
// goes first: what a kept sandbox costs per command.
void case_seq_true_instance(const config& cfg)
{
    const command floor_cmd({"/bin/true"});
    const auto req = make_request("/bin/true", {});
    raw_floor::run_sequential(floor_cmd, 10);
    instance_runs(req, 10, 1);
    auto figs = per_exec_rounds("seq_true_instance", cfg.rounds, [&](int r) {
        std::vector<double> f, o;
        if (r % 2 == 0)
            f = raw_floor::run_sequential(floor_cmd, cfg.n), o = instance_runs(req, cfg.n, 1).first;
        else
            o = instance_runs(req, cfg.n, 1).first, f = raw_floor::run_sequential(floor_cmd, cfg.n);
        return std::pair{f, o};
    });
    print_block("seq_true_instance: sequential /bin/true in one bwrap instance, N=" +
                    std::to_string(cfg.n) + " x " + std::to_string(cfg.rounds) +
                    " rounds (time per exec; ratio = ours/floor)",
                "floor", figs.with_target(1.30),
                {"floor: the seq_true floor (posix_spawn on the host, pipes, pidfd, epoll)",
                 "ours: async_exec on an instance of the bwrap runner (opened once, not timed): "
                 "a worker inside the sandbox per command (kept idle between them), its own "
                 "subreaper, deadline and tree kill"});
}

// One-shot calls served by warm sandboxes: with one ready, against the plain spawn floor
// (the target); back to back, against cold bwrap execs in the same run.
void case_seq_true_bwrap_pool(const config& cfg)
{
    const command floor_cmd({"/bin/true"});
    const auto req = make_request("/bin/true", {});
    const int n = std::max(10, cfg.n / 4);
    raw_floor::run_sequential(floor_cmd, 10);
    pool_runs(req, 5, true);
    auto ready = per_exec_rounds("seq_true_bwrap_pool", cfg.rounds, [&](int r) {
        std::vector<double> f, o;
        if (r % 2 == 0)
            f = raw_floor::run_sequential(floor_cmd, n), o = pool_runs(req, n, true);
        else
            o = pool_runs(req, n, true), f = raw_floor::run_sequential(floor_cmd, n);
        return std::pair{f, o};
    });
    auto figs = ready.with_target(1.50);
    auto sustained = per_exec_rounds(
        "seq_true_bwrap_pool_sustained", cfg.rounds,
        [&](int r) {
            std::vector<double> c, o;
            if (r % 2 == 0)
                c = bwrap_sequential(req, n), o = pool_runs(req, n, false);
            else
                o = pool_runs(req, n, false), c = bwrap_sequential(req, n);
            return std::pair{c, o};
        },
        "per exec, back to back vs cold");
    figs.insert(figs.end(), {sustained.med, sustained.p99});
    print_block("seq_true_bwrap_pool: one-shot /bin/true on a bwrap runner with warm = 2, N=" +
                    std::to_string(n) + " x " + std::to_string(cfg.rounds) +
                    " rounds (time per exec; ratio = ours/baseline)",
                "floor", figs,
                {"floor: the seq_true floor (posix_spawn on the host, pipes, pidfd, epoll)",
                 "ours: async_exec on the runner; a warm sandbox takes the call and is closed "
                 "(its tree gone) before the call completes; a replacement opens meanwhile",
                 "seq_true_bwrap_pool: each call with a warm sandbox ready (waiting for the "
                 "replacement is not timed)",
                 "seq_true_bwrap_pool_sustained: back to back, the replacements opening while "
                 "the calls run; baseline: cold bwrap execs (seq_true_bwrap's)"});
}

// The workload's commands, run in `work` (a repository under the bwrap root).
std::vector<sandbox::exec_request> workload(const std::string& work)
{
    const std::vector<std::vector<std::string>> lines{
        {"git", "status", "--short"},
        {"sh", "-c", "echo 'int main(void) { return 0; }' > m.c"},
        {"git", "add", "m.c"},
        {"git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m",
         "x"},
        {"cc", "-o", "m", "m.c"},
        {"./m"},
        {"git", "log", "--oneline", "-1"},
        {"ls", "-la"}};
    std::vector<sandbox::exec_request> out;
    for (const auto& l : lines)
    {
        auto req = make_request(l[0], {l.begin() + 1, l.end()});
        req.options.work_dir = work;
        out.push_back(std::move(req));
    }
    return out;
}

// Runs `reqs` one after another on `r` (the loop run until each completes); ms in all.
double run_sequence(asio::io_context& ioc, sandbox::runner& r,
                    const std::vector<sandbox::exec_request>& reqs)
{
    const auto t0 = clock_type::now();
    for (const auto& req : reqs)
    {
        bool done = false;
        sandbox::async_exec(r, req, [&](boost::system::error_code ec, sandbox::exec_result res) {
            check_exited(ec, res, ("workload: " + req.command).c_str());
            done = true;
        });
        if (ioc.stopped())
            ioc.restart();
        while (!done && ioc.run_one() > 0)
        {}
    }
    return seconds_since(t0) * 1e3;
}

void case_workload_instance(const config& cfg)
{
    const std::string work = bwrap_root() + "/work";
    std::string cmd = "mkdir -p " + work + " && cd " + work +
                      " && git init -q . && git -c user.name=b -c user.email=b@b commit -q "
                      "--allow-empty -m init";
    if (::geteuid() == 0)
        cmd += " && { chown -R nobody:nogroup " + work + " 2>/dev/null || chown -R 65534:65534 " +
               work + "; }";
    if (std::system(cmd.c_str()) != 0)
        fail("cannot make the workload's repository " + work);
    const auto reqs = workload(work);
    auto cold = [&] {
        asio::io_context ioc;
        sandbox::bwrap_runner runner(ioc.get_executor(), bwrap_options());
        return run_sequence(ioc, runner, reqs);
    };
    auto kept = [&] {
        asio::io_context ioc;
        sandbox::bwrap_runner runner(ioc.get_executor(), bwrap_options());
        const auto t0 = clock_type::now();
        std::shared_ptr<sandbox::instance> inst;
        asio::co_spawn(ioc, runner.open({}),
                       [&](std::exception_ptr e, std::shared_ptr<sandbox::instance> i) {
                           if (e)
                               fail("workload: cannot open an instance");
                           inst = std::move(i);
                       });
        while (!inst && ioc.run_one() > 0)
        {}
        const double open_ms = seconds_since(t0) * 1e3;
        const double ms = open_ms + run_sequence(ioc, *inst, reqs);
        asio::co_spawn(ioc, inst->close(), [&](std::exception_ptr) { inst.reset(); });
        ioc.run();
        return ms;
    };
    cold();
    kept();
    figure f{"workload_instance", "ms per sequence (8 commands)", "ms"};
    const int rounds = std::max(cfg.rounds, 5);
    for (int r = 0; r < rounds; ++r)
    {
        double c = 0, k = 0;
        if (r % 2 == 0)
            c = cold(), k = kept();
        else
            k = kept(), c = cold();
        f.rounds.add(k, c);
    }
    f.value = f.rounds.ours_median();
    f.baseline = f.rounds.base_median();
    print_block("workload_instance: git status, add, commit, cc, the program, git log, ls in "
                "one bwrap instance (its open counted) vs the same as cold bwrap execs, " +
                    std::to_string(rounds) + " rounds (ms; ratio = instance/cold)",
                "cold", {f},
                {"cold: each command a bwrap_runner exec (its own sandbox)",
                 "ours: runner.open() then the 8 commands in the instance, then its close"});
}

void case_conc64_true_instance(const config& cfg)
{
    const int inflight = 64;
    const command floor_cmd({"/bin/true"});
    const auto req = make_request("/bin/true", {});
    figure f{"conc64_true_instance", "execs per second", "execs/s"};
    f.better = "higher";
    for (int r = 0; r < cfg.rounds; ++r)
    {
        double fw = raw_floor::run_concurrent(floor_cmd, cfg.n, inflight);
        double ow = instance_runs(req, cfg.n, inflight).second;
        f.rounds.base.push_back(cfg.n / fw);
        f.rounds.ours.push_back(cfg.n / ow);
    }
    f.value = median(f.rounds.ours);
    f.baseline = median(f.rounds.base);
    f.target = "ratio >= 0.80";
    f.pass = f.ratio() >= 0.8;
    print_block("conc64_true_instance: " + std::to_string(cfg.n) +
                    " x /bin/true in one bwrap "
                    "instance, " +
                    std::to_string(inflight) + " in flight, " + std::to_string(cfg.rounds) +
                    " rounds (rate; ratio = ours/floor)",
                "floor", {f},
                {"floor: the conc64_true floor (one epoll loop over every child)",
                 "ours: 64 async_exec chains on one instance of the bwrap runner"});
}

// What the policy chain adds to an exec: the composed chain against the bare local runner,
// alternating within the same run.
void case_seq_true_chain(const config& cfg)
{
    // The request already holds what the defaults merge in, so both run the same effective
    // options (a cap would start the sampler) and only the chain's own work differs.
    auto req = make_request("/bin/true", {});
    req.options.timeout = std::chrono::minutes(10);
    req.options.env.inject = {{"SANDBOX_CHAIN", "1"}};
    req.options.limits.max_processes = 1024;
    chain_alternating(req, std::max(10, cfg.n / 20)); // warm-up
    auto figs = per_exec_rounds("seq_true_chain", cfg.rounds,
                                [&](int) { return chain_alternating(req, cfg.n); });
    print_block("seq_true_chain: sequential /bin/true through the policy chain, N=" +
                    std::to_string(cfg.n) + " x " + std::to_string(cfg.rounds) +
                    " rounds (time per exec; ratio = chain/bare local runner)",
                "local", figs.with_target(1.02),
                {"local: an async_exec chain on local_runner, in turn with ours on the same "
                 "io_context (exec by exec)",
                 "ours: the same through compose_local: defaults merged, 3 approval predicates "
                 "that do not match, the command gate; no audit sink"});
}

// What the fork gate costs: the same request with the sampler alone and with the gate too,
// in turn on one runner. Three figures: /bin/true (the filter's set-up), a shell running
// 100 /bin/true (a worker round trip per fork, far from the cap) and the same shell at a cap
// of 2 (every fork finds the count at the cap and lists the tree first).
void case_proc_cap(const config& cfg)
{
    const auto one = make_request("/bin/true", {});
    const auto loop = make_request(
        "/bin/sh", {"-c", "i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i+1)); done"});
    const int n = std::max(10, cfg.n / 10);
    const int n_loop = std::max(4, cfg.n / 100);
    proc_cap_alternating(one, 1024, std::max(10, n / 10)); // warm-up
    per_exec_figures t("proc_cap_true"), l("proc_cap_fork_loop", "per run"),
        c("proc_cap_fork_loop_at_cap", "per run");
    for (int r = 0; r < cfg.rounds; ++r) // the three cases in turn within each round
    {
        auto [b1, o1] = proc_cap_alternating(one, 1024, n);
        t.add_round(b1, o1);
        auto [b2, o2] = proc_cap_alternating(loop, 1024, n_loop);
        l.add_round(b2, o2);
        auto [b3, o3] = proc_cap_alternating(loop, 2, n_loop);
        c.add_round(b3, o3);
    }
    std::vector<figure> figs;
    for (auto [f, max] : {std::pair{&t, 1.25}, std::pair{&l, 1.10}, std::pair{&c, 1.25}})
    {
        f->settle();
        const auto two = f->with_target(max);
        figs.insert(figs.end(), two.begin(), two.end());
    }
    print_block("proc_cap: the same exec with the sampler alone and with the fork gate, in turn, /bin/true N=" +
                    std::to_string(n) + ", loops N=" + std::to_string(n_loop) + " x " +
                    std::to_string(cfg.rounds) + " rounds (ratio = gated/sampled)",
                "sampled", figs,
                {"sampled: local_runner, max_tasks 4096: the sampler at 50 ms, no fork gate",
                 "ours: the same plus max_processes 1024 (or 2 for _at_cap): the fork gate's "
                 "seccomp filter and a user-notification round trip per fork"});
}

void case_conc64_true(const config& cfg, const std::string& cgroup = "off")
{
    const int inflight = 64;
    const command floor_cmd({"/bin/true"});
    const auto req = make_request("/bin/true", {});
    const std::string name = cgroup == "off" ? "conc64_true" : "conc64_true_cgroup";
    figure f{name, "execs per second", "execs/s"};
    f.better = "higher";
    for (int r = 0; r < cfg.rounds; ++r)
    {
        double fw = raw_floor::run_concurrent(floor_cmd, cfg.n, inflight);
        double ow = ours_concurrent(req, cfg.n, inflight, cgroup);
        f.rounds.base.push_back(cfg.n / fw);
        f.rounds.ours.push_back(cfg.n / ow);
    }
    f.value = median(f.rounds.ours);
    f.baseline = median(f.rounds.base);
    f.target = "ratio >= 0.90";
    f.pass = f.ratio() >= 0.9;
    print_block(name + ": " + std::to_string(cfg.n) + " x /bin/true, " +
                    std::to_string(inflight) + " in flight, one thread, " +
                    std::to_string(cfg.rounds) +
                    " rounds (rate: higher is better; ratio = ours/floor)",
                "floor", {f},
                {"floor: one epoll loop over every child's two pipes and pidfd",
                 "ours: 64 async_exec chains on one io_context run by one thread"});
}

// The supervisor helper among our children (its comm, cut to 15 characters), or -1.
pid_t supervisor_child()
{
    for (pid_t kid : bench::my_children())
    {
        std::ifstream comm("/proc/" + std::to_string(kid) + "/comm");
        std::string name;
        std::getline(comm, name);
        if (name.rfind("sandbox-supervi", 0) == 0)
            return kid;
    }
    return -1;
}

// The workers (the helper's children) and the sum of their PSS in KiB.
std::pair<std::size_t, double> workers_and_pss(pid_t helper)
{
    std::vector<pid_t> workers;
    std::ifstream kids("/proc/" + std::to_string(helper) + "/task/" + std::to_string(helper) +
                       "/children");
    for (pid_t w; kids >> w;)
        workers.push_back(w);
    double pss_kb = 0;
    for (pid_t w : workers)
    {
        std::ifstream roll("/proc/" + std::to_string(w) + "/smaps_rollup");
        for (std::string line; std::getline(roll, line);)
            if (line.rfind("Pss:", 0) == 0)
                pss_kb += std::strtod(line.c_str() + 4, nullptr);
    }
    return {workers.size(), pss_kb};
}

struct burst_outcome
{
    double rate = 0;         // execs/s of the burst
    std::size_t workers = 0; // alive `settle` after it
    double pss_kb = 0;
};

// `n` /bin/true with 64 in flight under `pool`, then `settle` with the loop idle (the
// workers keep their own retire time), then the helper's workers are counted.
burst_outcome burst_then_settle(const sandbox::worker_pool_options& pool, int n,
                                std::chrono::milliseconds settle)
{
    asio::io_context ioc;
    sandbox::set_worker_pool_options(ioc, pool);
    sandbox::local_runner runner(ioc.get_executor(),
                                 runner_options(sandbox::default_sample_interval, "off"));
    const auto req = make_request("/bin/true", {});
    int launched = 0, done = 0;
    std::function<void()> start = [&] {
        if (launched >= n)
            return;
        ++launched;
        sandbox::async_exec(runner, req, [&](boost::system::error_code ec, sandbox::exec_result r) {
            check_exited(ec, r, "ours idle_workers");
            ++done;
            start();
        });
    };
    const auto t0 = clock_type::now();
    for (int i = 0; i < 64; ++i)
        start();
    ioc.run();
    burst_outcome out;
    out.rate = n / seconds_since(t0);
    if (done != n)
        fail("ours idle_workers: " + std::to_string(done) + " of " + std::to_string(n) + " done");
    std::this_thread::sleep_for(settle);
    const pid_t helper = supervisor_child();
    if (helper < 0)
        fail("idle_workers: no supervisor helper among our children");
    std::tie(out.workers, out.pss_kb) = workers_and_pss(helper);
    return out;
}

void case_idle_workers(const config& cfg)
{
    const sandbox::worker_pool_options never{
        .keep_idle = 4, .max_idle = 64, .retire_after = std::chrono::nanoseconds(0)};
    sandbox::worker_pool_options quick = never;
    quick.retire_after = std::chrono::milliseconds(200);
    const sandbox::worker_pool_options defaults{};
    figure workers{"idle_workers_after_burst", "workers alive after", "workers"};
    figure pss{"idle_workers_pss", "their PSS", "KiB"};
    figure rate{"idle_workers_burst_rate", "burst rate, default pool", "execs/s"};
    rate.better = "higher";
    const int n = std::min(cfg.n, 1000);
    for (int r = 0; r < cfg.rounds; ++r)
    {
        const auto kept = burst_then_settle(never, n, std::chrono::milliseconds(600));
        const auto retired = burst_then_settle(quick, n, std::chrono::milliseconds(600));
        const auto with_defaults = burst_then_settle(defaults, n, std::chrono::milliseconds(0));
        workers.rounds.base.push_back(static_cast<double>(kept.workers));
        workers.rounds.ours.push_back(static_cast<double>(retired.workers));
        pss.rounds.base.push_back(kept.pss_kb);
        pss.rounds.ours.push_back(retired.pss_kb);
        rate.rounds.base.push_back(kept.rate);
        rate.rounds.ours.push_back(with_defaults.rate);
    }
    for (auto* f : {&workers, &pss, &rate})
    {
        f->value = median(f->rounds.ours);
        f->baseline = median(f->rounds.base);
    }
    workers.target = "<= keep_idle (4)";
    workers.pass = workers.value <= 4;
    rate.target = "ratio >= 0.95";
    rate.pass = rate.ratio() >= 0.95;
    print_block(
        "idle_workers: " + std::to_string(n) +
            " x /bin/true, 64 in flight, then 600 ms "
            "idle; " +
            std::to_string(cfg.rounds) + " rounds",
        "never", {workers, pss, rate},
        {"never: keep_idle 4, retire_after 0 (every worker of the burst stays, the old pool)",
         "ours: keep_idle 4, retire_after 200 ms (the default is 10 s)",
         "rate: the default pool (keep 4, 10 s: each worker beyond 4 gets its retire claim) "
         "against never"});
}

void case_out512(const config& cfg, bool discard, bool cap1m)
{
    const std::uint64_t bytes = cfg.out_bytes;
    const double mb = static_cast<double>(bytes) / 1e6;
    const command shell({"/bin/sh", "-c",
                         "head -c " + std::to_string(bytes) + " /dev/zero | cat > /dev/null"});
    figure fd{"out512_discard", "discard (cap 1 B)", "MB/s"};
    figure fc{"out512_cap1m", "cap 1 MiB", "MB/s"};
    figure rss{"out512_cap1m_rss", "cap 1 MiB: peak RSS", "KiB"};
    fd.better = fc.better = "higher";
    std::vector<double> rss_discard;
    std::vector<std::string> round_notes;
    for (int r = 0; r < cfg.rounds; ++r)
    {
        double base = mb / raw_floor::run_captured(shell);
        std::string line = "round " + std::to_string(r + 1) + ": shell " + fmt_value(base);
        if (discard)
        {
            fd.rounds.base.push_back(base);
            auto c = ours_out_in_child("out512_discard", bytes);
            fd.rounds.ours.push_back(mb / c.wall_s);
            rss_discard.push_back(static_cast<double>(c.vmhwm_kb));
            line += ", ours discard " + fmt_value(fd.rounds.ours.back());
        }
        if (cap1m)
        {
            fc.rounds.base.push_back(base);
            auto c = ours_out_in_child("out512_cap1m", bytes);
            fc.rounds.ours.push_back(mb / c.wall_s);
            rss.rounds.ours.push_back(static_cast<double>(c.vmhwm_kb));
            line += ", ours cap 1 MiB " + fmt_value(fc.rounds.ours.back()) + " (VmHWM " +
                    std::to_string(c.vmhwm_kb) + " KiB)";
        }
        round_notes.push_back(line + " MB/s");
    }
    std::vector<figure> figs;
    const std::string tgt = "ratio >= 0.85";
    for (auto* f : {&fd, &fc})
    {
        f->value = median(f->rounds.ours);
        f->baseline = median(f->rounds.base);
        f->target = tgt;
        f->pass = f->ratio() >= 0.85;
    }
    if (discard)
        figs.push_back(fd);
    std::vector<std::string> notes{
        "baseline: sh -c 'head -c " + std::to_string(bytes) +
            " /dev/zero | cat > /dev/null', wall from posix_spawn to reap (raw floor)",
        "ours: async_exec of /usr/bin/head -c " + std::to_string(bytes) +
            " /dev/zero in a fresh process (re-exec, --child-case); wall from async_exec to "
            "its handler; kept/dropped verified every round",
        "pipe throughput on this VM is bimodal (both peers); read the per-round pairs:"};
    notes.insert(notes.end(), round_notes.begin(), round_notes.end());
    if (discard)
        notes.push_back("peak RSS (VmHWM) of the ours child with cap 1 B, for reference (the "
                        "process's own floor): " +
                        fmt_value(*std::max_element(rss_discard.begin(), rss_discard.end())) +
                        " KiB");
    if (cap1m)
    {
        figs.push_back(fc);
        rss.value = *std::max_element(rss.rounds.ours.begin(), rss.rounds.ours.end());
        rss.baseline = 1024;
        rss.target = "<= cap + 8 MiB (9216)";
        rss.pass = rss.value <= 1024 + 8 * 1024;
        rss.rounds.ours.clear(); // the figure is the max over rounds; no range line
        figs.push_back(rss);
        notes.push_back("peak RSS = largest VmHWM of the ours child process over rounds; "
                        "baseline = the cap (1024 KiB); peak <= cap + 8 MiB: " +
                        std::string(*rss.pass ? "yes" : "NO"));
    }
    print_block("out512: " + std::to_string(bytes) + " B of `head -c` to stdout, " +
                    std::to_string(cfg.rounds) +
                    " rounds (MB/s = 1e6 B/s: higher is better; RSS: lower is better; "
                    "ratio = ours/baseline)",
                "shell", figs, notes);
}

void case_sampler_1tree(const config& cfg)
{
    const auto interval = 10ms;
    const auto window = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(cfg.window_s));
    figure ms{"sampler_1tree_10ms", "CPU ms per s", "ms/s"};
    figure pct{"sampler_1tree_10ms_pct", "CPU % of one core", "%"};
    std::vector<std::string> notes;
    for (int r = 0; r < cfg.rounds; ++r)
    {
        std::vector<raw_floor::child> kids =
            raw_floor::spawn_idle(command({"/bin/sleep", "6"}), 1);
        auto p = raw_floor::ps_watch({kids[0].pid}, interval, window);
        raw_floor::kill_and_reap(kids);
        check_no_children("sampler_1tree_10ms floor");
        if (p.matched_lines != p.samples)
            fail("ps baseline: the sleep's pgid matched " + std::to_string(p.matched_lines) +
                 " lines in " + std::to_string(p.samples) + " samples");
        auto o = ours_sampler(1, make_request("/bin/sleep", {"6"}), interval, window);
        check_no_children("sampler_1tree_10ms ours");
        // The sampler must really have run: at least half of the ticks the window holds
        // (a loaded machine delays ticks; a broken sampler takes none).
        const double due = o.wall_s / std::chrono::duration<double>(interval).count();
        if (static_cast<double>(o.samples) < due / 2)
            fail("ours sampler ran " + std::to_string(o.samples) + " samples (< half of " +
                 std::to_string(static_cast<long>(due)) + " due) in " +
                 std::to_string(o.wall_s) + " s");
        double base = (p.self_ms + p.children_ms) / p.wall_s;
        double ours = o.cpu_ms / o.wall_s;
        ms.rounds.base.push_back(base);
        ms.rounds.ours.push_back(ours);
        pct.rounds.base.push_back(base / 10);
        pct.rounds.ours.push_back(ours / 10);
        char b[400];
        std::snprintf(b, sizeof b,
                      "round %d: ours %.1f ms CPU in %.2f s, sampler ticks %" PRIu64
                      " samples %" PRIu64 " failed %" PRIu64 " (%.1f us/sample) | ps: %" PRIu64
                      " samples, self %.1f + children %.1f ms in %.2f s (%.0f us/sample)",
                      r + 1, o.cpu_ms, o.wall_s, o.ticks, o.samples, o.failed,
                      o.cpu_ms * 1e3 / static_cast<double>(o.samples), p.samples, p.self_ms,
                      p.children_ms, p.wall_s,
                      (p.self_ms + p.children_ms) * 1e3 / static_cast<double>(p.samples));
        notes.push_back(b);
    }
    for (auto* f : {&ms, &pct})
    {
        f->value = median(f->rounds.ours);
        f->baseline = median(f->rounds.base);
    }
    pct.target = "ours <= 2 %";
    pct.pass = pct.value <= 2.0;
    notes.push_back("ours: one capped sleep 6 (memory cap 1 GiB, a task cap keeps the interval), "
                    "sample_interval 10 ms; CPU = this process + supervisor helper + workers, "
                    "schedstat delta over the window");
    notes.push_back("ps: every 10 ms posix_spawn `ps -o pgid=,rss=,time= -ax`, read, reap, sum "
                    "lines of the sleep's pgid; CPU = RUSAGE_SELF + RUSAGE_CHILDREN deltas");
    print_block("sampler_1tree_10ms: one capped tree for " + fmt_value(cfg.window_s) + " s, " +
                    std::to_string(cfg.rounds) +
                    " rounds (CPU: lower is better; ratio = ours/ps)",
                "ps", {ms, pct}, notes);
}

// The sampler's fast mode: a tree whose parent ignores SIGCHLD and has a live child is
// sampled every 2 ms (the kernel reaps such children, so their cpu time must be read before
// they end), whatever the interval. Ours: that tree at the default interval. Baseline: the
// same tree with SIGCHLD at its default, sampled at the default interval, in the same run.
void case_sampler_reaper(const config& cfg)
{
    const auto window = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(cfg.window_s));
    auto tree = [](bool ignore) {
        return make_request("/usr/bin/perl",
                            {"-e", std::string(ignore ? "$SIG{CHLD} = 'IGNORE'; " : "") +
                                       "if (!fork) { exec '/bin/sleep', '12' } sleep 12"});
    };
    figure pct{"sampler_1tree_reaper", "CPU % of one core", "%"};
    std::vector<std::string> notes;
    for (int r = 0; r < cfg.rounds; ++r)
    {
        auto base = ours_sampler(1, tree(false), sandbox::default_sample_interval, window);
        check_no_children("sampler_1tree_reaper baseline");
        auto fast = ours_sampler(1, tree(true), sandbox::default_sample_interval, window);
        check_no_children("sampler_1tree_reaper ours");
        // Fast mode must really have been on: at least a quarter of the 2 ms ticks.
        if (static_cast<double>(fast.samples) < fast.wall_s / 0.002 / 4)
            fail("fast mode took only " + std::to_string(fast.samples) + " samples in " +
                 std::to_string(fast.wall_s) + " s");
        pct.rounds.base.push_back(base.cpu_ms / base.wall_s / 10);
        pct.rounds.ours.push_back(fast.cpu_ms / fast.wall_s / 10);
        char b[300];
        std::snprintf(b, sizeof b,
                      "round %d: fast %.1f ms CPU in %.2f s, %" PRIu64
                      " samples | default %.1f ms CPU in %.2f s, %" PRIu64 " samples",
                      r + 1, fast.cpu_ms, fast.wall_s, fast.samples, base.cpu_ms, base.wall_s,
                      base.samples);
        notes.push_back(b);
    }
    pct.value = median(pct.rounds.ours);
    pct.baseline = median(pct.rounds.base);
    pct.target = "ours <= 5 %";
    pct.pass = pct.value <= 5.0;
    notes.push_back("tree: perl forking one sleep; ours ignores SIGCHLD (fast mode, every 2 ms), "
                    "the baseline does not (every 50 ms); CPU = this process + helper + worker");
    print_block("sampler_1tree_reaper: one tree in the sampler's fast mode for " +
                    fmt_value(cfg.window_s) + " s, " + std::to_string(cfg.rounds) +
                    " rounds (CPU: lower is better; ratio = fast/default)",
                "default", {pct}, notes);
}

void case_sampler_100trees(const config& cfg)
{
    const int trees = 100;
    const auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(
        sandbox::default_sample_interval);
    const auto window = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(cfg.window_s));
    figure per{"sampler_100trees_50ms", "CPU per tree-sample", "us/sample"};
    figure used{"sampler_100trees_50ms_cpu", "CPU actually used", "ms/s"};
    figure cnt{"sampler_100trees_50ms_samples", "tree-samples per s", "samples/s"};
    cnt.better = "higher";
    // The same idle trees without a task cap (the sampler lets them wait longer), against the
    // steady run of the same round.
    figure idle_used{"sampler_100trees_50ms_idle_cpu", "CPU used, idle trees", "ms/s"};
    figure idle_cnt{"sampler_100trees_50ms_idle_samples", "tree-samples per s, idle", "samples/s"};
    std::vector<std::string> notes;
    for (int r = 0; r < cfg.rounds; ++r)
    {
        std::vector<raw_floor::child> kids =
            raw_floor::spawn_idle(command({"/bin/sleep", "8"}), trees);
        std::vector<pid_t> pgids;
        for (const auto& k : kids)
            pgids.push_back(k.pid);
        auto p = raw_floor::ps_watch(pgids, interval, window);
        raw_floor::kill_and_reap(kids);
        check_no_children("sampler_100trees_50ms floor");
        if (p.samples == 0 || p.matched_lines != p.samples)
            fail("ps baseline: " + std::to_string(p.matched_lines) + " matching lines in " +
                 std::to_string(p.samples) + " samples");
        auto o = ours_sampler(trees, make_request("/bin/sleep", {"8"}), interval, window);
        check_no_children("sampler_100trees_50ms ours");
        auto idle = ours_sampler(trees, make_request("/bin/sleep", {"8"}), interval, window, false);
        check_no_children("sampler_100trees_50ms idle");
        idle_used.rounds.base.push_back(o.cpu_ms / o.wall_s);
        idle_used.rounds.ours.push_back(idle.cpu_ms / idle.wall_s);
        idle_cnt.rounds.base.push_back(static_cast<double>(o.samples) / o.wall_s);
        idle_cnt.rounds.ours.push_back(static_cast<double>(idle.samples) / idle.wall_s);
        if (o.samples < 100)
            fail("ours sampler ran " + std::to_string(o.samples) + " samples (< 100)");
        double pcpu = p.self_ms + p.children_ms;
        per.rounds.base.push_back(pcpu * 1e3 / static_cast<double>(p.samples));
        per.rounds.ours.push_back(o.cpu_ms * 1e3 / static_cast<double>(o.samples));
        used.rounds.base.push_back(pcpu / p.wall_s);
        used.rounds.ours.push_back(o.cpu_ms / o.wall_s);
        cnt.rounds.base.push_back(static_cast<double>(p.samples) / p.wall_s);
        cnt.rounds.ours.push_back(static_cast<double>(o.samples) / o.wall_s);
        char b[400];
        std::snprintf(b, sizeof b,
                      "round %d: ours %.1f ms CPU in %.2f s, ticks %" PRIu64 " samples %" PRIu64
                      " failed %" PRIu64 " | ps: %" PRIu64 " of %.0f due samples in %.2f s (%" PRIu64
                      " ticks, %" PRIu64 " late), self %.1f + children %.1f ms",
                      r + 1, o.cpu_ms, o.wall_s, o.ticks, o.samples, o.failed, p.samples,
                      trees * p.wall_s / 0.05, p.wall_s, p.ticks, p.late_ticks, p.self_ms,
                      p.children_ms);
        notes.push_back(b);
    }
    for (auto* f : {&per, &used, &cnt, &idle_used, &idle_cnt})
    {
        f->value = median(f->rounds.ours);
        f->baseline = median(f->rounds.base);
    }
    per.target = "ratio <= 0.02";
    per.pass = per.ratio() <= 0.02;
    notes.push_back("ours: 100 capped sleep 8 (memory cap 1 GiB, a task cap keeps the "
                    "interval) at the default 50 ms; CPU = this process + helper + workers "
                    "(schedstat) delta; per sample = CPU / samples in the window");
    notes.push_back("idle: the same without the task cap (idle trees wait up to 8x the "
                    "interval); its baseline is ours of the same round");
    notes.push_back("ps: one `ps -o pgid=,rss=,time= -ax` per tree per 50 ms tick, back to back "
                    "when behind (it cannot keep up); CPU = SELF + CHILDREN deltas");
    notes.push_back("'CPU actually used' is NOT like for like: ps does far fewer samples than "
                    "due; compare per tree-sample");
    print_block("sampler_100trees_50ms: 100 capped trees for " + fmt_value(cfg.window_s) +
                    " s, " + std::to_string(cfg.rounds) +
                    " rounds (CPU: lower is better; samples/s: higher is better; ratio = ours/ps)",
                "ps", {per, used, cnt}, notes);
    print_block("sampler_100trees_50ms_idle: the same trees left to idle (ratio = idle/steady)",
                "steady", {idle_used, idle_cnt}, {});
}

[[noreturn]] void usage(const char* msg)
{
    std::fprintf(stderr,
                 "exec_bench: %s\nusage: exec_bench [--quick] [--case NAME]... [--rounds R] "
                 "[--n N]\n  cases:",
                 msg);
    for (const char* c : all_cases)
        std::fprintf(stderr, " %s", c);
    std::fprintf(stderr, " (out512 = both out512 cases)\n");
    std::exit(64);
}

} // namespace

int main(int argc, char** argv)
{
    config cfg;
    std::optional<int> n_flag, rounds_flag;
    std::string child_case;
    std::uint64_t child_bytes = 0;
    for (int i = 1; i < argc; ++i)
    {
        std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc)
                usage(("missing value after " + a).c_str());
            return argv[++i];
        };
        if (a == "--quick")
            cfg.quick = true;
        else if (a == "--case")
        {
            std::string c = value();
            if (c == "out512")
            {
                cfg.cases.insert("out512_discard");
                cfg.cases.insert("out512_cap1m");
            }
            else if (std::find_if(std::begin(all_cases), std::end(all_cases), [&](const char* k) {
                         return c == k;
                     }) != std::end(all_cases))
                cfg.cases.insert(c);
            else
                usage(("unknown case " + c).c_str());
        }
        else if (a == "--rounds")
            rounds_flag = std::atoi(value().c_str());
        else if (a == "--n")
            n_flag = std::atoi(value().c_str());
        else if (a == "--child-case")
            child_case = value();
        else if (a == "--bytes")
            child_bytes = std::strtoull(value().c_str(), nullptr, 10);
        else if (a == "--help" || a == "-h")
            usage("help");
        else
            usage(("unknown argument " + a).c_str());
    }
    if (!child_case.empty())
        return run_child_case(child_case, child_bytes);
    if (cfg.quick)
    {
        cfg.rounds = 1; // a smoke run: every case once, unless --rounds says otherwise
        cfg.n = 200;
        cfg.out_bytes = 32 * mib;
        cfg.window_s = 1.5;
    }
    if (n_flag)
        cfg.n = *n_flag;
    if (rounds_flag)
        cfg.rounds = *rounds_flag;
    if (cfg.n < 1 || cfg.rounds < 1)
        usage("--n and --rounds must be positive");

    auto t0 = clock_type::now();
    bench::print_machine(stdout);
    std::printf("config: n=%d rounds=%d out_bytes=%" PRIu64 " sampler_window_s=%g%s\n", cfg.n,
                cfg.rounds, cfg.out_bytes, cfg.window_s, cfg.quick ? " (quick)" : "");
    std::fflush(stdout);
    if (cfg.want("seq_true"))
        case_seq_true(cfg);
    if (cfg.want("seq_true_bwrap"))
        case_seq_true_bwrap(cfg);
    if (cfg.want("seq_true_chain"))
        case_seq_true_chain(cfg);
    if (cfg.want("proc_cap"))
        case_proc_cap(cfg);
    if (cfg.want("conc64_true"))
        case_conc64_true(cfg);
    if (cfg.want("seq_true_instance"))
        case_seq_true_instance(cfg);
    if (cfg.want("seq_true_bwrap_pool"))
        case_seq_true_bwrap_pool(cfg);
    if (cfg.want("conc64_true_instance"))
        case_conc64_true_instance(cfg);
    if (cfg.want("workload_instance"))
        case_workload_instance(cfg);
    if (cfg.want("seq_true_cgroup") || cfg.want("conc64_true_cgroup"))
    {
        if (const auto why = cgroup_path_missing(); !why.empty())
            std::printf("seq_true_cgroup, conc64_true_cgroup: skipped: the cgroup path is not "
                        "used here (%s)\n", why.c_str());
        else
        {
            if (cfg.want("seq_true_cgroup"))
                case_seq_true(cfg, "auto");
            if (cfg.want("conc64_true_cgroup"))
                case_conc64_true(cfg, "auto");
        }
    }
    if (cfg.want("idle_workers"))
        case_idle_workers(cfg);
    if (cfg.want("out512_discard") || cfg.want("out512_cap1m"))
        case_out512(cfg, cfg.want("out512_discard"), cfg.want("out512_cap1m"));
    if (cfg.want("sampler_1tree_10ms"))
        case_sampler_1tree(cfg);
    if (cfg.want("sampler_100trees_50ms"))
        case_sampler_100trees(cfg);
    if (cfg.want("sampler_1tree_reaper"))
        case_sampler_reaper(cfg);
    check_no_children("end of run");
    std::printf("\nexec_bench: done in %.1f s; targets missed: %zu", seconds_since(t0),
                g_missed.size());
    for (const auto& m : g_missed)
        std::printf("\n   %s", m.c_str());
    std::printf("\n");
    return 0;
}
