// test/unit/connect_filter_test.cpp: the unix-socket policy's seccomp program, run by the
// test's BPF interpreter over made-up calls of every architecture it judges (the kernel
// runs the same program: test/integration/unix_socket_policy_test.cpp), and the broker's
// pure parts (the /proc status parser, sock_diag's device numbers).
#include <boost/test/unit_test.hpp>

#include "bpf_interpreter.hpp"
#include "helper/connect_broker.hpp"
#include "helper/connect_filter.hpp"
#include "helper/fork_filter.hpp"

#include <cerrno>
#include <cstdint>
#include <vector>

#include <csignal>
#include <grp.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

std::uint32_t verdict(std::uint32_t arch, std::uint32_t nr, std::uint64_t arg0 = 0,
                      std::uint64_t arg1 = 0, bool gate_forks = false)
{
    return sbx_test::run_bpf(sandbox::detail::connect_filter_program(gate_forks),
                             sbx_test::make_call(arch, nr, arg0, arg1));
}

// Under a process cap too: the same program holds the fork gate's rules.
std::uint32_t gated(std::uint32_t arch, std::uint32_t nr, std::uint64_t arg0 = 0,
                    std::uint64_t arg1 = 0)
{
    return verdict(arch, nr, arg0, arg1, true);
}

constexpr std::uint32_t notify = SECCOMP_RET_USER_NOTIF;
constexpr std::uint32_t allow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;
constexpr std::uint32_t eacces = SECCOMP_RET_ERRNO | EACCES;

} // namespace

BOOST_AUTO_TEST_SUITE(connect_filter)

BOOST_AUTO_TEST_CASE(the_program_fits_and_every_jump_lands_inside)
{
    BOOST_TEST(sbx_test::well_formed_bpf(sandbox::detail::connect_filter_program()));
    BOOST_TEST(sbx_test::well_formed_bpf(sandbox::detail::connect_filter_program(true)));
}

#if defined(__x86_64__)
BOOST_AUTO_TEST_CASE(native_and_x32_calls)
{
    const std::uint32_t a = AUDIT_ARCH_X86_64;
    for (std::uint32_t x32 : {0u, 0x40000000u})
    {
        BOOST_TEST(verdict(a, x32 | 42) == notify); // connect, whatever its arguments
        BOOST_TEST(verdict(a, x32 | 41, AF_UNIX, SOCK_DGRAM) == eacces);
        BOOST_TEST(verdict(a, x32 | 41, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK) ==
                   eacces);
        BOOST_TEST(verdict(a, x32 | 41, AF_UNIX, SOCK_RAW) == eacces);   // a datagram socket there
        BOOST_TEST(verdict(a, x32 | 53, AF_UNIX, SOCK_DGRAM) == eacces); // socketpair
        BOOST_TEST(verdict(a, x32 | 41, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC) == allow);
        BOOST_TEST(verdict(a, x32 | 41, AF_UNIX, SOCK_SEQPACKET) == allow);
        BOOST_TEST(verdict(a, x32 | 53, AF_UNIX, SOCK_STREAM) == allow);
        BOOST_TEST(verdict(a, x32 | 41, AF_INET, SOCK_DGRAM) == allow); // UDP
        BOOST_TEST(verdict(a, x32 | 41, AF_NETLINK, SOCK_RAW) == allow);
        BOOST_TEST(verdict(a, x32 | 425) == eperm); // io_uring_setup
        BOOST_TEST(verdict(a, x32 | 317, SECCOMP_SET_MODE_FILTER,
                           SECCOMP_FILTER_FLAG_NEW_LISTENER) == eperm);
        BOOST_TEST(verdict(a, x32 | 317, SECCOMP_SET_MODE_FILTER, 0) == allow);
        for (std::uint32_t nr : {0u, 1u, 44u, 46u, 49u, 50u, 56u, 57u, 59u, 426u, 427u})
            BOOST_TEST(verdict(a, x32 | nr) == allow, "call " << nr); // sendto, sendmsg, bind, ...
    }
}

