// lib/process/spawn.hpp: posix_spawn of a child in its own process group, plus its pidfd.
#ifndef SANDBOX_LIB_PROCESS_SPAWN_HPP
#define SANDBOX_LIB_PROCESS_SPAWN_HPP

#include <sandbox/backend/unique_fd.hpp>
#include <sandbox/failure.hpp>

#include <string>
#include <vector>

#include <sys/types.h>

namespace sandbox::detail {

/// What to start. Strings must hold no NUL (checked earlier, by validation).
struct spawn_args
{
    std::string executable;
    std::vector<std::string> argv;
    std::vector<std::string> envp;
    int work_dir_fd = -1;     // fchdir target in the child; -1: keep ours
    bool stdin_pipe = false;  // false: /dev/null
};

/// A started child: its pid, a pidfd, and our ends of its pipes.
struct spawned_child
{
    pid_t pid = -1;
    backend::unique_fd pidfd;
    backend::unique_fd stdin_w;  // when stdin_pipe
    backend::unique_fd stdout_r;
    backend::unique_fd stderr_r;
};

/// \brief Starts the child with posix_spawn: new process group, default signal dispositions
/// and an empty signal mask, only fds 0-2 open (everything from 3 up is closed in the child,
/// whatever the parent's CLOEXEC flags), work directory entered with fchdir on the
/// already-checked directory fd.
///
/// Errors: ENOENT/ENOTDIR → `errc::not_found`; EACCES/EPERM → `errc::forbidden`;
/// E2BIG/ENAMETOOLONG/ELOOP → `errc::validation`; no pidfd support (ENOSYS) →
/// `errc::not_available` (the child is killed and reaped first); anything else (ENOEXEC,
/// ETXTBSY, EMFILE, ...) → `errc::internal`. `diag.cause` holds the OS error.
outcome<spawned_child> spawn_child(const spawn_args& a);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_PROCESS_SPAWN_HPP
