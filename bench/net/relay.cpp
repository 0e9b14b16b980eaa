// bench/net/relay.cpp: the egress proxy's tunnel figures, each against a baseline measured in
// the same run. The proxy runs on its own io_context thread (mode allow_list, 127.0.0.1
// allowed by an IP rule); the sink and the clients are plain threads with blocking sockets
// on loopback (network.md §13.1's harness, in C++).
//   tunnel_throughput       MB/s through CONNECT; baseline: the same client straight to the sink
//   relay_cpu_per_gib       proxy thread cpu s per GiB relayed; baseline: the sink thread's cpu
//                           s per GiB received in the direct run (one side of a copy)
//   connect_setup_p50       µs for connect + CONNECT + 200; baseline: a direct connect
//   connect_setup_added_p50 µs the proxy adds at p50 (no baseline; target ≤ 150)
//   connect_setup_proxy_cpu µs of proxy thread cpu per setup (no baseline)
//   idle_tunnel_memory      KiB of process RSS per idle tunnel (4,000, each sent "hello");
//                           baseline: KiB per connection for as many direct connections
//   idle_tunnels_rss        MiB of process RSS with the idle tunnels open; baseline: before
//   stalled_tunnel_memory   KiB of process RSS per stalled tunnel (512: the client sends until
//                           its socket is full, the destination never reads); baseline: KiB
//                           per idle tunnel measured in the same run
//   stalled_tunnels_rss     MiB of process RSS with the stalled tunnels open; baseline: before
//   loop_stall_while_streaming  ms of the worst lateness of a 1 ms timer on the proxy's loop
//                           while a tunnel streams; baseline: the same timer on the idle loop
//   loop_stall_p99_while_streaming  the same at the 99th percentile
//   peer_tinyproxy_throughput  MB/s of a 1 GiB download through our CONNECT tunnel; baseline:
//                           the same client, source and bytes through tinyproxy (a peer
//                           CONNECT proxy, which does not pass a half-close on; when
//                           /usr/bin/tinyproxy is installed: `apt-get install tinyproxy`;
//                           skipped otherwise), rounds interleaved
//   peer_tinyproxy_setup_p50   µs for connect + CONNECT + 200 through ours; baseline: through
//                           tinyproxy, interleaved
#include "cases.hpp"

#include "bench/common.hpp"
#include "rig.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace net_bench {

namespace {

using clock_type = std::chrono::steady_clock;

/// Accepts on 127.0.0.1: drains each connection in a thread of its own (its byte count is
/// sent back at EOF), or only holds the connections (idle tunnels).
class sink
{
public:
    sink() = default;
    ~sink()
    {
        acceptor_.reset();
        for (auto& t : drains_)
            t.join();
        release_held();
    }
    std::uint16_t port() const { return acceptor_->port(); }
    void hold(bool on) { hold_ = on; }
    /// Drain threads lower their own priority (nice 19).
    void nice_drains(bool on) { nice_ = on; }
    std::size_t held() const
    {
        std::lock_guard lock(m_);
        return held_.size();
    }
    void release_held()
    {
        std::lock_guard lock(m_);
        for (int fd : held_)
            ::close(fd);
        held_.clear();
    }
    /// Cpu seconds of the last connection drained to its end.
    double last_drain_cpu() const { return last_cpu_.load(); }

private:
    void accepted(int fd)
    {
        std::lock_guard lock(m_);
        if (hold_)
            held_.push_back(fd);
        else
            drains_.emplace_back([this, fd] { drain(fd); });
    }
    void drain(int fd)
    {
        if (nice_)
            lower_priority();
        const double c0 = thread_cpu();
        constexpr std::size_t size = 1 << 20;
        const auto buf = std::make_unique_for_overwrite<char[]>(size); // no memset: setups read nothing
        std::uint64_t n = 0;
        for (;;)
        {
            const ssize_t k = ::recv(fd, buf.get(), size, 0);
            if (k <= 0)
                break;
            n += static_cast<std::uint64_t>(k);
        }
        last_cpu_ = thread_cpu() - c0;
        const std::string count = std::to_string(n);
        ::send(fd, count.data(), count.size(), MSG_NOSIGNAL);
        ::close(fd);
    }

