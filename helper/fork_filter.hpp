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

#include "helper/bpf_builder.hpp"
#include "helper/syscall_numbers.hpp"

#include <cstdint>
#include <vector>

#include <linux/filter.h>

namespace sandbox::detail {

std::vector<sock_filter> fork_filter_program();

/// The gate's jumps for one architecture, with the call's number loaded: clone3 to
/// `on_clone3`, clone to `on_clone` (whose flags decide), fork and vfork to `on_fork`. Shared
/// with the connect filter, which holds the gate's rules under a process cap.
template <std::size_t Labels>
void jump_forks(bpf_builder<Labels>& p, const arch_syscalls& c, std::uint8_t on_clone3,
                std::uint8_t on_clone, std::uint8_t on_fork)
{
    p.jump_if(clone3_nr, on_clone3);
    p.jump_if(c.clone, on_clone);
    if (c.fork != 0)
        p.jump_if(c.fork, on_fork);
    if (c.vfork != 0)
        p.jump_if(c.vfork, on_fork);
}

/// Whether a call a gated tree's listener received is a fork (clone, fork, vfork, of either
/// architecture; x32 ones too) rather than another call the same filter sends (the
/// unix-socket policy's connect: connect_filter.hpp).
bool is_fork_call(std::uint32_t arch, std::uint32_t nr);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_FORK_FILTER_HPP
