// helper/spawn.hpp: posix_spawn of a command in its own process group, with the
// descriptors it gets as stdin/stdout/stderr. Runs inside the supervisor's worker.
#ifndef SANDBOX_HELPER_SPAWN_HPP
#define SANDBOX_HELPER_SPAWN_HPP

#include <string>
#include <vector>

#include <sys/types.h>

namespace sandbox::detail {

/// What to start. Strings hold no NUL (checked earlier, by validation).
struct spawn_args
{
    std::string executable;
    std::vector<std::string> argv;
    std::vector<std::string> envp;
    int work_dir_fd = -1; // fchdir target in the child; -1: keep ours
    int stdin_fd = -1;    // -1: /dev/null
    int stdout_fd = -1;
    int stderr_fd = -1;
    /// Non-empty: run on this terminal (a pty slave path) instead of the descriptors above:
    /// a new session, the terminal opened as fd 0 (so it becomes the controlling terminal)
    /// and duplicated onto 1 and 2.
    std::string tty_path{};
    /// Instead of `tty_path`: a terminal's descriptor (a worker inside a sandbox got it with
    /// the plan; the host's name for it is not in the sandbox's /dev). The child, a session
    /// leader, makes it fd 0 and its controlling terminal (TIOCSCTTY: no permission on the
    /// device node needed), then 1 and 2. Started as a cgroup child is (clone_into_cgroup),
    /// with or without a cgroup: posix_spawn has no action for it.
    int tty_fd = -1;
    /// Handed to the command as fds 3, 4, ... (none: everything from 3 up is closed).
    std::vector<int> extra_fds{};
    /// Start with the job signals (status_init.hpp) ignored instead of at their defaults.
    bool ignore_job_signals = false;
    /// A cgroup directory (O_RDONLY | O_DIRECTORY) to start the command in, from its first
    /// instruction (clone3 with CLONE_INTO_CGROUP, so no fork of it can happen elsewhere);
    /// -1: the worker's own cgroup.
    int cgroup_fd = -1;
};

/// \brief Starts the command with posix_spawn: new process group (a new session on a
/// terminal), default signal dispositions
/// and an empty signal mask, only fds 0-2 open (everything from 3 up is closed in the child,
/// but for `extra_fds`),
/// work directory entered with fchdir on the already-checked directory fd.
///
/// Returns 0 and sets `pid`, or the errno value of the failure. With `a.cgroup_fd` the
/// child is made by clone3(CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP) on a stack of its own
/// and sets itself up as posix_spawn's child does (the failure of a step or of the exec is
/// reported back through a CLOEXEC pipe, as posix_spawn does).
int spawn_command(const spawn_args& a, pid_t& pid);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_SPAWN_HPP
