// helper/spawn.cpp: the start of the command (inside the worker): posix_spawn, or clone3
// straight into a cgroup when one is given.
#include "helper/spawn.hpp"
#include "helper/clone_into.hpp"
#include "helper/status_init.hpp"

#include <sandbox/unique_fd.hpp>

#include <cerrno>
#include <csignal>
#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

// glibc validates every descriptor given to a file action with getrlimit (one prlimit64
// syscall each), so building the actions costs about ten syscalls. Pipes reuse the lowest
// free descriptors, so consecutive spawns on a thread usually need the very same actions:
// keep the last set per thread and rebuild only when the descriptors differ.
struct action_cache
{
    bool valid = false;
    int key[4] = {-1, -1, -1, -1};
    posix_spawn_file_actions_t fa;
    action_cache() = default;
    action_cache(const action_cache&) = delete;
    action_cache& operator=(const action_cache&) = delete;
    ~action_cache() { reset(); }
    void reset()
    {
        if (valid)
            ::posix_spawn_file_actions_destroy(&fa);
        valid = false;
    }
};

// What the child does before exec, in order: enter the work directory; take the terminal
// (when `tty` names one: the child is a session leader by then, since POSIX_SPAWN_SETSID acts
// before the file actions, so opening the slave without O_NOCTTY makes it the controlling
// terminal) or the three descriptors as 0-2; the extra descriptors onto 3, 4, ... (their
// sources lie above that range: see spawn_command); close everything above. 0 or an errno.
int add_actions(posix_spawn_file_actions_t& fa, int dir, int in, int out, int err,
                const std::string& tty, const std::vector<int>& extra)
{
    int rc = dir >= 0 ? ::posix_spawn_file_actions_addfchdir_np(&fa, dir) : 0;
    if (!tty.empty())
    {
        rc = rc ? rc : ::posix_spawn_file_actions_addclose(&fa, 0);
        rc = rc ? rc : ::posix_spawn_file_actions_addopen(&fa, 0, tty.c_str(), O_RDWR, 0);
        in = out = err = 0;
    }
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&fa, in, 0);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&fa, out, 1);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&fa, err, 2);
    for (std::size_t i = 0; i < extra.size() && rc == 0; ++i)
        rc = ::posix_spawn_file_actions_adddup2(&fa, extra[i], 3 + static_cast<int>(i));
    return rc ? rc
              : ::posix_spawn_file_actions_addclosefrom_np(&fa, 3 + static_cast<int>(extra.size()));
}

// Returns the file actions for plain runs, or an errno value in `rc`.
posix_spawn_file_actions_t* file_actions(int dir, int in, int out, int err, int& rc)
{
    thread_local action_cache cache;
    const int key[4] = {dir, in, out, err};
    if (cache.valid && std::equal(key, key + 4, cache.key))
        return &cache.fa;
    cache.reset();
    ::posix_spawn_file_actions_init(&cache.fa);
    cache.valid = true;
    rc = add_actions(cache.fa, dir, in, out, err, {}, {});
    if (rc != 0)
    {
        cache.reset();
        return nullptr;
    }
    std::copy(key, key + 4, cache.key);
    return &cache.fa;
}

// Terminal runs and runs with extra descriptors: a fresh set each time (the terminal's path
// differs; wrapped commands are rare).
struct fresh_actions
{
    posix_spawn_file_actions_t fa;
    int rc = 0;
    fresh_actions(int dir, int in, int out, int err, const std::string& tty,
                  const std::vector<int>& extra)
    {
        ::posix_spawn_file_actions_init(&fa);
        rc = add_actions(fa, dir, in, out, err, tty, extra);
    }
    fresh_actions(const fresh_actions&) = delete;
    fresh_actions& operator=(const fresh_actions&) = delete;
    ~fresh_actions() { ::posix_spawn_file_actions_destroy(&fa); }
};

