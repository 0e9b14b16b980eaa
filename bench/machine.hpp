// bench/machine.hpp: the machine line every benchmark prints before its figures.
#ifndef SANDBOX_BENCH_MACHINE_HPP
#define SANDBOX_BENCH_MACHINE_HPP

#include <cstdio>
#include <fstream>
#include <string>

#include <sys/utsname.h>
#include <unistd.h>

namespace bench {

/// Prints `machine: nproc=N kernel="..." cpu="..."` to `out`.
inline void print_machine(std::FILE* out)
{
    utsname u{};
    ::uname(&u);
    std::string model = "unknown";
    std::ifstream cpu("/proc/cpuinfo");
    for (std::string line; std::getline(cpu, line);)
        if (line.rfind("model name", 0) == 0)
        {
            auto p = line.find(':');
            if (p != std::string::npos)
                model = line.substr(line.find_first_not_of(" \t", p + 1));
            break;
        }
    std::fprintf(out, "machine: nproc=%ld kernel=\"%s %s %s\" cpu=\"%s\"\n",
                 ::sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, u.machine, model.c_str());
}

} // namespace bench

#endif // SANDBOX_BENCH_MACHINE_HPP
