// bench/session_bench.cpp: what sessions cost next to exec, in one run.
//
//   throughput  `head -c N /dev/zero` streamed through session::read() and through a
//               watcher, against the same command run by exec with the default output cap
//               (10 MiB kept, the rest spliced away in the kernel; baseline).
//   idle        N idle `cat` sessions on one thread: our memory per session (target 64 KiB
//               beyond its output log; baseline: the target), the supervisor worker's
//               proportional memory per session (baseline: the `cat` it supervises), and the
//               time to start and close them all (baseline: N execs of `true`).
//
// One JSON line per figure. `--quick`: 32 MiB and 50 sessions (the smoke test).
//
//   session_bench [--quick] [--mib N] [--sessions N] [--rounds R]   (throughput: medians of R
//                                                                   interleaved rounds, 3)
#include "common.hpp"

#include <sandbox/local_runner.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <malloc.h>
#include <sys/resource.h>

namespace {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

struct config
{
    std::uint64_t mib = 512;
    int sessions = 1000;
    int rounds = 3;
};

using bench::median;

void emit(const char* name, double value, const char* unit, double baseline)
{
    bench::print_json("session_bench", name, value, unit, baseline);
}

void run(asio::io_context& ioc, std::function<asio::awaitable<void>()> f)
{
    std::exception_ptr failure;
    asio::co_spawn(ioc, std::move(f), [&](std::exception_ptr e) {
        failure = e;
        ioc.stop();
    });
    ioc.restart();
    ioc.run();
    if (failure)
        std::rethrow_exception(failure);
}

double seconds_since(clock_type::time_point t)
{
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

sandbox::session_spec zeros(std::uint64_t bytes)
{
    sandbox::session_spec s;
    s.command = "head";
    s.args = {"-c", std::to_string(bytes), "/dev/zero"};
    return s;
}

// A reader that falls behind the log's bound (a slow or loaded host) loses the oldest
// output by design: it resumes where the log now starts, and the figure counts only the
// bytes it was handed. The loss is reported, never hidden.
asio::awaitable<std::optional<sandbox::session_output>>
read_or_skip(sandbox::session& s, std::uint64_t& at, std::size_t max_read, std::uint64_t& dropped)
{
    try
    {
        auto o = co_await s.read(at, max_read);
        co_return o;
    }
    catch (const sandbox::error& e)
    {
        if (e.code() != sandbox::errc::sequence_gap)
            throw;
        const auto resume = static_cast<std::uint64_t>(e.diag().observed);
        dropped += resume - at;
        at = resume;
    }
    co_return std::nullopt;
}

asio::awaitable<std::optional<sandbox::session_event>> next_or_skip(sandbox::session_watcher& w)
{
    try
    {
        auto ev = co_await w.next();
        co_return ev;
    }
    catch (const sandbox::error& e)
    {
        if (e.code() != sandbox::errc::sequence_gap)
            throw;
    }
    co_return std::nullopt;
}

double delivered_mibs(std::uint64_t bytes, std::uint64_t dropped, double sec, const char* how)
{
    if (dropped > 0)
        std::fprintf(stderr, "session_bench: %s fell behind the log: %llu of %llu bytes dropped\n",
                     how, static_cast<unsigned long long>(dropped),
                     static_cast<unsigned long long>(bytes));
    return static_cast<double>(bytes - dropped) / (1 << 20) / sec;
}

// MiB/s of the exec capture path with the runner's default output cap (10 MiB kept, the
// rest spliced to /dev/null): the bound a session's log has by default too.
double exec_throughput(asio::io_context& ioc, sandbox::local_runner& r, std::uint64_t bytes)
{
    double mibs = 0;
    run(ioc, [&]() -> asio::awaitable<void> {
        sandbox::exec_request req;
        req.command = "head";
        req.args = {"-c", std::to_string(bytes), "/dev/zero"};
        const auto t = clock_type::now();
        auto res = co_await r.exec(req);
        const double s = seconds_since(t);
        if (res.out.data.size() + res.out.dropped_bytes != bytes)
            throw std::runtime_error("exec saw " + std::to_string(res.out.data.size()));
        mibs = static_cast<double>(bytes) / (1 << 20) / s;
    });
    return mibs;
}

double read_throughput(asio::io_context& ioc, sandbox::local_runner& r, std::uint64_t bytes,
                       std::size_t max_read)
{
    double mibs = 0;
    run(ioc, [&]() -> asio::awaitable<void> {
        const auto t = clock_type::now();
        auto s = co_await r.sessions()->start(zeros(bytes));
        std::uint64_t at = 0, dropped = 0;
        for (;;)
        {
            auto o = co_await read_or_skip(*s, at, max_read, dropped);
            if (!o)
                continue;
            at = o->next;
            if (o->eof)
                break;
        }
        const double sec = seconds_since(t);
        co_await s->close();
        if (at != bytes)
            throw std::runtime_error("read got " + std::to_string(at));
        mibs = delivered_mibs(bytes, dropped, sec, "read");
    });
    return mibs;
}

double watch_throughput(asio::io_context& ioc, sandbox::local_runner& r, std::uint64_t bytes)
{
    double mibs = 0;
    run(ioc, [&]() -> asio::awaitable<void> {
        const auto t = clock_type::now();
        auto s = co_await r.sessions()->start(zeros(bytes));
        auto w = s->watch();
        std::uint64_t got = 0, dropped = 0;
        for (;;)
        {
            const auto before = w.position();
            auto ev = co_await next_or_skip(w);
            if (!ev)
            {
                dropped += w.position() - before;
                continue;
            }
            if (ev->what != sandbox::session_event::kind::output)
                break;
            got += ev->data.size();
        }
        const double sec = seconds_since(t);
        co_await s->close();
        if (got + dropped != bytes)
            throw std::runtime_error("watch got " + std::to_string(got));
        mibs = delivered_mibs(bytes, dropped, sec, "watch");
    });
    return mibs;
}

long status_kib(const std::string& file, const char* key)
{
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key, 0) == 0)
            return std::atol(line.c_str() + std::strlen(key));
    return 0;
}

