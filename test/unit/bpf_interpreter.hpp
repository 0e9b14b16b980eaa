// test/unit/bpf_interpreter.hpp: a small classic-BPF interpreter for the unit tests of our
// seccomp programs (fork_filter_test.cpp, setid_filter_test.cpp): the kernel runs the same
// programs, but this host cannot make 32-bit or x32 calls, and a program that forgot an
// entry would only show there as a call that slipped through.
#ifndef SBX_TEST_UNIT_BPF_INTERPRETER_HPP
#define SBX_TEST_UNIT_BPF_INTERPRETER_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <linux/filter.h>
#include <linux/seccomp.h>

namespace sbx_test {

// Runs `prog` over `d` as the kernel's classic BPF would, for the instructions a seccomp
// program of ours uses; anything else fails the test.
inline std::uint32_t run_bpf(const std::vector<sock_filter>& prog, const seccomp_data& d)
{
    std::uint32_t a = 0;
    for (std::size_t pc = 0; pc < prog.size(); ++pc)
    {
        const sock_filter& i = prog[pc];
        switch (i.code)
        {
        case BPF_LD | BPF_W | BPF_ABS:
            if (i.k + 4 > sizeof d)
                throw std::runtime_error("load past seccomp_data");
            std::memcpy(&a, reinterpret_cast<const char*>(&d) + i.k, 4);
            break;
        case BPF_ALU | BPF_AND | BPF_K:
            a &= i.k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += a == i.k ? i.jt : i.jf;
            break;
        case BPF_JMP | BPF_JSET | BPF_K:
            pc += (a & i.k) != 0 ? i.jt : i.jf;
            break;
        case BPF_RET | BPF_K:
            return i.k;
        default:
            throw std::runtime_error("unexpected instruction " + std::to_string(i.code));
        }
    }
    throw std::runtime_error("ran off the end of the program");
}

// A call of `arch` numbered `nr` with the first three arguments given.
inline seccomp_data make_call(std::uint32_t arch, std::uint32_t nr, std::uint64_t arg0 = 0,
                              std::uint64_t arg1 = 0, std::uint64_t arg2 = 0)
{
    seccomp_data d{};
    d.arch = arch;
    d.nr = static_cast<int>(nr);
    d.args[0] = arg0;
    d.args[1] = arg1;
    d.args[2] = arg2;
    return d;
}

// A program the kernel would load: not empty, within BPF_MAXINSNS, every jump landing inside,
// the last instruction a return.
inline bool well_formed_bpf(const std::vector<sock_filter>& prog)
{
    if (prog.empty() || prog.size() > BPF_MAXINSNS || BPF_CLASS(prog.back().code) != BPF_RET)
        return false;
    for (std::size_t pc = 0; pc < prog.size(); ++pc)
        if (BPF_CLASS(prog[pc].code) == BPF_JMP &&
            (pc + 1 + prog[pc].jt >= prog.size() || pc + 1 + prog[pc].jf >= prog.size()))
            return false;
    return true;
}

} // namespace sbx_test

#endif // SBX_TEST_UNIT_BPF_INTERPRETER_HPP