// New process group (or session), empty signal mask, default dispositions (but for the job
// signals when `keep_ignored`: those the worker ignores at the spawn stay ignored).
const posix_spawnattr_t* spawn_attributes(bool session, bool keep_ignored, int& rc)
{
    struct attrs
    {
        posix_spawnattr_t attr;
        int rc = 0;
        attrs(bool session, bool keep_ignored)
        {
            ::posix_spawnattr_init(&attr);
            sigset_t none, all;
            sigemptyset(&none);
            sigfillset(&all);
            if (keep_ignored)
                for (int s : job_signals)
                    sigdelset(&all, s);
            rc = ::posix_spawnattr_setpgroup(&attr, 0);
            rc = rc ? rc : ::posix_spawnattr_setsigmask(&attr, &none);
            rc = rc ? rc : ::posix_spawnattr_setsigdefault(&attr, &all);
            const short group = session ? POSIX_SPAWN_SETSID : POSIX_SPAWN_SETPGROUP;
            rc = rc ? rc
                    : ::posix_spawnattr_setflags(&attr, static_cast<short>(
                                                            group | POSIX_SPAWN_SETSIGMASK |
                                                            POSIX_SPAWN_SETSIGDEF));
        }
        attrs(const attrs&) = delete;
        attrs& operator=(const attrs&) = delete;
        ~attrs() { ::posix_spawnattr_destroy(&attr); }
    };
    static const attrs group(false, false), own_session(true, false), group_ign(false, true),
        own_session_ign(true, true);
    const attrs& a = session ? (keep_ignored ? own_session_ign : own_session)
                             : (keep_ignored ? group_ign : group);
    rc = a.rc;
    return &a.attr;
}

// /dev/null for children without stdin, opened once per process (read-only, CLOEXEC).
int dev_null() noexcept
{
    static const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd;
}

// posix_spawn with the attributes and file actions above (no cgroup asked for).
int spawn_posix(const spawn_args& a, int stdin_src, const std::vector<int>& extra,
                char* const* argv, char* const* envp, pid_t& pid)
{
    int rc = 0;
    const bool tty = !a.tty_path.empty();
    const posix_spawnattr_t* attr = spawn_attributes(tty, a.ignore_job_signals, rc);
    std::optional<fresh_actions> fresh;
    posix_spawn_file_actions_t* fa = nullptr;
    if (rc == 0 && (tty || !extra.empty()))
    {
        fresh.emplace(a.work_dir_fd, stdin_src, a.stdout_fd, a.stderr_fd, a.tty_path, extra);
        rc = fresh->rc;
        fa = &fresh->fa;
    }
    else if (rc == 0)
        fa = file_actions(a.work_dir_fd, stdin_src, a.stdout_fd, a.stderr_fd, rc);
    if (rc != 0 || !fa)
        return rc ? rc : EINVAL;
    if (!a.ignore_job_signals)
        return ::posix_spawn(&pid, a.executable.c_str(), fa, attr, argv, envp);
    // Ignored here while the child starts (the worker is single-threaded), so the child
    // starts with them ignored; then back to what they were.
    struct sigaction ign{}, old[std::size(job_signals)]{};
    ign.sa_handler = SIG_IGN;
    for (std::size_t i = 0; i < std::size(job_signals); ++i)
        ::sigaction(job_signals[i], &ign, &old[i]);
    rc = ::posix_spawn(&pid, a.executable.c_str(), fa, attr, argv, envp);
    for (std::size_t i = 0; i < std::size(job_signals); ++i)
        ::sigaction(job_signals[i], &old[i], nullptr);
    return rc;
}

// ------------------------------------------------------------------ into a cgroup

// What the child started into a cgroup needs, built before it is made.
struct into_plan
{
    const spawn_args& a;
    int stdin_fd;
    const std::vector<int>& extra;
    int report_fd; // a pipe's end above 2 + extra.size(), close-on-exec; -1: `err` instead
    char* const* argv;
    char* const* envp;
    volatile int err = 0; // the child's failure, where it shares our memory
};