BOOST_AUTO_TEST_CASE(with_the_fork_gate_rules)
{
    constexpr std::uint64_t thread_flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
                                           CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS;
    for (std::uint32_t x32 : {0u, 0x40000000u})
    {
        const std::uint32_t a = AUDIT_ARCH_X86_64;
        BOOST_TEST(gated(a, x32 | 57) == notify);                        // fork
        BOOST_TEST(gated(a, x32 | 58) == notify);                        // vfork
        BOOST_TEST(gated(a, x32 | 56, SIGCHLD) == notify);               // clone: a process
        BOOST_TEST(gated(a, x32 | 56, thread_flags) == allow);           // clone: a thread
        BOOST_TEST(gated(a, x32 | 435) == (SECCOMP_RET_ERRNO | ENOSYS)); // clone3
        BOOST_TEST(gated(a, x32 | 42) == notify);                        // connect still
        BOOST_TEST(gated(a, x32 | 41, AF_UNIX, SOCK_DGRAM) == eacces);
        BOOST_TEST(gated(a, x32 | 0) == allow);
        // Without the gate's rules, forks pass this program.
        BOOST_TEST(verdict(a, x32 | 57) == allow);
        BOOST_TEST(verdict(a, x32 | 435) == allow);
    }
    BOOST_TEST(gated(AUDIT_ARCH_I386, 2) == notify);
    BOOST_TEST(gated(AUDIT_ARCH_I386, 120, SIGCHLD) == notify);
    BOOST_TEST(gated(AUDIT_ARCH_I386, 362) == notify);
    // The worker tells the two kinds of call apart by number.
    using sandbox::detail::is_fork_call;
    BOOST_TEST(is_fork_call(AUDIT_ARCH_X86_64, 56));
    BOOST_TEST(is_fork_call(AUDIT_ARCH_X86_64, 0x40000000u | 57));
    BOOST_TEST(is_fork_call(AUDIT_ARCH_I386, 190));
    BOOST_TEST(!is_fork_call(AUDIT_ARCH_X86_64, 42));
    BOOST_TEST(!is_fork_call(AUDIT_ARCH_I386, 362));
    BOOST_TEST(!is_fork_call(AUDIT_ARCH_I386, 56));
    BOOST_TEST(!is_fork_call(AUDIT_ARCH_AARCH64, 220));
}

BOOST_AUTO_TEST_CASE(i386_calls_through_int_0x80)
{
    const std::uint32_t a = AUDIT_ARCH_I386;
    BOOST_TEST(verdict(a, 362) == notify);                      // connect
    BOOST_TEST(verdict(a, 102, 1) == eperm);                    // socketcall, any
    BOOST_TEST(verdict(a, 359, AF_UNIX, SOCK_DGRAM) == eacces); // socket
    BOOST_TEST(verdict(a, 360, AF_UNIX, SOCK_RAW) == eacces);   // socketpair
    BOOST_TEST(verdict(a, 359, AF_UNIX, SOCK_STREAM) == allow);
    BOOST_TEST(verdict(a, 425) == eperm);
    BOOST_TEST(verdict(a, 354, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER) == eperm);
    BOOST_TEST(verdict(a, 42) == allow); // 32-bit 42 is pipe, not connect
}

BOOST_AUTO_TEST_CASE(other_architectures_are_killed)
{
    BOOST_TEST(verdict(AUDIT_ARCH_AARCH64, 203) == SECCOMP_RET_KILL_PROCESS);
    BOOST_TEST(verdict(0, 42) == SECCOMP_RET_KILL_PROCESS);
}
#endif

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(connect_broker_parts)

