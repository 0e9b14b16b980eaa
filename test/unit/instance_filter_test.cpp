// test/unit/instance_filter_test.cpp: the seccomp program of an instance's init (no command
// changes another process's limits or priorities), run by the BPF interpreter over made-up
// calls of both architectures (test/integration/instance_test.cpp runs it for real).
#include "helper/instance_filter.hpp"

#include "bpf_interpreter.hpp"

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstdint>
#include <vector>

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/resource.h>

namespace {

std::uint32_t verdict(std::uint32_t arch, std::uint32_t nr, std::uint64_t arg0 = 0,
                      std::uint64_t arg1 = 0)
{
    return sbx_test::run_bpf(sandbox::detail::instance_filter_program(),
                             sbx_test::make_call(arch, nr, arg0, arg1));
}

constexpr std::uint32_t allow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;

struct calls
{
    std::uint32_t arch;
    std::vector<std::uint32_t> by_pid; // prlimit64, then the sched_set* calls
    std::uint32_t setpriority, ioprio_set, other;
};

void check(const calls& c)
{
    for (std::uint32_t nr : c.by_pid)
    {
        BOOST_TEST(verdict(c.arch, nr, 0) == allow, nr);    // oneself
        BOOST_TEST(verdict(c.arch, nr, 1) == eperm, nr);    // the init
        BOOST_TEST(verdict(c.arch, nr, 4242) == eperm, nr); // a worker
        // Only the low half is the pid (an int): bits above do not make it someone else.
        BOOST_TEST(verdict(c.arch, nr, std::uint64_t{1} << 32) == allow, nr);
    }
    BOOST_TEST(verdict(c.arch, c.setpriority, PRIO_PROCESS, 0) == allow);
    BOOST_TEST(verdict(c.arch, c.setpriority, PRIO_PROCESS, 7) == eperm);
    BOOST_TEST(verdict(c.arch, c.setpriority, PRIO_PGRP, 0) == eperm); // could be the workers'
    BOOST_TEST(verdict(c.arch, c.setpriority, PRIO_PGRP, 7) == eperm);
    BOOST_TEST(verdict(c.arch, c.setpriority, PRIO_USER, 0) == eperm); // every process of ours
    BOOST_TEST(verdict(c.arch, c.ioprio_set, 1, 0) == allow); // IOPRIO_WHO_PROCESS, oneself
    BOOST_TEST(verdict(c.arch, c.ioprio_set, 1, 9) == eperm);
    BOOST_TEST(verdict(c.arch, c.ioprio_set, 2, 0) == eperm); // a process group
    BOOST_TEST(verdict(c.arch, c.ioprio_set, 3, 0) == eperm); // a user
    BOOST_TEST(verdict(c.arch, c.other, 1, 2) == allow);
}

} // namespace

BOOST_AUTO_TEST_SUITE(instance_filter)

BOOST_AUTO_TEST_CASE(another_process_s_limits_and_priorities_are_refused)
{
    BOOST_TEST(sbx_test::well_formed_bpf(sandbox::detail::instance_filter_program()));
#if defined(__x86_64__)
    check({AUDIT_ARCH_X86_64, {302, 142, 144, 203, 314}, 141, 251, 62 /* kill */});
    const std::uint32_t x32 = 0x40000000u; // x32 calls: judged as their 64-bit twins
    check({AUDIT_ARCH_X86_64,
           {302 | x32, 142 | x32, 144 | x32, 203 | x32, 314 | x32},
           141 | x32,
           251 | x32,
           62});
    check({AUDIT_ARCH_I386, {340, 154, 156, 241, 351}, 97, 289, 37});
#elif defined(__aarch64__)
    check({AUDIT_ARCH_AARCH64, {261, 118, 119, 122, 274}, 140, 30, 129});
    check({AUDIT_ARCH_ARM, {369, 154, 156, 241, 380}, 97, 314, 37});
#endif
    BOOST_TEST(verdict(AUDIT_ARCH_MIPS, 1) == SECCOMP_RET_KILL_PROCESS);
}

BOOST_AUTO_TEST_SUITE_END()