// The child: posix_spawn's set-up, then the command. A failure's errno goes into the plan
// (a child sharing our memory) or to the pipe.
[[noreturn]] void exec_into(void* plan)
{
    auto& c = *static_cast<into_plan*>(plan);
    int err = set_up_child(c.a, c.stdin_fd, c.extra, c.report_fd);
    if (err == 0)
    {
        ::execve(c.a.executable.c_str(), c.argv, c.envp);
        err = errno;
    }
    if (c.report_fd < 0)
        c.err = err;
    else
        [[maybe_unused]] const auto n = ::write(c.report_fd, &err, sizeof err);
    ::_exit(127);
}

// The errno the child wrote before it ended, or 0 at end of file (it executed the command).
int child_report(int fd)
{
    int err = 0;
    ssize_t n;
    while ((n = ::read(fd, &err, sizeof err)) < 0)
        if (errno != EINTR)
            return errno;
    if (n == 0)
        return 0;
    return n == static_cast<ssize_t>(sizeof err) && err != 0 ? err : EPROTO;
}

// A child that failed before its command: reaped, its errno returned.
int reap_failed(pid_t child, int err)
{
    ::kill(child, SIGKILL); // (it has ended already unless the pipe itself failed)
    ::waitpid(child, nullptr, 0);
    return err;
}

// clone3 into the cgroup `a.cgroup_fd`, the child set up as posix_spawn's is; a child that
// failed is reaped before the errno is returned, as posix_spawn does. A child sharing our
// memory leaves its errno in the plan (glibc's posix_spawn does the same); a copy of us (the
// sanitizer builds) writes it to a pipe.
int spawn_into_cgroup(const spawn_args& a, int stdin_src, const std::vector<int>& extra,
                      char* const* argv, char* const* envp, pid_t& pid)
{
    unique_fd from_child, to_parent;
    if constexpr (!clone_child_shares_memory)
    {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0)
            return errno;
        from_child.reset(p[0]);
        unique_fd low(p[1]);
        to_parent.reset(::fcntl(low.get(), F_DUPFD_CLOEXEC, 3 + static_cast<int>(extra.size())));
        if (!to_parent)
            return errno;
    }
    into_plan c{a, stdin_src, extra, to_parent ? to_parent.get() : -1, argv, envp};
    pid_t child = -1;
    if (int rc = clone_into_cgroup(a.cgroup_fd, exec_into, &c, child); rc != 0)
        return rc;
    to_parent.reset(); // the child has executed the command or ended: its copy is closed
    const int rc = from_child ? child_report(from_child.get()) : c.err;
    if (rc != 0)
        return reap_failed(child, rc);
    pid = child;
    return 0;
}

} // namespace

int spawn_command(const spawn_args& a, pid_t& pid)
{
    int stdin_src = a.stdin_fd;
    if (stdin_src < 0)
    {
        stdin_src = dev_null();
        if (stdin_src < 0)
            return errno;
    }
    // Extra descriptors first move above 3 + n, so no dup2 onto 3, 4, ... overwrites a
    // source still to be copied.
    std::vector<unique_fd> moved;
    std::vector<int> extra;
    for (int fd : a.extra_fds)
    {
        moved.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, 3 + static_cast<int>(a.extra_fds.size())));
        if (!moved.back())
            return errno;
        extra.push_back(moved.back().get());
    }
    const std::vector<char*> argv = c_strings(a.argv), envp = c_strings(a.envp);
    if (a.cgroup_fd >= 0 || a.tty_fd >= 0)
        return spawn_into_cgroup(a, stdin_src, extra, argv.data(), envp.data(), pid);
    return spawn_posix(a, stdin_src, extra, argv.data(), envp.data(), pid);
}

} // namespace sandbox::detail
