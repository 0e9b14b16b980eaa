// lib/process/spawn.cpp: posix_spawn of the command (inside the worker).
#include "process/spawn.hpp"

#include <cerrno>
#include <csignal>
#include <algorithm>
#include <cstring>
#include <optional>

#include <fcntl.h>
#include <spawn.h>
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

// Returns the file actions for these descriptors, or an errno value in `rc`.
posix_spawn_file_actions_t* file_actions(int dir, int in, int out, int err, int& rc)
{
    thread_local action_cache cache;
    const int key[4] = {dir, in, out, err};
    if (cache.valid && std::equal(key, key + 4, cache.key))
        return &cache.fa;
    cache.reset();
    ::posix_spawn_file_actions_init(&cache.fa);
    cache.valid = true;
    rc = 0;
    if (dir >= 0)
        rc = ::posix_spawn_file_actions_addfchdir_np(&cache.fa, dir);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&cache.fa, in, 0);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&cache.fa, out, 1);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&cache.fa, err, 2);
    rc = rc ? rc : ::posix_spawn_file_actions_addclosefrom_np(&cache.fa, 3);
    if (rc != 0)
    {
        cache.reset();
        return nullptr;
    }
    std::copy(key, key + 4, cache.key);
    return &cache.fa;
}

// Terminal runs: a fresh set each time (the path differs). The child is a session leader by
// then (POSIX_SPAWN_SETSID acts before the file actions), so opening the slave without
// O_NOCTTY makes it the controlling terminal.
struct tty_actions
{
    posix_spawn_file_actions_t fa;
    int rc = 0;
    tty_actions(int dir, const std::string& path)
    {
        ::posix_spawn_file_actions_init(&fa);
        if (dir >= 0)
            rc = ::posix_spawn_file_actions_addfchdir_np(&fa, dir);
        rc = rc ? rc : ::posix_spawn_file_actions_addclose(&fa, 0);
        rc = rc ? rc : ::posix_spawn_file_actions_addopen(&fa, 0, path.c_str(), O_RDWR, 0);
        rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&fa, 0, 1);
        rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&fa, 0, 2);
        rc = rc ? rc : ::posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    }
    tty_actions(const tty_actions&) = delete;
    tty_actions& operator=(const tty_actions&) = delete;
    ~tty_actions() { ::posix_spawn_file_actions_destroy(&fa); }
};

// New process group (or session), empty signal mask, default dispositions.
const posix_spawnattr_t* spawn_attributes(bool session, int& rc)
{
    struct attrs
    {
        posix_spawnattr_t attr;
        int rc = 0;
        explicit attrs(bool session)
        {
            ::posix_spawnattr_init(&attr);
            sigset_t none, all;
            sigemptyset(&none);
            sigfillset(&all);
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
    static const attrs group(false), own_session(true);
    const attrs& a = session ? own_session : group;
    rc = a.rc;
    return &a.attr;
}

// /dev/null for children without stdin, opened once per process (read-only, CLOEXEC).
int dev_null() noexcept
{
    static const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    return fd;
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
    int rc = 0;
    const bool tty = !a.tty_path.empty();
    const posix_spawnattr_t* attr = spawn_attributes(tty, rc);
    std::optional<tty_actions> on_tty;
    posix_spawn_file_actions_t* fa = nullptr;
    if (tty && rc == 0)
    {
        on_tty.emplace(a.work_dir_fd, a.tty_path);
        rc = on_tty->rc;
        fa = &on_tty->fa;
    }
    else if (rc == 0)
        fa = file_actions(a.work_dir_fd, stdin_src, a.stdout_fd, a.stderr_fd, rc);
    if (rc != 0 || !fa)
        return rc ? rc : EINVAL;

    std::vector<char*> argv, envp;
    argv.reserve(a.argv.size() + 1);
    for (const auto& s : a.argv)
        argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    envp.reserve(a.envp.size() + 1);
    for (const auto& s : a.envp)
        envp.push_back(const_cast<char*>(s.c_str()));
    envp.push_back(nullptr);
    return ::posix_spawn(&pid, a.executable.c_str(), fa, attr, argv.data(), envp.data());
}

} // namespace sandbox::detail
