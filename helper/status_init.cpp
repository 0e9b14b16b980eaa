// helper/status_init.cpp: the status init that runs inside a sandbox (see
// status_init.hpp). Plain syscalls only; it leaves with _exit (no static destructors, no
// leak check of a sanitizer build: it never allocated on its own behalf).
#include "helper/status_init.hpp"

#include "helper/setid_filter.hpp"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace sandbox::detail {

namespace {

void say(int fd, const char* what, long value, bool with_value)
{
    char line[64];
    const int n = with_value ? std::snprintf(line, sizeof line, "%s %ld\n", what, value)
                             : std::snprintf(line, sizeof line, "%s\n", what);
    for (int off = 0; off < n;)
    {
        ssize_t w = ::write(fd, line + off, static_cast<std::size_t>(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        off += static_cast<int>(w);
    }
}

// execvp without its fallback of running a file that is not an executable format with
// /bin/sh (the local backend refuses such a file with ENOEXEC, and so do we): the PATH of
// our environment (which is the command's), searched as execvp does. Returns the errno.
int exec_on_path(char** argv)
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
    for (const char* p = path;; ++p)
    {
        const char* end = std::strchr(p, ':');
        const std::size_t n = end ? static_cast<std::size_t>(end - p) : std::strlen(p);
        std::string full = n ? std::string(p, n) : std::string(".");
        full += '/';
        full += file;
        ::execve(full.c_str(), argv, environ);
        if (errno == EACCES)
            denied = true;
        else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV &&
                 errno != ETIMEDOUT)
            return errno; // it is there but cannot run: say so, as the local backend does
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
    const int err = exec_on_path(argv);
    say(fd, "exec", err, true); // fd is close-on-exec: only a failed exec gets here
    ::_exit(127);
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

void run_status_init(int argc, char** argv)
{
    // argv: sandbox-supervisor --init FD -- COMMAND [ARG...]
    if (argc < 5 || std::strcmp(argv[3], "--") != 0)
    {
        std::fprintf(stderr, "sandbox-supervisor --init FD -- COMMAND [ARG...]\n");
        ::_exit(125);
    }
    const int fd = std::atoi(argv[2]);
    if (fd < 3 || ::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
        ::_exit(125);
    // Nothing else of the wrapper's reaches the command: our own program's descriptor
    // (how bwrap ran us) and anything above the status pipe.
    ::syscall(SYS_close_range, fd + 1, ~0u, 0u);
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
    say(fd, "started", 0, false);
    const pid_t child = ::fork();
    if (child < 0)
    {
        say(fd, "exec", errno, true);
        ::_exit(125);
    }
    if (child == 0)
        exec_command(fd, argv + 4);
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
