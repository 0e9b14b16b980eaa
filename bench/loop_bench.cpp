// bench/loop_bench.cpp: does the caller's event loop stay responsive while the library works
// on it, and what does one `sandbox-run` cost against the bare exec of the same command?
//
// Cases (stdout: one JSON line per figure; stderr: a short table; ratio = value / baseline):
//   timer_lateness_3000  3,000 idle processes on the host (300 with --quick: forked children
//                        of this program that only pause()). On ONE io_context thread a 1 ms
//                        periodic steady_timer (expires_after(1ms) from its own handler, as an
//                        embedding program would write it) records how late each expiry fires
//                        (handler entry - scheduled expiry, us). Idle phase: the timer alone
//                        (2 s). Measured phase, same run and loop: the same timer while capped
//                        execs run continuously through local_runner + async_exec, 8 in flight,
//                        a mix that exits, times out (tree killed) and trips a process cap
//                        (4 s). Figures: p99 and max lateness (value = measured, baseline =
//                        idle), execs completed in the window. Target: p99 at most 2 ms above
//                        idle (reported, not asserted).
//   cli_true             `sandbox-run --backend local -- /bin/true` (default policy, caps
//                        on) against `env /bin/true`: posix_spawn + waitpid, alternating, 200
//                        each (40 with --quick), all three standard streams on /dev/null;
//                        median wall us.
//                        Target ratio <= 3 (reported, not asserted).
//   cli_true_bwrap       `sandbox-run --backend bwrap -- /bin/true` against bare bwrap with the
//                        same namespaces and mounts (bwrap's own init), alternating, 50 each (10
//                        with --quick), in a work dir holding every write-deny path. Target
//                        ratio <= 1.5 (reported, not asserted).
//
// Every idle child is killed (SIGKILL, by pid) and reaped at the end of its case, on error
// paths (RAII, atexit, terminate) and on SIGINT/SIGTERM/SIGHUP (the handler kills them by pid;
// the children also carry PR_SET_PDEATHSIG=SIGKILL should this process die any other way).
//
// Exit status: 0 when every run was correct (targets missed are reported, not fatal); 1 when
// a result was wrong (an exec ended unexpectedly, an exec did not complete, a leftover
// process, an idle child that died early); 64 on a usage error; 128+N when interrupted by
// signal N (after the cleanup).
#include "bwrap_args.hpp"
#include "common.hpp"
#include <sandbox/error.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/sampler.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using boost::system::error_code;

#ifdef SBX_SANDBOX_RUN
constexpr const char* default_sandbox_run = SBX_SANDBOX_RUN;
#else
constexpr const char* default_sandbox_run = "";
#endif

constexpr const char* case_timer = "timer_lateness_3000";
constexpr const char* case_cli = "cli_true";
constexpr const char* case_cli_bwrap = "cli_true_bwrap";
const char* const all_cases[] = {case_timer, case_cli, case_cli_bwrap};

// ---------------------------------------------------------------- configuration

struct config
{
    bool quick = false;
    int idle = 3000;
    std::chrono::milliseconds idle_phase = 2000ms;
    std::chrono::milliseconds busy_phase = 4000ms;
    int inflight = 8;
    int cli_n = 200;
    std::string sandbox_run = default_sandbox_run;
    std::set<std::string> cases;

    bool want(const std::string& name) const { return cases.empty() || cases.count(name) > 0; }
};

// ---------------------------------------------------------------- errors and signals

std::vector<std::string> g_errors; // wrong results: exit status 1

void record_error(const std::string& what)
{
    if (g_errors.size() < 20)
        std::fprintf(stderr, "loop_bench: ERROR: %s\n", what.c_str());
    g_errors.push_back(what);
}

// The idle children, readable from the signal handler: pids are stored before the count is
// raised, with the handled signals blocked around fork + store.
constexpr int max_idle = 8192;
pid_t g_idle_pids[max_idle];
std::atomic<int> g_idle_count{0};
static_assert(std::atomic<int>::is_always_lock_free);

std::atomic<int> g_signal{0};       // first SIGINT/SIGTERM/SIGHUP received
std::atomic<bool> g_in_loop{false}; // the loop polls g_signal and winds down by itself
const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP};

// Async-signal-safe: SIGKILL every idle child by pid. They stay unreaped (zombies) until
// someone waits for them, so the pids cannot be reused under us.
void kill_idle_async_safe()
{
    const int n = g_idle_count.load();
    for (int i = 0; i < n; ++i)
        ::kill(g_idle_pids[i], SIGKILL);
}

void on_signal(int sig)
{
    const int saved = errno;
    kill_idle_async_safe();
    int expected = 0;
    const bool first = g_signal.compare_exchange_strong(expected, sig);
    if (first && g_in_loop.load())
    {
        errno = saved; // the loop cancels its execs, then main cleans up and exits 128+sig
        return;
    }
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    errno = saved;
}

void install_signal_handlers()
{
    struct sigaction sa = {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int s : handled_signals)
        ::sigaction(s, &sa, nullptr);
}

