// bench/daemon_bench.cpp: what sandboxd costs over the library in-process, in one run.
//
//   seq_exec_true      N execs of /bin/true through the daemon (one keep-alive connection,
//                      HTTP + JSON both ways); baseline: N execs through the same kind of
//                      runner in this process. Target <= 1.5x.
//   conc64_exec_true   64 clients at once, each its own connection, N/64 execs each;
//                      baseline: 64 execs in flight on one io_context in this process.
//   idle_session_kib   the daemon's own memory per idle `cat` session (its private dirty
//                      pages after starting N, minus before, over N); baseline: 64 KiB (the
//                      library's own target per session). The supervisor worker of each session is
//                      reported apart (worker_pss_per_session, baseline the `cat`).
//
//   neighbour_hold_p99_us    p99 of a well-behaved client's exec of /bin/true while another
//                            uid (65534) holds 100 idle connections and 8 sessions with
//                            followers that never read; baseline: the same p99 with the
//                            daemon idle, same run. Target <= 3x (issue 32). Needs root.
//   neighbour_bodies_p99_us  the same while the neighbour also keeps posting 256 KiB bodies
//                            (invalid JSON, one at a time): what parsing costs the others.
//   neighbour_*_private_kib  the daemon's private memory while that neighbour floods;
//                            baseline: just before it came.
//   stalled_tunnel_kib       the daemon's private memory per stalled tunnel of a bwrap
//                            allow-list session: its command opens 256 CONNECT tunnels
//                            through the daemon's egress proxy to a host sink that never
//                            reads, then sends on each until its socket is full; (memory
//                            then - before the session) / 256, the session's own cost
//                            included; baseline: the same per tunnel with the 256 tunnels
//                            open and idle (each sent "hello"), same session. Needs root.
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

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

    // `sink_port`: a host port the `t` sandbox (bwrap, allow-list) may reach; 0: no `t`.
    daemon_process(const std::string& program, int sink_port)
    {
        char tmpl[] = "/tmp/sbx-daemon-bench-XXXXXX";
        dir = ::mkdtemp(tmpl);
        socket = dir + "/d.sock";
        const std::string doc = dir + "/d.yaml";
        // Bounds raised for the idle-session and concurrency figures; the neighbour case's
        // flooding uid 65534 may use the sandbox (run_as: daemon).
        std::ofstream(doc) << "version: v1\ndaemon:\n  allow_uids: [65534]\n"
                              "  max_connections_per_uid: 128\n  max_sessions_per_uid: 2000\n"
                              "  max_sessions: 4000\n  session_output_budget: 64GiB\n"
                              "sandboxes:\n  b:\n    backend: local\n    run_as: daemon\n"
                              "    root: "
                           << dir << "\n";
        if (sink_port > 0)
        {
            ::mkdir((dir + "/t").c_str(), 0777);
            ::chmod((dir + "/t").c_str(), 0777); // the sandbox user's root
            std::ofstream(doc, std::ios::app)
                << "  t:\n    backend: bwrap\n    root: " << dir << "/t\n"
                << "    settings: {max_sandbox_tunnels: 1024}\n"
                << "    defaults:\n      net:\n        mode: allow_list\n        rules:\n"
                << "          - {action: allow, host: 127.0.0.1, port: " << sink_port << "}\n";
        }
        ::chmod(dir.c_str(), 0755);
        pid = ::fork();
        if (pid == 0)
        {
            ::execl(program.c_str(), program.c_str(), "--config", doc.c_str(), "--listen",
                    socket.c_str(), static_cast<char*>(nullptr));
            ::_exit(127);
        }
        for (int i = 0; i < 500 && ::access(socket.c_str(), F_OK) != 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        ::chmod(socket.c_str(), 0666);
    }
    ~daemon_process()
    {
        ::kill(pid, SIGTERM);
        int st = 0;
        ::waitpid(pid, &st, 0);
        std::remove((dir + "/d.yaml").c_str());
        ::rmdir((dir + "/t").c_str());
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

// The proportional memory of this run's processes named `comm` (the daemon's workers, cats).
long pss_of_comm(const char* comm, int& count)
{
    long sum = 0;
    count = 0;
    for (pid_t pid : bench::proc_pids())
    {
        std::ifstream c("/proc/" + std::to_string(pid) + "/comm");
        std::string name;
        std::getline(c, name);
        if (name == comm && bench::mine(pid))
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

// A raw connection for the flood (blocking, no reading unless asked).
int dial(const std::string& path)
{
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    {
        ::close(fd);
        return -1;
    }
    return fd;
}

void send_all(int fd, const std::string& s)
{
    for (std::size_t at = 0; at < s.size();)
    {
        const ssize_t n = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL);
        if (n <= 0)
            return;
        at += static_cast<std::size_t>(n);
    }
}

std::string post(const std::string& target, const std::string& body)
{
    return "POST " + target + " HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The hostile neighbour, as uid 65534, until killed: holds connections, sessions with
// followers that never read, and keeps sending refused session starts and 256 KiB bodies.
[[noreturn]] void flood(const std::string& path, bool bodies)
{
    if (::setgid(65534) != 0 || ::setuid(65534) != 0)
        ::_exit(3);
    std::vector<int> held;
    for (int i = 0; i < 100; ++i) // past its bound of 128 with the rest below
        if (int fd = dial(path); fd >= 0)
            held.push_back(fd);
    for (int i = 0; i < 8; ++i) // sessions with a follower that never reads
    {
        const int fd = dial(path);
        if (fd < 0)
            continue;
        send_all(fd, post("/v1/sandboxes/b/sessions",
                          R"({"command":"sh","args":["-c","echo flood; exec sleep 1000"]})"));
        char buf[4096];
        const ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        const char* id = std::strstr(buf, "\"id\":\"");
        ::close(fd);
        if (!id)
            continue;
        const std::string sid(id + 6, std::strcspn(id + 6, "\""));
        if (int f = dial(path); f >= 0)
        {
            send_all(f, "GET /v1/sessions/" + sid + "/output?follow=1 HTTP/1.1\r\nHost: d\r\n\r\n");
            held.push_back(f);
        }
    }
    const std::string big = post("/v1/sandboxes/b/exec", "{\"command\":\"" + std::string(256 << 10, 'x') + "\"");
    for (;;)
    {
        if (!bodies)
            ::pause();
        for (int i = 0; i < 4; ++i)
            if (int fd = dial(path); fd >= 0)
            {
                send_all(fd, big);
                char buf[512];
                (void)!::recv(fd, buf, sizeof buf, 0);
                ::close(fd);
            }
    }
}

// p99 of `n` sequential execs of /bin/true on one connection, in microseconds.
double exec_p99_us(const daemon_process& d, int n)
{
    client c(d.socket);
    c.call(http::verb::post, "/v1/sandboxes/b/exec", true_call);
    std::vector<double> us;
    for (int i = 0; i < n; ++i)
    {
        const auto t = clock_type::now();
        c.call(http::verb::post, "/v1/sandboxes/b/exec", true_call);
        us.push_back(seconds_since(t) * 1e6);
    }
    std::sort(us.begin(), us.end());
    return us[static_cast<std::size_t>(0.99 * (us.size() - 1))];
}

void neighbour(const daemon_process& d, int n)
{
    if (::geteuid() != 0)
    {
        std::fprintf(stderr, "daemon_bench: neighbour_p99_us skipped (needs root)\n");
        return;
    }
    for (const bool bodies : {false, true})
    {
        const double idle = exec_p99_us(d, n);
        const long kib_before = private_kib(d.pid);
        const pid_t pid = ::fork();
        if (pid == 0)
            flood(d.socket, bodies);
        std::this_thread::sleep_for(std::chrono::seconds(1)); // the flood is in place
        const double busy = exec_p99_us(d, n);
        const long kib_during = private_kib(d.pid);
        ::kill(pid, SIGKILL);
        int st = 0;
        ::waitpid(pid, &st, 0);
        // Its connections close with it; its sessions end when the daemon does.
        bench::print_json("daemon_bench", bodies ? "neighbour_bodies_p99_us" : "neighbour_hold_p99_us",
                          busy, "us", idle);
        // The daemon's own memory with the neighbour at its bounds, against before it came.
        bench::print_json("daemon_bench", bodies ? "neighbour_bodies_private_kib" : "neighbour_hold_private_kib",
                          static_cast<double>(kib_during), "KiB", static_cast<double>(kib_before));
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
}

// A host destination that accepts and never reads (a small receive buffer, so a direction
// stalls after a few KiB), on 127.0.0.1; its connections close with it.
struct stalled_sink
{
    int listener = -1;
    int port = 0;
    std::vector<int> held;
    std::thread acceptor;

    stalled_sink()
    {
        listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int small = 4096;
        ::setsockopt(listener, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        if (::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listener, 1024) != 0 ||
            ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0)
            throw std::runtime_error("stalled sink: cannot listen");
        port = ntohs(a.sin_port);
        acceptor = std::thread([this] {
            for (int fd; (fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;)
                held.push_back(fd);
        });
    }
    ~stalled_sink()
    {
        ::shutdown(listener, SHUT_RDWR); // ends the accept loop
        acceptor.join();
        ::close(listener);
        for (int fd : held)
            ::close(fd);
    }
};

// The command of the stalled-tunnel session: N tunnels through its proxy, "hello" on each,
// "idle"; after a line on stdin, fills each until its socket takes no more, "stalled"; then
// holds them until stdin ends.
const char* stalled_script = R"(import os, socket, sys
port = int(os.environ['HTTP_PROXY'].rsplit(':', 1)[1])
n, dest = int(sys.argv[1]), sys.argv[2]
kept = []
for i in range(n):
    s = socket.create_connection(('127.0.0.1', port))
    s.sendall(b'CONNECT ' + dest.encode() + b' HTTP/1.1\r\n\r\n')
    if b' 200' not in s.recv(64):
        print('refused', i, flush=True); sys.exit(1)
    s.sendall(b'hello')
    kept.append(s)
print('idle', flush=True)
sys.stdin.readline()
chunk = b'x' * 65536
for s in kept:
    s.setblocking(False)
    try:
        while True:
            s.send(chunk)
    except BlockingIOError:
        pass
print('stalled', flush=True)
sys.stdin.read()
)";

// Waits until the session's output holds `word` (false: it ended or 60 s passed). Every poll
// reads from offset 0, where earlier output already waits, so the daemon answers at once: the
// pause between polls and the clock bound the wait, not the number of polls.
bool wait_for_output(client& c, const std::string& id, const std::string& word)
{
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (bool first = true; first || std::chrono::steady_clock::now() < deadline; first = false)
    {
        if (!first)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        out = c.call(http::verb::get, "/v1/sessions/" + id + "/output?offset=0&wait=100", "");
        if (out.find(word) != std::string::npos)
            return true;
        if (out.find("\"eof\":true") != std::string::npos)
        {
            std::fprintf(stderr, "daemon_bench: the stalled-tunnel session ended: %s\n",
                         out.c_str());
            return false;
        }
    }
    std::fprintf(stderr, "daemon_bench: no \"%s\" from the stalled-tunnel session: %s\n",
                 word.c_str(), out.substr(0, 2000).c_str());
    return false;
}

void stalled_tunnels(const daemon_process& d, int sink_port)
{
    constexpr int n = 256;
    client c(d.socket);
    c.call(http::verb::post, "/v1/sandboxes/b/exec", true_call);
    const long before = private_kib(d.pid);
    const std::string dest = "127.0.0.1:" + std::to_string(sink_port);
    std::string script;
    for (char ch : std::string(stalled_script))
        script += ch == '\n'   ? std::string("\\n")
                  : ch == '"'  ? std::string("\\\"")
                  : ch == '\\' ? std::string("\\\\")
                               : std::string(1, ch);
    const auto body = c.call(http::verb::post, "/v1/sandboxes/t/sessions",
                             R"({"command":"/usr/bin/python3","args":["-c",")" + script + R"(",")" +
                                 std::to_string(n) + R"(",")" + dest + R"("]})");
    const auto at = body.find("\"id\":\"");
    if (at == std::string::npos)
        throw std::runtime_error("the stalled-tunnel session did not start: " + body);
    const std::string id = body.substr(at + 6, body.find('"', at + 6) - at - 6);
    bool ok = wait_for_output(c, id, "idle");
    const long idle = private_kib(d.pid);
    if (ok)
    {
        c.call(http::verb::post, "/v1/sessions/" + id + "/input", "go\n");
        ok = wait_for_output(c, id, "stalled");
    }
    std::this_thread::sleep_for(std::chrono::seconds(1)); // the proxy has read what it will
    const long stalled = private_kib(d.pid);
    c.call(http::verb::delete_, "/v1/sessions/" + id, "");
    if (!ok)
        throw std::runtime_error("the stalled-tunnel session did not get its tunnels");
    bench::print_json("daemon_bench", "stalled_tunnel_kib",
                      static_cast<double>(stalled - before) / n, "KiB",
                      static_cast<double>(idle - before) / n);
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
        const bool root = ::geteuid() == 0;
        std::optional<stalled_sink> sink;
        if (root)
            sink.emplace();
        daemon_process d(program, sink ? sink->port : 0);
        // Interleaved: library, daemon, library, daemon (the host drifts).
        const double lib1 = library_seq(execs / 2), dmn1 = daemon_seq(d, execs / 2);
        const double lib2 = library_seq(execs / 2), dmn2 = daemon_seq(d, execs / 2);
        bench::print_json("daemon_bench", "seq_exec_true", (dmn1 + dmn2) * 1e6 / execs, "us",
                          (lib1 + lib2) * 1e6 / execs);
        const double libc = library_conc(execs, 64);
        const double dmnc = daemon_conc(d, execs, 64);
        bench::print_json("daemon_bench", "conc64_exec_true", dmnc * 1e6 / execs, "us",
                          libc * 1e6 / execs);
        neighbour(d, execs / 2);
        if (sink)
            stalled_tunnels(d, sink->port);
        else
            std::fprintf(stderr, "daemon_bench: stalled_tunnel_kib skipped (needs root)\n");
        idle_sessions(d, sessions);
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "daemon_bench: %s\n", e.what());
        return 1;
    }
    return 0;
}