BOOST_AUTO_TEST_CASE(task_ids_from_proc_status)
{
    const auto t = sandbox::detail::parse_task_ids(
        "Name:\tsh\nUmask:\t0022\nTgid:\t4242\nPid:\t4243\nUid:\t65534\t65534\t65534\t65534\n"
        "Gid:\t65534\t65534\t100\t65534\nFDSize:\t64\nGroups:\t27 100 \nNStgid:\t4242\t1\n");
    BOOST_TEST_REQUIRE(t.has_value());
    BOOST_TEST(t->tgid == 4242);
    BOOST_TEST(t->uid[0] == 65534u);
    BOOST_TEST(t->gid[2] == 100u);
    BOOST_TEST((t->groups == std::vector<std::uint32_t>{27, 100}));
    // No groups at all is a valid line.
    BOOST_TEST(sandbox::detail::parse_task_ids("Tgid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n"
                                               "Groups:\t\n")
                   .has_value());
    // A missing or malformed line: nothing (the broker then refuses the call).
    BOOST_TEST(!sandbox::detail::parse_task_ids("Tgid:\t1\nUid:\t0\t0\t0\t0\nGroups:\t\n"));
    BOOST_TEST(
        !sandbox::detail::parse_task_ids("Tgid:\t1\nUid:\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n"));
    BOOST_TEST(!sandbox::detail::parse_task_ids(
        "Tgid:\tx\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t\n"));
    BOOST_TEST(!sandbox::detail::parse_task_ids(""));
}

BOOST_AUTO_TEST_CASE(sock_diag_device_numbers)
{
    // The kernel's encoding: major << 20 | minor; stat's: glibc's makedev.
    BOOST_TEST(sandbox::detail::same_device((8u << 20) | 1u, makedev(8, 1)));
    BOOST_TEST(sandbox::detail::same_device((0u << 20) | 45u, makedev(0, 45)));
    BOOST_TEST(sandbox::detail::same_device((259u << 20) | 300u, makedev(259, 300)));
    BOOST_TEST(!sandbox::detail::same_device((8u << 20) | 1u, makedev(8, 2)));
    BOOST_TEST(!sandbox::detail::same_device((8u << 20) | 1u, makedev(1, 8)));
}

// A task with the kernel's most groups (65,536: a status of ~450 KiB) is read whole, every
// group, not cut at the first buffer's end. (Root: a child sets its groups and waits.)
BOOST_AUTO_TEST_CASE(a_task_with_65536_groups_is_read_whole)
{
    if (::geteuid() != 0)
    {
        BOOST_TEST_MESSAGE("skipped: needs root to set groups");
        return;
    }
    std::vector<gid_t> groups(65536);
    for (std::size_t i = 0; i < groups.size(); ++i)
        groups[i] = static_cast<gid_t>(100000 + i);
    int ready[2];
    BOOST_TEST_REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    BOOST_TEST_REQUIRE(child >= 0);
    if (child == 0)
    {
        const char ok = ::setgroups(groups.size(), groups.data()) == 0 ? 'y' : 'n';
        [[maybe_unused]] auto n = ::write(ready[1], &ok, 1);
        ::pause();
        ::_exit(0);
    }
    ::close(ready[1]);
    char ok = 0;
    BOOST_TEST(::read(ready[0], &ok, 1) == 1);
    ::close(ready[0]);
    int err = 0;
    const auto ids = ok == 'y' ? sandbox::detail::read_task_ids(child, err) : std::nullopt;
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    BOOST_TEST_REQUIRE(ok == 'y');
    BOOST_TEST_REQUIRE(ids.has_value(), err);
    BOOST_TEST(ids->tgid == child);
    BOOST_TEST((std::vector<gid_t>(ids->groups.begin(), ids->groups.end()) == groups));
    // A task that is gone: ESRCH.
    BOOST_TEST(!sandbox::detail::read_task_ids(child, err).has_value());
    BOOST_TEST(err == ESRCH);
}

BOOST_AUTO_TEST_SUITE_END()