sigset_t handled_set()
{
    sigset_t set;
    sigemptyset(&set);
    for (int s : handled_signals)
        sigaddset(&set, s);
    return set;
}

// SIGKILL and reap every idle child; idempotent; called by the RAII owner, atexit and the
// terminate handler. Each must die of our SIGKILL: anything else is an error.
void kill_and_reap_idle()
{
    const sigset_t set = handled_set();
    sigset_t old;
    ::sigprocmask(SIG_BLOCK, &set, &old);
    const int n = g_idle_count.load();
    for (int i = 0; i < n; ++i)
        ::kill(g_idle_pids[i], SIGKILL);
    g_idle_count.store(0); // all killed: the handler has nothing left to do
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    int early = 0;
    for (int i = 0; i < n; ++i)
    {
        int st = 0;
        pid_t r;
        while ((r = ::waitpid(g_idle_pids[i], &st, 0)) < 0 && errno == EINTR)
        {}
        if (r != g_idle_pids[i])
            record_error("waitpid(" + std::to_string(g_idle_pids[i]) +
                         ") of an idle child: " + std::strerror(errno));
        else if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
            ++early;
    }
    if (early > 0 && g_signal.load() == 0)
        record_error(std::to_string(early) + " idle child(ren) ended before the cleanup");
}

/// Owns the idle children of one case: forks `n` of them, kills and reaps them on destruction.
class idle_children
{
public:
    explicit idle_children(int n)
    {
        const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
            throw std::runtime_error(std::string("open /dev/null: ") + std::strerror(errno));
        const pid_t parent = ::getpid();
        const sigset_t set = handled_set();
        for (int i = 0; i < n && g_signal.load() == 0; ++i)
        {
            sigset_t old;
            ::sigprocmask(SIG_BLOCK, &set, &old);
            const pid_t pid = ::fork();
            if (pid == 0)
                idle_child(parent, null_fd); // never returns
            if (pid < 0)
            {
                const int err = errno;
                ::sigprocmask(SIG_SETMASK, &old, nullptr);
                ::close(null_fd);
                record_error("fork of idle child " + std::to_string(i + 1) + ": " +
                             std::strerror(err));
                return;
            }
            const int k = g_idle_count.load();
            g_idle_pids[k] = pid;
            g_idle_count.store(k + 1);
            ::sigprocmask(SIG_SETMASK, &old, nullptr);
        }
        ::close(null_fd);
    }
    idle_children(const idle_children&) = delete;
    idle_children& operator=(const idle_children&) = delete;
    ~idle_children() { kill_and_reap_idle(); }

    int size() const { return g_idle_count.load(); }

private:
    [[noreturn]] static void idle_child(pid_t parent, int null_fd)
    {
        struct sigaction dfl = {};
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        for (int s : handled_signals)
            ::sigaction(s, &dfl, nullptr);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (::getppid() != parent)
            ::_exit(0);
        ::dup2(null_fd, 0);
        ::dup2(null_fd, 1);
        ::dup2(null_fd, 2);
        ::syscall(SYS_close_range, 3U, ~0U, 0U); // no pipe of ours (or of ctest) held open
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        for (;;)
            ::pause();
    }
};

// ---------------------------------------------------------------- statistics

using bench::percentile;

