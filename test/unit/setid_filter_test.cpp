// test/unit/setid_filter_test.cpp: the status init's seccomp program against set-id bits, run
// by the BPF interpreter over made-up calls of every architecture the host can make
// (test/integration/bwrap_test.cpp runs it for real on x86_64 calls).
#include "helper/setid_filter.hpp"

#include "bpf_interpreter.hpp"

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstdint>

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sys/stat.h>

namespace {

// The first argument (a descriptor or a path) is never looked at.
std::uint32_t verdict(std::uint32_t arch, std::uint32_t nr, std::uint64_t arg1 = 0,
                      std::uint64_t arg2 = 0)
{
    return sbx_test::run_bpf(sandbox::detail::setid_filter_program(),
                             sbx_test::make_call(arch, nr, 3, arg1, arg2));
}

constexpr std::uint32_t allow = SECCOMP_RET_ALLOW;
constexpr std::uint32_t eperm = SECCOMP_RET_ERRNO | EPERM;

// The mode-setting calls of one architecture, the mode in the given argument (1 or 2).
struct mode_call
{
    std::uint32_t nr;
    int mode_arg;
};

void check_modes(std::uint32_t arch, std::initializer_list<mode_call> calls)
{
    for (auto [nr, at] : calls)
    {
        auto with_mode = [&](std::uint64_t mode) {
            return at == 1 ? verdict(arch, nr, mode) : verdict(arch, nr, AT_SYMLINK_NOFOLLOW, mode);
        };
        BOOST_TEST(with_mode(04755) == eperm, "call " << nr);
        BOOST_TEST(with_mode(02755) == eperm, "call " << nr);
        BOOST_TEST(with_mode(06000) == eperm, "call " << nr);
        BOOST_TEST(with_mode(S_ISUID) == eperm, "call " << nr);
        BOOST_TEST(with_mode(0755) == allow, "call " << nr);
        BOOST_TEST(with_mode(01777) == allow, "call " << nr); // sticky is fine
        BOOST_TEST(with_mode(0) == allow, "call " << nr);
        // Only the low half is the mode (the kernel reads an umode_t): bits above are not.
        BOOST_TEST(with_mode(std::uint64_t{S_ISUID} << 32 | 0644) == allow, "call " << nr);
        // The bit in the other argument (a path or flags) is not the mode.
        BOOST_TEST((at == 1 ? verdict(arch, nr, 0644, 04755) : verdict(arch, nr, 04755, 0644)) ==
                       allow,
                   "call " << nr);
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(setid_filter)

BOOST_AUTO_TEST_CASE(the_program_fits_and_every_jump_lands_inside)
{
    BOOST_TEST(sbx_test::well_formed_bpf(sandbox::detail::setid_filter_program()));
}

#if defined(__x86_64__)
BOOST_AUTO_TEST_CASE(chmod_and_its_kin_refuse_set_id_bits_on_x86_64)
{
    // chmod 90, fchmod 91 (mode second); fchmodat 268, fchmodat2 452 (mode third).
    check_modes(AUDIT_ARCH_X86_64, {{90, 1}, {91, 1}, {268, 2}, {452, 2}});
    for (std::uint32_t nr : {0u, 2u, 59u, 92u, 93u, 94u, 257u, 260u, 437u})
        BOOST_TEST(verdict(AUDIT_ARCH_X86_64, nr, 04755, 04755) == allow, "call " << nr);
}

BOOST_AUTO_TEST_CASE(x32_calls_are_their_64_bit_twins)
{
    const std::uint32_t x32 = 0x40000000;
    check_modes(AUDIT_ARCH_X86_64, {{x32 | 90, 1}, {x32 | 91, 1}, {x32 | 268, 2}, {x32 | 452, 2}});
    BOOST_TEST(verdict(AUDIT_ARCH_X86_64, x32 | 92, 04755) == allow); // chown
}

BOOST_AUTO_TEST_CASE(i386_calls_through_int_0x80_are_judged)
{
    // 32-bit numbers: chmod 15, fchmod 94, fchmodat 306, fchmodat2 452.
    check_modes(AUDIT_ARCH_I386, {{15, 1}, {94, 1}, {306, 2}, {452, 2}});
    BOOST_TEST(verdict(AUDIT_ARCH_I386, 90, 04755) == allow);  // 32-bit 90 is mmap
    BOOST_TEST(verdict(AUDIT_ARCH_I386, 268, 0, 04755) == allow); // 32-bit 268 is statfs64
}

BOOST_AUTO_TEST_CASE(other_architectures_are_killed)
{
    BOOST_TEST(verdict(AUDIT_ARCH_AARCH64, 52, 04755) == SECCOMP_RET_KILL_PROCESS);
    BOOST_TEST(verdict(AUDIT_ARCH_ARM, 15, 0644) == SECCOMP_RET_KILL_PROCESS);
    BOOST_TEST(verdict(0, 90) == SECCOMP_RET_KILL_PROCESS);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
