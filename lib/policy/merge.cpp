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

// The stricter of two server-name checks: deny, then record, then off.
sni_mode stricter_sni(sni_mode a, sni_mode b)
{
    const auto rank = [](sni_mode m) { return m == sni_mode::deny ? 2 : m == sni_mode::record; };
    return rank(a) >= rank(b) ? a : b;
}

// The caller's policy when it denies all or the defaults say nothing; else the defaults',
// with the stricter server-name check of both. A caller's deny_all keeps only the unix
// sockets the defaults also grant: deny_all with a socket list is still a way out.
net_policy merge_net(net_policy caller, const net_policy& d)
{
    if (d.mode == net_mode::inherit)
        return caller;
    if (caller.mode != net_mode::deny_all)
    {
        net_policy m = d;
        if (caller.mode != net_mode::inherit)
            m.sni_check = stricter_sni(caller.sni_check, d.sni_check);
        return m;
    }
    std::vector<std::string> both;
    for (auto& sock : caller.unix_sockets)
        if (std::find(d.unix_sockets.begin(), d.unix_sockets.end(), sock) != d.unix_sockets.end())
            both.push_back(std::move(sock));
    caller.unix_sockets = std::move(both);
    return caller;
}

} // namespace

exec_options merge_defaults(exec_options caller, const exec_options& defaults)
{
    exec_options m;
    m.work_dir = caller.work_dir.empty() ? defaults.work_dir : std::move(caller.work_dir);
    m.input = caller.input ? std::move(caller.input) : defaults.input;
    m.timeout = stricter(caller.timeout, defaults.timeout);
    // 0 is "SIGKILL at once", the strictest: a caller's 0 stands; the defaults' 0 says nothing.
    m.kill_grace = defaults.kill_grace > std::chrono::nanoseconds::zero()
                       ? std::min(caller.kill_grace, defaults.kill_grace)
                       : caller.kill_grace;
    m.env.allow = merge_allow(caller.env.allow, defaults.env.allow);
    m.env.inject = defaults.env.inject;
    for (auto& [name, value] : caller.env.inject)
        m.env.inject[name] = std::move(value);
    m.net = merge_net(std::move(caller.net), defaults.net);
    m.limits = merge_limits(caller.limits, defaults.limits);
    return m;
}

} // namespace sandbox
