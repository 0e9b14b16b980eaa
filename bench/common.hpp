// bench/common.hpp: what every benchmark shares: the machine line printed before its
// figures, and percentiles.
#ifndef SANDBOX_BENCH_COMMON_HPP
#define SANDBOX_BENCH_COMMON_HPP

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

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

/// The p-th percentile of `v` (nearest rank; 0 when empty).
inline double percentile(std::vector<double> v, double p)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    rank = std::clamp<std::size_t>(rank, 1, v.size());
    return v[rank - 1];
}

} // namespace bench

#endif // SANDBOX_BENCH_COMMON_HPP
