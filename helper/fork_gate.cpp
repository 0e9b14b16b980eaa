// helper/fork_gate.cpp: the fork gate's filter, the start of a gated command and the
// worker's side of the listener (see fork_gate.hpp).
#include "helper/fork_gate.hpp"
#include "helper/clone_into.hpp"
#include "helper/connect_filter.hpp"
#include "helper/fork_filter.hpp"
#include "helper/status_init.hpp"
#include "protocol/protocol.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

using backend::unique_fd;

// ------------------------------------------------------------------ the filter

// From Linux 6.6's <linux/seccomp.h> (Debian 12's headers are 6.1's).
constexpr unsigned long notif_set_flags = SECCOMP_IOW(4, __u64);
constexpr unsigned long sync_wake_up = 1;

long seccomp_filter(unsigned flags, sock_fprog* prog)
{
    return ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog);
}

// Installs the filter on the calling (single-threaded) process; the listener, or -errno.
int install_fork_filter(const std::vector<sock_filter>& program)
{
    sock_fprog prog{static_cast<unsigned short>(program.size()),
                    const_cast<sock_filter*>(program.data())};
    // Once the worker holds a fork, the task waits for the answer without being woken by
    // harmless signals (which would restart the call, and a busy handler could livelock it).
    unsigned flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    long fd = seccomp_filter(flags, &prog);
    if (fd < 0 && errno == EINVAL) // before Linux 5.19
    {
        flags &= ~static_cast<unsigned>(SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV);
        fd = seccomp_filter(flags, &prog);
    }
    if (fd < 0 && errno == EACCES) // no CAP_SYS_ADMIN: only with no_new_privs
    {
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
            return -errno;
        fd = seccomp_filter(flags, &prog);
    }
    return fd < 0 ? -errno : static_cast<int>(fd);
}

} // namespace

int probe_fork_gate()
{
    const int listener = install_fork_filter(fork_filter_program());
    if (listener < 0)
        return -listener;
    ::close(listener);
    return 0;
}

namespace {

// ------------------------------------------------------------------ the child's reports

// The child reports in the supervisor protocol's own messages: `spawned` carrying the
// listener, or `spawn_failed` with the errno and its stage, just as the worker reports to
// the library (protocol.hpp; sending allocates nothing, as the child needs).

// Reports `err` to the worker and ends the child.
[[noreturn]] void child_failed(int sock, int err, proto::spawn_stage stage = proto::stage_command)
{
    const proto::spawn_failed_msg f{err, stage};
    proto::send_message(sock, proto::msg_type::spawn_failed, 0, proto::as_bytes(f));
    ::_exit(127);
}

// The child's next report, waiting for it: 0 with `m`, or an errno; `eof` once the child
// has executed the command (its end is close-on-exec) or is gone.
int next_report(int sock, proto::message& m, bool& eof)
{
    pollfd p{sock, POLLIN, 0};
    while (::poll(&p, 1, -1) < 0)
        if (errno != EINTR)
            return errno;
    return proto::receive_message(sock, m, eof);
}

// The errno of a `spawn_failed` report (EPROTO for anything else).
int reported_error(const proto::message& m, proto::spawn_stage& stage)
{
    proto::spawn_failed_msg f;
    if (m.head.type != proto::msg_type::spawn_failed || !proto::from_bytes(m.payload, f) ||
        f.error == 0)
        return EPROTO;
    stage = static_cast<proto::spawn_stage>(f.stage);
    return f.error;
}

// ------------------------------------------------------------------ starting the command

// Everything the child needs, built before the fork.
struct child_plan
{
    const spawn_args& a;
    int stdin_fd;
    std::vector<int> extra; // above 3 + extra.size(), like the socket
    int sock;
    std::vector<char*> argv, envp;
    // The one filter to install (the kernel allows one listener per tree: under both a
    // process cap and the unix-socket policy the connect filter holds the gate's rules too),
    // and the stage its failure is reported as.
    std::vector<sock_filter> prog;
    proto::spawn_stage prog_stage = proto::stage_fork_gate;
};

// The child: what posix_spawn does for spawn_command (clone_into.hpp: set_up_child), then
// the filter, its listener to the worker, and the command.
[[noreturn]] void run_child(const child_plan& c)
{
    if (int rc = set_up_child(c.a, c.stdin_fd, c.extra, c.sock); rc != 0)
        child_failed(c.sock, rc);
    const int listener = install_fork_filter(c.prog);
    if (listener < 0)
        child_failed(c.sock, -listener, c.prog_stage);
    proto::send_message(c.sock, proto::msg_type::spawned, 0, {},
                        std::span<const int>(&listener, 1));
    ::close(listener); // the worker's copy is the only one now
    ::execve(c.a.executable.c_str(), c.argv.data(), c.envp.data());
    child_failed(c.sock, errno);
}

// Copies `fd` above `floor` (close-on-exec), so that no dup2 onto 3, 4, ... overwrites it.
unique_fd lift(int fd, int floor) { return unique_fd(::fcntl(fd, F_DUPFD_CLOEXEC, floor)); }

// Starts the child as posix_spawn does: sharing our memory, with us suspended until it has
// executed the command or failed (CLONE_VM | CLONE_VFORK), so neither our address space is
// copied nor its copy torn down again at the exec (a fork() cost 1.9 ms more per command
// here). All signals stay blocked meanwhile, so no handler of ours runs in the child. Under
// AddressSanitizer, which cannot follow code onto a stack of our own, it is a fork(). With a
// cgroup, the child is made inside it (clone_into.hpp), the same way.
int start_child(const child_plan& c, pid_t& pid)
{
    auto entry = [](void* plan) { run_child(*static_cast<const child_plan*>(plan)); };
    if (c.a.cgroup_fd >= 0)
        return clone_into_cgroup(c.a.cgroup_fd, entry, const_cast<child_plan*>(&c), pid);
#if defined(__SANITIZE_ADDRESS__)
    pid = ::fork();
    if (pid == 0)
        run_child(c);
#else
    // The worker starts one command at a time, and only its main thread ever does (a PSS
    // read of an earlier execution may still run on a thread of its own: it never spawns).
    alignas(64) static std::array<std::byte, 128 * 1024> stack;
    auto clone_entry = [](void* plan) -> int { run_child(*static_cast<const child_plan*>(plan)); };
    sigset_t all, old;
    sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = ::clone(clone_entry, stack.data() + stack.size(), CLONE_VM | CLONE_VFORK | SIGCHLD,
                  const_cast<child_plan*>(&c));
    const int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = err;
#endif
    return pid < 0 ? errno : 0;
}

} // namespace

