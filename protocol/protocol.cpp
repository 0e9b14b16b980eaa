// protocol/protocol.cpp: plan encoding and one-message send/receive with SCM_RIGHTS.
#include "protocol/protocol.hpp"

#include <cerrno>

#include <sys/socket.h>

namespace sandbox::detail::proto {

namespace {

void put_string(std::string& out, std::string_view s)
{
    const auto n = static_cast<std::uint32_t>(s.size());
    out.append(as_bytes(n));
    out.append(s);
}

bool get_string(std::string_view& in, std::string& s)
{
    std::uint32_t n = 0;
    if (!from_bytes(in, n) || in.size() - sizeof n < n)
        return false;
    s.assign(in.substr(sizeof n, n));
    in.remove_prefix(sizeof n + n);
    return true;
}

// A count, then each file's device, inode and path (at least 20 bytes each: a count the
// rest cannot hold is refused before anything is allocated).
bool get_socket_files(std::string_view& in, std::vector<socket_file>& out)
{
    std::uint32_t count = 0;
    if (!from_bytes(in, count))
        return false;
    in.remove_prefix(sizeof count);
    if (count > in.size() / 20)
        return false;
    out.resize(count);
    for (auto& sf : out)
    {
        if (!from_bytes(in, sf.dev))
            return false;
        in.remove_prefix(sizeof sf.dev);
        if (!from_bytes(in, sf.ino))
            return false;
        in.remove_prefix(sizeof sf.ino);
        if (!get_string(in, sf.path))
            return false;
    }
    return true;
}

} // namespace

std::string encode_plan(const plan& p)
{
    plan_fixed f = p.fixed;
    f.argc = static_cast<std::uint32_t>(p.argv.size());
    f.envc = static_cast<std::uint32_t>(p.envp.size());
    std::string out;
    std::size_t size = sizeof f + 4 + p.executable.size();
    for (const auto& s : p.argv)
        size += 4 + s.size();
    for (const auto& s : p.envp)
        size += 4 + s.size();
    out.reserve(size);
    out.append(as_bytes(f));
    put_string(out, p.executable);
    for (const auto& s : p.argv)
        put_string(out, s);
    for (const auto& s : p.envp)
        put_string(out, s);
    if (f.options & opt_tty)
        put_string(out, p.tty_path);
    if (f.options & opt_connect_broker)
    {
        out.append(as_bytes(static_cast<std::uint32_t>(p.allowed_sockets.size())));
        for (const auto& sf : p.allowed_sockets)
        {
            out.append(as_bytes(sf.dev));
            out.append(as_bytes(sf.ino));
            put_string(out, sf.path);
        }
    }
    if (f.options & opt_inside)
        put_string(out, p.work_dir_path);
    return out;
}

std::optional<plan> decode_plan(std::string_view in)
{
    plan p;
    if (!from_bytes(in, p.fixed))
        return std::nullopt;
    in.remove_prefix(sizeof p.fixed);
    if (!get_string(in, p.executable))
        return std::nullopt;
    // Each string takes at least 4 bytes, so the counts are bounded by the input size.
    if (p.fixed.argc > in.size() / 4 || p.fixed.envc > in.size() / 4)
        return std::nullopt;
    p.argv.resize(p.fixed.argc);
    for (auto& s : p.argv)
        if (!get_string(in, s))
            return std::nullopt;
    p.envp.resize(p.fixed.envc);
    for (auto& s : p.envp)
        if (!get_string(in, s))
            return std::nullopt;
    if ((p.fixed.options & opt_tty) && !get_string(in, p.tty_path))
        return std::nullopt;
    if ((p.fixed.options & opt_connect_broker) && !get_socket_files(in, p.allowed_sockets))
        return std::nullopt;
    if ((p.fixed.options & opt_inside) && !get_string(in, p.work_dir_path))
        return std::nullopt;
    if (!in.empty())
        return std::nullopt;
    return p;
}

int send_message(int sock, msg_type type, std::uint32_t flags, std::string_view payload,
                 std::span<const int> fds)
{
    header h{type, flags};
    iovec iov[2] = {{&h, sizeof h}, {const_cast<char*>(payload.data()), payload.size()}};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds)] = {};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = payload.empty() ? 1 : 2;
    if (!fds.empty())
    {
        if (fds.size() > max_fds)
            return EINVAL;
        m.msg_control = control;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    for (;;)
    {
        if (::sendmsg(sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
            return 0;
        if (errno != EINTR)
            return errno;
    }
}

int receive_message(int sock, message& out, bool& eof)
{
    eof = false;
    out.payload.resize(max_payload);
    out.fds.clear();
    iovec iov[2] = {{&out.head, sizeof out.head}, {out.payload.data(), out.payload.size()}};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds)] = {};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = 2;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    ssize_t n;
    do
        n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == ECONNRESET ? (eof = true, 0) : errno;
    if (n == 0)
    {
        eof = true;
        return 0;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i)
        {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            out.fds.emplace_back(fd);
        }
    }
    if ((m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0 ||
        static_cast<std::size_t>(n) < sizeof out.head)
        return EPROTO;
    out.payload.resize(static_cast<std::size_t>(n) - sizeof out.head);
    return 0;
}

} // namespace sandbox::detail::proto
