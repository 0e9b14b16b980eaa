// bench/common.hpp: what every benchmark shares: the machine line printed before its
// figures, percentiles, and the leak check on our own children.
#ifndef SANDBOX_BENCH_COMMON_HPP
#define SANDBOX_BENCH_COMMON_HPP

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <dirent.h>
#include <sys/types.h>
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

/// The pids listed in /proc.
inline std::vector<pid_t> proc_pids()
{
    std::vector<pid_t> pids;
    DIR* d = ::opendir("/proc");
    if (!d)
        return pids;
    while (dirent* e = ::readdir(d))
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
            pids.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    ::closedir(d);
    return pids;
}

/// Processes whose parent is this process (a benchmark must leave none behind).
inline std::vector<pid_t> my_children()
{
    std::vector<pid_t> kids;
    const pid_t me = ::getpid();
    for (pid_t pid : proc_pids())
    {
        std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
        std::string text;
        std::getline(st, text);
        auto rp = text.rfind(')');
        if (rp == std::string::npos)
            continue;
        char state = 0;
        int ppid = 0;
        if (std::sscanf(text.c_str() + rp + 1, " %c %d", &state, &ppid) == 2 && ppid == me)
            kids.push_back(pid);
    }
    return kids;
}

} // namespace bench

#endif // SANDBOX_BENCH_COMMON_HPP
