// helper/bpf_builder.hpp: a small classic-BPF program builder for our seccomp
// filters (fork_filter.cpp, setid_filter.cpp): loads from seccomp_data, one ALU mask,
// returns, and conditional jumps to named targets, resolved when the program is finished.
#ifndef SANDBOX_HELPER_BPF_BUILDER_HPP
#define SANDBOX_HELPER_BPF_BUILDER_HPP

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandbox::detail {

/// Offsets into seccomp_data: the call's number, its architecture, and the low half of an
/// argument (a mode or flags word: the kernel reads no more than these 32 bits of them).
inline constexpr std::uint32_t bpf_nr_offset = offsetof(seccomp_data, nr);
inline constexpr std::uint32_t bpf_arch_offset = offsetof(seccomp_data, arch);
constexpr std::uint32_t bpf_arg_offset(unsigned i)
{
    return static_cast<std::uint32_t>(offsetof(seccomp_data, args) + i * sizeof(std::uint64_t));
}
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "bpf_arg_offset reads the low half");

// The host's architecture and its 32-bit one, as seccomp_data names them: a 64-bit program
// can make 32-bit calls too (int 0x80), which arrive with the 32-bit numbers. x32 calls
// arrive as native ones with this bit set in their numbers.
#if defined(__x86_64__)
inline constexpr std::uint32_t bpf_native_arch = AUDIT_ARCH_X86_64;
inline constexpr std::uint32_t bpf_compat_arch = AUDIT_ARCH_I386;
inline constexpr std::uint32_t bpf_x32_bit = 0x40000000;
#elif defined(__aarch64__)
inline constexpr std::uint32_t bpf_native_arch = AUDIT_ARCH_AARCH64;
inline constexpr std::uint32_t bpf_compat_arch = AUDIT_ARCH_ARM;
inline constexpr std::uint32_t bpf_x32_bit = 0;
#else
#error "our seccomp filters know the calls of x86_64 and aarch64 only"
#endif

/// A program of at most 64 instructions with `Labels` jump targets (numbered 0 ..
/// Labels - 1); jumps go forward only. A mistake in a fixed program aborts (the unit tests
/// build every program).
template <std::size_t Labels>
class bpf_builder
{
public:
    void load(std::uint32_t offset) { add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset)); }
    void mask(std::uint32_t bits) { add(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, bits)); }
    void ret(std::uint32_t value) { add(BPF_STMT(BPF_RET | BPF_K, value)); }
    /// Jumps to `to` when A == k (or, with `test_bits`, when A & k), else falls through.
    void jump_if(std::uint32_t k, std::uint8_t to, bool test_bits = false)
    {
        fixups_[count_] = to;
        add(BPF_JUMP(BPF_JMP | (test_bits ? BPF_JSET : BPF_JEQ) | BPF_K, k, 0, 0));
    }
    void here(std::uint8_t l) { at_[l] = count_; }

    /// Goes on at `native` or `compat` by the call's architecture; a call of any other
    /// kills the process (its numbers mean other calls).
    void by_architecture(std::uint8_t native, std::uint8_t compat)
    {
        load(bpf_arch_offset);
        jump_if(bpf_native_arch, native);
        jump_if(bpf_compat_arch, compat);
        ret(SECCOMP_RET_KILL_PROCESS);
    }
    /// `by_architecture`, then each architecture's part: `judge(calls)` with that
    /// architecture's table of call numbers (the same judge for both, so neither is missed).
    template <class Calls, class Judge>
    void per_architecture(std::uint8_t native, std::uint8_t compat, const Calls& native_calls,
                          const Calls& compat_calls, Judge judge)
    {
        by_architecture(native, compat);
        here(native);
        judge(native_calls);
        here(compat);
        judge(compat_calls);
    }
    /// Loads the call's number; a native one's without the x32 bit (an x32 call is judged as
    /// its 64-bit twin).
    void load_call(bool native)
    {
        load(bpf_nr_offset);
        if (native && bpf_x32_bit != 0)
            mask(~bpf_x32_bit);
    }

    std::vector<sock_filter> finish()
    {
        for (std::size_t i = 0; i < count_; ++i)
            if (fixups_[i] != none)
            {
                if (at_[fixups_[i]] <= i) // only forward jumps, and max < 256 keeps them short
                    std::abort();
                code_[i].jt = static_cast<std::uint8_t>(at_[fixups_[i]] - i - 1);
            }
        return {code_.begin(), code_.begin() + static_cast<std::ptrdiff_t>(count_)};
    }

private:
    static_assert(Labels < 255);
    static constexpr std::size_t max = 64;
    static constexpr std::uint8_t none = 255;

    void add(sock_filter f)
    {
        if (count_ == max)
            std::abort();
        code_[count_++] = f;
    }
    std::array<sock_filter, max> code_{};
    std::array<std::uint8_t, max> fixups_ = [] {
        std::array<std::uint8_t, max> a{};
        a.fill(none);
        return a;
    }();
    std::array<std::size_t, Labels> at_{};
    std::size_t count_ = 0;
};

/// Puts `prog` on the calling thread, after no_new_privs (which a filter without
/// CAP_SYS_ADMIN needs; everything the thread starts inherits both). 0, or the errno.
inline int install_filter(const std::vector<sock_filter>& prog)
{
    const sock_fprog fp{static_cast<unsigned short>(prog.size()),
                        const_cast<sock_filter*>(prog.data())};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0u, &fp) != 0)
        return errno;
    return 0;
}

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_BPF_BUILDER_HPP