// Proportional memory of this run's processes with this name (comm), in KiB.
long pss_of(const char* comm, int& count)
{
    long sum = 0;
    count = 0;
    for (pid_t pid : bench::proc_pids())
    {
        const std::string dir = "/proc/" + std::to_string(pid);
        std::ifstream c(dir + "/comm");
        std::string name;
        std::getline(c, name);
        if (name != comm || !bench::mine(pid))
            continue;
        ++count;
        sum += status_kib(dir + "/smaps_rollup", "Pss:");
    }
    return sum;
}

// Heap bytes in use (malloc's own count: exact, unlike RSS, which keeps freed pages).
std::size_t heap_bytes()
{
    const auto m = ::mallinfo2();
    return m.uordblks + m.hblkhd;
}

void idle_sessions(asio::io_context& ioc, sandbox::local_runner& r, int n)
{
    // Warm up (the helper, its pool, the allocator), so the delta is the sessions' own.
    run(ioc, [&]() -> asio::awaitable<void> {
        sandbox::session_spec cat;
        cat.command = "cat";
        auto s = co_await r.sessions()->start(cat);
        co_await s->close();
    });
    const auto heap_before = heap_bytes();
    std::vector<std::shared_ptr<sandbox::session>> all;
    double start_s = 0, close_s = 0;
    std::size_t heap_during = 0;
    long worker_pss = 0, cat_pss = 0;
    int workers = 0, cats = 0;
    run(ioc, [&]() -> asio::awaitable<void> {
        sandbox::session_spec cat;
        cat.command = "cat";
        auto t = clock_type::now();
        for (int i = 0; i < n; ++i)
            all.push_back(co_await r.sessions()->start(cat));
        start_s = seconds_since(t);
        heap_during = heap_bytes();
        worker_pss = pss_of("sbx-worker", workers);
        cat_pss = pss_of("cat", cats);
        t = clock_type::now();
        for (auto& s : all)
            co_await s->close();
        close_s = seconds_since(t);
        all.clear();
    });
    double exec_s = 0;
    run(ioc, [&]() -> asio::awaitable<void> {
        sandbox::exec_request t;
        t.command = "true";
        const auto t0 = clock_type::now();
        for (int i = 0; i < n; ++i)
            co_await r.exec(t);
        exec_s = seconds_since(t0);
    });
    emit("idle_memory_per_session",
         (static_cast<double>(heap_during) - static_cast<double>(heap_before)) / 1024 / n, "KiB",
         64.0);
    if (workers > 0 && cats > 0)
        emit("worker_pss_per_session", static_cast<double>(worker_pss) / workers, "KiB",
             static_cast<double>(cat_pss) / cats);
    emit("start_and_close_all", (start_s + close_s) * 1000, "ms", exec_s * 1000);
    emit("start_per_session", start_s * 1e6 / n, "us", exec_s * 1e6 / n);
}

} // namespace

