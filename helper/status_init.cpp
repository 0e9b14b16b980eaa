// helper/status_init.cpp: the status init that runs inside a sandbox (see
// status_init.hpp). Plain syscalls only; it leaves with _exit (no static destructors, no
// leak check of a sanitizer build: it never allocated on its own behalf).
#include "helper/status_init.hpp"

#include "helper/instance_filter.hpp"
#include "helper/serve.hpp"
#include "helper/setid_filter.hpp"
#include "protocol/net_bridge.hpp"
#include "protocol/protocol.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace sandbox::detail {

namespace {

// Writes all of `n` bytes (a status line), giving up on an error other than EINTR: false
// then.
bool write_all(int fd, const char* data, std::size_t n)
{
    for (std::size_t off = 0; off < n;)
    {
        const ssize_t w = ::write(fd, data + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        off += static_cast<std::size_t>(w);
    }
    return true;
}

bool say(int fd, const char* what, long value, bool with_value)
{
    char line[64];
    const int n = with_value ? std::snprintf(line, sizeof line, "%s %ld\n", what, value)
                             : std::snprintf(line, sizeof line, "%s\n", what);
    return n > 0 &&
           write_all(fd, line, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof line - 1));
}

// "unreachable ENTRY": a PATH entry the command's user cannot search (at most 16, each
// shortened to 512 bytes), before "exec ERRNO".
void say_unreachable(int fd, std::string entry)
{
    entry.resize(std::min<std::size_t>(entry.size(), 512));
    std::replace(entry.begin(), entry.end(), '\n', '?');
    const std::string line = "unreachable " + entry + "\n";
    write_all(fd, line.data(), line.size());
}

// execvp without its fallback of running a file that is not an executable format with
// /bin/sh (the local backend refuses such a file with ENOEXEC, and so do we): the PATH of
// our environment (which is the command's), searched as the shell does: an entry the user
// cannot search is skipped (and told on `fd`), a file found but not executable is EACCES,
// nothing found ENOENT. Returns the errno.
int exec_on_path(int fd, char** argv)
{
    const char* file = argv[0];
    if (std::strchr(file, '/'))
    {
        ::execve(file, argv, environ);
        return errno;
    }
    const char* path = std::getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin";
    bool denied = false;
    int unreachable = 0;
    for (const char* p = path;; ++p)
    {
        const char* end = std::strchr(p, ':');
        const std::size_t n = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
        const std::string dir = n ? std::string(p, n) : std::string(".");
        const std::string full = dir + '/' + file;
        ::execve(full.c_str(), argv, environ);
        const int err = errno;
        struct stat st
        {
        };
        if (err == EACCES && ::stat(full.c_str(), &st) != 0 && errno == EACCES)
        {
            if (unreachable++ < 16) // the directory: not searchable, so nothing there counts
                say_unreachable(fd, dir);
        }
        else if (err == EACCES)
            denied = true;
        else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ENODEV &&
                 err != ETIMEDOUT)
            return err; // it is there but cannot run: say so, as the local backend does
        if (!end)
            break;
        p = end;
    }
    return denied ? EACCES : ENOENT;
}

[[noreturn]] void exec_command(int fd, char** argv)
{
    for (int s : job_signals)
        ::signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int err = exec_on_path(fd, argv);
    say(fd, "exec", err, true); // fd is close-on-exec: only a failed exec gets here
    ::_exit(127);
}

