// lib/supervisor/capabilities.cpp: what the helper can enforce on this host, asked once per
// process: the sampler (/proc), the fork gate (a seccomp listener, checked by the helper
// program installing the real filter on itself), the unix-socket policy (capabilities,
// pidfd_getfd, openat2).
#include "supervisor/client.hpp"

#include <sandbox/backend/supervise.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sandbox {

namespace detail {

int probe_fork_gate_in_helper()
{
    const std::string path = supervisor_program();
    if (path.empty())
        return ENOENT;
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    for (int fd : {0, 1, 2})
        ::posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
    ::posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    char* argv[] = {const_cast<char*>(path.c_str()), const_cast<char*>("--probe-fork-gate"),
                    nullptr};
    char* envp[] = {nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, envp);
    ::posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        return rc;
    // Reaped through a pidfd, so a caller's own waitpid(-1) loop cannot take the status.
    unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    siginfo_t info{};
    const int waited =
        pidfd
            ? static_cast<int>(::syscall(SYS_waitid, P_PIDFD, pidfd.get(), &info, WEXITED, nullptr))
            : ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED);
    if (waited != 0)
        return errno;
    return info.si_code == CLD_EXITED ? info.si_status : EPERM; // killed: not usable either
}

} // namespace detail

bool sampler_usable() noexcept
{
    // Only /proc: a missing helper program fails every execution with its own error.
    return ::access("/proc/self/stat", R_OK) == 0;
}

namespace {

// What costs no process: asking for a filter with a listener but giving no program installs
// nothing: the kernel answers EFAULT when it would accept one, EPERM (or another error) when
// a filter above us forbids it (a container's, or a fork gate above ours). Letting a held
// call go on (SECCOMP_USER_NOTIF_FLAG_CONTINUE) came in Linux 5.5.
bool fork_gate_precheck() noexcept
{
    static const bool ok = [] {
        if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                      nullptr) == 0 ||
            errno != EFAULT)
            return false;
        struct utsname u
        {
        };
        int major = 0, minor = 0;
        return ::uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
               (major > 5 || (major == 5 && minor >= 5));
    }();
    return ok;
}

// The probe's answer once it ran: 1 usable, 0 not, -1 not asked yet.
std::atomic<int> probed_usable{-1};

} // namespace

bool detail::fork_gate_ruled_out() noexcept
{
    return !fork_gate_precheck() || probed_usable.load() == 0;
}

// Synchronous by contract (a bool, for `enforcement()`): the first call spawns the probe and
// waits for it, a few milliseconds once per process. The exec path never calls it
// (`detail::fork_gate_ruled_out`).
bool fork_gate_usable() noexcept
{
    static const bool usable = [] {
        // The checks above install nothing, so they miss what only an installation meets:
        // a listener on a filter above us (a container runtime that intercepts syscalls:
        // EBUSY), a forbidden no_new_privs. The helper program installs the real filter
        // on itself and exits, once per process.
        if (!fork_gate_precheck())
            return false;
        const int err = detail::probe_fork_gate_in_helper();
        // No helper program: that is what an exec will say (not_available "supervisor"), not
        // a fault of the gate's.
        if (err != ENOENT)
            probed_usable = err == 0 ? 1 : 0;
        return err == 0;
    }();
    return usable;
}

namespace backend {

bool unix_socket_policy_usable()
{
    static const bool usable = [] {
        // The worker enters each tree's network namespace (CAP_SYS_ADMIN) and takes its
        // processes' ids (CAP_SETUID, CAP_SETGID); the helper has ours.
        __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
        __user_cap_data_struct d[2]{};
        if (::syscall(SYS_capget, &h, d) != 0)
            return false;
        for (int cap : {CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_SYS_PTRACE})
            if ((d[cap / 32].effective & (1u << (cap % 32))) == 0)
                return false;
        // pidfd_getfd and openat2 (Linux 5.6): an invalid call says EBADF where they exist.
        if (::syscall(SYS_pidfd_getfd, -1, 0, 0) == 0 || errno != EBADF)
            return false;
        open_how how{};
        if (::syscall(SYS_openat2, -1, "x", &how, sizeof how) == 0 || errno != EBADF)
            return false;
        return fork_gate_usable(); // a filter with a listener installs here
    }();
    return usable;
}

} // namespace backend

} // namespace sandbox
