// helper/fork_filter.hpp: the fork gate's seccomp program (classic BPF), built
// without I/O so that a test can run it over made-up calls.
//
// For the host's architecture (x86_64 or aarch64) and its 32-bit one:
//   clone3                     fails with ENOSYS (glibc then uses clone, whose flags a
//                              filter can read)
//   clone with CLONE_THREAD    allowed (a thread)
//   clone without it, fork, vfork   sent to the worker (SECCOMP_RET_USER_NOTIF)
//   seccomp with SECCOMP_FILTER_FLAG_NEW_LISTENER   fails with EPERM (a listener of the
//                              tree's own would get its forks before the gate: the newest
//                              filter wins among equal verdicts)
//   x32 calls                  the same as their 64-bit twins
//   anything else              allowed
// A call of any other architecture kills the process: it could fork past the gate.
#ifndef SANDBOX_HELPER_FORK_FILTER_HPP
#define SANDBOX_HELPER_FORK_FILTER_HPP

#include <vector>

#include <linux/filter.h>

namespace sandbox::detail {

std::vector<sock_filter> fork_filter_program();

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_FORK_FILTER_HPP
