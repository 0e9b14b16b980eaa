// helper/clone_into.hpp: the start of a command straight inside a cgroup (clone3 with
// CLONE_INTO_CGROUP, so that not one instruction of the child runs elsewhere), and the
// set-up every child we start ourselves does before its exec, as posix_spawn's does in
// spawn_command. Shared by spawn.cpp (a cgroup given) and fork_gate.cpp (the gated start).
#ifndef SANDBOX_HELPER_CLONE_INTO_HPP
#define SANDBOX_HELPER_CLONE_INTO_HPP

#include "helper/spawn.hpp"

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <sys/types.h>

// A sanitizer's runtime keeps per-thread state (the shadow of the stack, the shadow call
// stack) that a child sharing our memory on a stack of its own would corrupt: there the child
// is a copy of us.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SBX_CHILD_SHARES_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SBX_CHILD_SHARES_MEMORY 0
#endif
#endif
#if !defined(SBX_CHILD_SHARES_MEMORY)
#if defined(__x86_64__)
#define SBX_CHILD_SHARES_MEMORY 1
#else
#define SBX_CHILD_SHARES_MEMORY 0
#endif
#endif

namespace sandbox::detail {

/// Whether the child of clone_into_cgroup shares our memory (what it stores before it
/// executes a program or ends is then seen here once clone_into_cgroup returns).
inline constexpr bool clone_child_shares_memory = SBX_CHILD_SHARES_MEMORY != 0;

/// What a child runs: it never returns (it executes a program or `_exit`s). While it runs it
/// may share our memory with us suspended: async-signal-safe calls only, no allocation.
using child_entry = void (*)(void* arg);

/// The stack a child sharing our memory gets (a guard page lies below it). The deepest
/// child measured here used 3.6 KiB of it (the gated one: set-up, filter, report, exec,
/// the dynamic linker's first binding of execve included).
inline constexpr std::size_t clone_stack_size = 64 * 1024;

/// \brief Runs `entry(arg)` in a new process made by clone3(CLONE_VM | CLONE_VFORK |
/// CLONE_INTO_CGROUP) in the cgroup `cgroup_fd` (a cgroup v2 directory; -1: the caller's, made
/// by clone(2) instead, which a fork filter over the caller's tree lets through where it
/// refuses clone3), on a stack of its own, SIGCHLD at its end. Returns once the child
/// has executed a program or ended: 0 with `pid`, or the errno of clone3 (ENOSYS or E2BIG/EINVAL
/// before Linux 5.7, EBUSY, EOPNOTSUPP, EACCES from the cgroup). Every signal is blocked in the
/// caller meanwhile, so the child starts with all of them blocked and no handler of ours runs in
/// it.
///
/// Under AddressSanitizer or ThreadSanitizer (whose per-thread state a child sharing our
/// memory on a stack of its own would corrupt) and on architectures other than x86-64, the
/// child is a copy of us instead (clone3 without CLONE_VM, on our stack), still made inside
/// the cgroup and still waited for.
int clone_into_cgroup(int cgroup_fd, child_entry entry, void* arg, pid_t& pid);

/// \brief In the child: what posix_spawn's attributes and file actions do in spawn_command.
/// A new process group (a new session on a terminal), default dispositions (the job signals
/// ignored when `a.ignore_job_signals`), an empty signal mask, the work directory, the
/// terminal or `stdin_fd`/`a.stdout_fd`/`a.stderr_fd` as 0-2, `extra` onto 3, 4, ... and
/// every other descriptor closed but `keep_fd` (-1: none; it must lie above 2 + extra.size()
/// like the sources in `extra`). 0, or the errno of the step that failed.
int set_up_child(const spawn_args& a, int stdin_fd, std::span<const int> extra, int keep_fd);

/// The C strings of `v` for execve, null-terminated (pointing into `v`).
std::vector<char*> c_strings(const std::vector<std::string>& v);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_CLONE_INTO_HPP
