// lib/supervisor/fork_filter.cpp: the fork gate's seccomp program (see fork_filter.hpp).
#include "supervisor/fork_filter.hpp"

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <linux/audit.h>
#include <linux/seccomp.h>
#include <sched.h>

namespace sandbox::detail {

namespace {

// The filter, as a tiny program with named jump targets resolved when it is built.
class bpf_program
{
public:
    enum label : std::uint8_t
    {
        native,
        compat,
        flags,
        notify,
        allow,
        no_clone3,
        seccomp_call,
        no_listener,
        label_count
    };

    void load(std::uint32_t offset) { add(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset)); }
    void mask(std::uint32_t bits) { add(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, bits)); }
    void ret(std::uint32_t value) { add(BPF_STMT(BPF_RET | BPF_K, value)); }
    /// Jumps to `to` when A == k (or, with `test_bits`, when A & k), else falls through.
    void jump_if(std::uint32_t k, label to, bool test_bits = false)
    {
        fixups_[count_] = to;
        add(BPF_JUMP(BPF_JMP | (test_bits ? BPF_JSET : BPF_JEQ) | BPF_K, k, 0, 0));
    }
    void here(label l) { at_[l] = count_; }

    std::vector<sock_filter> finish()
    {
        for (std::size_t i = 0; i < count_; ++i)
            if (fixups_[i] != label_count)
            {
                if (at_[fixups_[i]] <= i) // only forward jumps, and max < 256 keeps them short
                    std::abort();
                code_[i].jt = static_cast<std::uint8_t>(at_[fixups_[i]] - i - 1);
            }
        return {code_.begin(), code_.begin() + static_cast<std::ptrdiff_t>(count_)};
    }

private:
    void add(sock_filter f)
    {
        if (count_ == max)
            std::abort(); // a fixed program: fork_filter_test checks its size
        code_[count_++] = f;
    }
    static constexpr std::size_t max = 32;
    std::array<sock_filter, max> code_{};
    std::array<label, max> fixups_ = [] {
        std::array<label, max> a{};
        a.fill(label_count);
        return a;
    }();
    std::array<std::size_t, label_count> at_{};
    std::size_t count_ = 0;
};

constexpr std::uint32_t nr_offset = offsetof(seccomp_data, nr);
constexpr std::uint32_t arch_offset = offsetof(seccomp_data, arch);
// The low half of the first argument (clone's flags; CLONE_THREAD lies in it; the kernel's
// clone reads no more than these 32 bits) and of the second (seccomp's flags).
constexpr std::uint32_t flags_offset = offsetof(seccomp_data, args);
constexpr std::uint32_t arg1_offset = offsetof(seccomp_data, args) + sizeof(std::uint64_t);
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "flags_offset reads the low half");

constexpr std::uint32_t clone3_nr = 435;

// The calls of one architecture the filter judges: those that make a process (`fork_nr` and
// `vfork_nr` are 0 where the architecture has no such call) and seccomp itself.
struct arch_calls
{
    std::uint32_t arch, clone_nr, fork_nr, vfork_nr, seccomp_nr;
};

#if defined(__x86_64__)
constexpr arch_calls native_calls{AUDIT_ARCH_X86_64, 56, 57, 58, 317};
constexpr std::uint32_t x32_bit = 0x40000000; // x32 calls: the same numbers with this bit
// 32-bit programs on a 64-bit kernel enter through other numbers: gated as well.
constexpr arch_calls compat_calls{AUDIT_ARCH_I386, 120, 2, 190, 354};
#elif defined(__aarch64__)
constexpr arch_calls native_calls{AUDIT_ARCH_AARCH64, 220, 0, 0, 277};
constexpr std::uint32_t x32_bit = 0;
constexpr arch_calls compat_calls{AUDIT_ARCH_ARM, 120, 2, 190, 383};
#else
#error "the fork gate knows the process-creating calls of x86_64 and aarch64 only"
#endif

void gate_calls(bpf_program& p, const arch_calls& c)
{
    p.load(nr_offset);
    if (c.arch == native_calls.arch && x32_bit != 0)
        p.mask(~x32_bit);
    p.jump_if(clone3_nr, bpf_program::no_clone3);
    p.jump_if(c.clone_nr, bpf_program::flags);
    if (c.fork_nr != 0)
        p.jump_if(c.fork_nr, bpf_program::notify);
    if (c.vfork_nr != 0)
        p.jump_if(c.vfork_nr, bpf_program::notify);
    p.jump_if(c.seccomp_nr, bpf_program::seccomp_call);
    p.ret(SECCOMP_RET_ALLOW);
}

} // namespace

std::vector<sock_filter> fork_filter_program()
{
    bpf_program p;
    p.load(arch_offset);
    p.jump_if(native_calls.arch, bpf_program::native);
    p.jump_if(compat_calls.arch, bpf_program::compat);
    p.ret(SECCOMP_RET_KILL_PROCESS);
    p.here(bpf_program::native);
    gate_calls(p, native_calls);
    p.here(bpf_program::compat);
    gate_calls(p, compat_calls);
    p.here(bpf_program::flags);
    p.load(flags_offset);
    p.jump_if(CLONE_THREAD, bpf_program::allow, true);
    p.here(bpf_program::notify);
    p.ret(SECCOMP_RET_USER_NOTIF);
    p.here(bpf_program::allow);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(bpf_program::no_clone3);
    p.ret(SECCOMP_RET_ERRNO | ENOSYS);
    // A filter of the tree's own that sends forks to a listener of its own would get them
    // before ours (the newest of equal verdicts wins) and could let them all go on: no
    // listener can be made below the gate.
    p.here(bpf_program::seccomp_call);
    p.load(arg1_offset);
    p.jump_if(SECCOMP_FILTER_FLAG_NEW_LISTENER, bpf_program::no_listener, true);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(bpf_program::no_listener);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    return p.finish();
}

} // namespace sandbox::detail
