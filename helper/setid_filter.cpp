// helper/setid_filter.cpp: no set-id bits from inside a sandbox (see setid_filter.hpp).
#include "helper/setid_filter.hpp"

#include "helper/bpf_builder.hpp"

#include <cerrno>
#include <cstdint>

#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

enum label : std::uint8_t
{
    native,
    compat,
    mode_in_arg1,
    mode_in_arg2,
    refuse,
    label_count
};
using bpf_program = bpf_builder<label_count>;

// The mode-setting calls of one architecture (0: it has no such call). The mode is the
// second argument of chmod and fchmod, the third of fchmodat and fchmodat2.
struct arch_calls
{
    std::uint32_t arch, chmod_nr, fchmod_nr, fchmodat_nr, fchmodat2_nr;
};

#if defined(__x86_64__)
constexpr arch_calls native_calls{AUDIT_ARCH_X86_64, 90, 91, 268, 452};
constexpr arch_calls compat_calls{AUDIT_ARCH_I386, 15, 94, 306, 452};
#elif defined(__aarch64__)
constexpr arch_calls native_calls{AUDIT_ARCH_AARCH64, 0, 52, 53, 452};
constexpr arch_calls compat_calls{AUDIT_ARCH_ARM, 15, 94, 333, 452};
#endif

void judge_calls(bpf_program& p, const arch_calls& c)
{
    p.load_call(c.arch == native_calls.arch);
    if (c.chmod_nr != 0)
        p.jump_if(c.chmod_nr, mode_in_arg1);
    p.jump_if(c.fchmod_nr, mode_in_arg1);
    p.jump_if(c.fchmodat_nr, mode_in_arg2);
    p.jump_if(c.fchmodat2_nr, mode_in_arg2);
    p.ret(SECCOMP_RET_ALLOW);
}

} // namespace

std::vector<sock_filter> setid_filter_program()
{
    bpf_program p;
    p.per_architecture(native, compat, native_calls, compat_calls,
                       [&](const auto& c) { judge_calls(p, c); });
    p.here(mode_in_arg1);
    p.load(bpf_arg_offset(1));
    p.jump_if(S_ISUID | S_ISGID, refuse, true);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(mode_in_arg2);
    p.load(bpf_arg_offset(2));
    p.jump_if(S_ISUID | S_ISGID, refuse, true);
    p.ret(SECCOMP_RET_ALLOW);
    p.here(refuse);
    p.ret(SECCOMP_RET_ERRNO | EPERM);
    return p.finish();
}

int install_setid_filter()
{
    return install_filter(setid_filter_program());
}

} // namespace sandbox::detail
