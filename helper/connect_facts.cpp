// helper/connect_facts.cpp: what the connect broker reads from the kernel
// (connect_broker.hpp): a task's ids and groups (/proc/TID/status), the device numbers
// sock_diag and stat give, and whether a listening unix socket of a network namespace is
// bound to a file (sock_diag).
#include "helper/connect_broker.hpp"

#include "helper/proc.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace sandbox::detail {

using backend::unique_fd;

namespace {

// The numbers of a "Name:\tA\tB ..." line's value, or false when malformed.
bool parse_numbers(std::string_view value, std::vector<std::uint32_t>& out)
{
    out.clear();
    while (true)
    {
        const auto start = value.find_first_not_of(" \t");
        if (start == std::string_view::npos)
            return true;
        value.remove_prefix(start);
        std::uint32_t n = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
        if (ec != std::errc{} ||
            (end != value.data() + value.size() && *end != ' ' && *end != '\t'))
            return false;
        out.push_back(n);
        value.remove_prefix(static_cast<std::size_t>(end - value.data()));
    }
}

} // namespace

std::optional<task_ids> parse_task_ids(std::string_view status)
{
    task_ids t;
    bool tgid = false, uid = false, gid = false, groups = false;
    std::vector<std::uint32_t> v;
    while (!status.empty())
    {
        const auto nl = status.find('\n');
        const std::string_view line = status.substr(0, nl);
        status.remove_prefix(nl == std::string_view::npos ? status.size() : nl + 1);
        const auto colon = line.find(':');
        if (colon == std::string_view::npos)
            continue;
        const std::string_view name = line.substr(0, colon);
        const bool ids = name == "Uid" || name == "Gid";
        if (name != "Tgid" && !ids && name != "Groups")
            continue;
        if (!parse_numbers(line.substr(colon + 1), v))
            return std::nullopt;
        if (name == "Tgid" && v.size() == 1 && v[0] > 0)
            t.tgid = static_cast<pid_t>(v[0]), tgid = true;
        else if (ids && v.size() == 4)
        {
            std::copy(v.begin(), v.end(), name == "Uid" ? t.uid : t.gid);
            (name == "Uid" ? uid : gid) = true;
        }
        else if (name == "Groups")
            t.groups = v, groups = true;
        else
            return std::nullopt;
    }
    if (!(tgid && uid && gid && groups))
        return std::nullopt;
    return t;
}

std::optional<task_ids> read_task_ids(pid_t tid, int& err)
{
    const std::string where = "/proc/" + std::to_string(tid) + "/status";
    for (std::size_t size = 16384; size <= (std::size_t{1} << 20); size *= 4)
    {
        std::string status(size, '\0'); // on the heap: see served_in_namespace
        const ssize_t n = read_small(where.c_str(), status.data(), status.size(), err);
        if (n <= 0)
        {
            err = ESRCH;
            return std::nullopt;
        }
        if (static_cast<std::size_t>(n) == size)
            continue; // perhaps cut inside the Groups line: read again, whole
        auto ids = parse_task_ids(std::string_view(status.data(), static_cast<std::size_t>(n)));
        if (!ids)
            err = EPERM;
        return ids;
    }
    err = EPERM;
    return std::nullopt;
}

bool same_device(std::uint32_t kernel_dev, std::uint64_t st_dev)
{
    return (kernel_dev >> 20) == major(st_dev) && (kernel_dev & 0xfffff) == minor(st_dev);
}

// ------------------------------------------------------------------ the broker

// A sock_diag socket in the network namespace `ns` (made on this thread, which enters the
// namespace: a socket stays in the namespace it was made in).
unique_fd diag_socket_in(int ns)
{
    if (::setns(ns, CLONE_NEWNET) != 0)
        return {};
    return unique_fd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
}

// Whether a listening AF_UNIX socket of the diag socket's namespace is bound to the file
// `st` (sock_diag gives the bound file's device and the low 32 bits of its inode).
served served_in_namespace(int diag, const struct stat& st)
{
    struct
    {
        nlmsghdr nlh;
        unix_diag_req req;
    } q{};
    q.nlh.nlmsg_len = sizeof q;
    q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    q.req.sdiag_family = AF_UNIX;
    q.req.udiag_states = 1u << 10; // TCP_LISTEN
    q.req.udiag_show = UDIAG_SHOW_VFS;
    if (::send(diag, &q, sizeof q, 0) != static_cast<ssize_t>(sizeof q))
        return served::broken;
    // On the heap, as every buffer of a call: a call's thread is new, and glibc gives a
    // cached stack back to the kernel (madvise) when a thread ends, so each stack page a
    // call touches faults in again (16 KiB of stack cost ~100 us a call here).
    std::vector<nlmsghdr> space(16384 / sizeof(nlmsghdr));
    char* buf = reinterpret_cast<char*>(space.data());
    const std::size_t size = space.size() * sizeof(nlmsghdr);
    bool found = false;
    while (true)
    {
        const ssize_t n = ::recv(diag, buf, size, 0);
        if (n <= 0)
            return served::broken;
        int left = static_cast<int>(n);
        for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left))
        {
            if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR)
                return found ? served::yes : served::no;
            auto* msg = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
            int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *msg));
            for (auto* a = reinterpret_cast<rtattr*>(msg + 1); RTA_OK(a, alen);
                 a = RTA_NEXT(a, alen))
            {
                if (a->rta_type != UNIX_DIAG_VFS || RTA_PAYLOAD(a) < sizeof(unix_diag_vfs))
                    continue;
                unix_diag_vfs v;
                std::memcpy(&v, RTA_DATA(a), sizeof v);
                if (v.udiag_vfs_ino == static_cast<std::uint32_t>(st.st_ino) &&
                    same_device(v.udiag_vfs_dev, st.st_dev))
                    found = true; // read on to the end of the dump
            }
        }
    }
}

} // namespace sandbox::detail
