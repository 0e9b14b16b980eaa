// test/unit/fork_filter_test.cpp: the fork gate's seccomp program, run by a small classic-BPF
// interpreter over made-up calls (the kernel runs the same program; the integration tests
// run it for real, but this host cannot run 32-bit or x32 code, and a program that forgot
// an entry would only show there as a fork the gate never saw).
#include "helper/fork_filter.hpp"

#include "bpf_interpreter.hpp"

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdint>
#include <utility>

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>

namespace {

std::uint32_t verdict(std::uint32_t arch, std::uint32_t nr, std::uint64_t arg0 = 0,
                      std::uint64_t arg1 = 0)
{
    return sbx_test::run_bpf(sandbox::detail::fork_filter_program(),
                             sbx_test::make_call(arch, nr, arg0, arg1));
}

constexpr std::uint32_t notify = SECCOMP_RET_USER_NOTIF;
constexpr std::uint32_t allow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t enosys = SECCOMP_RET_ERRNO | ENOSYS;
constexpr std::uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
constexpr std::uint64_t new_listener = SECCOMP_FILTER_FLAG_NEW_LISTENER;
constexpr std::uint64_t thread_flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
                                       CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |
                                       CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
constexpr std::uint64_t fork_flags = CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD;

} // namespace

BOOST_AUTO_TEST_SUITE(fork_filter)

BOOST_AUTO_TEST_CASE(the_program_fits_and_every_jump_lands_inside)
{
    BOOST_TEST(sbx_test::well_formed_bpf(sandbox::detail::fork_filter_program()));
}

#if defined(__x86_64__)
BOOST_AUTO_TEST_CASE(native_calls_x86_64)
{
    const std::uint32_t a = AUDIT_ARCH_X86_64;
    BOOST_TEST(verdict(a, 57) == notify);                     // fork
    BOOST_TEST(verdict(a, 58) == notify);                     // vfork
    BOOST_TEST(verdict(a, 56, fork_flags) == notify);         // clone: a process
    BOOST_TEST(verdict(a, 56, CLONE_VM | CLONE_VFORK | SIGCHLD) == notify); // posix_spawn
    BOOST_TEST(verdict(a, 56, CLONE_NEWPID | SIGCHLD) == notify);            // bwrap's
    BOOST_TEST(verdict(a, 56, thread_flags) == allow);        // clone: a thread
    BOOST_TEST(verdict(a, 56, std::uint64_t{1} << 32 | SIGCHLD) == notify); // high half
    BOOST_TEST(verdict(a, 435) == enosys);                    // clone3
    for (std::uint32_t nr : {0u, 1u, 59u, 60u, 231u, 322u, 434u, 436u})
        BOOST_TEST(verdict(a, nr) == allow, "call " << nr); // read ... execveat, pidfd_open
}

BOOST_AUTO_TEST_CASE(no_listener_of_the_trees_own)
{
    // seccomp(SECCOMP_SET_MODE_FILTER, flags, prog): x86_64 317, x32 the same, i386 354.
    using call = std::pair<std::uint32_t, std::uint32_t>;
    for (auto [a, nr] : {call{AUDIT_ARCH_X86_64, 317}, call{AUDIT_ARCH_X86_64, 0x40000000u | 317},
                         call{AUDIT_ARCH_I386, 354}})
    {
        BOOST_TEST(verdict(a, nr, SECCOMP_SET_MODE_FILTER, new_listener) == eperm, "call " << nr);
        BOOST_TEST(verdict(a, nr, SECCOMP_SET_MODE_FILTER,
                           new_listener | SECCOMP_FILTER_FLAG_TSYNC) == eperm);
        // Filters without a listener (a sandbox inside, a runtime's own) stay possible.
        BOOST_TEST(verdict(a, nr, SECCOMP_SET_MODE_FILTER, 0) == allow);
        BOOST_TEST(verdict(a, nr, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC) == allow);
        BOOST_TEST(verdict(a, nr, SECCOMP_GET_ACTION_AVAIL, 0) == allow);
    }
}

BOOST_AUTO_TEST_CASE(x32_calls_are_their_64_bit_twins)
{
    const std::uint32_t a = AUDIT_ARCH_X86_64, x32 = 0x40000000;
    BOOST_TEST(verdict(a, x32 | 57) == notify);
    BOOST_TEST(verdict(a, x32 | 58) == notify);
    BOOST_TEST(verdict(a, x32 | 56, fork_flags) == notify);
    BOOST_TEST(verdict(a, x32 | 56, thread_flags) == allow);
    BOOST_TEST(verdict(a, x32 | 435) == enosys);
    BOOST_TEST(verdict(a, x32 | 0) == allow);
}

BOOST_AUTO_TEST_CASE(i386_calls_through_int_0x80_are_gated)
{
    // A 64-bit program can make 32-bit calls: they arrive as AUDIT_ARCH_I386 with the
    // 32-bit numbers (fork 2, clone 120, vfork 190, clone3 435).
    const std::uint32_t a = AUDIT_ARCH_I386;
    BOOST_TEST(verdict(a, 2) == notify);
    BOOST_TEST(verdict(a, 190) == notify);
    BOOST_TEST(verdict(a, 120, SIGCHLD) == notify);
    BOOST_TEST(verdict(a, 120, thread_flags & 0xffffffffu) == allow);
    BOOST_TEST(verdict(a, 435) == enosys);
    BOOST_TEST(verdict(a, 57) == allow); // 32-bit 57 is setpgid, not fork
    BOOST_TEST(verdict(a, 56) == allow); // 32-bit 56 is mpx: not ours to judge
}

BOOST_AUTO_TEST_CASE(other_architectures_are_killed)
{
    BOOST_TEST(verdict(AUDIT_ARCH_AARCH64, 220) == SECCOMP_RET_KILL_PROCESS);
    BOOST_TEST(verdict(AUDIT_ARCH_ARM, 2) == SECCOMP_RET_KILL_PROCESS);
    BOOST_TEST(verdict(0, 57) == SECCOMP_RET_KILL_PROCESS);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
