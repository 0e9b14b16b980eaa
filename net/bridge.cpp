// net/bridge.cpp: see bridge.hpp. The message format is protocol/net_bridge.hpp's.
#include "bridge.hpp"

#include "protocol/net_bridge.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include <sys/socket.h>
#include <unistd.h>

namespace sandbox::net {

namespace asio = boost::asio;
using asio::ip::tcp;

struct sandbox_network::state : std::enable_shared_from_this<state>
{
    state(std::shared_ptr<egress> g, unique_fd fd)
        : gate(std::move(g)), proxy(gate), host(gate->get_executor(), fd.release())
    {
    }

    std::shared_ptr<egress> gate;
    egress_proxy proxy;
    asio::posix::stream_descriptor host;

    void wait();
    void receive();
    void serve(std::vector<unique_fd>& fds);
    void stop();
};

namespace {

// One recvmsg: the body and up to `net_bridge_max_fds` descriptors (close-on-exec).
// Returns the byte count (0: end of file), or -1 with errno.
ssize_t receive_message(int fd, std::string& body, std::vector<unique_fd>& fds)
{
    char text[64];
    iovec iov{text, sizeof text};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * detail::net_bridge_max_fds)]{};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    ssize_t n;
    while ((n = ::recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) < 0 && errno == EINTR)
    {
    }
    if (n < 0)
        return n;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
        {
            const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (std::size_t i = 0; i < count; ++i)
            {
                int got = -1;
                std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
                fds.emplace_back(got);
            }
        }
    body.assign(text, static_cast<std::size_t>(n));
    return n;
}

// The family a received listener was bound in (AF_INET, AF_INET6), or -1.
int family_of(int fd)
{
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
        return -1;
    return a.ss_family;
}

} // namespace

void sandbox_network::state::wait()
{
    host.async_wait(asio::posix::descriptor_base::wait_read,
                    [self = shared_from_this()](boost::system::error_code ec) {
                        if (!ec)
                            self->receive();
                    });
}

// The init's one message; end of file or an error leaves nothing to serve (the command
// still runs; its connects to the proxy's port are refused).
void sandbox_network::state::receive()
{
    std::string body;
    std::vector<unique_fd> fds;
    const ssize_t n = receive_message(host.native_handle(), body, fds);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return wait();
    if (n > 0 && detail::parse_net_bridge_body(body))
        serve(fds);
    boost::system::error_code ignored;
    host.close(ignored); // one message only
}

void sandbox_network::state::serve(std::vector<unique_fd>& fds)
{
    for (auto& fd : fds)
    {
        const int family = family_of(fd.get());
        if (family != AF_INET && family != AF_INET6)
            continue;
        tcp::acceptor listener(gate->get_executor());
        boost::system::error_code ec;
        listener.assign(family == AF_INET ? tcp::v4() : tcp::v6(), fd.get(), ec);
        if (ec)
            continue;
        (void)fd.release(); // the acceptor's now
        proxy.add_listener(std::move(listener));
    }
}

void sandbox_network::state::stop()
{
    boost::system::error_code ignored;
    host.close(ignored);
    proxy.stop();
}

outcome<sandbox_network::ends> sandbox_network::make_ends()
{
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    {
        const int err = errno;
        failure f = make_failure(errc::internal,
                                 std::string("cannot create the proxy's hand-off socket: ") +
                                     std::strerror(err),
                                 "net.mode");
        f.diag.cause = boost::system::error_code(err, boost::system::system_category());
        return f;
    }
    return ends{unique_fd(sv[0]), unique_fd(sv[1])};
}

sandbox_network::sandbox_network(std::shared_ptr<egress> gate, unique_fd host_end)
    : st_(std::make_shared<state>(std::move(gate), std::move(host_end)))
{
    asio::dispatch(st_->gate->get_executor(), [st = st_] { st->wait(); });
}

void sandbox_network::settle(std::function<void()> done)
{
    asio::dispatch(st_->gate->get_executor(), [st = st_, done = std::move(done)]() mutable {
        boost::system::error_code ignored;
        st->host.close(ignored);
        st->proxy.stop(std::move(done));
    });
}

sandbox_network::~sandbox_network()
{
    auto ex = st_->gate->get_executor(); // before st_ moves into the handler
    asio::dispatch(ex, [st = std::move(st_)] { st->stop(); });
}

} // namespace sandbox::net
