// lib/process/spawn.cpp: posix_spawn + pidfd_open.
#include "process/spawn.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

using backend::unique_fd;

struct fd_pair
{
    unique_fd read, write;
};

bool make_pipe(fd_pair& p)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return false;
    p.read.reset(fds[0]);
    p.write.reset(fds[1]);
    return true;
}

failure os_failure(int err, const std::string& what, const std::string& path)
{
    errc code = err == ENOENT                   ? errc::not_found
                : (err == EACCES || err == EPERM) ? errc::forbidden
                : err == ENOSYS                   ? errc::not_available
                                                  : errc::internal;
    failure f = make_failure(code, what + ": " + std::strerror(err));
    f.diag.path = path;
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

// RAII for the posix_spawn attribute objects.
struct spawn_attrs
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    spawn_attrs()
    {
        ::posix_spawn_file_actions_init(&fa);
        ::posix_spawnattr_init(&attr);
    }
    ~spawn_attrs()
    {
        ::posix_spawn_file_actions_destroy(&fa);
        ::posix_spawnattr_destroy(&attr);
    }
    spawn_attrs(const spawn_attrs&) = delete;
    spawn_attrs& operator=(const spawn_attrs&) = delete;
};

} // namespace

outcome<spawned_child> spawn_child(const spawn_args& a)
{
    spawned_child c;
    fd_pair in, out, err;
    if (a.stdin_pipe)
    {
        if (!make_pipe(in))
            return os_failure(errno, "cannot create stdin pipe", {});
    }
    else
    {
        in.read.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        if (!in.read)
            return os_failure(errno, "cannot open /dev/null", "/dev/null");
    }
    if (!make_pipe(out) || !make_pipe(err))
        return os_failure(errno, "cannot create output pipe", {});

    spawn_attrs s;
    int rc = 0;
    if (a.work_dir_fd >= 0)
        rc = rc ? rc : ::posix_spawn_file_actions_addfchdir_np(&s.fa, a.work_dir_fd);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&s.fa, in.read.get(), 0);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&s.fa, out.write.get(), 1);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&s.fa, err.write.get(), 2);
    rc = rc ? rc : ::posix_spawn_file_actions_addclosefrom_np(&s.fa, 3);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    rc = rc ? rc : ::posix_spawnattr_setpgroup(&s.attr, 0);
    rc = rc ? rc : ::posix_spawnattr_setsigmask(&s.attr, &none);
    rc = rc ? rc : ::posix_spawnattr_setsigdefault(&s.attr, &all);
    rc = rc ? rc
            : ::posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                      POSIX_SPAWN_SETSIGDEF);
    if (rc != 0)
        return os_failure(rc, "cannot prepare spawn", {});

    std::vector<char*> argv, envp;
    argv.reserve(a.argv.size() + 1);
    for (const auto& s2 : a.argv)
        argv.push_back(const_cast<char*>(s2.c_str()));
    argv.push_back(nullptr);
    envp.reserve(a.envp.size() + 1);
    for (const auto& s2 : a.envp)
        envp.push_back(const_cast<char*>(s2.c_str()));
    envp.push_back(nullptr);

    pid_t pid = -1;
    rc = ::posix_spawn(&pid, a.executable.c_str(), &s.fa, &s.attr, argv.data(), envp.data());
    if (rc != 0)
        return os_failure(rc, "cannot execute " + a.executable, a.executable);

    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd < 0)
    {
        int e = errno;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        failure f = os_failure(e, "pidfd_open failed; process supervision needs pidfd", {});
        f.code = make_error_code(errc::not_available);
        return f;
    }
    c.pid = pid;
    c.pidfd.reset(pidfd);
    c.stdin_w = std::move(in.write);
    c.stdout_r = std::move(out.read);
    c.stderr_r = std::move(err.read);
    return c;
}

} // namespace sandbox::detail
