// helper/instance_filter.cpp: no command of an instance changes another process's limits or
// priorities (see instance_filter.hpp).
#include "helper/instance_filter.hpp"

#include "helper/bpf_builder.hpp"

#include <array>
#include <cerrno>
#include <cstdint>

#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

enum label : std::uint8_t
{
    native,
    compat,
    pid_in_arg0,    // prlimit64(pid, ...), sched_set*(pid, ...)
    priority_of,    // setpriority(which, who, ...)
    io_priority_of, // ioprio_set(which, who, ...)
    who_is_self,    // their `who`: 0, the caller
    allow,
    label_count
};
using bpf_program = bpf_builder<label_count>;

// The calls of one architecture whose first argument is a pid (0: the caller), and the two
// whose first argument says what the second one names.
struct arch_calls
{
    std::uint32_t arch;
    std::array<std::uint32_t, 5> by_pid; // prlimit64, sched_setparam, sched_setscheduler,
                                         // sched_setaffinity, sched_setattr
    std::uint32_t setpriority_nr, ioprio_set_nr;
};

#if defined(__x86_64__)
constexpr arch_calls native_calls{AUDIT_ARCH_X86_64, {302, 142, 144, 203, 314}, 141, 251};
constexpr arch_calls compat_calls{AUDIT_ARCH_I386, {340, 154, 156, 241, 351}, 97, 289};
#elif defined(__aarch64__)
constexpr arch_calls native_calls{AUDIT_ARCH_AARCH64, {261, 118, 119, 122, 274}, 140, 30};
constexpr arch_calls compat_calls{AUDIT_ARCH_ARM, {369, 154, 156, 241, 380}, 97, 314};
#endif

constexpr std::uint32_t ioprio_who_process = 1; // IOPRIO_WHO_PROCESS (linux/ioprio.h)

void judge_calls(bpf_program& p, const arch_calls& c)
{
    p.load_call(c.arch == native_calls.arch);
    for (std::uint32_t nr : c.by_pid)
        p.jump_if(nr, pid_in_arg0);
    p.jump_if(c.setpriority_nr, priority_of);
    p.jump_if(c.ioprio_set_nr, io_priority_of);
    p.ret(SECCOMP_RET_ALLOW);
}

} // namespace

// setpriority and ioprio_set pass for the caller's own process only: a process group of
// the caller's could be the workers' (a command can join it with setpgid), a user is all of
// them.
std::vector<sock_filter> instance_filter_program()
{
    bpf_program p;
    p.per_architecture(native, compat, native_calls, compat_calls,
                       [&](const auto& c) { judge_calls(p, c); });
    p.here(pid_in_arg0);
    p.load(bpf_arg_offset(0));
    p.jump_if(0, allow);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    p.here(priority_of);
    p.load(bpf_arg_offset(0));
    p.jump_if(PRIO_PROCESS, who_is_self);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    p.here(io_priority_of);
    p.load(bpf_arg_offset(0));
    p.jump_if(ioprio_who_process, who_is_self);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    p.here(who_is_self);
    p.load(bpf_arg_offset(1));
    p.jump_if(0, allow);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    p.here(allow);
    p.ret(SECCOMP_RET_ALLOW);
    return p.finish();
}

int install_instance_filter()
{
    return install_filter(instance_filter_program());
}

} // namespace sandbox::detail