double max_of(const std::vector<double>& v)
{
    return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

double us_between(clock_type::time_point a, clock_type::time_point b)
{
    return std::chrono::duration<double, std::micro>(b - a).count();
}

double seconds_since(clock_type::time_point t0)
{
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double cpu_ms_self()
{
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

// ---------------------------------------------------------------- reporting

std::string fmt_value(double v)
{
    char b[64];
    if (v == std::floor(v) && std::fabs(v) < 1e15)
        std::snprintf(b, sizeof b, "%.0f", v); // counts
    else
        std::snprintf(b, sizeof b, std::fabs(v) >= 100 ? "%.1f" : "%.4g", v);
    return b;
}

struct figure
{
    std::string json_case;
    std::string label;
    std::string unit;
    double value = 0;
    std::optional<double> baseline{}; // none: JSON null, and no ratio
    std::string target{};             // human text, empty when none
    std::optional<bool> pass{};

    std::optional<double> ratio() const
    {
        if (!baseline || *baseline == 0)
            return std::nullopt;
        return value / *baseline;
    }
};

std::vector<std::string> g_missed;

void report(const std::string& title, const std::string& value_name, const std::string& base_name,
            const std::vector<figure>& figs, const std::vector<std::string>& notes)
{
    std::fprintf(stderr, "\n== %s\n", title.c_str());
    std::fprintf(stderr, "   %-20s %-7s %12s %12s %8s  %-24s %s\n", "figure", "unit",
                 value_name.c_str(), base_name.c_str(), "ratio", "target", "verdict");
    for (const auto& f : figs)
    {
        auto r = f.ratio();
        char rb[32] = "-";
        if (r)
            std::snprintf(rb, sizeof rb, "%.4g", *r);
        const char* verdict = !f.pass ? "-" : *f.pass ? "PASS" : "MISS";
        std::fprintf(stderr, "   %-20s %-7s %12s %12s %8s  %-24s %s\n", f.label.c_str(),
                     f.unit.c_str(), fmt_value(f.value).c_str(),
                     f.baseline ? fmt_value(*f.baseline).c_str() : "-", rb,
                     f.target.empty() ? "-" : f.target.c_str(), verdict);
        if (f.pass && !*f.pass)
            g_missed.push_back(f.json_case + " (" + f.target + ")");
    }
    for (const auto& n : notes)
        std::fprintf(stderr, "   %s\n", n.c_str());
    for (const auto& f : figs)
        bench::print_json("loop_bench", f.json_case, f.value, f.unit, f.baseline);
    std::fflush(stdout);
    std::fflush(stderr);
}


// ---------------------------------------------------------------- /proc checks

// Live processes whose environment holds exactly `entry` (NAME=VALUE). Every exec of the
// timer case carries a tag made of this program's pid, so a process of a tree the library
// should have killed is found even after it was reparented away from us.
std::vector<pid_t> tagged_processes(const std::string& entry)
{
    std::vector<pid_t> found;
    const pid_t me = ::getpid();
    for (pid_t pid : bench::proc_pids())
    {
        if (pid == me)
            continue;
        std::ifstream env("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
        if (!env)
            continue;
        for (std::string var; std::getline(env, var, '\0');)
            if (var == entry)
            {
                found.push_back(pid);
                break;
            }
    }
    return found;
}

// ---------------------------------------------------------------- timer_lateness_3000

// The exec mix, in rotation.
enum class kind : int
{
    true_capped = 0,  // /bin/true, memory cap 256 MiB: exits 0
    sleep_timeout,    // sleep 5, timeout 50 ms, memory cap: timed out, tree killed
    shell_bg_timeout, // sh -c 'sleep 5 & sleep 5 & sleep 5', timeout 80 ms, 64 processes
    over_process_cap, // 5 processes under max_processes 3: budget_exceeded (processes)
};
constexpr int kind_count = 4;
const char* const kind_names[kind_count] = {"true (mem cap)", "sleep 5 (timeout 50ms)",
                                            "sh 3x sleep (timeout 80ms)",
                                            "sh 5 procs (max_processes 3)"};

sandbox::exec_request make_exec(kind k, const std::string& tag_name, const std::string& tag)
{
    sandbox::exec_request r;
    r.options.env.allow = std::vector<std::string>{"PATH"};
    r.options.env.inject[tag_name] = tag;
    constexpr std::int64_t mem_cap = 256LL << 20;
    switch (k)
    {
    case kind::true_capped:
        r.command = "/bin/true";
        r.options.limits.memory_bytes = mem_cap;
        break;
    case kind::sleep_timeout:
        r.command = "/bin/sleep";
        r.args = {"5"};
        r.options.timeout = 50ms;
        r.options.limits.memory_bytes = mem_cap;
        break;
    case kind::shell_bg_timeout:
        r.command = "/bin/sh";
        r.args = {"-c", "sleep 5 & sleep 5 & sleep 5"};
        r.options.timeout = 80ms;
        r.options.limits.max_processes = 64;
        break;
    case kind::over_process_cap:
        r.command = "/bin/sh";
        r.args = {"-c", "sleep 5 & sleep 5 & sleep 5 & sleep 5 & wait"};
        r.options.timeout = 3s; // a safety net only: the cap must fire first
        r.options.limits.max_processes = 3;
        break;
    }
    return r;
}

// Empty when `ec`/`r` is what kind `k` must end with, else what was wrong.
std::string check_outcome(kind k, const error_code& ec, const sandbox::exec_result& r)
{
    bool ok = false;
    switch (k)
    {
    case kind::true_capped:
        ok = !ec && r.status == sandbox::exec_status::exited && r.exit_code == 0;
        break;
    case kind::sleep_timeout:
    case kind::shell_bg_timeout:
        ok = ec == sandbox::errc::timeout && r.status == sandbox::exec_status::timed_out;
        break;
    case kind::over_process_cap:
        ok = ec == sandbox::errc::budget_exceeded &&
             r.status == sandbox::exec_status::budget_exceeded &&
             r.budget == sandbox::budget_kind::processes;
        break;
    }
    if (ok)
        return {};
    return std::string(kind_names[static_cast<int>(k)]) + ": " + (ec ? ec.message() : "no error") +
           "; status " + sandbox::to_string(r.status) + ", exit " + std::to_string(r.exit_code) +
           ", budget " + sandbox::to_string(r.budget) + ": " + r.diag.message;
}

struct kind_stats
{
    int done = 0;
    int wrong = 0;
    std::vector<double> wall_ms{};
};

// One io_context, run by this thread: the probe timer, then the probe timer and the execs.
class loop_run
{
public:
    loop_run(const config& cfg, std::string tag_name, std::string tag)
        : cfg_(cfg), tag_name_(std::move(tag_name)), tag_(std::move(tag)),
          runner_(ioc_.get_executor(), runner_options()), probe_(ioc_), phase_(ioc_),
          watchdog_(ioc_), slots_(static_cast<std::size_t>(cfg.inflight))
    {
        idle_late_.reserve(static_cast<std::size_t>(cfg.idle_phase.count()) + 64);
        busy_late_.reserve(static_cast<std::size_t>(cfg.busy_phase.count()) + 64);
    }

    void run()
    {
        t0_ = clock_type::now();
        cpu0_ = cpu_ms_self();
        busy_start_ = t0_ + cfg_.idle_phase;
        busy_end_ = busy_start_ + cfg_.busy_phase;
        arm_probe();
        phase_.expires_at(busy_start_);
        phase_.async_wait([this](error_code ec) {
            if (!ec && !stopping_)
                start_busy();
        });
        g_in_loop.store(true);
        ioc_.run();
        g_in_loop.store(false);
        wall_s_ = seconds_since(t0_);
    }

    const std::vector<double>& idle_late() const { return idle_late_; }
    const std::vector<double>& busy_late() const { return busy_late_; }
    const std::array<kind_stats, kind_count>& kinds() const { return kinds_; }
    int completed_in_window() const { return completed_in_window_; }
    int completed() const { return completed_; }
    int launched() const { return launched_; }
    bool drained() const { return inflight_ == 0; }
    double idle_cpu_ms_per_s() const { return idle_cpu_ms_ / idle_s_; }
    double busy_cpu_ms_per_s() const { return busy_cpu_ms_ / busy_s_; }
    const sandbox::sampler_stats& sampler_delta() const { return sampler_delta_; }
    double drain_s() const { return drain_s_; }

private:
    static sandbox::local_runner_options runner_options()
    {
        sandbox::local_runner_options o;
        o.root = "/";
        return o;
    }

    void arm_probe()
    {
        probe_.expires_after(1ms);
        probe_.async_wait([this](error_code ec) {
            if (ec || probe_stopped_)
                return;
            const auto now = clock_type::now();
            const auto scheduled = probe_.expiry();
            const double late = us_between(scheduled, now);
            if (scheduled < busy_start_)
                idle_late_.push_back(late);
            else if (scheduled < busy_end_)
                busy_late_.push_back(late);
            if (g_signal.load() != 0)
            {
                interrupt();
                return;
            }
            arm_probe();
        });
    }

    void start_busy()
    {
        const auto now = clock_type::now();
        idle_s_ = std::chrono::duration<double>(now - t0_).count();
        busy_cpu_ms_ = cpu_ms_self(); // the start; end_busy turns it into the phase's CPU
        idle_cpu_ms_ = busy_cpu_ms_ - cpu0_;
        sampler0_ = sandbox::get_sampler_stats(ioc_.get_executor());
        for (std::size_t s = 0; s < slots_.size(); ++s)
            launch(s);
        phase_.expires_at(busy_end_);
        phase_.async_wait([this](error_code ec) {
            if (!ec)
                end_busy();
        });
    }

    void end_busy()
    {
        busy_s_ = seconds_since(busy_start_);
        busy_cpu_ms_ = cpu_ms_self() - busy_cpu_ms_;
        auto s1 = sandbox::get_sampler_stats(ioc_.get_executor());
        sampler_delta_.ticks = s1.ticks - sampler0_.ticks;
        sampler_delta_.samples = s1.samples - sampler0_.samples;
        sampler_delta_.failed_samples = s1.failed_samples - sampler0_.failed_samples;
        sampler_delta_.budget_kills = s1.budget_kills - sampler0_.budget_kills;
        sampler_delta_.unenforceable_kills = s1.unenforceable_kills - sampler0_.unenforceable_kills;
        stop_all(false);
    }

    // Stops launching and probing; `cancel`: also cancel the execs in flight (interrupted).
    void stop_all(bool cancel)
    {
        if (stopping_)
            return;
        stopping_ = true;
        drain_t0_ = clock_type::now();
        probe_stopped_ = true;
        probe_.cancel();
        phase_.cancel();
        if (cancel)
            for (auto& s : slots_)
                s.emit(asio::cancellation_type::terminal);
        if (inflight_ == 0)
            return;
        watchdog_.expires_after(30s);
        watchdog_.async_wait([this](error_code ec) {
            if (ec || inflight_ == 0)
                return;
            record_error(std::to_string(inflight_) +
                         " exec(s) did not complete within 30 s of the end of the window");
            ioc_.stop();
        });
    }

    void interrupt()
    {
        if (idle_s_ == 0)
            idle_s_ = seconds_since(t0_);
        stop_all(true);
    }

    void launch(std::size_t slot)
    {
        if (stopping_)
            return;
        const auto k = static_cast<kind>(launched_ % kind_count);
        ++launched_;
        ++inflight_;
        const auto t0 = clock_type::now();
        sandbox::async_exec(
            runner_, make_exec(k, tag_name_, tag_),
            asio::bind_cancellation_slot(
                slots_[slot].slot(), [this, k, slot, t0](error_code ec, sandbox::exec_result r) {
                    const auto now = clock_type::now();
                    --inflight_;
                    ++completed_;
                    if (now < busy_end_)
                        ++completed_in_window_;
                    auto& ks = kinds_[static_cast<int>(k)];
                    ++ks.done;
                    ks.wall_ms.push_back(us_between(t0, now) / 1e3);
                    const bool interrupted =
                        g_signal.load() != 0 && ec == asio::error::operation_aborted;
                    if (!interrupted)
                        if (auto what = check_outcome(k, ec, r); !what.empty())
                        {
                            ++ks.wrong;
                            record_error(what);
                        }
                    if (stopping_)
                    {
                        if (inflight_ == 0)
                        {
                            drain_s_ = seconds_since(drain_t0_);
                            watchdog_.cancel();
                        }
                        return;
                    }
                    launch(slot);
                }));
    }

    const config& cfg_;
    std::string tag_name_, tag_;
    asio::io_context ioc_;
    sandbox::local_runner runner_;
    asio::steady_timer probe_, phase_, watchdog_;
    std::vector<asio::cancellation_signal> slots_;

    clock_type::time_point t0_{}, busy_start_{}, busy_end_{}, drain_t0_{};
    std::vector<double> idle_late_, busy_late_;
    std::array<kind_stats, kind_count> kinds_{};
    bool probe_stopped_ = false, stopping_ = false;
    int launched_ = 0, inflight_ = 0, completed_ = 0, completed_in_window_ = 0;
    double cpu0_ = 0, idle_s_ = 0, busy_s_ = 0, idle_cpu_ms_ = 0, busy_cpu_ms_ = 0, wall_s_ = 0,
           drain_s_ = 0;
    sandbox::sampler_stats sampler0_{}, sampler_delta_{};
};

void case_timer_lateness(const config& cfg)
{
    const std::string tag_name = "SBX_LOOP_BENCH_TAG";
    const std::string tag = std::to_string(::getpid());
    std::vector<std::string> notes;

    const auto f0 = clock_type::now();
    idle_children idle(cfg.idle);
    if (idle.size() != cfg.idle || g_signal.load() != 0)
        return; // error recorded (or interrupted); the destructor cleans up
    const double fork_s = seconds_since(f0);
    std::fprintf(stderr, "%s: %d idle processes forked in %.2f s; running the loop...\n",
                 case_timer, idle.size(), fork_s);

    std::optional<loop_run> run;
    run.emplace(cfg, tag_name, tag);
    run->run();
    if (g_signal.load() != 0)
        return;

    // Every exec completed, so every tree must be gone: no process anywhere with this run's tag
    // (checked before the io_context goes; children of ours: after, see below).
    if (auto left = tagged_processes(tag_name + "=" + tag); !left.empty())
    {
        record_error(std::to_string(left.size()) +
                     " process(es) of killed trees still alive after completion, first pid " +
                     std::to_string(left[0]) + " (now killed)");
        for (pid_t p : left)
            ::kill(p, SIGKILL);
    }
    if (!run->drained())
        record_error("execs still in flight at the end");

    const std::vector<double> idle_l = run->idle_late();
    const std::vector<double> busy_l = run->busy_late();
    // A stalled loop fires the probe rarely (that is a figure); never firing is a broken run.
    if (idle_l.size() < 10 || busy_l.empty())
        record_error("the probe timer fired too rarely (" + std::to_string(idle_l.size()) +
                     " idle, " + std::to_string(busy_l.size()) + " measured expiries)");

    figure p99{std::string(case_timer) + "_p99", "p99 lateness", "us"};
    p99.value = percentile(busy_l, 99);
    p99.baseline = percentile(idle_l, 99);
    p99.target = "<= idle + 2000 us";
    p99.pass = p99.value <= *p99.baseline + 2000;
    figure mx{std::string(case_timer) + "_max", "max lateness", "us"};
    mx.value = max_of(busy_l);
    mx.baseline = max_of(idle_l);
    figure ex{std::string(case_timer) + "_execs", "execs completed", "execs"};
    ex.value = run->completed_in_window();

    char b[512];
    std::snprintf(b, sizeof b,
                  "p50 lateness: measured %s us, idle %s us; p99.9: measured %s us, idle %s us; "
                  "expiries: measured %zu, idle %zu",
                  fmt_value(percentile(busy_l, 50)).c_str(),
                  fmt_value(percentile(idle_l, 50)).c_str(),
                  fmt_value(percentile(busy_l, 99.9)).c_str(),
                  fmt_value(percentile(idle_l, 99.9)).c_str(), busy_l.size(), idle_l.size());
    notes.push_back(b);
    auto over = [](const std::vector<double>& v, double us) {
        return static_cast<long>(
            std::count_if(v.begin(), v.end(), [us](double x) { return x > us; }));
    };
    std::snprintf(
        b, sizeof b,
        "expiries later than 1 / 5 / 20 ms: measured %ld / %ld / %ld, idle %ld / %ld / %ld",
        over(busy_l, 1e3), over(busy_l, 5e3), over(busy_l, 20e3), over(idle_l, 1e3),
        over(idle_l, 5e3), over(idle_l, 20e3));
    notes.push_back(b);
    std::snprintf(b, sizeof b,
                  "execs: %d launched, %d completed in the window, %d after it (drained in %.0f "
                  "ms), %d in flight at once",
                  run->launched(), run->completed_in_window(),
                  run->completed() - run->completed_in_window(), run->drain_s() * 1e3,
                  cfg.inflight);
    notes.push_back(b);
    for (int k = 0; k < kind_count; ++k)
    {
        const auto& ks = run->kinds()[static_cast<std::size_t>(k)];
        std::snprintf(b, sizeof b, "  %-30s %5d done, %d wrong, wall median %.1f ms, max %.1f ms",
                      kind_names[k], ks.done, ks.wrong, percentile(ks.wall_ms, 50),
                      max_of(ks.wall_ms));
        notes.push_back(b);
    }
    const auto& sd = run->sampler_delta();
    std::snprintf(b, sizeof b,
                  "sampler in the window: %" PRIu64 " ticks, %" PRIu64 " samples, %" PRIu64
                  " failed, %" PRIu64 " budget kills, %" PRIu64 " unenforceable kills",
                  sd.ticks, sd.samples, sd.failed_samples, sd.budget_kills, sd.unenforceable_kills);
    notes.push_back(b);
    std::snprintf(b, sizeof b,
                  "CPU of this process: measured %.0f ms/s, idle %.1f ms/s; %d idle processes "
                  "forked in %.2f s",
                  run->busy_cpu_ms_per_s(), run->idle_cpu_ms_per_s(), idle.size(), fork_s);
    notes.push_back(b);
    notes.push_back("lateness = handler entry - scheduled expiry of a 1 ms steady_timer re-armed "
                    "with expires_after(1ms) from its handler");
    notes.push_back("target (the issue): measured p99 at most 2 ms above idle p99; p99 delta = " +
                    fmt_value(p99.value - *p99.baseline) + " us");
    // Destroying the io_context shuts down what the library keeps per execution context (a
    // helper process may be our child while it lives); then no child but the idle ones.
    run.reset();
    std::set<pid_t> idle_set(g_idle_pids, g_idle_pids + idle.size());
    int extra = 0;
    for (pid_t p : bench::my_children())
        if (!idle_set.count(p))
            ++extra;
    if (extra > 0)
        record_error(std::to_string(extra) +
                     " child process(es) besides the idle ones left after the io_context ended");
    report(std::string(case_timer) + ": " + std::to_string(idle.size()) +
               " idle processes, 1 ms timer on one io_context thread; idle " +
               std::to_string(cfg.idle_phase.count()) + " ms, then " +
               std::to_string(cfg.busy_phase.count()) + " ms with " + std::to_string(cfg.inflight) +
               " capped execs in flight",
           "measured", "idle", {p99, mx, ex}, notes);
    // `idle` goes out of scope here: every idle child is killed and reaped.
}

// ---------------------------------------------------------------- cli_true

class spawner
{
public:
    spawner()
    {
        null_r_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        null_w_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null_r_ < 0 || null_w_ < 0)
            throw std::runtime_error(std::string("open /dev/null: ") + std::strerror(errno));
        ::posix_spawn_file_actions_init(&fa_);
        ::posix_spawn_file_actions_adddup2(&fa_, null_r_, 0);
        ::posix_spawn_file_actions_adddup2(&fa_, null_w_, 1);
        ::posix_spawn_file_actions_adddup2(&fa_, null_w_, 2);
    }
    spawner(const spawner&) = delete;
    spawner& operator=(const spawner&) = delete;
    ~spawner()
    {
        ::posix_spawn_file_actions_destroy(&fa_);
        ::close(null_r_);
        ::close(null_w_);
    }

    // Wall us from posix_spawn to the reap; nullopt (and an error recorded) when the command
    // could not be spawned or did not exit with 0.
    std::optional<double> run(const std::vector<std::string>& args)
    {
        std::vector<char*> argv;
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        pid_t pid = -1;
        const auto t0 = clock_type::now();
        const int rc = ::posix_spawn(&pid, argv[0], &fa_, nullptr, argv.data(), environ);
        if (rc != 0)
        {
            record_error("posix_spawn " + args[0] + ": " + std::strerror(rc));
            return std::nullopt;
        }
        int st = 0;
        pid_t r;
        while ((r = ::waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        {}
        const double us = us_between(t0, clock_type::now());
        if (r != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        {
            record_error(args[0] + " did not exit with 0 (wait status " + std::to_string(st) + ")");
            return std::nullopt;
        }
        return us;
    }

private:
    posix_spawn_file_actions_t fa_{};
    int null_r_ = -1, null_w_ = -1;
};

// Median wall of `ours` against `base`, alternating which goes first (so neither always
// runs on a cache the other warmed). Empty when interrupted or when nothing ran.
struct paired_runs
{
    std::vector<double> ours, base;
};

paired_runs alternate(const config& cfg, const std::vector<std::string>& ours,
                      const std::vector<std::string>& base, int n)
{
    spawner sp;
    const int warm = cfg.quick ? 3 : 10;
    const std::size_t errors0 = g_errors.size();
    for (int i = 0; i < warm && g_signal.load() == 0; ++i)
    {
        sp.run(base);
        sp.run(ours);
    }
    paired_runs r;
    auto one = [&](const std::vector<std::string>& args, std::vector<double>& into) {
        if (auto v = sp.run(args))
            into.push_back(*v);
    };
    for (int i = 0; i < n && g_signal.load() == 0; ++i)
    {
        if (i % 2 == 0)
            one(base, r.base), one(ours, r.ours);
        else
            one(ours, r.ours), one(base, r.base);
        if (g_errors.size() > errors0 + 5)
            break;
    }
    return r;
}

void report_pair(const std::string& json_case, const std::string& title, const paired_runs& r,
                 double target, const std::vector<std::string>& notes)
{
    if (g_signal.load() != 0 || r.ours.empty() || r.base.empty())
        return;
    figure f{json_case, "median wall", "us"};
    f.value = percentile(r.ours, 50);
    f.baseline = percentile(r.base, 50);
    f.target = "ratio <= " + fmt_value(target);
    f.pass = *f.ratio() <= target;
    char b[400];
    std::snprintf(
        b, sizeof b, "p10 / p90: sandbox-run %s / %s us, baseline %s / %s us; runs: %zu and %zu",
        fmt_value(percentile(r.ours, 10)).c_str(), fmt_value(percentile(r.ours, 90)).c_str(),
        fmt_value(percentile(r.base, 10)).c_str(), fmt_value(percentile(r.base, 90)).c_str(),
        r.ours.size(), r.base.size());
    std::vector<std::string> all{b};
    all.insert(all.end(), notes.begin(), notes.end());
    report(title, "sandbox-run", "baseline", {f}, all);
}

void case_cli_true(const config& cfg)
{
    // The local backend, as this figure has always measured (the default, auto, would run
    // bwrap where it works).
    const std::vector<std::string> ours{cfg.sandbox_run, "--backend", "local", "--", "/bin/true"};
    const std::vector<std::string> base{"/usr/bin/env", "/bin/true"};
    report_pair(case_cli,
                std::string(case_cli) + ": `sandbox-run --backend local -- /bin/true` (default "
                                        "policy) vs `env /bin/true`, posix_spawn + waitpid, "
                                        "alternating",
                alternate(cfg, ours, base, cfg.cli_n), 3.0,
                {"sandbox-run: " + cfg.sandbox_run,
                 "stdin, stdout, stderr: /dev/null; the environment of this program for both"});
}

// A work directory for the bwrap row: every built-in write-deny path exists in it (so the
// command line names the same binds each run, and the bare line can bind them too), owned
// by the sandbox user when this runs as root (the user a root caller's commands run as).
class bwrap_work_dir
{
public:
    bwrap_work_dir()
    {
        char tmpl[] = "/var/tmp/sbx-loop-bench-XXXXXX";
        if (!::mkdtemp(tmpl))
            throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
        path_ = tmpl;
        std::string cmd = "chmod 755 " + path_ + " && mkdir -p " + path_ + "/.git && touch " +
                          path_ + "/.git/config";
        for (const auto& e : sandbox::bwrap::default_write_deny())
            if (e.relative != ".git/config")
                cmd += " && mkdir -p " + path_ + "/" + e.relative;
        if (::geteuid() == 0)
            cmd += " && chown -R 65534:65534 " + path_;
        if (std::system(cmd.c_str()) != 0)
            throw std::runtime_error("cannot prepare " + path_);
    }
    bwrap_work_dir(const bwrap_work_dir&) = delete;
    bwrap_work_dir& operator=(const bwrap_work_dir&) = delete;
    ~bwrap_work_dir() { (void)std::system(("rm -rf " + path_).c_str()); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// The namespaces and mounts sandbox-run's default bwrap sandbox has (no network namespace:
// the default policy keeps the host's network), the write-deny paths bound read-only, run
// by bwrap directly as this user with bwrap's own init.
std::vector<std::string> bare_bwrap_line(const std::string& dir)
{
    std::vector<std::string> a{"/usr/bin/bwrap",
                               "--unshare-user",
                               "--disable-userns",
                               "--cap-drop",
                               "ALL",
                               "--unshare-pid",
                               "--unshare-ipc",
                               "--unshare-uts",
                               "--unshare-cgroup-try",
                               "--die-with-parent",
                               "--ro-bind",
                               "/",
                               "/",
                               "--tmpfs",
                               "/tmp",
                               "--bind",
                               dir,
                               dir,
                               "--proc",
                               "/proc",
                               "--dev",
                               "/dev",
                               "--remount-ro",
                               "/dev",
                               "--tmpfs",
                               "/dev/shm"};
    for (const auto& e : sandbox::bwrap::default_write_deny())
    {
        const std::string p = dir + "/" + e.relative;
        a.insert(a.end(), {"--ro-bind", p, p});
    }
    a.insert(a.end(), {"--chdir", dir, "--", "/bin/true"});
    return a;
}

void case_cli_true_bwrap(const config& cfg)
{
    if (::access("/usr/bin/bwrap", X_OK) != 0)
    {
        std::fprintf(stderr, "\n== %s: skipped (no /usr/bin/bwrap)\n", case_cli_bwrap);
        return;
    }
    bwrap_work_dir dir;
    const std::vector<std::string> ours{cfg.sandbox_run, "--backend", "bwrap",    "--root",
                                        dir.path(),      "--",        "/bin/true"};
    report_pair(case_cli_bwrap,
                std::string(case_cli_bwrap) +
                    ": `sandbox-run --backend bwrap -- /bin/true` (default policy) vs bare "
                    "bwrap with the same namespaces and mounts, alternating",
                alternate(cfg, ours, bare_bwrap_line(dir.path()), cfg.cli_n / 4), 1.5,
                {"sandbox-run: " + cfg.sandbox_run +
                     " (as root: the command runs as the "
                     "sandbox user, through the helper)",
                 "bare: bwrap run directly by this program, bwrap's own init as pid 1",
                 "work dir " + dir.path() + ": every built-in write-deny path exists there"});
}

// ---------------------------------------------------------------- main

[[noreturn]] void usage(const std::string& msg)
{
    std::fprintf(stderr,
                 "loop_bench: %s\nusage: loop_bench [--quick] [--case NAME]... "
                 "[--sandbox-run PATH]\n  cases:",
                 msg.c_str());
    for (const char* c : all_cases)
        std::fprintf(stderr, " %s", c);
    std::fprintf(stderr, "\n");
    std::exit(64);
}

void on_terminate()
{
    kill_and_reap_idle();
    std::abort();
}

int run_cases(const config& cfg)
{
    const auto t0 = clock_type::now();
    bench::print_machine(stderr);
    std::fprintf(stderr,
                 "config: idle=%d idle_phase=%lld ms busy_phase=%lld ms inflight=%d "
                 "cli_n=%d%s\n",
                 cfg.idle, static_cast<long long>(cfg.idle_phase.count()),
                 static_cast<long long>(cfg.busy_phase.count()), cfg.inflight, cfg.cli_n,
                 cfg.quick ? " (quick)" : "");
    try
    {
        if (cfg.want(case_timer) && g_signal.load() == 0)
            case_timer_lateness(cfg);
        if (cfg.want(case_cli) && g_signal.load() == 0)
            case_cli_true(cfg);
        if (cfg.want(case_cli_bwrap) && g_signal.load() == 0)
            case_cli_true_bwrap(cfg);
    }
    catch (const std::exception& e)
    {
        record_error(std::string("exception: ") + e.what());
    }
    kill_and_reap_idle(); // normally a no-op: each case reaps its own
    if (const int sig = g_signal.load(); sig != 0)
    {
        std::fprintf(stderr, "\nloop_bench: interrupted by signal %d; cleaned up\n", sig);
        return 128 + sig;
    }
    if (auto kids = bench::my_children(); !kids.empty())
        record_error(std::to_string(kids.size()) +
                     " child process(es) left at the end, first pid " + std::to_string(kids[0]));
    std::fprintf(stderr, "\nloop_bench: done in %.1f s; targets missed: %zu; wrong results: %zu\n",
                 seconds_since(t0), g_missed.size(), g_errors.size());
    for (const auto& m : g_missed)
        std::fprintf(stderr, "   missed: %s\n", m.c_str());
    for (const auto& e : g_errors)
        std::fprintf(stderr, "   wrong: %s\n", e.c_str());
    return g_errors.empty() ? 0 : 1;
}

} // namespace

int main(int argc, char** argv)
{
    config cfg;
    bool sandbox_run_flag = false;
    for (int i = 1; i < argc; ++i)
    {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc)
                usage("missing value after " + a);
            return argv[++i];
        };
        if (a == "--quick")
            cfg.quick = true;
        else if (a == "--case")
        {
            std::string c = value();
            if (std::find(std::begin(all_cases), std::end(all_cases), c) == std::end(all_cases))
                usage("unknown case " + c);
            cfg.cases.insert(c);
        }
        else if (a == "--sandbox-run")
        {
            cfg.sandbox_run = value();
            sandbox_run_flag = true;
        }
        else if (a == "--help" || a == "-h")
            usage("help");
        else
            usage("unknown argument " + a);
    }
    if (cfg.quick)
    {
        cfg.idle = 300;
        cfg.idle_phase = 1000ms;
        cfg.busy_phase = 2000ms;
        cfg.cli_n = 40;
    }
    if (cfg.want(case_cli) || cfg.want(case_cli_bwrap))
    {
        if (cfg.sandbox_run.empty())
            usage("no sandbox-run path built in (SANDBOX_BUILD_TOOLS=OFF): pass --sandbox-run");
        if (::access(cfg.sandbox_run.c_str(), X_OK) != 0)
        {
            if (sandbox_run_flag)
                usage("--sandbox-run " + cfg.sandbox_run + ": not executable");
            std::fprintf(stderr, "loop_bench: sandbox-run not found at %s (build it first)\n",
                         cfg.sandbox_run.c_str());
            return 1;
        }
    }
    install_signal_handlers();
    std::atexit(kill_and_reap_idle);
    std::set_terminate(on_terminate);
    return run_cases(cfg);
}
