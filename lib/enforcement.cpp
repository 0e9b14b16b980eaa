// lib/enforcement.cpp: enforcement_of and the JSON form of a report.
#include <sandbox/enforcement.hpp>
#include <sandbox/runner.hpp>

#include <boost/json.hpp>

namespace sandbox {

enforcement_report enforcement_of(const runner* r)
{
    return r ? r->enforcement() : enforcement_report{};
}

std::string to_json(const enforcement_report& e)
{
    boost::json::array modes;
    for (auto m : e.net_modes)
        modes.emplace_back(to_string(m));
    boost::json::object o{
        {"env_allow_list", e.env_allow_list},
        {"net_modes", std::move(modes)},
        {"socks5", e.socks5},
        {"mitm", e.mitm},
        {"unix_socket_policy", e.unix_socket_policy},
        {"memory_cap", e.memory_cap},
        {"cpu_cap", e.cpu_cap},
        {"process_cap", e.process_cap},
        {"task_cap", e.task_cap},
        {"disk_cap", e.disk_cap},
        {"filesystem_bounds", e.filesystem_bounds},
        {"tree_kill", e.tree_kill},
    };
    auto by = [&o](const char* key, const std::string& v) {
        if (!v.empty())
            o[key] = v;
    };
    by("memory_cap_by", e.memory_cap_by);
    by("cpu_cap_by", e.cpu_cap_by);
    by("process_cap_by", e.process_cap_by);
    by("task_cap_by", e.task_cap_by);
    by("tree_kill_by", e.tree_kill_by);
    by("cgroup", e.cgroup);
    if (!e.cgroup_notes.empty())
    {
        boost::json::array notes;
        for (const auto& n : e.cgroup_notes)
            notes.emplace_back(n);
        o["cgroup_notes"] = std::move(notes);
    }
    if (e.command_uid)
        o["command_uid"] = *e.command_uid;
    if (e.command_gid)
        o["command_gid"] = *e.command_gid;
    if (!e.unwritable_paths.empty())
    {
        boost::json::array paths;
        for (const auto& p : e.unwritable_paths)
            paths.emplace_back(p);
        o["unwritable_paths"] = std::move(paths);
    }
    if (!e.unavailable.empty())
        o["unavailable"] = e.unavailable;
    return boost::json::serialize(o);
}

} // namespace sandbox
