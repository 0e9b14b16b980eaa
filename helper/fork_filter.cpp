// helper/fork_filter.cpp: the fork gate's seccomp program (see fork_filter.hpp).
#include "helper/fork_filter.hpp"

#include "helper/bpf_builder.hpp"

#include <cerrno>
#include <cstdint>

#include <linux/seccomp.h>
#include <sched.h>

namespace sandbox::detail {

namespace {

// The filter's jump targets.
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
using bpf_program = bpf_builder<label_count>;

// The low half of the first argument (clone's flags; CLONE_THREAD lies in it; the kernel's
// clone reads no more than these 32 bits) and of the second (seccomp's flags).
constexpr std::uint32_t flags_offset = bpf_arg_offset(0);
constexpr std::uint32_t arg1_offset = bpf_arg_offset(1);

constexpr std::uint32_t clone3_nr = 435;

// The calls of one architecture the filter judges: those that make a process (`fork_nr` and
// `vfork_nr` are 0 where the architecture has no such call) and seccomp itself.
struct arch_calls
{
    std::uint32_t arch, clone_nr, fork_nr, vfork_nr, seccomp_nr;
};

#if defined(__x86_64__)
constexpr arch_calls native_calls{AUDIT_ARCH_X86_64, 56, 57, 58, 317};
constexpr arch_calls compat_calls{AUDIT_ARCH_I386, 120, 2, 190, 354};
#elif defined(__aarch64__)
constexpr arch_calls native_calls{AUDIT_ARCH_AARCH64, 220, 0, 0, 277};
constexpr arch_calls compat_calls{AUDIT_ARCH_ARM, 120, 2, 190, 383};
#endif

void gate_calls(bpf_program& p, const arch_calls& c)
{
    p.load_call(c.arch == native_calls.arch);
    p.jump_if(clone3_nr, no_clone3);
    p.jump_if(c.clone_nr, flags);
    if (c.fork_nr != 0)
        p.jump_if(c.fork_nr, notify);
    if (c.vfork_nr != 0)
        p.jump_if(c.vfork_nr, notify);
    p.jump_if(c.seccomp_nr, seccomp_call);
    p.ret(SECCOMP_RET_ALLOW);
}

} // namespace

std::vector<sock_filter> fork_filter_program()
{
    bpf_program p;
    p.by_architecture(native, compat);
    p.here(native);
    gate_calls(p, native_calls);
    p.here(compat);
    gate_calls(p, compat_calls);
    p.here(flags);
    p.load(flags_offset);
    p.jump_if(CLONE_THREAD, allow, true);
    p.here(notify);
    p.ret(SECCOMP_RET_USER_NOTIF);
    p.here(allow);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(no_clone3);
    p.ret(SECCOMP_RET_ERRNO | ENOSYS);
    // A filter of the tree's own that sends forks to a listener of its own would get them
    // before ours (the newest of equal verdicts wins) and could let them all go on: no
    // listener can be made below the gate.
    p.here(seccomp_call);
    p.load(arg1_offset);
    p.jump_if(SECCOMP_FILTER_FLAG_NEW_LISTENER, no_listener, true);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(no_listener);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    return p.finish();
}

} // namespace sandbox::detail
