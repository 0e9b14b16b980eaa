// lib/sampler/budget.cpp: cap decisions and cpu accounting (pure logic).
#include "sampler/budget.hpp"

#include <algorithm>
#include <unordered_set>

namespace sandbox::detail {

cap_decision cap_budget::on_sample(const tree_usage& u) noexcept
{
    failures_ = 0;
    peak_rss_ = std::max(peak_rss_, u.rss_bytes);
    peak_procs_ = std::max(peak_procs_, u.processes);
    cpu_ = std::max(cpu_, u.cpu);
    cap_decision d;
    if (limits_.memory_bytes > 0 && u.rss_bytes >= limits_.memory_bytes)
    {
        d.action = cap_action::kill_budget;
        d.which = budget_kind::memory;
        d.observed = static_cast<std::int64_t>(u.rss_bytes);
        d.configured = static_cast<std::int64_t>(limits_.memory_bytes);
    }
    else if (limits_.cpu.count() > 0 && u.cpu >= limits_.cpu)
    {
        d.action = cap_action::kill_budget;
        d.which = budget_kind::cpu;
        d.observed = u.cpu.count();
        d.configured = limits_.cpu.count();
    }
    else if (limits_.max_processes > 0 && u.processes > limits_.max_processes)
    {
        d.action = cap_action::kill_budget;
        d.which = budget_kind::processes;
        d.observed = static_cast<std::int64_t>(u.processes);
        d.configured = static_cast<std::int64_t>(limits_.max_processes);
    }
    return d;
}

cap_decision cap_budget::on_failure() noexcept
{
    cap_decision d;
    if (++failures_ >= max_failures_)
    {
        d.action = cap_action::kill_unenforceable;
        d.observed = failures_;
        d.configured = max_failures_;
    }
    return d;
}

std::chrono::nanoseconds cpu_ledger::update(std::span<const member> live)
{
    std::unordered_set<pid_t> alive;
    alive.reserve(live.size());
    std::chrono::nanoseconds sum{0};
    for (const auto& m : live)
    {
        alive.insert(m.pid);
        sum += m.time;
    }
    for (const auto& [pid, m] : last_)
        if (!alive.count(pid) && !alive.count(m.ppid))
            departed_ += m.time;
    last_.clear();
    for (const auto& m : live)
        last_[m.pid] = m;
    total_ = std::max(total_, departed_ + sum);
    return total_;
}

} // namespace sandbox::detail
