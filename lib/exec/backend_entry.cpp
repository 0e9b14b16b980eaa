// lib/exec/backend_entry.cpp: what sandbox/backend/supervise.hpp offers a backend around the
// exec core: the request's pass-through into a plan, the supervised enforcement facts, and
// exec_plan (a plan run to its outcome: a refusal or a failed run is a value).
#include <sandbox/backend/request.hpp>
#include <sandbox/backend/supervise.hpp>
#include <sandbox/error.hpp>

#include "kernel/cgroup_site.hpp"
#include "supervisor/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandbox::backend {

namespace asio = boost::asio;

void take_pass_through(exec_request& req, std::int64_t default_max_output_bytes,
                       std::string backend_name, spawn_plan& plan)
{
    const exec_options& o = req.options;
    plan.input = o.input;
    plan.stdin_fd = std::move(req.stdin_fd);
    plan.on_output = std::move(req.on_output);
    plan.on_output_async = std::move(req.on_output_async);
    plan.tty = req.tty;
    plan.max_output_bytes = output_cap(o, default_max_output_bytes);
    plan.timeout = o.timeout;
    plan.kill_grace = o.kill_grace;
    plan.caps = caps_of(o);
    plan.backend_name = std::move(backend_name);
}

enforcement_report supervised_enforcement(const std::string& cgroup)
{
    enforcement_report e = supervised_enforcement();
    e.tree_kill_by = "subreaper";
    e.cpu_cap_by = e.cpu_cap ? "sampler" : "";
    e.memory_cap_by = e.memory_cap ? "sampler" : "";
    e.task_cap_by = e.task_cap ? "sampler" : "";
    e.process_cap_by = e.process_cap ? "fork_gate" : "";
    if (cgroup.empty() || cgroup == "off")
    {
        e.cgroup_notes.push_back("off: this runner's cgroup setting");
        return e;
    }
    const auto site = detail::find_cgroup_site(cgroup);
    if (!site.why_not.empty())
    {
        e.cgroup_notes.push_back(site.why_not);
        if (cgroup != "auto") // an explicit directory that cannot be used refuses every exec
            return enforcement_report{.unavailable = "cgroup " + cgroup + ": " + site.why_not};
        return e;
    }
    // cpu.stat and cgroup.kill need no controller; memory.max and pids.max do.
    e.cgroup = site.parent;
    e.tree_kill_by = "cgroup";
    e.cpu_cap = true;
    e.cpu_cap_by = "cgroup";
    const struct
    {
        unsigned controller;
        bool& cap;
        std::string& by;
        const char* note; // when the controller is not delegated
    } held[] = {{detail::cgc_memory, e.memory_cap, e.memory_cap_by, "memory cap: the memory"},
                {detail::cgc_pids, e.task_cap, e.task_cap_by, "task cap: the pids"}};
    for (const auto& h : held)
        if (site.controllers & h.controller)
            h.cap = true, h.by = "cgroup";
        else
            e.cgroup_notes.push_back(std::string(h.note) + " controller is not enabled for the " +
                                     "children of " + site.parent + " (sampled instead)");
    e.cgroup_notes.push_back("process cap: held by the fork gate (the pids controller "
                             "counts threads too)");
    if (!site.has_kill)
        e.cgroup_notes.push_back("no cgroup.kill (Linux 5.14): the tree is frozen, killed "
                                 "and thawed");
    return e;
}

enforcement_report supervised_enforcement()
{
    enforcement_report e;
    e.env_allow_list = true;
    const bool s = sampler_usable();
    e.memory_cap = s;
    e.cpu_cap = s;
    e.process_cap = s && fork_gate_usable();
    e.task_cap = s;
    e.tree_kill = true;
    return e;
}

outcome<spawn_plan> with_backend_name(outcome<spawn_plan> plan, const char* backend)
{
    if (plan)
        return plan;
    failure f = plan.error();
    f.diag.backend = backend;
    return f;
}

asio::awaitable<exec_outcome> exec_plan(asio::any_io_executor ex, outcome<spawn_plan> plan,
                                        std::string backend)
{
    plan = with_backend_name(std::move(plan), backend.c_str());
    if (!plan)
    {
        failure f = std::move(plan).error();
        co_return not_run(f.code, std::move(f.diag));
    }
    auto [ec, r] = co_await async_supervise(std::move(ex), std::move(*plan),
                                            asio::as_tuple(asio::use_awaitable));
    co_return exec_outcome{ec, std::move(r)};
}

} // namespace sandbox::backend
