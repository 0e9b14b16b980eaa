// lib/sampler/sampler_service.cpp: the shared /proc sampler. Per tick it reads, for each due
// tree, /proc/<pid>/stat and the children list of every known member (about 10 us each) and
// once a second a full /proc scan that catches members orphaned between ticks.
#include "sampler/sampler_service.hpp"
#include "process/proc.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <deque>
#include <unordered_set>

namespace sandbox::detail {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {
constexpr auto full_scan_interval = std::chrono::seconds(1);
// Upper bound of members walked per sample: a fork bomb must not make one tick unbounded.
constexpr std::size_t max_walk = 8192;
// Members whose /proc files stay open between ticks (two descriptors each): the leader and a
// few more, so that a capped tree never holds more than 8 descriptors of the host process.
constexpr std::size_t max_cached_members = 4;

// Due times sit on a grid of the interval, so trees with the same interval share ticks
// (one wake-up per interval, not one per tree).
clock::time_point on_grid(clock::time_point t, std::chrono::nanoseconds interval)
{
    auto n = t.time_since_epoch().count();
    auto i = interval.count();
    return clock::time_point(clock::duration((n + i - 1) / i * i));
}
// Trees due this close after a tick are sampled in it.
constexpr auto tick_slack = std::chrono::milliseconds(2);
} // namespace

tree_watch::tree_watch(pid_t leader, cap_limits limits, std::chrono::nanoseconds interval,
                       std::shared_ptr<kill_arbiter> arbiter)
    : leader_(leader), budget_(limits), arbiter_(std::move(arbiter)), interval_(interval),
      next_due_(on_grid(clock::now() + interval, interval))
{
}

void tree_watch::stop()
{
    std::lock_guard l(mu_);
    stopped_ = true;
}

cap_decision tree_watch::decision() const
{
    std::lock_guard l(mu_);
    return decision_;
}

std::uint64_t tree_watch::peak_rss_bytes() const
{
    std::lock_guard l(mu_);
    return budget_.peak_rss_bytes();
}

std::chrono::nanoseconds tree_watch::cpu_used() const
{
    std::lock_guard l(mu_);
    return budget_.cpu_used();
}

std::vector<known_process> tree_watch::members() const
{
    std::lock_guard l(mu_);
    return members_locked();
}

std::vector<known_process> tree_watch::members_locked() const
{
    std::vector<known_process> v;
    v.reserve(members_.size());
    for (const auto& [pid, m] : members_)
        v.push_back({pid, m.starttime});
    return v;
}

std::string tree_watch::last_failure() const
{
    std::lock_guard l(mu_);
    return last_failure_;
}

asio::execution_context::id sampler_service::id;

sampler_service::sampler_service(asio::execution_context& ctx)
    : asio::execution_context::service(ctx)
{
}

sampler_service::~sampler_service() = default;

void sampler_service::shutdown()
{
    std::lock_guard l(mu_);
    shut_down_ = true;
    watches_.clear();
    // Drop the timer and the strand now: services created after this one (the strand
    // service) are destroyed before it, so holding them until our destructor would dangle.
    timer_.reset();
    strand_.reset();
}

std::shared_ptr<tree_watch> sampler_service::watch(const asio::any_io_executor& ex, pid_t leader,
                                                   cap_limits limits,
                                                   std::chrono::nanoseconds interval,
                                                   std::shared_ptr<kill_arbiter> arbiter)
{
    if (interval <= std::chrono::nanoseconds(0))
        interval = default_sample_interval;
    auto w = std::make_shared<tree_watch>(leader, limits, interval, std::move(arbiter));
    std::lock_guard l(mu_);
    if (shut_down_)
        return w;
    if (!strand_)
    {
        strand_.emplace(asio::make_strand(ex));
        timer_.emplace(*strand_);
    }
    watches_.push_back(w);
    auto due = w->next_due_;
    if (!armed_for_ || *armed_for_ > due)
        asio::post(*strand_, [this, due] {
            std::lock_guard l2(mu_);
            if (!shut_down_)
                arm_locked(due);
        });
    return w;
}

void sampler_service::arm_locked(clock::time_point when)
{
    if (armed_for_ && *armed_for_ <= when)
        return;
    armed_for_ = when;
    timer_->expires_at(when);
    timer_->async_wait([this](boost::system::error_code ec) {
        if (!ec)
            on_tick();
    });
}

sampler_stats sampler_service::stats() const
{
    sampler_stats s;
    {
        std::lock_guard l(mu_);
        s.watched_trees = watches_.size();
    }
    s.ticks = ticks_.load();
    s.samples = samples_.load();
    s.failed_samples = failed_.load();
    s.budget_kills = budget_kills_.load();
    s.unenforceable_kills = unenforceable_kills_.load();
    return s;
}

void sampler_service::set_fault_injector(std::function<bool(pid_t)> f)
{
    std::lock_guard l(mu_);
    fault_ = std::move(f);
}

bool sampler_service::sample(tree_watch& w,
                             const std::unordered_map<pid_t, std::vector<pid_t>>* by_group,
                             const std::function<bool(pid_t)>& fault, tree_usage& u, int& err)
{
    if (fault && fault(w.leader_))
    {
        err = EIO;
        return false;
    }
    const auto page = static_cast<std::uint64_t>(page_size_bytes());
    const auto tick_ns = 1'000'000'000LL / clock_ticks_per_second();
    std::vector<pid_t> queue;
    queue.reserve(w.members_.size() + 8);
    queue.push_back(w.leader_);
    for (const auto& [pid, m] : w.members_)
        if (pid != w.leader_)
            queue.push_back(pid);
    if (by_group)
        if (auto it = by_group->find(w.leader_); it != by_group->end())
            queue.insert(queue.end(), it->second.begin(), it->second.end());

    std::unordered_map<pid_t, tree_watch::member_rec> seen;
    std::vector<cpu_ledger::member> live;
    for (std::size_t i = 0; i < queue.size() && seen.size() < max_walk; ++i)
    {
        pid_t pid = queue[i];
        if (seen.count(pid))
            continue;
        tree_watch::member_rec rec;
        auto old = w.members_.find(pid);
        if (old != w.members_.end())
            rec = std::move(old->second);
        else if (seen.size() < max_cached_members)
            rec.stat_fd.reset(open_proc_stat(pid));
        int e = 0;
        std::optional<proc_stat> st =
            rec.stat_fd ? read_proc_stat_at(rec.stat_fd.get(), e) : read_proc_stat(pid, e);
        if (!st)
        {
            if (pid == w.leader_)
            {
                err = e;
                return false;
            }
            continue; // gone (a cached descriptor never reads a reused pid)
        }
        if (pid != w.leader_ && old != w.members_.end() && rec.starttime != st->starttime)
            continue; // the pid was reused by an unrelated process
        rec.starttime = st->starttime;
        rec.ppid = st->ppid;
        u.rss_bytes += st->rss_pages * page;
        ++u.processes;
        live.push_back(
            {pid, st->ppid,
             std::chrono::nanoseconds(static_cast<std::int64_t>(st->cpu_ticks()) * tick_ns)});
        if (st->state != 'Z')
        {
            if (st->num_threads <= 1 && !rec.children_fd && rec.stat_fd)
                rec.children_fd.reset(open_proc_children(pid));
            if (st->num_threads > 1 || !rec.children_fd ||
                !read_children_at(rec.children_fd.get(), queue))
                read_children(pid, st->num_threads, queue);
        }
        seen.emplace(pid, std::move(rec));
    }
    w.members_ = std::move(seen);
    u.cpu = w.ledger_.update(live);
    return true;
}

void sampler_service::on_tick()
{
    ++ticks_;
    auto now = clock::now();
    std::vector<std::shared_ptr<tree_watch>> snapshot;
    std::function<bool(pid_t)> fault;
    {
        std::lock_guard l(mu_);
        armed_for_.reset();
        snapshot = watches_;
        fault = fault_;
    }
    std::unordered_map<pid_t, std::vector<pid_t>> by_group;
    bool scanned = false;
    if (now >= next_full_scan_)
    {
        std::unordered_set<pid_t> leaders;
        for (const auto& w : snapshot)
            leaders.insert(w->leader_);
        std::vector<proc_stat> all;
        scan_all(all);
        for (const auto& st : all)
            if (st.pid != st.pgrp && leaders.count(st.pgrp))
                by_group[st.pgrp].push_back(st.pid);
        next_full_scan_ = now + full_scan_interval;
        scanned = true;
    }
    for (const auto& wp : snapshot)
    {
        tree_watch& w = *wp;
        std::lock_guard wl(w.mu_);
        if (w.stopped_ || w.done_ || w.next_due_ > now + tick_slack)
            continue;
        tree_usage u;
        int err = 0;
        bool ok = sample(w, scanned ? &by_group : nullptr, fault, u, err);
        ++samples_;
        cap_decision d;
        if (ok)
            d = w.budget_.on_sample(u);
        else
        {
            ++failed_;
            w.last_failure_ = std::strerror(err);
            d = w.budget_.on_failure();
        }
        if (d.action != cap_action::keep_going)
        {
            auto reason = d.action == cap_action::kill_budget ? end_reason::budget
                                                              : end_reason::unenforceable;
            if (w.arbiter_->claim(reason))
            {
                signal_tree(w.leader_, w.leader_, w.members_locked(), SIGKILL, true);
                w.decision_ = d;
                ++(reason == end_reason::budget ? budget_kills_ : unenforceable_kills_);
            }
            w.done_ = true;
            continue;
        }
        w.next_due_ += w.interval_;
        if (w.next_due_ <= now)
            w.next_due_ = on_grid(now + w.interval_, w.interval_);
    }
    std::lock_guard l(mu_);
    std::erase_if(watches_, [](const std::shared_ptr<tree_watch>& w) {
        std::lock_guard wl(w->mu_);
        return w->stopped_ || w->done_;
    });
    if (shut_down_ || watches_.empty())
        return;
    auto earliest = clock::time_point::max();
    for (const auto& w : watches_)
    {
        std::lock_guard wl(w->mu_);
        earliest = std::min(earliest, w->next_due_);
    }
    arm_locked(earliest);
}

} // namespace sandbox::detail

namespace sandbox {

bool sampler_usable() noexcept
{
    int err = 0;
    return detail::read_proc_stat(::getpid(), err).has_value();
}

sampler_stats get_sampler_stats(const boost::asio::any_io_executor& ex)
{
    auto& ctx = boost::asio::query(ex, boost::asio::execution::context);
    if (!boost::asio::has_service<detail::sampler_service>(ctx))
        return {};
    return boost::asio::use_service<detail::sampler_service>(ctx).stats();
}

} // namespace sandbox