    std::atomic<bool> hold_{false};
    std::atomic<bool> nice_{false};
    std::atomic<double> last_cpu_{0};
    mutable std::mutex m_;
    std::vector<int> held_;
    std::vector<std::thread> drains_;
    std::unique_ptr<loopback_acceptor> acceptor_ =
        std::make_unique<loopback_acceptor>([this](int fd) { accepted(fd); });
};

/// Streams `total` bytes in 1 MiB sends, half-closes, checks the sink's count; seconds.
double stream(int fd, std::uint64_t total)
{
    std::vector<char> buf(1 << 20, 'x');
    const auto t0 = clock_type::now();
    for (std::uint64_t sent = 0; sent < total; sent += buf.size())
        send_all(fd, buf.data(), buf.size());
    ::shutdown(fd, SHUT_WR);
    std::string reply;
    char r[64];
    for (ssize_t k; (k = ::recv(fd, r, sizeof r, 0)) > 0;)
        reply.append(r, static_cast<std::size_t>(k));
    const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    ::close(fd);
    if (reply != std::to_string(total))
    {
        std::fprintf(stderr, "net_bench: sink counted %s of %llu\n", reply.c_str(),
                     static_cast<unsigned long long>(total));
        std::exit(1);
    }
    return dt;
}

struct stream_figures
{
    double mbps = 0, cpu_per_gib = 0;
};

stream_figures stream_direct(sink& s, std::uint64_t total)
{
    const double dt = stream(dial(s.port()), total);
    return {static_cast<double>(total) / dt / 1e6,
            s.last_drain_cpu() / (static_cast<double>(total) / (1 << 30))};
}

stream_figures stream_tunnel(proxy_rig& px, sink& s, std::uint64_t total)
{
    const int fd = dial(px.port());
    open_tunnel(fd, s.port());
    const double c0 = px.cpu();
    const double dt = stream(fd, total);
    const double cpu = px.cpu() - c0;
    return {static_cast<double>(total) / dt / 1e6, cpu / (static_cast<double>(total) / (1 << 30))};
}

void run_throughput(proxy_rig& px, sink& s, const options& o)
{
    const std::uint64_t total = o.quick ? (16ull << 20) : (1ull << 30);
    std::vector<double> cpu_ours, cpu_base;
    auto r = bench::measure_rounds(o.quick ? 1 : 3, [&] {
        const auto d = stream_direct(s, total);
        const auto t = stream_tunnel(px, s, total);
        cpu_base.push_back(d.cpu_per_gib);
        cpu_ours.push_back(t.cpu_per_gib);
        return std::pair{t.mbps, d.mbps};
    });
    bench::print_json(bench_name, "tunnel_throughput", r.ours_median(), "MB/s", r.base_median());
    bench::print_json(bench_name, "relay_cpu_per_gib", bench::median(cpu_ours), "s/GiB",
                      bench::median(cpu_base));
}

void run_setup(proxy_rig& px, sink& s, const options& o)
{
    const int n = o.quick ? 20 : 200;
    std::vector<double> direct, tunnel;
    const double cpu0 = px.cpu();
    for (int i = 0; i < n; ++i)
    {
        auto t0 = clock_type::now();
        int fd = dial(s.port());
        direct.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
        ::close(fd);
        t0 = clock_type::now();
        fd = dial(px.port());
        open_tunnel(fd, s.port());
        tunnel.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
        ::close(fd);
    }
    const double ours = bench::percentile(tunnel, 50), base = bench::percentile(direct, 50);
    bench::print_json(bench_name, "connect_setup_p50", ours, "us", base);
    bench::print_json(bench_name, "connect_setup_added_p50", ours - base, "us", std::nullopt);
    // The proxy thread's own cpu per setup (accept, head, decision, dial, 200, relay start,
    // close): what is left of the added latency is thread hand-offs and scheduling.
    bench::print_json(bench_name, "connect_setup_proxy_cpu", (px.cpu() - cpu0) / n * 1e6, "us",
                      std::nullopt);
}

/// Waits (bounded) until the sink holds `n` connections.
void await_held(sink& s, std::size_t n)
{
    for (int i = 0; i < 10'000 && s.held() < n; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

/// KiB of RSS per connection for `n` connections opened by `open_one`.
double rss_per_connection(sink& s, std::size_t n, const std::function<int()>& open_one,
                          double* total_kib = nullptr, double* before_kib = nullptr)
{
    s.hold(true);
    const double before = rss_kib();
    std::vector<int> fds;
    fds.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        fds.push_back(open_one());
    await_held(s, n);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double after = rss_kib();
    for (int fd : fds)
        ::close(fd);
    s.release_held();
    s.hold(false);
    if (total_kib)
        *total_kib = after;
    if (before_kib)
        *before_kib = before;
    return (after - before) / static_cast<double>(n);
}

std::size_t raise_fd_limit(std::size_t want)
{
    rlimit r{};
    ::getrlimit(RLIMIT_NOFILE, &r);
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
    // Per idle tunnel: the client's fd, the proxy's two, the sink's one.
    const auto fit = static_cast<std::size_t>((r.rlim_cur > 256 ? r.rlim_cur - 256 : 0) / 4);
    return std::min(want, fit);
}

/// Returns KiB per idle tunnel.
double run_idle(proxy_rig& px, sink& s, const options& o)
{
    const std::size_t n = raise_fd_limit(o.quick ? 200 : 4000);
    const double base = rss_per_connection(s, n, [&] {
        const int fd = dial(s.port());
        send_all(fd, "hello", 5);
        return fd;
    });
    double total = 0, before = 0;
    const double ours = rss_per_connection(
        s, n,
        [&] {
            const int fd = dial(px.port());
            open_tunnel(fd, s.port());
            send_all(fd, "hello", 5);
            return fd;
        },
        &total, &before);
    bench::print_json(bench_name, "idle_tunnel_memory", ours, "KiB", base);
    bench::print_json(bench_name, "idle_tunnels_rss", total / 1024, "MiB", before / 1024);
    for (int i = 0; i < 10'000 && px.connections() > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return ours;
}

/// Sends until the socket would block, a few rounds apart, so that the proxy behind it has
/// met the destination's full receive window and stalled.
void fill_until_blocked(const std::vector<int>& fds)
{
    static const std::vector<char> block(64 * 1024, 'x');
    for (int round = 0; round < 3; ++round)
    {
        for (int fd : fds)
            while (::send(fd, block.data(), block.size(), MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
            {
            }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

struct stalled_figures
{
    double per_tunnel_kib = 0, before_kib = 0, after_kib = 0;
};

/// Tunnels whose destination never reads: what the proxy keeps for a stalled direction.
/// Run before the idle tunnels (whose freed pages it would otherwise reuse and count as
/// nothing); printed against their figure.
stalled_figures run_stalled(proxy_rig& px, sink& s, const options& o)
{
    const std::size_t n = raise_fd_limit(o.quick ? 64 : 512);
    const auto open_idle = [&] {
        const int fd = dial(px.port());
        open_tunnel(fd, s.port());
        send_all(fd, "hello", 5);
        return fd;
    };
    s.hold(true);
    const double before = rss_kib();
    std::vector<int> fds;
    for (std::size_t i = 0; i < n; ++i)
        fds.push_back(open_idle());
    await_held(s, n);
    fill_until_blocked(fds);
    const double after = rss_kib();
    for (int fd : fds)
        ::close(fd);
    s.release_held();
    s.hold(false);
    for (int i = 0; i < 10'000 && px.connections() > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return {(after - before) / static_cast<double>(n), before, after};
}

/// Every lateness (ms) of a 1 ms timer on the proxy's loop until `until` is set.
asio::awaitable<void> timer_probe(std::atomic<bool>& until, std::promise<std::vector<double>>& out)
{
    asio::steady_timer t(co_await asio::this_coro::executor);
    std::vector<double> late;
    while (!until.load())
    {
        t.expires_after(std::chrono::milliseconds(1));
        co_await t.async_wait(asio::use_awaitable);
        late.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t.expiry()).count());
    }
    out.set_value(std::move(late));
}

std::vector<double> probe_while(proxy_rig& px, const std::function<void()>& work)
{
    std::atomic<bool> until{false};
    std::promise<std::vector<double>> late;
    asio::co_spawn(px.loop(), timer_probe(until, late), asio::detached);
    work();
    until = true;
    return late.get_future().get();
}

void run_stall(proxy_rig& px, sink& s, const options& o)
{
    const std::uint64_t total = o.quick ? (16ull << 20) : (1ull << 30);
    double streaming_s = 0;
    const auto busy = probe_while(px, [&] {
        const int fd = dial(px.port());
        open_tunnel(fd, s.port());
        streaming_s = stream(fd, total);
    });
    const auto idle = probe_while(px, [&] {
        std::this_thread::sleep_for(std::chrono::duration<double>(std::max(streaming_s, 0.2)));
    });
    bench::print_json(bench_name, "loop_stall_while_streaming", bench::percentile(busy, 100), "ms",
                      bench::percentile(idle, 100));
    bench::print_json(bench_name, "loop_stall_p99_while_streaming", bench::percentile(busy, 99), "ms",
                      bench::percentile(idle, 99));
    // The same with the harness's client and sink at nice 19: on a machine with fewer free
    // cores than busy threads, this separates the loop's own handlers from preemption.
    s.nice_drains(true);
    const auto niced = probe_while(px, [&] {
        std::thread client([&] {
            lower_priority();
            const int fd = dial(px.port());
            open_tunnel(fd, s.port());
            stream(fd, total);
        });
        client.join();
    });
    s.nice_drains(false);
    bench::print_json(bench_name, "loop_stall_while_streaming_harness_niced", bench::percentile(niced, 100),
                      "ms", bench::percentile(idle, 100));
}

} // namespace

namespace {

/// tinyproxy on 127.0.0.1 (a port the kernel chose a moment before; tried again on another
/// when it cannot listen there), in the foreground as a child of ours, its output discarded;
/// killed (by pid) and reaped at destruction, and by an exit handler when a failed figure
/// ends the program with std::exit. Throws std::runtime_error when it cannot be started
/// (nothing of it is left then).
class tinyproxy
{
public:
    static constexpr const char* program = "/usr/bin/tinyproxy";

    tinyproxy() : dir_(make_dir())
    {
        static const bool once = std::atexit([] {
                                     if (running > 0)
                                         ::kill(running, SIGKILL), ::waitpid(running, nullptr, 0);
                                     std::error_code ignored;
                                     if (!running_dir.empty())
                                         std::filesystem::remove_all(running_dir, ignored);
                                 }) == 0;
        (void)once;
        running_dir = dir_.path;
        std::string why;
        for (int attempt = 0; attempt < 3; ++attempt)
            if (try_start(why))
                return;
        throw std::runtime_error(why);
    }
    tinyproxy(const tinyproxy&) = delete;
    tinyproxy& operator=(const tinyproxy&) = delete;
    ~tinyproxy() { stop(); }
    std::uint16_t port() const { return port_; }

private:
    struct temp_dir
    {
        std::string path;
        ~temp_dir()
        {
            std::error_code ignored;
            std::filesystem::remove_all(path, ignored);
            running_dir.clear();
        }
    };
    static temp_dir make_dir()
    {
        char dir[] = "/tmp/net-bench-tinyproxy-XXXXXX";
        if (!::mkdtemp(dir))
            throw std::runtime_error("mkdtemp");
        return temp_dir{dir};
    }
    void stop()
    {
        if (pid_ > 0)
        {
            ::kill(pid_, SIGKILL);
            while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR)
            {}
        }
        pid_ = running = -1;
    }
    // Spawns it on a fresh port and waits until it answers a CONNECT there. False (why set,
    // nothing left running) when it did not.
    bool try_start(std::string& why)
    {
        port_ = free_port();
        if (port_ == 0)
            return why = "no free port", false;
        const std::string conf = dir_.path + "/tinyproxy.conf";
        // No ConnectPort line: CONNECT to any port. Root drops to nobody, as packaged.
        std::ofstream(conf) << "User nobody\nGroup nogroup\nPort " << port_
                            << "\nListen 127.0.0.1\nTimeout 600\nMaxClients 1000\n"
                               "LogLevel Critical\nAllow 127.0.0.1\nDisableViaHeader Yes\n";
        posix_spawn_file_actions_t fa;
        ::posix_spawn_file_actions_init(&fa);
        for (int fd : {0, 1, 2})
            ::posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY,
                                               0);
        std::string c = conf;
        char* argv[] = {const_cast<char*>(program), const_cast<char*>("-d"),
                        const_cast<char*>("-c"), c.data(), nullptr};
        const int rc = ::posix_spawn(&pid_, program, &fa, nullptr, argv, environ);
        ::posix_spawn_file_actions_destroy(&fa);
        if (rc != 0)
        {
            pid_ = -1;
            return why = std::string("posix_spawn tinyproxy: ") + std::strerror(rc), false;
        }
        running = pid_;
        if (answers())
            return true;
        stop();
        why = "tinyproxy did not answer a CONNECT on port " + std::to_string(port_) + " within 5 s";
        return false;
    }
    static std::uint16_t free_port()
    {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return 0;
        sockaddr_in a = loopback(0);
        socklen_t len = sizeof a;
        const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0 &&
                        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
        ::close(fd);
        return ok ? ntohs(a.sin_port) : 0;
    }
    // True once a CONNECT to the proxy's own port gets "HTTP/1.x 200": it is tinyproxy
    // listening there, not another program nor a loopback self-connect.
    bool answers()
    {
        for (int i = 0; i < 500; ++i)
        {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_)
            {
                pid_ = running = -1;
                return false;
            }
            const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            const sockaddr_in a = loopback(port_);
            if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0)
            {
                const timeval t{1, 0};
                ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
                const std::string head = "CONNECT 127.0.0.1:" + std::to_string(port_) +
                                         " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
                char buf[64] = {};
                const bool ok = ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) ==
                                    static_cast<ssize_t>(head.size()) &&
                                ::recv(fd, buf, sizeof buf - 1, 0) > 12 &&
                                (std::strncmp(buf, "HTTP/1.0 200", 12) == 0 ||
                                 std::strncmp(buf, "HTTP/1.1 200", 12) == 0);
                ::close(fd);
                if (ok)
                    return true;
            }
            else
                ::close(fd);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    }

    static inline pid_t running = -1; // for the exit handler
    static inline std::string running_dir{};
    temp_dir dir_;
    std::uint16_t port_ = 0;
    pid_t pid_ = -1;
};

/// Accepts on 127.0.0.1; to each connection sends the number of bytes its first line asks
/// for, then closes (a download: no half-close needed, which tinyproxy does not pass on).
/// A connection silent for 10 s, or whose peer goes away, is closed.
class source
{
public:
    ~source()
    {
        acceptor_.reset();
        std::lock_guard lock(m_);
        for (auto& t : threads_)
            t.join();
    }
    std::uint16_t port() const { return acceptor_->port(); }

private:
    void accepted(int fd)
    {
        std::lock_guard lock(m_);
        threads_.emplace_back([fd] { serve(fd); });
    }
    static void serve(int fd)
    {
        const timeval t{10, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
        std::string line;
        char c;
        while (line.size() < 32 && ::recv(fd, &c, 1, 0) == 1 && c != '\n')
            line += c;
        std::uint64_t left = std::strtoull(line.c_str(), nullptr, 10);
        std::vector<char> buf(1 << 20, 'y');
        while (left > 0)
        {
            const auto k = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
            const ssize_t n = ::send(fd, buf.data(), k, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break; // the client or the proxy went away: the client's count says so
            left -= static_cast<std::uint64_t>(n);
        }
        ::close(fd);
    }

    std::mutex m_;
    std::vector<std::thread> threads_;
    std::unique_ptr<loopback_acceptor> acceptor_ =
        std::make_unique<loopback_acceptor>([this](int fd) { accepted(fd); });
};

/// MB/s of a download of `total` bytes from `src` through the proxy at `proxy_port`.
double download_via(std::uint16_t proxy_port, const source& src, std::uint64_t total)
{
    const int fd = dial(proxy_port);
    open_tunnel(fd, src.port());
    const std::string ask = std::to_string(total) + "\n";
    const auto t0 = clock_type::now();
    send_all(fd, ask.data(), ask.size());
    std::vector<char> buf(1 << 20);
    std::uint64_t got = 0;
    for (ssize_t k; (k = ::recv(fd, buf.data(), buf.size(), 0)) > 0;)
        got += static_cast<std::uint64_t>(k);
    const double dt = std::chrono::duration<double>(clock_type::now() - t0).count();
    ::close(fd);
    if (got != total)
    {
        std::fprintf(stderr, "net_bench: downloaded %llu of %llu through port %u\n",
                     static_cast<unsigned long long>(got), static_cast<unsigned long long>(total),
                     proxy_port);
        std::exit(1);
    }
    return static_cast<double>(total) / dt / 1e6;
}

/// The same client, source and bytes through our tunnel and through tinyproxy's, rounds
/// and setups interleaved (which goes first alternates).
void run_peer(proxy_rig& px, const options& o)
{
    if (::access(tinyproxy::program, X_OK) != 0)
    {
        std::fprintf(stderr,
                     "net_bench: peer_tinyproxy skipped: %s is not installed "
                     "(apt-get install tinyproxy)\n",
                     tinyproxy::program);
        return;
    }
    std::optional<tinyproxy> peer;
    try
    {
        peer.emplace();
    }
    catch (const std::exception& e)
    {
        std::fprintf(stderr, "net_bench: peer_tinyproxy skipped: %s\n", e.what());
        return;
    }
    source src;
    const std::uint64_t total = o.quick ? (16ull << 20) : (1ull << 30);
    int round = 0;
    auto t = bench::measure_rounds(o.quick ? 1 : 4, [&] {
        double ours = 0, theirs = 0;
        if (round++ % 2 == 0)
            theirs = download_via(peer->port(), src, total),
            ours = download_via(px.port(), src, total);
        else
            ours = download_via(px.port(), src, total),
            theirs = download_via(peer->port(), src, total);
        return std::pair{ours, theirs};
    });
    bench::print_json(bench_name, "peer_tinyproxy_throughput", t.ours_median(), "MB/s",
                      t.base_median());
    const int n = o.quick ? 20 : 200;
    std::vector<double> ours, theirs;
    auto setup = [&](std::uint16_t port, std::vector<double>& into) {
        const auto t0 = clock_type::now();
        const int fd = dial(port);
        open_tunnel(fd, src.port());
        into.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
        ::close(fd);
    };
    for (int i = 0; i < n; ++i)
        if (i % 2 == 0)
            setup(peer->port(), theirs), setup(px.port(), ours);
        else
            setup(px.port(), ours), setup(peer->port(), theirs);
    bench::print_json(bench_name, "peer_tinyproxy_setup_p50", bench::percentile(ours, 50), "us",
                      bench::percentile(theirs, 50));
}

} // namespace

void run_setup_only(const options& o)
{
    sink s;
    proxy_rig px;
    run_setup(px, s, o);
}

void run_relay(const options& o)
{
    sink s;
    proxy_rig px;
    run_throughput(px, s, o);
    run_setup(px, s, o);
    run_peer(px, o);
    run_stall(px, s, o);
    const stalled_figures stalled = run_stalled(px, s, o);
    const double idle = run_idle(px, s, o);
    bench::print_json(bench_name, "stalled_tunnel_memory", stalled.per_tunnel_kib, "KiB", idle);
    bench::print_json(bench_name, "stalled_tunnels_rss", stalled.after_kib / 1024, "MiB",
                      stalled.before_kib / 1024);
}

} // namespace net_bench
