// lib/exec_options.cpp: backend-independent pre-spawn policy checks.
#include <sandbox/exec_options.hpp>

#include <limits>

namespace sandbox {

outcome<> validate_exec_policy(const exec_options& o, bool sampler_usable)
{
    using namespace std::chrono_literals;
    const auto& l = o.limits;
    struct field
    {
        std::int64_t v;
        const char* name;
    };
    for (auto f : {field{l.memory_bytes, "memory"}, field{l.cpu_millicores, "cpu"},
                   field{l.disk_bytes, "disk"}, field{l.max_output_bytes, "output"},
                   field{l.max_processes, "processes"}, field{l.max_tasks, "tasks"}})
        if (f.v < 0)
            return make_failure(errc::validation,
                                std::string("resource limit ") + f.name + " is negative", f.name);
    if (o.timeout < 0ns)
        return make_failure(errc::validation, "timeout is negative", "timeout");
    if (o.kill_grace < 0ns)
        return make_failure(errc::validation, "kill grace is negative", "kill_grace");
    if (l.disk_bytes != 0)
        return make_failure(errc::not_available, "no backend can enforce a disk quota", "disk");
    if (l.cpu_millicores != 0 && o.timeout <= 0ns)
        return make_failure(errc::not_available,
                            "a cpu cap is a share of the timeout and needs a timeout", "cpu");
    if (l.has_sampled_caps() && !sampler_usable)
        return make_failure(errc::not_available,
                            "resource caps need /proc sampling, which does not work on this host",
                            l.memory_bytes > 0     ? "memory"
                            : l.cpu_millicores > 0 ? "cpu"
                            : l.max_processes > 0  ? "processes"
                                                   : "tasks");
    return {};
}

std::chrono::nanoseconds cpu_budget(const exec_options& o) noexcept
{
    using namespace std::chrono_literals;
    if (o.limits.cpu_millicores <= 0 || o.timeout <= 0ns)
        return 0ns;
    // Exact, rounded up: a positive share of a positive timeout is never "no budget".
    __extension__ typedef unsigned __int128 wide;
    const wide ns = (static_cast<wide>(o.timeout.count()) *
                         static_cast<wide>(o.limits.cpu_millicores) +
                     999) /
                    1000;
    constexpr auto max = std::numeric_limits<std::chrono::nanoseconds::rep>::max();
    if (ns >= static_cast<wide>(max))
        return std::chrono::nanoseconds(max);
    return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(ns));
}

} // namespace sandbox
