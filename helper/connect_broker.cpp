// helper/connect_broker.cpp: the connect broker (see connect_broker.hpp).
#include "helper/connect_broker.hpp"

#include "helper/proc.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

namespace sandbox::detail {

using backend::unique_fd;

struct connect_broker::state
{
    unique_fd listener;
    unique_fd wake; // an eventfd: written by stop()
    std::vector<proto::socket_file> allowed;
    // Calls in flight, each on a thread of its own; at most `max_in_flight`. `threads` holds
    // those that started, by notification id; the watcher interrupts them (see watch_calls).
    std::mutex m;
    std::condition_variable changed;
    unsigned in_flight = 0;
    std::map<std::uint64_t, pthread_t> threads;
    bool watching = false;
    bool watcher_idle = false; // waiting without a period: a new call must wake it
    bool stopped = false;
    std::thread receiver;
    // sock_diag sockets by network namespace (device, inode), made on first use: a thread
    // that queries one holds `diag_m` (a query is a send and the dump's receives).
    std::mutex diag_m;
    struct diag_socket
    {
        unique_fd fd;
        bool broken = false; // a dump that did not end: out of step, never asked again
    };
    std::map<std::pair<dev_t, ino_t>, std::shared_ptr<diag_socket>> diag;
};

namespace {

constexpr unsigned max_in_flight = 64;
constexpr std::size_t max_namespaces = 16; // sock_diag sockets kept; more are made per call
constexpr auto watch_period = std::chrono::milliseconds(20);
constexpr auto stop_patience = std::chrono::seconds(2);
constexpr auto idle_after = std::chrono::seconds(1); // without calls: the watcher sleeps

// The signal that interrupts a call's thread (a blocked connect returns EINTR): a handler
// that does nothing, without SA_RESTART, installed once in the worker (our own process).
int wake_signal()
{
    static const int sig = [] {
        const int n = SIGRTMIN + 2;
        struct sigaction a
        {
        };
        a.sa_handler = [](int) {};
        sigemptyset(&a.sa_mask);
        ::sigaction(n, &a, nullptr);
        return n;
    }();
    return sig;
}

int sys_pidfd_open(pid_t pid)
{
    return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}
int sys_pidfd_getfd(int pidfd, int fd)
{
    return static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd, fd, 0));
}

// Whether the call `id` still waits (its task alive). The kernel takes its lock
// interruptibly: EINTR says nothing about the call, and is asked again.
bool notification_alive(int listener, std::uint64_t id)
{
    while (::ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0)
        if (errno != EINTR)
            return false;
    return true;
}

// The calling thread takes `t`'s ids and groups and drops every capability (raw calls: the
// C library's wrappers would change every thread of the worker). The thread is the call's
// own and ends after it.
bool become(const task_ids& t)
{
    if (::syscall(SYS_setgroups, t.groups.size(), t.groups.data()) != 0 ||
        ::syscall(SYS_setresgid, t.gid[0], t.gid[1], t.gid[2]) != 0 ||
        ::syscall(SYS_setresuid, t.uid[0], t.uid[1], t.uid[2]) != 0)
        return false;
    ::syscall(SYS_setfsgid, t.gid[3]);
    ::syscall(SYS_setfsuid, t.uid[3]);
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    return ::syscall(SYS_capset, &h, d) == 0;
}

// One connect, as the task asked for it (see connect_broker.hpp): 0 or an errno. (Every
// call is answered: an answer to a task that is gone fails harmlessly.)
class call
{
public:
    call(connect_broker::state& s, const seccomp_notif& n) : s_(s), n_(n) {}

    int run()
    {
        const pid_t tid = static_cast<pid_t>(n_.pid);
        if (tid <= 0)
            return EPERM; // not in our pid namespace: nothing to act as
        const std::size_t len = static_cast<std::uint32_t>(n_.data.args[2]);
        if (len > sizeof addr_)
            return EINVAL;
        len_ = len;
        if (int rc = copy_address(tid); rc != 0)
            return rc;
        int rc = 0;
        const auto found = read_task_ids(tid, rc);
        if (!found)
            return rc;
        const task_ids& ids = *found;
        if (rc = copy_socket(tid, ids.tgid); rc != 0)
            return rc;
        if (path_named())
            return connect_path(tid, ids);
        if (!become(ids))
            return EPERM;
        return connect_as_given();
    }

private:
    int copy_address(pid_t tid)
    {
        if (len_ == 0)
            return 0;
        iovec local{&addr_, len_};
        iovec remote{reinterpret_cast<void*>(n_.data.args[1]), len_};
        const ssize_t got = ::process_vm_readv(tid, &local, 1, &remote, 1, 0);
        if (got == static_cast<ssize_t>(len_))
            return 0;
        return EFAULT;
    }

