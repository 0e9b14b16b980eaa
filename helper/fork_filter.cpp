// helper/fork_filter.cpp: the fork gate's seccomp program (see fork_filter.hpp).
#include "helper/fork_filter.hpp"

#include "helper/bpf_builder.hpp"
#include "helper/syscall_numbers.hpp"

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

void gate_calls(bpf_program& p, const arch_syscalls& c)
{
    p.load_call(c.arch == native_syscalls.arch);
    jump_forks(p, c, no_clone3, flags, notify);
    p.jump_if(c.seccomp, seccomp_call);
    p.ret(SECCOMP_RET_ALLOW);
}

} // namespace

std::vector<sock_filter> fork_filter_program()
{
    bpf_program p;
    p.per_architecture(native, compat, native_syscalls, compat_syscalls,
                       [&](const arch_syscalls& c) { gate_calls(p, c); });
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

bool is_fork_call(std::uint32_t arch, std::uint32_t nr)
{
    const bool native = arch == native_syscalls.arch;
    if (!native && arch != compat_syscalls.arch)
        return false;
    const arch_syscalls& c = native ? native_syscalls : compat_syscalls;
    if (native)
        nr &= ~bpf_x32_bit;
    return nr == c.clone || (c.fork != 0 && nr == c.fork) || (c.vfork != 0 && nr == c.vfork);
}

} // namespace sandbox::detail
