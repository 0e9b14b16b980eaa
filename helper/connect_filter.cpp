// helper/connect_filter.cpp: the unix-socket policy's seccomp program (see
// connect_filter.hpp).
#include "helper/connect_filter.hpp"

#include "helper/bpf_builder.hpp"
#include "helper/fork_filter.hpp"
#include "helper/syscall_numbers.hpp"

#include <cerrno>
#include <cstdint>

#include <linux/seccomp.h>
#include <sched.h>
#include <sys/socket.h>

namespace sandbox::detail {

namespace {

enum label : std::uint8_t
{
    native,
    compat,
    socket_args,
    unix_socket,
    seccomp_call,
    clone_flags,
    notify,
    allow,
    refuse_eperm,
    refuse_eacces,
    refuse_enosys,
    label_count
};
using bpf_program = bpf_builder<label_count>;

constexpr std::uint32_t sock_type_mask = 0xf; // the kernel's SOCK_TYPE_MASK

void judge_calls(bpf_program& p, const arch_syscalls& c, bool gate_forks)
{
    p.load_call(c.arch == native_syscalls.arch);
    p.jump_if(c.connect, notify);
    p.jump_if(c.socket, socket_args);
    p.jump_if(c.socketpair, socket_args);
    p.jump_if(io_uring_setup_nr, refuse_eperm);
    p.jump_if(c.seccomp, seccomp_call);
    if (c.socketcall != 0)
        p.jump_if(c.socketcall, refuse_eperm);
    if (gate_forks) // the fork gate's rules
        jump_forks(p, c, refuse_enosys, clone_flags, notify);
    p.ret(SECCOMP_RET_ALLOW);
}

} // namespace

std::vector<sock_filter> connect_filter_program(bool gate_forks)
{
    bpf_program p;
    p.per_architecture(native, compat, native_syscalls, compat_syscalls,
                       [&](const arch_syscalls& c) { judge_calls(p, c, gate_forks); });
    // socket(domain, type, protocol) and socketpair(domain, type, protocol, sv): a datagram
    // socket of AF_UNIX (SOCK_RAW is one too there) is refused; anything else is made.
    p.here(socket_args);
    p.load(bpf_arg_offset(0));
    p.jump_if(AF_UNIX, unix_socket);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(unix_socket);
    p.load(bpf_arg_offset(1));
    p.mask(sock_type_mask); // SOCK_NONBLOCK and SOCK_CLOEXEC lie above it
    p.jump_if(SOCK_DGRAM, refuse_eacces);
    p.jump_if(SOCK_RAW, refuse_eacces);
    p.ret(SECCOMP_RET_ALLOW);
    // A filter of the tree's own that sent connects to a listener of its own would get them
    // before ours (the newest of equal verdicts wins) and could let them go on unchecked.
    // (The kernel refuses a second listener in one tree too, with EBUSY: this says so first.)
    p.here(seccomp_call);
    p.load(bpf_arg_offset(1));
    p.jump_if(SECCOMP_FILTER_FLAG_NEW_LISTENER, refuse_eperm, true);
    p.ret(SECCOMP_RET_ALLOW);
    // clone: a thread passes, a process asks the gate.
    p.here(clone_flags);
    p.load(bpf_arg_offset(0));
    p.jump_if(CLONE_THREAD, allow, true);
    p.here(notify);
    p.ret(SECCOMP_RET_USER_NOTIF);
    p.here(allow);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(refuse_eperm);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    p.here(refuse_eacces);
    p.ret(SECCOMP_RET_ERRNO | EACCES);
    p.here(refuse_enosys);
    p.ret(SECCOMP_RET_ERRNO | ENOSYS);
    return p.finish();
}

} // namespace sandbox::detail