    // The socket the thread names, copied from its process: the thread's descriptor table
    // may be its own (clone without CLONE_FILES), so the copy must be the very socket the
    // thread's descriptor shows.
    int copy_socket(pid_t tid, pid_t tgid)
    {
        unique_fd pidfd(sys_pidfd_open(tgid));
        if (!pidfd || !notification_alive(s_.listener.get(), n_.id))
            return ESRCH; // the tid (and its process) may have been reused meanwhile
        const int fd = static_cast<int>(n_.data.args[0]);
        sock_.reset(sys_pidfd_getfd(pidfd.get(), fd));
        if (!sock_)
            return errno == EBADF || errno == ESRCH ? EBADF : errno;
        struct stat mine = {};
        struct stat theirs = {};
        const std::string seen = "/proc/" + std::to_string(tgid) + "/task/" + std::to_string(tid) +
                                 "/fd/" + std::to_string(fd);
        if (::fstat(sock_.get(), &mine) != 0 || ::stat(seen.c_str(), &theirs) != 0 ||
            mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev)
            return EBADF;
        return 0;
    }

    bool path_named() const
    {
        return len_ > offsetof(sockaddr_un, sun_path) && addr_.ss_family == AF_UNIX &&
               reinterpret_cast<const sockaddr_un&>(addr_).sun_path[0] != '\0';
    }

    std::string path() const
    {
        const auto& un = reinterpret_cast<const sockaddr_un&>(addr_);
        const std::size_t max = len_ - offsetof(sockaddr_un, sun_path);
        return std::string(un.sun_path, ::strnlen(un.sun_path, max));
    }

