// helper/budget.cpp: cap decisions and cpu accounting (pure logic).
#include "helper/budget.hpp"

#include <algorithm>
#include <unordered_set>

namespace sandbox::detail {

cap_decision cap_budget::on_sample(const tree_usage& u) noexcept
{
    failures_ = 0;
    last_footprint_ = u.footprint_bytes;
    last_tasks_ = std::max<std::uint64_t>(u.tasks, 1);
    peak_footprint_ = std::max(peak_footprint_, u.footprint_bytes);
    peak_procs_ = std::max(peak_procs_, u.processes);
    cpu_ = std::max(cpu_, u.cpu);
    auto ratio = [](double used, double cap) { return cap > 0 ? used / cap : 0.0; };
    pressure_ = std::max({ratio(static_cast<double>(u.footprint_bytes),
                                static_cast<double>(limits_.memory_bytes)),
                          ratio(static_cast<double>(cpu_.count()),
                                static_cast<double>(limits_.cpu.count())),
                          ratio(static_cast<double>(u.processes),
                                static_cast<double>(limits_.max_processes)),
                          ratio(static_cast<double>(u.tasks),
                                static_cast<double>(limits_.max_tasks))});
    cap_decision d;
    if (limits_.memory_bytes > 0 && u.footprint_bytes >= limits_.memory_bytes)
    {
        d.action = cap_action::kill_budget;
        d.which = budget_kind::memory;
        d.observed = static_cast<std::int64_t>(u.footprint_bytes);
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
    else if (limits_.max_tasks > 0 && u.tasks > limits_.max_tasks)
    {
        d.action = cap_action::kill_budget;
        d.which = budget_kind::tasks;
        d.observed = static_cast<std::int64_t>(u.tasks);
        d.configured = static_cast<std::int64_t>(limits_.max_tasks);
    }
    return d;
}

std::chrono::nanoseconds cap_budget::memory_reach_time(unsigned parallel) const noexcept
{
    if (limits_.memory_bytes == 0)
        return std::chrono::nanoseconds::max();
    const double bound = memory_overshoot_bound * static_cast<double>(limits_.memory_bytes);
    const double room = std::max(0.0, bound - static_cast<double>(last_footprint_));
    const double seconds = room / (fault_bytes_per_second * std::max(parallel, 1u));
    return std::chrono::nanoseconds(static_cast<std::int64_t>(std::min(seconds, 3600.0) * 1e9));
}

std::chrono::nanoseconds cap_budget::cpu_reach_time(unsigned parallel) const noexcept
{
    if (limits_.cpu.count() <= 0)
        return std::chrono::nanoseconds::max();
    const auto room = std::max(limits_.cpu - cpu_, std::chrono::nanoseconds(0));
    return room / static_cast<std::int64_t>(std::max(parallel, 1u));
}

bool sample_pacer::idle_since_last(const tree_usage& u, time_point now) const noexcept
{
    if (!previous_)
        return false;
    const auto& [before, at] = *previous_;
    constexpr std::uint64_t mib = 1 << 20;
    const auto footprint_moved = u.footprint_bytes > before.footprint_bytes ? u.footprint_bytes - before.footprint_bytes
                                                          : before.footprint_bytes - u.footprint_bytes;
    return u.processes == before.processes && u.tasks == before.tasks && footprint_moved <= mib &&
           (u.cpu - before.cpu) * 100 <= now - at;
}

std::chrono::nanoseconds sample_pacer::pace(bool idle, const pace_input& in) noexcept
{
    auto next = last_ * 2;
    if (in.pressure >= 0.8)
        next = floor();
    else if (in.pressure >= 0.5)
        next = std::min(next, interval_ / 4);
    else if (idle && may_idle_)
    {
        next = std::min(next, interval_ * idle_interval_factor);
        if (next > interval_) // waiting longer than the interval only where nothing can pass
            next = std::max(interval_, std::min(next, in.time_to_bound_all_cpus));
    }
    else
        next = std::min(next, interval_);
    last_ = std::max({floor(), in.took, std::min(next, in.time_to_bound)});
    return last_;
}

std::chrono::nanoseconds sample_pacer::after_sample(const tree_usage& u, time_point now,
                                                    const pace_input& in) noexcept
{
    const bool idle = idle_since_last(u, now);
    previous_.emplace(u, now);
    return pace(idle, in);
}

std::chrono::nanoseconds sample_pacer::after_failure(const pace_input& in) noexcept
{
    previous_.reset();
    return pace(false, in);
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

std::chrono::nanoseconds cpu_ledger::update(std::span<const member> live,
                                            const std::function<bool(pid_t, std::uint64_t)>& ended,
                                            const std::function<bool(pid_t)>& reaped_by_us)
{
    by_pid now;
    now.reserve(live.size());
    for (const auto& m : live)
        now[m.pid] = m;
    const used_by_parent departed = departed_since(now, ended, reaped_by_us);
    match_orphans(now, departed);
    last_ = std::move(now);
    return lost_;
}

// What the members that ended since the last sample had used, by parent. Members this
// listing missed although they live on keep their last record (added to `now`); their
// children time is unknown until they are seen again. A member whose parent the listing
// missed is judged at a later sample, against that parent's children time then.
cpu_ledger::used_by_parent
cpu_ledger::departed_since(by_pid& now, const std::function<bool(pid_t, std::uint64_t)>& ended,
                           const std::function<bool(pid_t)>& reaped_by_us)
{
    std::unordered_set<pid_t> unseen_alive;
    std::vector<const member*> gone;
    for (const auto& [pid, m] : last_)
    {
        auto it = now.find(pid);
        if (it != now.end() && it->second.starttime == m.starttime)
            continue;
        if (it == now.end() && !ended(pid, m.starttime))
            unseen_alive.insert(pid);
        else
            gone.push_back(&m);
    }
    for (pid_t pid : unseen_alive)
        now[pid] = last_.at(pid);
    used_by_parent departed;
    for (const member* m : gone)
    {
        if (reaped_by_us && reaped_by_us(m->pid))
            continue; // it outlived its parent and fell to us: in our own children time
        if (unseen_alive.count(m->ppid) != 0)
        {
            carried_[m->pid] = *m;
            continue;
        }
        departed[m->ppid] += m->own + m->reaped;
    }
    for (auto it = carried_.begin(); it != carried_.end();)
    {
        if (unseen_alive.count(it->second.ppid) != 0)
        {
            ++it;
            continue;
        }
        departed[it->second.ppid] += it->second.own + it->second.reaped;
        it = carried_.erase(it);
    }
    return departed;
}

// Only a parent seen ignoring SIGCHLD can have lost a child (see the class comment). Seen
// now and before, the same process: what its children time grew by was waited for. Ended
// since, ignoring SIGCHLD when last seen: its children that ended with it were reaped by the
// kernel, unless they outlived it: then they fell to us (left out of `departed`) or to a
// member that reaps orphans (a subreaper, a pid namespace's init), whose children time grew
// by more than its own children that ended explain. That growth is taken off.
void cpu_ledger::match_orphans(const by_pid& now, const used_by_parent& departed)
{
    using ns = std::chrono::nanoseconds;
    ns orphaned{0}, unexplained{0};
    for (const auto& [pid, is] : now)
    {
        auto was = last_.find(pid);
        if (was == last_.end() || was->second.starttime != is.starttime)
            continue;
        const ns growth = std::max(is.reaped - was->second.reaped, ns{0});
        auto d = departed.find(pid);
        const ns used = d == departed.end() ? ns{0} : d->second;
        unexplained += std::max(growth - used, ns{0});
        // Lost, unless the parent has ended (a zombie still listed) and they fell to a
        // reaper, whose growth then explains them: matched like the orphans below.
        if (used > growth && (was->second.kernel_reaps || is.kernel_reaps))
            orphaned += used - growth;
    }
    for (const auto& [parent, used] : departed)
    {
        auto was = last_.find(parent);
        if (was == last_.end())
            continue; // not a member (the subreaper itself)
        auto is = now.find(parent);
        if ((is == now.end() || was->second.starttime != is->second.starttime) &&
            was->second.kernel_reaps)
            orphaned += used;
    }
    settle_orphans(orphaned, unexplained);
}

// Each member last seen brings its own time and its children time so far into some reaper's
// children time, and so, the tree being reaped, into ours: less what its parent let the
// kernel reap (a member whose parent ignored SIGCHLD), which is orphaned. What `grown` holds
// beyond that was used after the listing, by the members or by orphans a member reaped.
std::chrono::nanoseconds cpu_ledger::finish(std::chrono::nanoseconds grown)
{
    using ns = std::chrono::nanoseconds;
    ns orphaned{0}, expected{0};
    auto judge = [&](const member& m) {
        auto parent = last_.find(m.ppid);
        const bool kernel_reaped = parent != last_.end() && parent->second.kernel_reaps;
        (kernel_reaped ? orphaned : expected) += m.own + m.reaped;
    };
    for (const auto& [pid, m] : last_)
        judge(m);
    for (const auto& [pid, m] : carried_)
        judge(m);
    settle_orphans(orphaned, std::max(grown - expected, ns{0}));
    last_.clear();
    carried_.clear();
    debts_.clear();
    credit_ = ns{0};
    return lost_;
}

void cpu_ledger::settle_orphans(std::chrono::nanoseconds orphaned,
                                std::chrono::nanoseconds unexplained)
{
    // A listing is not an instant: the reaper's record may be read before it waits for an
    // orphan that is already gone from the listing (the growth shows one sample late), or
    // after it waited for one the listing still showed alive (the growth shows one sample
    // early). So what is left unmatched on either side is kept for one more sample.
    // The reaper of an orphan may also wait for it several samples later (it runs when it is
    // scheduled), so what was counted lost is repaid for `orphan_debt_samples` samples.
    using ns = std::chrono::nanoseconds;
    for (auto& [owed, left] : debts_)
    {
        const ns repaid = std::min(owed, unexplained);
        owed -= repaid;
        lost_ -= repaid;
        unexplained -= repaid;
        --left;
    }
    std::erase_if(debts_, [](const auto& d) { return d.first <= ns{0} || d.second <= 0; });
    orphaned -= std::min(std::exchange(credit_, ns{0}), orphaned);
    const ns matched = std::min(orphaned, unexplained);
    if (orphaned > matched)
        debts_.emplace_back(orphaned - matched, orphan_debt_samples);
    credit_ = unexplained - matched;
    lost_ += orphaned - matched;
}

std::optional<process_gate::time_point> process_gate::list_after(pid_t tid, time_point now)
{
    std::erase_if(in_flight_, [&](const auto& f) {
        return (tid > 0 && f.first == tid) || f.second + settle_ <= now;
    });
    if (in_flight_.empty())
        return std::nullopt;
    return std::max_element(in_flight_.begin(), in_flight_.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
               ->second +
           settle_;
}

bool process_gate::admit(pid_t tid, time_point now)
{
    if (at_cap())
        return false;
    ++admitted_;
    in_flight_.emplace_back(tid, now);
    return true;
}

} // namespace sandbox::detail
