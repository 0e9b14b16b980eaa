// bench/net/rig.hpp: what net_bench's tunnel cases share: thread cpu and process RSS,
// blocking loopback sockets (dial, send, CONNECT), and the egress proxy on an io_context
// thread of its own.
#ifndef SANDBOX_BENCH_NET_RIG_HPP
#define SANDBOX_BENCH_NET_RIG_HPP

#include "net/proxy.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

namespace net_bench {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace sandbox;

inline constexpr const char* bench_name = "net_bench";

/// Microseconds since `t0`.
inline double micros_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

inline double seconds_of(clockid_t id)
{
    timespec ts{};
    ::clock_gettime(id, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

inline double thread_cpu()
{
    return seconds_of(CLOCK_THREAD_CPUTIME_ID);
}

inline double rss_kib()
{
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0)
            return std::atof(line.c_str() + 6);
    return 0;
}

/// Nice 19 for the calling thread only (Linux: a thread id is a PRIO_PROCESS target).
inline void lower_priority()
{
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
}

inline sockaddr_in loopback(std::uint16_t port)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

inline int dial(std::uint16_t port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_in a = loopback(port);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
    {
        std::perror("connect");
        std::exit(1);
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

inline void send_all(int fd, const char* p, std::size_t n)
{
    while (n > 0)
    {
        const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
        {
            std::perror("send");
            std::exit(1);
        }
        p += k;
        n -= static_cast<std::size_t>(k);
    }
}

/// CONNECT host:port through the proxy on `fd`; exits unless answered 200.
inline void open_tunnel(int fd, std::uint16_t port, const std::string& host = "127.0.0.1")
{
    const std::string head =
        "CONNECT " + host + ":" + std::to_string(port) + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
    send_all(fd, head.data(), head.size());
    std::string got;
    char buf[512];
    while (got.find("\r\n\r\n") == std::string::npos)
    {
        const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
        if (k <= 0)
            break;
        got.append(buf, static_cast<std::size_t>(k));
    }
    // HTTP/1.0 from a peer proxy (tinyproxy answers so).
    if (got.rfind("HTTP/1.1 200 ", 0) != 0 && got.rfind("HTTP/1.0 200 ", 0) != 0)
    {
        std::fprintf(stderr, "net_bench: CONNECT refused: %s\n", got.c_str());
        std::exit(1);
    }
}

/// A listener on 127.0.0.1 (port chosen by the kernel) whose thread hands every accepted
/// connection to `on_accept` until destruction.
class loopback_acceptor
{
public:
    explicit loopback_acceptor(std::function<void(int)> on_accept)
        : on_accept_(std::move(on_accept))
    {
        lfd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a = loopback(0);
        ::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::listen(lfd_, 4096);
        socklen_t len = sizeof a;
        ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { run(); });
    }
    ~loopback_acceptor()
    {
        ::shutdown(lfd_, SHUT_RDWR);
        thread_.join();
        ::close(lfd_);
    }
    loopback_acceptor(const loopback_acceptor&) = delete;
    loopback_acceptor& operator=(const loopback_acceptor&) = delete;
    std::uint16_t port() const { return port_; }

private:
    void run()
    {
        for (;;)
        {
            const int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0)
                on_accept_(fd);
            else if (errno != EINTR && errno != ECONNABORTED)
                return;
        }
    }

    std::function<void(int)> on_accept_;
    int lfd_ = -1;
    std::uint16_t port_ = 0;
    std::thread thread_;
};

/// Mode allow_list with 127.0.0.1 allowed by an IP rule and `names` pinned to it (allowed
/// too), room for 100,000 tunnels.
inline net::egress_config loopback_config(const std::vector<std::string>& names = {})
{
    net_policy p;
    p.mode = net_mode::allow_list;
    p.rules = {net_rule{net_action::allow, "127.0.0.1", 0}};
    std::map<std::string, std::vector<asio::ip::address>> pins;
    for (const auto& n : names)
    {
        p.rules.push_back(net_rule{net_action::allow, n, 0});
        pins[n] = {asio::ip::make_address("127.0.0.1")};
    }
    net::egress_config cfg;
    cfg.mode = net_mode::allow_list;
    cfg.rules = net::rule_set::compile(p).value();
    cfg.dns = std::make_shared<net::static_resolver>(std::move(pins), nullptr);
    cfg.limits.max_tunnels = 100'000;
    return cfg;
}

/// The proxy on its own io_context thread.
class proxy_rig
{
public:
    explicit proxy_rig(net::egress_config cfg = loopback_config())
    {
        gate_ = std::make_shared<net::egress>(ioc_.get_executor(), std::move(cfg));
        proxy_ = std::make_unique<net::egress_proxy>(gate_);
        tcp::acceptor a(ioc_);
        const tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
        a.open(ep.protocol());
        a.bind(ep);
        a.listen(4096);
        port_ = a.local_endpoint().port();
        proxy_->add_listener(std::move(a));
        thread_ = std::thread([this] { ioc_.run(); });
        ::pthread_setname_np(thread_.native_handle(), "proxy"); // for perf --comm
        ::pthread_getcpuclockid(thread_.native_handle(), &cpu_clock_);
    }
    ~proxy_rig()
    {
        asio::post(ioc_, [this] { proxy_->stop(); });
        work_.reset();
        thread_.join();
    }
    std::uint16_t port() const { return port_; }
    double cpu() const { return seconds_of(cpu_clock_); }
    asio::io_context& loop() { return ioc_; }
    std::size_t connections()
    {
        std::promise<std::size_t> p;
        asio::post(ioc_, [&] { p.set_value(proxy_->connections()); });
        return p.get_future().get();
    }

private:
    asio::io_context ioc_{1};
    asio::executor_work_guard<asio::io_context::executor_type> work_{ioc_.get_executor()};
    std::shared_ptr<net::egress> gate_;
    std::unique_ptr<net::egress_proxy> proxy_;
    std::uint16_t port_ = 0;
    std::thread thread_;
    clockid_t cpu_clock_{};
};

} // namespace net_bench

#endif // SANDBOX_BENCH_NET_RIG_HPP
