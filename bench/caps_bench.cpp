// bench/caps_bench.cpp: how exact the caps are, against a baseline in the same run.
//
// Cases (one JSON line per figure; ratio = value / baseline):
//   cpu_3level        sh → 2 burners → 3 children each: reported cpu_time vs the bare run's
//                     RUSAGE_CHILDREN (sampled: a memory cap that never trips); medians of 3
//   cpu_compiler      g++ -O2 -c of a small file (driver → cc1plus, as): its cpu varies by
//                     ±20 % between runs here, so it is compared with the same run's own
//                     RUSAGE_CHILDREN, read by a wrapper inside the sandbox; medians of 3
//   cpu_threads       one process, 4 threads burning 200 ms each, same comparison
//   cpu_kernel_reaped 4 children of a parent that ignores SIGCHLD (the kernel reaps them):
//                     reported cpu_time vs the bare run of the same job with SIGCHLD default
//   cpu_reaper_ends   6 parents, one after the other, that ignore SIGCHLD and end the moment
//                     their burner does: vs the bare run of the same with waiting parents
//   cpu_*_cgroup      the five cpu cases on the cgroup path (cpu.stat of the tree's own
//                     cgroup), where it is used here; every other case runs with it off
//   mem_overshoot     an allocator at full speed after a quiet start, 128 MiB cap: the
//                     leader's peak RSS (kernel high-water mark) vs the cap, worst of 5;
//                     _2threads: two threads allocating at once; _populate: MAP_POPULATE
//   procs_overshoot   a binary fork tree under max_processes 50: processes counted at the kill
//                     vs the cap
//   mem_shared        40 `sleep`s: the footprint judged under a 16 MiB cap (PSS, read once the
//                     RSS sum reaches the cap) vs the RSS sum seen under a cap that never trips
//   watch_*           a cap watch (sandbox/backend/cap_watch.hpp) on a process this program
//                     spawns itself: watch_mem_overshoot, the leader's peak (kernel high-water
//                     mark) under a 128 MiB cap, worst of 5, vs an exec's in the same run;
//                     watch_cpu, the cpu time the watch reports for 4 threads burning 200 ms
//                     each vs the process's own rusage (the last sample's: the watch ends with
//                     the process)
//
// The burners are this program (`--child ...`), so the cpu work is fixed whatever the load.
// Exit status: 0 when every run was correct (figures are reported, not asserted), 1 when a
// result was wrong (an exec failed or ended unexpectedly), 64 on a usage error.
#include "common.hpp"

#include <sandbox/backend/cap_watch.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <spawn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