// A listener on `addr` (127.0.0.1 or ::1, with its port set), or -1 and errno.
int listen_on(const sockaddr* addr, socklen_t len)
{
    const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    const int one = 1;
    if (addr->sa_family == AF_INET6)
        ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (::bind(fd, addr, len) != 0 || ::listen(fd, net_bridge_backlog) != 0)
    {
        const int err = errno;
        ::close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

// The IPv4 listener on 127.0.0.1:0 (its port in `port`), or -1 and errno.
int listen_v4(std::uint16_t& port)
{
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int fd = listen_on(reinterpret_cast<const sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    if (fd >= 0 && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    {
        ::close(fd);
        return -1;
    }
    port = ntohs(a.sin_port);
    return fd;
}

// The IPv6 listener on [::1]:port; -1 with errno 0 when the namespace has no IPv6.
int listen_v6(std::uint16_t port)
{
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    a.sin6_port = htons(port);
    const int fd = listen_on(reinterpret_cast<const sockaddr*>(&a), sizeof a);
    if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL))
        errno = 0;
    return fd;
}

// One message: the listeners (SCM_RIGHTS) and the body naming the port. 0 or the errno.
int send_listeners(int bridge, const int* fds, std::size_t n, std::uint16_t port)
{
    const std::string body = net_bridge_body(port);
    iovec iov{const_cast<char*>(body.data()), body.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * net_bridge_max_fds)]{};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    ssize_t sent;
    while ((sent = ::sendmsg(bridge, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
    {
    }
    if (sent < 0)
        return errno;
    return static_cast<std::size_t>(sent) == body.size() ? 0 : EMSGSIZE;
}

// The command's environment (environ) gets the proxy variables for `port`.
void set_proxy_environment(std::uint16_t port)
{
    static std::vector<std::string> strings;
    static std::vector<char*> pointers;
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
        env.emplace_back(*e);
    strings = proxy_environment(std::move(env), port);
    for (auto& s : strings)
        pointers.push_back(s.data());
    pointers.push_back(nullptr);
    environ = pointers.data();
}

[[noreturn]] void bridge_failed(const char* what, int err)
{
    std::fprintf(stderr, "sandbox-supervisor --init: cannot hand the proxy's listeners over "
                         "(%s): %s\n", what, std::strerror(err));
    ::_exit(125);
}

// --net-bridge: listeners in our network namespace, sent to the host's proxy over
// `bridge`, which is closed after; then the command's proxy environment. Returns the port.
std::uint16_t hand_over_listeners(int bridge)
{
    std::uint16_t port = 0;
    int fds[net_bridge_max_fds];
    std::size_t n = 0;
    fds[n] = listen_v4(port);
    if (fds[n] < 0)
        bridge_failed("listen on 127.0.0.1", errno);
    ++n;
    fds[n] = listen_v6(port);
    if (fds[n] >= 0)
        ++n;
    else if (errno != 0)
        bridge_failed("listen on [::1]", errno);
    if (const int err = send_listeners(bridge, fds, n, port); err != 0)
        bridge_failed("send", err);
    for (std::size_t i = 0; i < n; ++i)
        ::close(fds[i]);
    ::close(bridge);
    set_proxy_environment(port);
    return port;
}

// Nothing else of the wrapper's reaches the command: our own program's descriptor (how
// bwrap ran us) and anything above the status pipe, but for the bridge (closed later) and
// an instance's control socket.
void close_inherited(int status_fd, int bridge, int control)
{
    int keep[2] = {bridge, control};
    std::sort(std::begin(keep), std::end(keep));
    int from = status_fd + 1;
    for (int k : keep)
    {
        if (k < from)
            continue;
        if (k > from)
            ::syscall(SYS_close_range, from, k - 1, 0u);
        from = k + 1;
    }
    ::syscall(SYS_close_range, from, ~0u, 0u);
}

volatile pid_t g_child = 0;

// A job signal reached us (the worker signals the group, or a terminal its foreground
// group): the command got it too, unless it has left our group (setsid, setpgid, a job
// control shell): then it goes on to the command's group.
void forward(int sig)
{
    const int saved = errno;
    const pid_t child = g_child;
    if (child > 0)
    {
        const pid_t group = ::getpgid(child);
        if (group > 0 && group != ::getpgrp())
            ::kill(-group, sig);
    }
    errno = saved;
}

} // namespace

namespace {

// The command line after "--init FD": the bridge, then either the command or --serve.
struct init_args
{
    int status = -1;
    int bridge = -1;
    int control = -1; // --serve: an instance's control socket
    char** command = nullptr;
};

bool parse(int argc, char** argv, init_args& a)
{
    if (argc < 4)
        return false;
    a.status = std::atoi(argv[2]);
    int i = 3;
    if (argc > i + 1 && std::strcmp(argv[i], "--net-bridge") == 0)
    {
        a.bridge = std::atoi(argv[i + 1]);
        i += 2;
    }
    if (argc == i + 2 && std::strcmp(argv[i], "--serve") == 0)
    {
        a.control = std::atoi(argv[i + 1]);
        return a.control > a.status && a.control != a.bridge;
    }
    if (argc < i + 2 || std::strcmp(argv[i], "--") != 0)
        return false;
    a.command = argv + i + 1;
    return true;
}

// An instance's init (--serve): it tells the library it is ready on the control socket,
// then forks a worker inside the sandbox for each channel the library hands it
// (serve.hpp); as pid 1 it also gets every orphan, and kills those of a dead worker. When
// the library closes the socket it kills every worker's tree and exits, and the kernel
// ends the namespace with it.
[[noreturn]] void serve(int control, std::uint16_t port)
{
    const std::string body = port ? net_bridge_body(port) : std::string();
    if (proto::send_message(control, proto::msg_type::ready, 0, body) != 0)
        ::_exit(125);
    serve_workers(control, -1, {}, true);
}

} // namespace

void run_status_init(int argc, char** argv)
{
    // argv: sandbox-supervisor --init FD [--net-bridge FD2] -- COMMAND [ARG...]
    //       sandbox-supervisor --init FD [--net-bridge FD2] --serve FD3
    init_args a;
    if (!parse(argc, argv, a))
    {
        std::fprintf(stderr, "sandbox-supervisor --init FD [--net-bridge FD2] -- COMMAND "
                             "[ARG...]\n   or: sandbox-supervisor --init FD [--net-bridge FD2] "
                             "--serve FD3\n");
        ::_exit(125);
    }
    const int fd = a.status;
    const int bridge = a.bridge;
    const bool bridged = bridge >= 0;
    if (fd < 3 || ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 ||
        (bridged && (bridge <= fd || ::fcntl(bridge, F_SETFD, FD_CLOEXEC) != 0)) ||
        (a.control >= 0 && ::fcntl(a.control, F_SETFD, FD_CLOEXEC) != 0))
        ::_exit(125);
    close_inherited(fd, bridge, a.control);
    ::prctl(PR_SET_NAME, "sandbox-init");
    ::prctl(PR_SET_DUMPABLE, 0); // the command cannot ptrace us to forge its own report
    ::signal(SIGCHLD, SIG_DFL); // an inherited SIG_IGN would reap the command behind our back
    // No set-id bit from inside (setid_filter.hpp); without the filter, no sandbox.
    if (const int err = install_setid_filter(); err != 0)
    {
        std::fprintf(stderr, "sandbox-supervisor --init: cannot install the seccomp filter "
                             "against set-id bits: %s\n", std::strerror(err));
        ::_exit(125);
    }
    if (a.control >= 0)
    {
        // Its commands run as its workers' user: none may lower a worker's limits or
        // priority (instance_filter.hpp).
        if (const int err = install_instance_filter(); err != 0)
        {
            std::fprintf(stderr,
                         "sandbox-supervisor --init: cannot install the instance's "
                         "seccomp filter: %s\n",
                         std::strerror(err));
            ::_exit(125);
        }
        // The proxy's variables go into each command's environment from the library,
        // which learns the port with "ready".
        const std::uint16_t port = bridged ? hand_over_listeners(bridge) : 0;
        if (!say(fd, "started", 0, false))
            ::_exit(125);
        serve(a.control, port);
    }
    sigset_t jobs, old;
    sigemptyset(&jobs);
    for (int s : job_signals)
        sigaddset(&jobs, s);
    ::sigprocmask(SIG_BLOCK, &jobs, &old); // until the command's pid is known
    struct sigaction on_job{};
    on_job.sa_handler = forward;
    on_job.sa_flags = SA_RESTART;
    sigfillset(&on_job.sa_mask);
    for (int s : job_signals)
        ::sigaction(s, &on_job, nullptr);
    if (bridged)
        hand_over_listeners(bridge); // readiness: the listeners are the host's before we start
    // The host reads a missing "started" as a sandbox never set up, after which a caller
    // may run the request elsewhere (sandbox-run's auto backend): no command without it.
    if (!say(fd, "started", 0, false))
        ::_exit(125);
    const pid_t child = ::fork();
    if (child < 0)
    {
        say(fd, "exec", errno, true);
        ::_exit(125);
    }
    if (child == 0)
        exec_command(fd, a.command);
    g_child = child;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    // As the namespace's pid 1 we also reap what the command's tree orphans; when the
    // command ends we do, and the kernel kills whatever is left in the namespace.
    int status = 0;
    for (;;)
    {
        const pid_t p = ::waitpid(-1, &status, 0);
        if (p == child)
            break;
        if (p < 0 && errno != EINTR)
            ::_exit(125);
    }
    say(fd, "status", status, true);
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

} // namespace sandbox::detail
