// lib/policy/merge.cpp: merge_defaults, the stricter-of-both rule (pure logic).
#include <sandbox/policy/decorators.hpp>

#include <algorithm>

namespace sandbox {

namespace {

// The smaller of two "0 = unset" values; 0 only when neither is set.
template <class T>
T stricter(T caller, T deflt)
{
    const T zero{};
    if (caller == zero)
        return deflt;
    if (deflt == zero)
        return caller;
    return std::min(caller, deflt);
}

std::optional<std::vector<std::string>> merge_allow(
    const std::optional<std::vector<std::string>>& caller,
    const std::optional<std::vector<std::string>>& deflt)
{
    if (!caller)
        return deflt;
    if (!deflt)
        return caller;
    std::vector<std::string> both;
    for (const auto& name : *caller)
        if (std::find(deflt->begin(), deflt->end(), name) != deflt->end())
            both.push_back(name);
    return both;
}

resource_limits merge_limits(const resource_limits& c, const resource_limits& d)
{
    resource_limits m;
    m.memory_bytes = stricter(c.memory_bytes, d.memory_bytes);
    m.cpu_millicores = stricter(c.cpu_millicores, d.cpu_millicores);
    m.disk_bytes = stricter(c.disk_bytes, d.disk_bytes);
    m.max_output_bytes = stricter(c.max_output_bytes, d.max_output_bytes);
    m.max_processes = stricter(c.max_processes, d.max_processes);
    m.max_tasks = stricter(c.max_tasks, d.max_tasks);
    return m;
}

} // namespace

exec_options merge_defaults(const exec_options& caller, const exec_options& defaults)
{
    exec_options m;
    m.work_dir = caller.work_dir.empty() ? defaults.work_dir : caller.work_dir;
    m.input = caller.input ? caller.input : defaults.input;
    m.timeout = stricter(caller.timeout, defaults.timeout);
    m.kill_grace = stricter(caller.kill_grace, defaults.kill_grace);
    m.env.allow = merge_allow(caller.env.allow, defaults.env.allow);
    m.env.inject = defaults.env.inject;
    for (const auto& [name, value] : caller.env.inject)
        m.env.inject[name] = value;
    const bool caller_net = caller.net.mode == net_mode::deny_all ||
                            defaults.net.mode == net_mode::inherit;
    m.net = caller_net ? caller.net : defaults.net;
    m.limits = merge_limits(caller.limits, defaults.limits);
    return m;
}

} // namespace sandbox