namespace {

using namespace std::chrono_literals;
constexpr std::int64_t mib = 1024 * 1024;
std::string self_path;
int wrong = 0;
// Rounds of each cpu case, and worst-of runs of each overshoot case (--quick: one each, a
// smoke run that checks every case still works, not a measurement).
int rounds = 3;
int overshoot_runs = 5;

// ---------------------------------------------------------------- child jobs

void spin(clockid_t clock, long ms)
{
    auto now = [clock] {
        timespec ts{};
        ::clock_gettime(clock, &ts);
        return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
    };
    const auto end = now() + std::chrono::milliseconds(ms);
    volatile unsigned long sink = 0;
    while (now() < end)
        for (int i = 0; i < 10000; ++i)
            sink = sink + 1;
}

void cpu_stream(long n, long ms)
{
    for (long i = 0; i < n; ++i)
    {
        pid_t p = ::fork();
        if (p == 0)
        {
            spin(CLOCK_PROCESS_CPUTIME_ID, ms);
            ::_exit(0);
        }
        while (::waitpid(p, nullptr, 0) < 0 && errno == EINTR)
        {
        }
    }
}

// Runs ARGV, waits for it, prints its whole cpu time (its RUSAGE_CHILDREN, in ms) on
// stdout and exits as it did: the truth of the very run that is being measured.
int rusage_of(int argc, char** argv)
{
    if (argc < 1)
        return 64;
    pid_t pid = -1;
    if (::posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ) != 0)
        return 127;
    int status = 0;
    struct rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    std::printf("%.3f\n", ru.ru_utime.tv_sec * 1000.0 + ru.ru_utime.tv_usec / 1000.0 +
                              ru.ru_stime.tv_sec * 1000.0 + ru.ru_stime.tv_usec / 1000.0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void fork_tree(int depth)
{
    for (int d = 0; d < depth; ++d)
        if (::fork() < 0)
            break;
    ::pause();
}

int child_main(int argc, char** argv)
{
    const std::string job = argc > 2 ? argv[2] : "";
    auto arg = [&](int i) { return argc > i ? std::atol(argv[i]) : 0L; };
    if (job == "rusage-of")
        return rusage_of(argc - 3, argv + 3);
    if (job == "cpu-stream")
        cpu_stream(arg(3), arg(4));
    else if (job == "reaped-stream")
    {
        ::signal(SIGCHLD, SIG_IGN);
        cpu_stream(arg(3), arg(4));
    }
    else if (job == "parent-stream")
    {
        // N parents one after the other, each forking a burner and exiting the moment it
        // ends: "ignore" parents ignore SIGCHLD (the kernel reaps the burner), "wait" ones
        // wait for it.
        const bool ignore = argc > 5 && std::strcmp(argv[5], "ignore") == 0;
        for (long i = 0; i < arg(3); ++i)
        {
            pid_t parent = ::fork();
            if (parent == 0)
            {
                if (ignore)
                    ::signal(SIGCHLD, SIG_IGN);
                int p[2];
                if (::pipe(p) != 0)
                    ::_exit(1);
                pid_t burner = ::fork();
                if (burner == 0)
                {
                    ::close(p[0]);
                    spin(CLOCK_PROCESS_CPUTIME_ID, arg(4));
                    ::_exit(0);
                }
                ::close(p[1]);
                char c;
                while (::read(p[0], &c, 1) < 0 && errno == EINTR)
                {
                }
                if (!ignore)
                    ::waitpid(burner, nullptr, 0);
                ::_exit(0);
            }
            while (::waitpid(parent, nullptr, 0) < 0 && errno == EINTR)
            {
            }
        }
    }
    else if (job == "threads")
    {
        std::vector<std::thread> ts;
        for (long i = 0; i < arg(3); ++i)
            ts.emplace_back([ms = arg(4)] { spin(CLOCK_THREAD_CPUTIME_ID, ms); });
        for (auto& t : ts)
            t.join();
    }
    else if (job == "alloc-after")
    {
        // MS MIB THREADS [populate]: after MS ms, THREADS threads each fault in MIB MiB at
        // full speed, 1 MiB at a time (a byte written per page, or MAP_POPULATE).
        std::this_thread::sleep_for(std::chrono::milliseconds(arg(3)));
        const bool populate = argc > 6 && std::strcmp(argv[6], "populate") == 0;
        std::vector<std::thread> ts;
        for (long t = 0; t < std::max(arg(5), 1L); ++t)
            ts.emplace_back([n = arg(4), populate] {
                for (long i = 0; i < n; ++i)
                    if (populate)
                        ::mmap(nullptr, mib, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
                    else if (auto* p = static_cast<volatile char*>(std::malloc(mib)))
                        for (long off = 0; off < mib; off += 4096)
                            p[off] = 1;
            });
        for (auto& t : ts)
            t.join();
    }
    else if (job == "fork-tree")
        fork_tree(static_cast<int>(arg(3)));
    else
        return 64;
    return 0;
}

// ---------------------------------------------------------------- running

double ms_of(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

double bare_cpu_ms(const std::vector<std::string>& argv)
{
    std::vector<char*> a;
    for (const auto& s : argv)
        a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawn(&pid, a[0], nullptr, nullptr, a.data(), environ) != 0)
        return ++wrong, 0.0;
    int status = 0;
    struct rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        ++wrong;
    auto tv = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
    return tv(ru.ru_utime) + tv(ru.ru_stime);
}

// The runners' cgroup setting: the sampler path unless the cgroup cases run.
std::string g_cgroup = "off";

sandbox::exec_result run(const std::vector<std::string>& argv, sandbox::exec_options o,
                         boost::system::error_code& ec,
                         std::chrono::nanoseconds interval = sandbox::default_sample_interval)
{
    boost::asio::io_context ioc;
    sandbox::local_runner_options ro;
    ro.root = "/";
    ro.sample_interval = interval;
    ro.cgroup = g_cgroup;
    sandbox::local_runner runner(ioc.get_executor(), ro);
    sandbox::exec_request req;
    req.command = argv[0];
    req.args.assign(argv.begin() + 1, argv.end());
    if (o.timeout == 0ns)
        o.timeout = 60s;
    req.options = o;
    sandbox::exec_result res;
    sandbox::async_exec(runner, std::move(req),
                        [&](boost::system::error_code e, sandbox::exec_result r) {
                            ec = e;
                            res = std::move(r);
                        });
    ioc.run();
    return res;
}

void print(const std::string& name, double value, const char* unit, double baseline)
{
    bench::print_json("caps_bench", name, value, unit, baseline);
}

std::vector<std::string> child(std::vector<std::string> args)
{
    args.insert(args.begin(), {self_path, "--child"});
    return args;
}

// Three rounds, bare and ours in turn; the medians. A job's own cpu time varies from run to
// run (a compiler's by ±20 % on this VM), so one pair is not a measurement.
void cpu_case(const std::string& name, const std::vector<std::string>& job,
              const std::vector<std::string>& bare_job)
{
    const auto cpu = bench::measure_rounds(rounds, [&] {
        const double bare = bare_cpu_ms(bare_job);
        sandbox::exec_options o;
        o.limits.memory_bytes = 64 * 1024 * mib; // never trips: the worker samples the tree
        boost::system::error_code ec;
        auto r = run(job, o, ec);
        if (ec || r.exit_code != 0)
            ++wrong;
        return std::pair{ms_of(r.cpu_time), bare};
    });
    print(name, cpu.ours_median(), "ms", cpu.base_median());
}

// For a job whose own cpu varies from run to run (a compiler): ours against the truth of the
// same run, its RUSAGE_CHILDREN read by a wrapper inside the sandbox (the wrapper's own
// fraction of a millisecond is in ours). Medians of three runs.
void cpu_case_same_run(const std::string& name, const std::vector<std::string>& job)
{
    auto wrapped = job;
    wrapped.insert(wrapped.begin(), "rusage-of");
    const auto cpu = bench::measure_rounds(rounds, [&] {
        sandbox::exec_options o;
        o.limits.memory_bytes = 64 * 1024 * mib; // never trips: the worker samples the tree
        boost::system::error_code ec;
        auto r = run(child(wrapped), o, ec);
        if (ec || r.exit_code != 0)
            ++wrong;
        return std::pair{ms_of(r.cpu_time), std::atof(r.out.data.c_str())};
    });
    print(name, cpu.ours_median(), "ms", cpu.base_median());
}

void cpu_cases(const std::string& suffix = "")
{
    const std::string me = self_path + " --child cpu-stream 3 120";
    const std::vector<std::string> three{"/bin/sh", "-c", me + " & " + me + "; wait"};
    cpu_case("cpu_3level" + suffix, three, three);

    const auto dir = std::filesystem::temp_directory_path() / ("caps_bench." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "unit.cpp") << "#include <map>\n#include <string>\n"
                                       "int f(const std::map<std::string,int>& m){return (int)m.size();}\n";
    const std::vector<std::string> gxx{"/usr/bin/g++", "-O2", "-c", (dir / "unit.cpp").string(),
                                       "-o", (dir / "unit.o").string()};
    cpu_case_same_run("cpu_compiler" + suffix, gxx);
    std::filesystem::remove_all(dir);

    const auto threads = child({"threads", "4", "200"});
    cpu_case("cpu_threads" + suffix, threads, threads);
    cpu_case("cpu_kernel_reaped" + suffix, child({"reaped-stream", "4", "250"}),
             child({"cpu-stream", "4", "250"}));
    cpu_case("cpu_reaper_ends" + suffix, child({"parent-stream", "6", "150", "ignore"}),
             child({"parent-stream", "6", "150", "wait"}));
}

// The cpu cases again on the cgroup path, where this host offers it.
void cgroup_cpu_cases()
{
    boost::asio::io_context ioc;
    sandbox::local_runner_options ro;
    ro.cgroup = "auto";
    const auto e = sandbox::local_runner(ioc.get_executor(), ro).enforcement();
    if (e.cpu_cap_by != "cgroup")
    {
        std::printf("cpu_*_cgroup: skipped: the cgroup path is not used here (%s)\n",
                    e.cgroup_notes.empty() ? "?" : e.cgroup_notes.front().c_str());
        return;
    }
    g_cgroup = "auto";
    cpu_cases("_cgroup");
    g_cgroup = "off";
}

void overshoot_cases()
{
    // The worst of five runs each: where the allocation starts between two samples is luck.
    auto mem_case = [](const char* name, std::vector<std::string> job) {
        sandbox::exec_options o;
        o.limits.memory_bytes = 128 * mib;
        double worst = 0;
        for (int round = 0; round < overshoot_runs; ++round)
        {
            boost::system::error_code ec;
            auto r = run(child(job), o, ec);
            if (r.status != sandbox::exec_status::budget_exceeded ||
                r.budget != sandbox::budget_kind::memory)
                ++wrong;
            worst = std::max(worst, static_cast<double>(r.peak_memory_bytes) / mib);
        }
        print(name, worst, "MiB", 128);
    };
    mem_case("mem_overshoot", {"alloc-after", "300", "4096", "1"});
    mem_case("mem_overshoot_2threads", {"alloc-after", "300", "2048", "2"});
    mem_case("mem_overshoot_populate", {"alloc-after", "300", "4096", "1", "populate"});
    {
        sandbox::exec_options o;
        o.limits.max_processes = 50;
        boost::system::error_code ec;
        auto r = run(child({"fork-tree", "11"}), o, ec);
        if (r.status != sandbox::exec_status::budget_exceeded)
            ++wrong;
        print("procs_overshoot", static_cast<double>(r.diag.observed), "processes", 50);
    }
    {
        const std::vector<std::string> sleeps{
            "/bin/sh", "-c", "i=0; while [ $i -lt 40 ]; do /bin/sleep 1 & i=$((i+1)); done; wait"};
        sandbox::exec_options o;
        o.limits.memory_bytes = 64 * 1024 * mib;
        boost::system::error_code ec;
        auto rss = run(sleeps, o, ec, 20ms);
        o.limits.memory_bytes = 16 * mib;
        auto pss = run(sleeps, o, ec, 20ms);
        if (ec || pss.status != sandbox::exec_status::exited)
            ++wrong;
        print("mem_shared", static_cast<double>(pss.peak_memory_bytes) / mib, "MiB",
              static_cast<double>(rss.peak_memory_bytes) / mib);
    }
}

// Spawns `argv` (this program's own children), watches it with `o`, reaps it: the watch's
// result, and the process's own rusage.
struct watched
{
    sandbox::backend::cap_watch_result result;
    boost::system::error_code ec;
    struct rusage ru
    {
    };
    int status = 0;
};

watched watch_run(const std::vector<std::string>& argv,
                  const sandbox::backend::cap_watch_options& o)
{
    std::vector<char*> a;
    for (const auto& s : argv)
        a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    watched w;
    pid_t pid = -1;
    if (::posix_spawn(&pid, a[0], nullptr, nullptr, a.data(), environ) != 0)
        return ++wrong, w;
    boost::asio::io_context ioc;
    sandbox::backend::async_watch_caps(
        ioc.get_executor(), pid, o,
        [&](boost::system::error_code ec, sandbox::backend::cap_watch_result r) {
            w.ec = ec;
            w.result = r;
        });
    ioc.run();
    ::wait4(pid, &w.status, 0, &w.ru);
    return w;
}

void watch_cases()
{
    sandbox::backend::cap_watch_options o;
    o.caps.memory_bytes = 128 * mib;
    double worst_watch = 0, worst_exec = 0;
    const auto job = child({"alloc-after", "300", "4096", "1"});
    for (int round = 0; round < overshoot_runs; ++round)
    {
        auto w = watch_run(job, o);
        if (w.ec || w.result.exceeded != sandbox::budget_kind::memory)
            ++wrong;
        const double peak = std::max<double>(static_cast<double>(w.result.peak_memory_bytes),
                                             static_cast<double>(w.ru.ru_maxrss) * 1024);
        worst_watch = std::max(worst_watch, peak / mib);
        sandbox::exec_options eo;
        eo.limits.memory_bytes = 128 * mib;
        boost::system::error_code ec;
        auto r = run(job, eo, ec);
        if (r.budget != sandbox::budget_kind::memory)
            ++wrong;
        worst_exec = std::max(worst_exec, static_cast<double>(r.peak_memory_bytes) / mib);
    }
    print("watch_mem_overshoot", worst_watch, "MiB", worst_exec);
    sandbox::backend::cap_watch_options never;
    never.caps.memory_bytes = 64 * 1024 * mib;
    const auto cpu = bench::measure_rounds(rounds, [&] {
        auto w = watch_run(child({"threads", "4", "200"}), never);
        if (w.ec || w.result.exceeded != sandbox::budget_kind::none || w.status != 0)
            ++wrong;
        auto tv = [](const timeval& t) { return t.tv_sec * 1000.0 + t.tv_usec / 1000.0; };
        return std::pair{ms_of(w.result.cpu), tv(w.ru.ru_utime) + tv(w.ru.ru_stime)};
    });
    print("watch_cpu", cpu.ours_median(), "ms", cpu.base_median());
}

} // namespace

int main(int argc, char** argv)
{
    if (argc > 1 && std::strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);
    self_path = std::filesystem::canonical("/proc/self/exe").string();
    bool cpu = true, overshoot = true, watch = true;
    for (int i = 1; i < argc; ++i)
    {
        const std::string a = argv[i];
        if (a == "--quick")
        {
            rounds = 1;
            overshoot_runs = 1;
        }
        else if (a == "--case" && i + 1 < argc)
        {
            const std::string c = argv[++i];
            cpu = c == "cpu";
            overshoot = c == "overshoot";
            watch = c == "watch";
        }
        else
        {
            std::fprintf(stderr, "usage: caps_bench [--quick] [--case cpu|overshoot|watch]\n");
            return 64;
        }
    }
    if (cpu)
    {
        cpu_cases();
        cgroup_cpu_cases();
    }
    if (overshoot)
        overshoot_cases();
    if (watch)
        watch_cases();
    std::fprintf(stderr, "caps_bench: %d wrong result(s)\n", wrong);
    return wrong ? 1 : 0;
}