    int connect_path(pid_t tid, const task_ids& ids)
    {
        const std::string proc = "/proc/" + std::to_string(tid);
        unique_fd root(::open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        std::string where = path();
        if (where.front() != '/')
        {
            std::string cwd(PATH_MAX, '\0');
            const ssize_t n = ::readlink((proc + "/cwd").c_str(), cwd.data(), cwd.size() - 1);
            if (n <= 0)
                return EACCES;
            cwd.resize(static_cast<std::size_t>(n));
            where = cwd + "/" + where;
        }
        unique_fd ns(::open((proc + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
        pin_listed();
        // The root and the namespace were opened while the task lived: its tid was not
        // another process's yet.
        if (!root || !notification_alive(s_.listener.get(), n_.id))
            return EACCES;
        // Without a sock_diag socket (no CAP_SYS_ADMIN to enter the namespace) only the
        // plan's sockets pass.
        if (ns)
            take_diag_socket(ns.get());
        if (!become(ids))
            return EPERM;
        // Resolved as the task, in its root: the directories it cannot search stop us too.
        open_how how{};
        how.flags = O_PATH | O_CLOEXEC;
        how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
        unique_fd file(
            static_cast<int>(::syscall(SYS_openat2, root.get(), where.c_str(), &how, sizeof how)));
        if (!file)
            return errno == ELOOP || errno == EXDEV ? EACCES : errno;
        struct stat st = {};
        if (::fstat(file.get(), &st) != 0)
            return errno;
        if (!S_ISSOCK(st.st_mode))
            return ECONNREFUSED; // what connecting to a file that is no socket gives
        if (!allowed(st))
            return EACCES;
        sockaddr_un via{};
        via.sun_family = AF_UNIX;
        const std::string link = "/proc/self/fd/" + std::to_string(file.get());
        std::memcpy(via.sun_path, link.c_str(), link.size() + 1);
        return ::connect(sock_.get(), reinterpret_cast<const sockaddr*>(&via), sizeof via) == 0
                   ? 0
                   : errno;
    }

    // The sock_diag socket of the network namespace `ns` (kept by the broker, one per
    // namespace), made on this thread while it still has CAP_SYS_ADMIN; none when none can
    // be had.
    void take_diag_socket(int ns)
    {
        struct stat st = {};
        if (::fstat(ns, &st) != 0)
            return;
        diag_key_ = {st.st_dev, st.st_ino};
        std::lock_guard lock(s_.diag_m);
        if (auto it = s_.diag.find(diag_key_); it != s_.diag.end())
        {
            diag_ = it->second;
            return;
        }
        auto made = std::make_shared<connect_broker::state::diag_socket>();
        made->fd = diag_socket_in(ns);
        if (!made->fd)
            return;
        diag_ = made;
        if (s_.diag.size() < max_namespaces)
            s_.diag.emplace(diag_key_, std::move(made));
    }

    // The plan's sockets whose host path still names them, each held open (O_PATH) for the
    // call: a socket its service removed does not pass, and none that passes can have its
    // inode number handed to another file meanwhile. (As the worker, before the thread
    // takes the task's ids: the host path may lie where the task's user cannot search.)
    void pin_listed()
    {
        for (const auto& f : s_.allowed)
        {
            unique_fd fd(::open(f.path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
            struct stat st = {};
            if (fd && ::fstat(fd.get(), &st) == 0 && S_ISSOCK(st.st_mode) &&
                static_cast<std::uint64_t>(st.st_dev) == f.dev &&
                static_cast<std::uint64_t>(st.st_ino) == f.ino)
            {
                listed_.emplace_back(st.st_dev, st.st_ino);
                pinned_.push_back(std::move(fd));
            }
        }
    }

    // A listed socket file, or one a listener of the task's own namespace is bound to. A
    // sock_diag socket whose dump did not end is dropped (the next call makes another).
    bool allowed(const struct stat& st)
    {
        const auto file = std::make_pair(st.st_dev, st.st_ino);
        if (std::find(listed_.begin(), listed_.end(), file) != listed_.end())
            return true;
        if (!diag_)
            return false;
        std::lock_guard lock(s_.diag_m);
        if (diag_->broken)
            return false;
        const served r = served_in_namespace(diag_->fd.get(), st);
        if (r == served::broken)
        {
            diag_->broken = true;
            if (auto it = s_.diag.find(diag_key_); it != s_.diag.end() && it->second == diag_)
                s_.diag.erase(it);
        }
        return r == served::yes;
    }

    int connect_as_given()
    {
        return ::connect(sock_.get(), reinterpret_cast<const sockaddr*>(&addr_),
                         static_cast<socklen_t>(len_)) == 0
                   ? 0
                   : errno;
    }

    connect_broker::state& s_;
    seccomp_notif n_;
    sockaddr_storage addr_{};
    std::size_t len_ = 0;
    unique_fd sock_;
    std::shared_ptr<connect_broker::state::diag_socket> diag_;
    std::pair<dev_t, ino_t> diag_key_{};
    std::vector<std::pair<dev_t, ino_t>> listed_;
    std::vector<unique_fd> pinned_;
};

void answer(int listener, std::uint64_t id, int rc)
{
    seccomp_notif_resp resp{};
    resp.id = id;
    resp.error = rc == 0 ? 0 : -rc;
    while (::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0 && errno == EINTR)
    {}
}

// The watcher: while calls are in flight, it interrupts (wake_signal) each whose task is
// gone, every `watch_period`, so a connect left blocked (a server that accepts nothing) is
// withdrawn as the task's own would be. (A signal may land just before the thread blocks:
// hence the repeats.) After stop() it interrupts all; it ends once none is left, or after
// `stop_patience` (a thread stuck where no signal reaches keeps its state alive).
void watch_calls(std::shared_ptr<connect_broker::state> s)
{
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr); // nothing interrupts its own waits
    using clock = std::chrono::steady_clock;
    std::unique_lock lock(s->m);
    auto give_up = clock::time_point::max();
    auto busy = clock::now();
    while (!(s->stopped && s->in_flight == 0))
    {
        const auto now = clock::now();
        if (s->stopped && give_up == clock::time_point::max())
            give_up = now + stop_patience;
        if (now > give_up)
            break;
        for (const auto& [id, thread] : s->threads)
            if (s->stopped || !notification_alive(s->listener.get(), id))
                ::pthread_kill(thread, wake_signal());
        if (s->in_flight > 0)
            busy = now;
        // Periodic while calls come (no wake-up per call: a busy connect loop pays none),
        // asleep after a quiet second until a call or stop() wakes it.
        if (s->in_flight == 0 && !s->stopped && now - busy > idle_after)
        {
            s->watcher_idle = true;
            s->changed.wait(lock, [&] { return s->in_flight > 0 || s->stopped; });
            s->watcher_idle = false;
            busy = clock::now();
        }
        else
            s->changed.wait_for(lock, watch_period);
    }
    s->watching = false;
}

void serve_one(std::shared_ptr<connect_broker::state> s, seccomp_notif n)
{
    sigset_t wake;
    sigemptyset(&wake);
    sigaddset(&wake, wake_signal());
    ::pthread_sigmask(SIG_UNBLOCK, &wake, nullptr);
    {
        std::lock_guard lock(s->m);
        s->threads.emplace(n.id, ::pthread_self());
    }
    const int rc = call(*s, n).run();
    {
        // Off the list before the answer ends the notification: the watcher signals only
        // calls still waiting, and never a thread that is gone.
        std::lock_guard lock(s->m);
        s->threads.erase(n.id);
    }
    answer(s->listener.get(), n.id, rc);
    std::lock_guard lock(s->m);
    --s->in_flight;
}

// Starts the watcher if it is not running (with `s->m` held). False when no thread can be had.
bool ensure_watcher(const std::shared_ptr<connect_broker::state>& s)
{
    if (s->watching)
        return true;
    try
    {
        std::thread(watch_calls, s).detach();
    }
    catch (const std::system_error&)
    {
        return false;
    }
    s->watching = true;
    return true;
}

// Hands `n` to a thread of its own, or answers EAGAIN when `max_in_flight` are busy (or no
// thread can be had).
void serve_on_a_thread(const std::shared_ptr<connect_broker::state>& s, const seccomp_notif& n)
{
    {
        std::lock_guard lock(s->m);
        if (s->in_flight >= max_in_flight || !ensure_watcher(s))
            return answer(s->listener.get(), n.id, EAGAIN);
        ++s->in_flight;
        if (s->watcher_idle)
            s->changed.notify_all();
    }
    try
    {
        std::thread(serve_one, s, n).detach();
    }
    catch (const std::system_error&)
    {
        answer(s->listener.get(), n.id, EAGAIN);
        std::lock_guard lock(s->m);
        --s->in_flight;
    }
}

// The receiving thread: takes each call and hands it to a thread of its own.
void receive_calls(std::shared_ptr<connect_broker::state> s)
{
    pollfd p[2] = {{s->listener.get(), POLLIN, 0}, {s->wake.get(), POLLIN, 0}};
    while (true)
    {
        if (::poll(p, 2, -1) < 0)
        {
            if (errno == EINTR)
                continue;
            return;
        }
        if (p[1].revents != 0 || (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0)
            return; // stopped, or no task uses the filter any more
        seccomp_notif n{};
        if (::ioctl(s->listener.get(), SECCOMP_IOCTL_NOTIF_RECV, &n) != 0)
            continue; // the task was killed meanwhile (ENOENT)
        serve_on_a_thread(s, n);
    }
}

} // namespace

connect_broker::connect_broker(std::shared_ptr<state> s) : s_(std::move(s)) {}

std::shared_ptr<connect_broker>
connect_broker::start(unique_fd listener, std::vector<proto::socket_file> allowed, bool receive)
{
    auto s = std::make_shared<state>();
    s->listener = std::move(listener);
    s->wake.reset(::eventfd(0, EFD_CLOEXEC));
    s->allowed = std::move(allowed);
    if (!s->wake)
        return nullptr;
    wake_signal(); // its handler in place before any call's thread runs
    if (receive)
    {
        try
        {
            s->receiver = std::thread(receive_calls, s);
        }
        catch (const std::system_error&)
        {
            return nullptr;
        }
    }
    return std::shared_ptr<connect_broker>(new connect_broker(std::move(s)));
}

void connect_broker::serve(const seccomp_notif& n)
{
    serve_on_a_thread(s_, n);
}

void connect_broker::stop()
{
    {
        std::lock_guard lock(s_->m);
        s_->stopped = true;
        s_->changed.notify_all();
    }
    if (!s_->receiver.joinable())
        return;
    const std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(s_->wake.get(), &one, sizeof one);
    s_->receiver.join();
}

connect_broker::~connect_broker()
{
    stop();
}

} // namespace sandbox::detail
