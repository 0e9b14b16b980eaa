// helper/syscall_numbers.hpp: the numbers of the calls our seccomp programs judge
// (fork_filter.cpp, connect_filter.cpp), for the host's architecture and its 32-bit one, as
// seccomp_data names them. A number is 0 where the architecture has no such call.
#ifndef SANDBOX_HELPER_SYSCALL_NUMBERS_HPP
#define SANDBOX_HELPER_SYSCALL_NUMBERS_HPP

#include <cstdint>

#include <linux/audit.h>

namespace sandbox::detail {

struct arch_syscalls
{
    std::uint32_t arch;
    std::uint32_t clone, fork, vfork, seccomp;
    std::uint32_t connect, socket, socketpair, socketcall;
};

// The same on every architecture.
inline constexpr std::uint32_t clone3_nr = 435;
inline constexpr std::uint32_t io_uring_setup_nr = 425;

#if defined(__x86_64__)
inline constexpr arch_syscalls native_syscalls{AUDIT_ARCH_X86_64, 56, 57, 58, 317, 42, 41, 53, 0};
inline constexpr arch_syscalls compat_syscalls{
    AUDIT_ARCH_I386, 120, 2, 190, 354, 362, 359, 360, 102};
#elif defined(__aarch64__)
inline constexpr arch_syscalls native_syscalls{
    AUDIT_ARCH_AARCH64, 220, 0, 0, 277, 203, 198, 199, 0};
inline constexpr arch_syscalls compat_syscalls{AUDIT_ARCH_ARM, 120, 2, 190, 383, 283, 281, 288, 0};
#else
#error "our seccomp filters know the calls of x86_64 and aarch64 only"
#endif

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_SYSCALL_NUMBERS_HPP
