// bench/daemon_bench.cpp: what sandboxd costs over the library in-process, in one run.
//
//   seq_exec_true      N execs of /bin/true through the daemon (one keep-alive connection,
//                      HTTP + JSON both ways); baseline: N execs through the same kind of
//                      runner in this process. Target <= 1.5x.
//   conc64_exec_true   64 clients at once, each its own connection, N/64 execs each;
//                      baseline: 64 execs in flight on one io_context in this process.
//   idle_session_kib   the daemon's own memory per idle `cat` session (its private dirty
//                      pages after starting N, minus before, over N); baseline: 64 KiB (the library's
//                      own target per session). The supervisor worker of each session is
//                      reported apart (worker_pss_per_session, baseline the `cat`).
//
//   daemon_bench [--quick] [--execs N] [--sessions N] [--sandboxd PATH]
#include "common.hpp"

#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using local = asio::local::stream_protocol;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t)
{
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

// One blocking HTTP/1.1 client connection (keep-alive).
struct client
{
    asio::io_context ioc;
    local::socket sock{ioc};
    boost::beast::flat_buffer buf;

    explicit client(const std::string& path) { sock.connect(local::endpoint(path)); }

    std::string call(http::verb method, const std::string& target, const std::string& body)
    {
        http::request<http::string_body> req{method, target, 11};
        req.set(http::field::host, "sandboxd");
        req.set(http::field::content_type, "application/json");
        req.keep_alive(true);
        req.body() = body;
        req.prepare_payload();
        http::write(sock, req);
        http::response<http::string_body> res;
        http::read(sock, buf, res);
        if (res.result_int() >= 300)
            throw std::runtime_error(target + ": " + res.body());
        return res.body();
    }
};

struct daemon_process
{
    pid_t pid = -1;
    std::string dir, socket;

    daemon_process(const std::string& program)
    {
        char tmpl[] = "/tmp/sbx-daemon-bench-XXXXXX";
        dir = ::mkdtemp(tmpl);
        socket = dir + "/d.sock";
        const std::string doc = dir + "/d.yaml";
        std::ofstream(doc) << "version: v1\nsandboxes:\n  b:\n    backend: local\n    root: " << dir
                           << "\n";
        pid = ::fork();
        if (pid == 0)
        {
            ::execl(program.c_str(), program.c_str(), "--config", doc.c_str(), "--listen",
                    socket.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        for (int i = 0; i < 500 && ::access(socket.c_str(), F_OK) != 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ~daemon_process()
    {
        ::kill(pid, SIGTERM);
        int st = 0;
        ::waitpid(pid, &st, 0);
        std::remove((dir + "/d.yaml").c_str());
        ::rmdir(dir.c_str());
    }
};

long rollup_kib(pid_t pid, const char* key)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
    const std::size_t n = std::strlen(key);
    for (std::string line; std::getline(in, line);)
        if (line.compare(0, n, key) == 0)
            return std::atol(line.c_str() + n);
    return 0;
}

long pss_kib(pid_t pid) { return rollup_kib(pid, "Pss:"); }

// The daemon's own growth: its private dirty pages (the heap), not shared ones.
long private_kib(pid_t pid) { return rollup_kib(pid, "Private_Dirty:"); }

long pss_of_comm(const char* comm, int& count)
{
    long sum = 0;
    count = 0;
    for (pid_t pid : bench::proc_pids())
    {
        std::ifstream c("/proc/" + std::to_string(pid) + "/comm");
        std::string name;
        std::getline(c, name);
        if (name == comm)
            ++count, sum += pss_kib(pid);
    }
    return sum;
}

const std::string true_call = R"({"command":"/bin/true"})";

double library_seq(int n)
{
    asio::io_context ioc;
    sandbox::local_runner r(ioc.get_executor());
    double s = 0;
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        sandbox::exec_request warm;
        warm.command = "/bin/true";
        co_await r.exec(warm);
        const auto t = clock_type::now();
        for (int i = 0; i < n; ++i)
        {
            sandbox::exec_request x;
            x.command = "/bin/true";
            co_await r.exec(std::move(x));
        }
        s = seconds_since(t);
    }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    ioc.run();
    return s;
}

double library_conc(int n, int width)
{
    asio::io_context ioc;
    sandbox::local_runner r(ioc.get_executor());
    int left = n;
    clock_type::time_point t;
    double s = 0;
    int running = width;
    auto one = [&]() -> asio::awaitable<void> {
        while (left > 0)
        {
            --left;
            sandbox::exec_request x;
            x.command = "/bin/true";
            co_await r.exec(std::move(x));
        }
        if (--running == 0)
            s = seconds_since(t);
    };
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        sandbox::exec_request warm;
        warm.command = "/bin/true";
        co_await r.exec(warm);
        t = clock_type::now();
        for (int i = 0; i < width; ++i)
            asio::co_spawn(ioc, one(), [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    ioc.run();
    return s;
}

double daemon_seq(const daemon_process& d, int n)
{
    client c(d.socket);
    c.call(http::verb::post, "/v1/sandboxes/b/exec", true_call);
    const auto t = clock_type::now();
    for (int i = 0; i < n; ++i)
        c.call(http::verb::post, "/v1/sandboxes/b/exec", true_call);
    return seconds_since(t);
}

double daemon_conc(const daemon_process& d, int n, int width)
{
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    const auto t = clock_type::now();
    for (int i = 0; i < width; ++i)
        threads.emplace_back([&, share = n / width] {
            try
            {
                client c(d.socket);
                for (int k = 0; k < share; ++k)
                    c.call(http::verb::post, "/v1/sandboxes/b/exec", true_call);
            }
            catch (const std::exception& e)
            {
                std::fprintf(stderr, "daemon_bench: %s\n", e.what());
                ++failures;
            }
        });
    for (auto& th : threads)
        th.join();
    if (failures > 0)
        throw std::runtime_error("concurrent clients failed");
    return seconds_since(t);
}

void idle_sessions(const daemon_process& d, int n)
{
    client c(d.socket);
    // Warm up: the helper, its pool, the allocator.
    c.call(http::verb::post, "/v1/sandboxes/b/exec", true_call);
    const long before = private_kib(d.pid);
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i)
    {
        const auto body = c.call(http::verb::post, "/v1/sandboxes/b/sessions", R"({"command":"cat"})");
        const auto at = body.find("\"id\":\"");
        ids.push_back(body.substr(at + 6, body.find('"', at + 6) - at - 6));
    }
    const long after = private_kib(d.pid);
    int workers = 0, cats = 0;
    const long worker_pss = pss_of_comm("sbx-worker", workers);
    const long cat_pss = pss_of_comm("cat", cats);
    for (const auto& id : ids)
        c.call(http::verb::delete_, "/v1/sessions/" + id, "");
    bench::print_json("daemon_bench", "idle_session_kib",
                      static_cast<double>(after - before) / n, "KiB", 64.0);
    if (workers > 0 && cats > 0)
        bench::print_json("daemon_bench", "worker_pss_per_session",
                          static_cast<double>(worker_pss) / workers, "KiB",
                          static_cast<double>(cat_pss) / cats);
}

} // namespace

int main(int argc, char** argv)
{
    int execs = 1000, sessions = 1000;
    std::string program = SBX_SANDBOXD;
    for (int i = 1; i < argc; ++i)
    {
        const std::string a = argv[i];
        if (a == "--quick")
            execs = 128, sessions = 50;
        else if (a == "--execs" && i + 1 < argc)
            execs = std::max(64, std::atoi(argv[++i]));
        else if (a == "--sessions" && i + 1 < argc)
            sessions = std::max(1, std::atoi(argv[++i]));
        else if (a == "--sandboxd" && i + 1 < argc)
            program = argv[++i];
        else
        {
            std::fprintf(stderr, "usage: daemon_bench [--quick] [--execs N] [--sessions N] "
                                 "[--sandboxd PATH]\n");
            return 2;
        }
    }
    rlimit nofile{};
    ::getrlimit(RLIMIT_NOFILE, &nofile);
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
    bench::print_machine(stderr);
    try
    {
        daemon_process d(program);
        // Interleaved: library, daemon, library, daemon (the host drifts).
        const double lib1 = library_seq(execs / 2), dmn1 = daemon_seq(d, execs / 2);
        const double lib2 = library_seq(execs / 2), dmn2 = daemon_seq(d, execs / 2);
        bench::print_json("daemon_bench", "seq_exec_true", (dmn1 + dmn2) * 1e6 / execs, "us",
                          (lib1 + lib2) * 1e6 / execs);
        const double libc = library_conc(execs, 64);
        const double dmnc = daemon_conc(d, execs, 64);
        bench::print_json("daemon_bench", "conc64_exec_true", dmnc * 1e6 / execs, "us",
                          libc * 1e6 / execs);
        idle_sessions(d, sessions);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "daemon_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
