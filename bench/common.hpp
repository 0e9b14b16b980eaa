// bench/common.hpp: what every benchmark shares: the machine line printed before its
// figures, percentiles and medians, the rounds ritual (ours and the baseline measured in
// turn, medians reported), the one JSON line per figure, and the leak check on our own
// children.
#ifndef SANDBOX_BENCH_COMMON_HPP
#define SANDBOX_BENCH_COMMON_HPP

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <optional>
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

/// The median of `v` (the mean of the middle two for an even count; 0 when empty).
inline double median(std::vector<double> v)
{
    if (v.empty())
        return 0;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/// One figure measured in rounds, ours and the baseline in turn within each round, so that
/// both see the same moment of a host whose speed drifts; the medians are reported.
struct rounds
{
    std::vector<double> ours{}, base{};

    void add(double o, double b)
    {
        ours.push_back(o);
        base.push_back(b);
    }
    double ours_median() const { return median(ours); }
    double base_median() const { return median(base); }
};

/// Runs `one_round()` (which measures the baseline and ours in turn and returns them as a
/// `std::pair{ours, baseline}`) `n` times.
template <class F>
rounds measure_rounds(int n, F one_round)
{
    rounds r;
    for (int i = 0; i < n; ++i)
    {
        const auto [o, b] = one_round();
        r.add(o, b);
    }
    return r;
}

/// The one JSON line of a figure: {"bench","case","value","unit","baseline","ratio"}; the
/// baseline and the ratio are null when there is no baseline.
inline void print_json(const char* bench, const std::string& name, double value,
                       const std::string& unit, std::optional<double> baseline)
{
    char b[64] = "null", r[64] = "null";
    if (baseline)
    {
        std::snprintf(b, sizeof b, "%.6g", *baseline);
        if (*baseline != 0)
            std::snprintf(r, sizeof r, "%.4g", value / *baseline);
    }
    std::printf("{\"bench\":\"%s\",\"case\":\"%s\",\"value\":%.6g,\"unit\":\"%s\","
                "\"baseline\":%s,\"ratio\":%s}\n",
                bench, name.c_str(), value, unit.c_str(), b, r);
    std::fflush(stdout);
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

/// The parent of `pid` (0 when it is gone or unreadable).
inline pid_t parent_of(pid_t pid)
{
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(st, text);
    auto rp = text.rfind(')');
    char state = 0;
    int ppid = 0;
    if (rp == std::string::npos || std::sscanf(text.c_str() + rp + 1, " %c %d", &state, &ppid) != 2)
        return 0;
    return ppid;
}

/// True when `pid` is this process or below it (a memory figure counts only the processes
/// of its own run, whatever else runs on the machine: another benchmark, a test suite).
inline bool mine(pid_t pid)
{
    const pid_t me = ::getpid();
    for (int depth = 0; depth < 64 && pid > 1; ++depth, pid = parent_of(pid))
        if (pid == me)
            return true;
    return false;
}

/// Processes whose parent is this process (a benchmark must leave none behind).
inline std::vector<pid_t> my_children()
{
    std::vector<pid_t> kids;
    const pid_t me = ::getpid();
    for (pid_t pid : proc_pids())
        if (parent_of(pid) == me)
            kids.push_back(pid);
    return kids;
}

} // namespace bench

#endif // SANDBOX_BENCH_COMMON_HPP