// ------------------------------------------------------------------ the worker's side

int spawn_filtered(const spawn_args& a, spawn_filters which, pid_t& pid, unique_fd& listener,
                   proto::spawn_stage& stage)
{
    stage = proto::stage_command;
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return errno;
    unique_fd ours(sv[0]), theirs_low(sv[1]);
    const int floor = 3 + static_cast<int>(a.extra_fds.size());
    unique_fd theirs = lift(theirs_low.get(), floor), null_in;
    if (!theirs)
        return errno;
    theirs_low.reset();
    std::vector<unique_fd> lifted;
    child_plan c{a, a.stdin_fd, {}, theirs.get(), c_strings(a.argv), c_strings(a.envp), {}};
    if (which.connect_broker)
    {
        c.prog = connect_filter_program(which.fork_gate);
        c.prog_stage = proto::stage_connect_filter;
    }
    else
        c.prog = fork_filter_program();
    if (c.stdin_fd < 0)
    {
        null_in.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!null_in)
            return errno;
        c.stdin_fd = null_in.get();
    }
    for (int fd : a.extra_fds)
    {
        lifted.push_back(lift(fd, floor));
        if (!lifted.back())
            return errno;
        c.extra.push_back(lifted.back().get());
    }
    if (int rc = start_child(c, pid); rc != 0)
        return rc;
    theirs.reset(); // end of file comes when the child has executed the command
    // A child that failed, or whose report did not come through, may be running the
    // command already: it goes, now, and is reaped here (as posix_spawn reaps).
    auto failed = [&](int err) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return err;
    };
    proto::message m;
    bool eof = false;
    int rc = next_report(ours.get(), m, eof);
    if (rc != 0 || eof || m.head.type != proto::msg_type::spawned || m.fds.size() != 1)
        return failed(rc != 0 ? rc : eof ? EIO : reported_error(m, stage));
    unique_fd passed = std::move(m.fds[0]);
    rc = next_report(ours.get(), m, eof);
    if (rc != 0 || !eof) // the exec failed
        return failed(rc != 0 ? rc : reported_error(m, stage));
    // Linux 6.6+: the task and the worker hand the cpu to each other at each round trip
    // instead of waking each other across cpus (ignored where unknown).
    ::ioctl(passed.get(), notif_set_flags, sync_wake_up);
    listener = std::move(passed);
    return 0;
}

gate_listener gate_state(int listener)
{
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 0) != 1)
        return gate_listener::idle;
    if (p.revents & POLLIN)
        return gate_listener::request;
    return (p.revents & POLLHUP) ? gate_listener::tree_gone : gate_listener::idle;
}

int receive_fork(int listener, fork_request& r)
{
    seccomp_notif n{}; // the kernel wants it zeroed
    if (::ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &n) != 0)
        return errno;
    r.id = n.id;
    r.pid = static_cast<pid_t>(n.pid);
    r.call = n;
    return 0;
}

int answer_fork(int listener, const fork_request& r, bool allow)
{
    seccomp_notif_resp resp{};
    resp.id = r.id;
    if (allow)
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    else
        resp.error = -EAGAIN;
    while (::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0)
        if (errno != EINTR)
            return errno;
    return 0;
}

} // namespace sandbox::detail