int main(int argc, char** argv)
{
    config c;
    for (int i = 1; i < argc; ++i)
    {
        std::string a = argv[i];
        if (a == "--quick")
        {
            c.mib = 32;
            c.sessions = 50;
            c.rounds = 1;
        }
        else if (a == "--mib" && i + 1 < argc)
            c.mib = std::strtoull(argv[++i], nullptr, 10);
        else if (a == "--sessions" && i + 1 < argc)
            c.sessions = std::atoi(argv[++i]);
        else if (a == "--rounds" && i + 1 < argc)
            c.rounds = std::max(1, std::atoi(argv[++i]));
        else
        {
            std::fprintf(stderr, "usage: session_bench [--quick] [--mib N] [--sessions N] [--rounds R]\n");
            return 2;
        }
    }
    // Each running session holds four descriptors here.
    rlimit nofile{};
    ::getrlimit(RLIMIT_NOFILE, &nofile);
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);

    bench::print_machine(stderr);
    try
    {
        asio::io_context ioc(1);
        sandbox::local_runner r(ioc.get_executor());
        const std::uint64_t bytes = c.mib << 20;
        exec_throughput(ioc, r, 1 << 20); // warm up: the helper starts on the first exec
        std::vector<double> ex, rd, rd1m, wt; // interleaved rounds, medians
        // The case right after an exec runs slower (the allocator hands it fresh pages that
        // fault in, expensive on this VM), so the order of the session cases rotates.
        for (int i = 0; i < c.rounds; ++i)
        {
            ex.push_back(exec_throughput(ioc, r, bytes));
            for (int k = 0; k < 3; ++k)
                switch ((i + k) % 3)
                {
                case 0: rd.push_back(read_throughput(ioc, r, bytes, 64 << 10)); break;
                case 1: rd1m.push_back(read_throughput(ioc, r, bytes, 1 << 20)); break;
                default: wt.push_back(watch_throughput(ioc, r, bytes)); break;
                }
        }
        emit("stream_read_64k", median(rd), "MiB/s", median(ex));
        emit("stream_read_1m", median(rd1m), "MiB/s", median(ex));
        emit("stream_watch", median(wt), "MiB/s", median(ex));
        idle_sessions(ioc, r, c.sessions);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "session_bench: %s\n", e.what());
        return 1;
    }
    // The io_context is gone, so the supervisor helper has been stopped and reaped.
    if (auto kids = bench::my_children(); !kids.empty())
    {
        std::ifstream st("/proc/" + std::to_string(kids[0]) + "/stat");
        std::string line;
        std::getline(st, line);
        std::fprintf(stderr, "session_bench: %zu processes left behind (first: %s)\n",
                     kids.size(), line.substr(0, 60).c_str());
        return 1;
    }
    return 0;
}
