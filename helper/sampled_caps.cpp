// helper/sampled_caps.cpp: the sampler and the fork gate of one execution (see
// sampled_caps.hpp). Coroutines on the worker's loop; each holds the enforcer (`self`) and
// checks the run's phase before each step: the sampler runs while nothing stopped the tree
// yet, the gate answers forks until the run is reported. Only the memory cap's PSS reads
// run on a thread of their own (pss_reader.hpp).
#include "helper/sampled_caps.hpp"

#include "helper/fork_filter.hpp"
#include "helper/fork_gate.hpp"
#include "helper/pss_reader.hpp"
#include "helper/subtree.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

namespace asio = boost::asio;
using proto::end_reason;
using std::chrono::nanoseconds;
using awaitable = asio::awaitable<void>;
using event_kind = worker_event::kind;

// How long a fork the gate let go may take to show in a listing (process_gate).
constexpr nanoseconds fork_settle_time = std::chrono::milliseconds(5);

// The cpus a tree's tasks may run on at once (for pace_of's reach times): all that
// are online, since a member may widen the affinity it inherited.
unsigned online_cpus()
{
    static const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<unsigned>(n) : 1u;
}

nanoseconds tv_ns(const timeval& tv)
{
    return std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
}

nanoseconds ticks_ns(std::uint64_t ticks)
{
    return nanoseconds(static_cast<std::int64_t>(ticks * 1'000'000'000ull /
                                                 static_cast<std::uint64_t>(clock_ticks_per_second())));
}

// One listing summed up: usage, the ledger's view of each member, and whether a live member
// ignores SIGCHLD. The children of such a member end without reaching any rusage, so the
// ledger can only add what they had used when last seen: the tree is sampled as often as can
// be while such a member lives, even with no child (one forked just after a sample and gone
// before the next would never be seen), and those children's time is read in nanoseconds
// (schedstat), not as utime + stime, which are whole clock ticks rounded down separately (up
// to 20 ms short per child).
struct tallied
{
    tree_usage usage;
    std::vector<cpu_ledger::member> seen;
    bool kernel_reaper = false;
};

tallied tally(const std::vector<subtree_member>& members)
{
    tallied t;
    t.seen.reserve(members.size());
    std::vector<pid_t> reapers;
    for (const auto& m : members)
        if (!m.stat.zombie() && m.stat.children_reaped_by_kernel())
            reapers.push_back(m.stat.pid);
    t.kernel_reaper = !reapers.empty();
    for (const auto& m : members)
    {
        const auto& st = m.stat;
        nanoseconds own = ticks_ns(st.utime + st.stime);
        int err = 0;
        if (!st.zombie() && std::find(reapers.begin(), reapers.end(), st.ppid) != reapers.end())
        {
            if (auto ns = read_runtime_ns(st.pid, err)) // a child the kernel will reap
                own = std::max(own, nanoseconds(static_cast<std::int64_t>(*ns)));
        }
        t.seen.push_back({st.pid, st.ppid, st.starttime, own, ticks_ns(st.cutime + st.cstime),
                          !st.zombie() && st.children_reaped_by_kernel()});
        // A process in state X is being reaped right now: a waiting parent may already hold
        // its time in the children time read earlier in this listing. The next sample finds
        // it there (or, for a kernel reaper's child, in the ledger).
        if (st.state != 'X')
            t.usage.cpu += ticks_ns(st.cpu_ticks());
        t.usage.footprint_bytes += st.rss_pages * static_cast<std::uint64_t>(page_size_bytes());
        t.usage.processes += st.live() ? 1 : 0;
        t.usage.tasks += st.live() ? static_cast<std::uint64_t>(st.num_threads) : 0;
    }
    return t;
}

// The tree's RSS sum now: a listing, whose stat reads take no memory-map lock.
std::uint64_t rss_sum_now()
{
    std::vector<subtree_member> members;
    list_subtree(members);
    std::uint64_t sum = 0;
    for (const auto& m : members)
        sum += m.stat.rss_pages * static_cast<std::uint64_t>(page_size_bytes());
    return sum;
}

// True unless `pid` is still the process that started at `starttime` (zombies included: their
// time is still to be counted by whoever reaps them).
bool member_ended(pid_t pid, std::uint64_t starttime)
{
    int err = 0;
    auto st = read_proc_stat(pid, err);
    return !st || st->starttime != starttime;
}

// The live members of a listing (proc_stat::live).
std::uint64_t live_count(const std::vector<subtree_member>& members)
{
    return static_cast<std::uint64_t>(std::count_if(
        members.begin(), members.end(), [](const auto& m) { return m.stat.live(); }));
}

// One sample: the listing and its usage (`ok` false when it failed), the members, and
// whether the memory cap needs their PSS before the usage can be judged.
struct sample
{
    bool ok = false;
    tree_usage usage;
    std::vector<subtree_member> members;
    bool wants_pss = false;
};

class sampled_caps final : public cap_enforcer,
                           public std::enable_shared_from_this<sampled_caps>
{
public:
    sampled_caps(asio::io_context& ctx, sampled_setup s, trip_fn trip)
        : ctx_(ctx), trip_(std::move(trip)), budget_(s.limits), interval_(s.interval),
          children_base_(s.children_base), faults_left_(s.faults), cgroup_(std::move(s.cgroup)),
          list_(s.list ? std::move(s.list) : decltype(s.list)(list_subtree)), sample_timer_(ctx)
    {
        if (s.gate)
            gate_.emplace(ctx, s.gate.release());
        other_calls_ = std::move(s.other_calls);
    }

    void start() override;
    void on_reaped(pid_t p) override
    {
        // (the ledger leaves them out: they are in our RUSAGE_CHILDREN)
        if (budget_.limits().any())
            reaped_since_sample_.insert(p);
    }
    void on_all_reaped() override;
    void stop() override;
    void add_to(cap_report& r) const override;

private:
    using ptr = std::shared_ptr<sampled_caps>;

    // Sampling: list the tree, measure its footprint if it needs it, apply the caps.
    awaitable sample_loop(ptr self);
    sample take_sample();
    sample take_cgroup_sample();
    awaitable judge_footprint(sample& s);
    awaitable measure_pss(sample& s);
    std::optional<tree_usage> apply_caps(const sample& s);
    pace_input pace_of(nanoseconds took) const;
    void note_gap(std::chrono::steady_clock::time_point now) noexcept;

    // The fork gate.
    awaitable gate_loop(ptr self);
    asio::awaitable<bool> count_at_the_cap(pid_t asking, asio::steady_timer& settle);
    void on_fork(int listener, const fork_request& req);
    void gate_broke(const char* what, int err);

    asio::io_context& ctx_;
    trip_fn trip_;
    cap_budget budget_;
    nanoseconds interval_;
    cpu_ledger ledger_;
    nanoseconds children_base_;
    // Our children time (less the base) at the last listing the ledger took.
    nanoseconds reaped_at_listing_{0};
    std::uint64_t samples_ = 0, failed_ = 0;
    // The start of the last sample (of the sampling, before the first), and the longest
    // time from one sample's start to the end of the next: a member's cpu can have grown
    // unseen for that long before it ended (or the tree did).
    std::chrono::steady_clock::time_point last_began_{};
    nanoseconds longest_gap_{0};
    std::uint32_t faults_left_ = 0;
    // Members' children are reaped by the kernel (SIGCHLD ignored): seen from a loss the
    // ledger found (kept), or predicted from a live member that ignores SIGCHLD (per sample).
    bool kernel_reaps_ = false;
    bool kernel_reaper_alive_ = false;
    // The last sampling failure.
    std::string last_failure_;
    // Members the worker reaped since the last sample.
    std::unordered_set<pid_t> reaped_since_sample_;
    // The execution's cgroup (its cpu.stat is the tree's cpu time), if any.
    std::shared_ptr<const exec_cgroup> cgroup_;
    std::function<int(std::vector<subtree_member>&)> list_;
    asio::steady_timer sample_timer_;
    // Measures the footprint once the RSS sum reaches the memory cap.
    std::shared_ptr<pss_reader> pss_;
    // Under a process cap: the fork gate's listener and its decisions (fork_gate.hpp).
    std::optional<asio::posix::stream_descriptor> gate_;
    std::optional<process_gate> forks_;
    std::function<void(const seccomp_notif&)> other_calls_;
};

void sampled_caps::start()
{
    if (gate_)
    {
        forks_.emplace(budget_.limits().max_processes, fork_settle_time);
        forks_->on_listing(1); // the command
        asio::co_spawn(ctx_, gate_loop(shared_from_this()), asio::detached);
    }
    if (budget_.limits().any())
    {
        last_began_ = std::chrono::steady_clock::now();
        asio::co_spawn(ctx_, sample_loop(shared_from_this()), asio::detached);
    }
}

void sampled_caps::note_gap(std::chrono::steady_clock::time_point now) noexcept
{
    if (last_began_ != std::chrono::steady_clock::time_point{})
        longest_gap_ = std::max<nanoseconds>(longest_gap_, now - last_began_);
}

// A reaper that waited for an orphan after the last listing, and ended, shows its growth
// only in ours: the ledger settles that against our children time now (a tree sampled
// through its cgroup has no ledger: cpu.stat holds every member's time).
void sampled_caps::on_all_reaped()
{
    if (!cgroup_)
        ledger_.finish(children_cpu() - children_base_ - reaped_at_listing_);
}

void sampled_caps::stop()
{
    note_gap(std::chrono::steady_clock::now()); // the time since the last sample
    last_began_ = {};
    sample_timer_.cancel();
    if (pss_)
        pss_->cancel(); // a sample waiting for it ends now (the tree is gone)
    boost::system::error_code ignored;
    if (gate_)
        gate_->close(ignored); // the tree is gone: nothing can ask any more
}

void sampled_caps::add_to(cap_report& r) const
{
    r.lost_cpu += ledger_.lost();
    r.cpu = std::max(r.cpu, budget_.cpu_used());
    r.peak_memory_bytes = std::max(r.peak_memory_bytes, budget_.peak_footprint_bytes());
    r.samples += samples_;
    r.failed_samples += failed_;
    r.longest_sample_gap = std::max(r.longest_sample_gap, longest_gap_);
    if (r.last_failure.empty())
        r.last_failure = last_failure_;
}

// What the pacer needs of the last sample (sample_pacer). A memory cap's bound counts the
// tree's own tasks (at most one per cpu) faulting at once, a cpu budget's every cpu; an idle
// tree waits longer only where even every cpu could not pass a bound meanwhile.
pace_input sampled_caps::pace_of(nanoseconds took) const
{
    const auto& b = budget_;
    const unsigned cpus = online_cpus();
    const auto tasks = static_cast<unsigned>(std::min<std::uint64_t>(b.last_tasks(), cpus));
    pace_input in;
    // (as often as can be while a member's children are reaped by the kernel: see tally)
    in.pressure = kernel_reaps_ || kernel_reaper_alive_ ? 1.0 : b.pressure();
    in.time_to_bound = std::min(b.memory_reach_time(tasks), b.cpu_reach_time(cpus));
    in.time_to_bound_all_cpus = std::min(b.memory_reach_time(cpus), b.cpu_reach_time(cpus));
    in.took = took;
    return in;
}

awaitable sampled_caps::sample_loop(ptr /*self*/)
{
    // A young tree is sampled often so that a fork bomb or a fast allocator is caught
    // early, a tree near a cap more often again, an idle one far from its caps less often,
    // and none later than it could pass a cap's bound (sample_pacer, pace_of).
    const auto interval = std::max<nanoseconds>(interval_, std::chrono::milliseconds(1));
    sample_pacer pacer(interval, budget_.limits().max_tasks == 0);
    auto delay = pacer.first();
    while (samples(phase()))
    {
        sample_timer_.expires_after(delay);
        boost::system::error_code ec;
        co_await sample_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !samples(phase()))
            co_return;
        const auto began = std::chrono::steady_clock::now();
        auto taken = take_sample();
        if (taken.wants_pss)
        {
            co_await judge_footprint(taken);
            if (!samples(phase()))
                co_return;
        }
        const auto usage = apply_caps(taken);
        const auto now = std::chrono::steady_clock::now();
        note_gap(now);
        last_began_ = began;
        const auto in = pace_of(now - began);
        delay = usage ? pacer.after_sample(*usage, now, in) : pacer.after_failure(in);
    }
}

// Lists the tree and sums up its usage (the RSS sum as its footprint, for now).
sample sampled_caps::take_sample()
{
    ++samples_;
    sample s;
    if (faults_left_ > 0)
    {
        if (faults_left_ != 0xffffffffu)
            --faults_left_;
        last_failure_ = "injected sampling fault";
        return s;
    }
    if (cgroup_)
        return take_cgroup_sample();
    if (int err = list_(s.members); err != 0)
    {
        last_failure_ = std::string("reading /proc failed: ") + std::strerror(err);
        return s;
    }
    s.ok = true;
    last_failure_.clear();
    // Reaped members are in our RUSAGE_CHILDREN or in a live member's cutime/cstime, so each
    // process's time is counted once; the ledger adds what the kernel reaped.
    const nanoseconds reaped = children_cpu() - children_base_;
    tallied t = tally(s.members);
    s.usage = t.usage;
    s.usage.cpu += reaped;
    kernel_reaper_alive_ = t.kernel_reaper;
    const auto lost_before = ledger_.lost();
    s.usage.cpu += ledger_.update(t.seen, member_ended, [this](pid_t p) {
        return reaped_since_sample_.count(p) != 0;
    });
    reaped_since_sample_.clear();
    reaped_at_listing_ = reaped;
    // Children reaped by the kernel lose what they used after the last sample: while a member
    // ignores SIGCHLD, or once the tree is seen losing time that way, it is sampled as often
    // as can be (pace_of), so each such child loses at most one short interval.
    kernel_reaps_ = kernel_reaps_ || ledger_.lost() > lost_before;
    // RSS counts a page shared by N members N times: an upper bound. Only when it reaches the
    // cap is the real footprint (PSS) read, which walks page tables.
    const auto cap = budget_.limits().memory_bytes;
    s.wants_pss = cap > 0 && s.usage.footprint_bytes >= cap;
    return s;
}

// A sample of a tree in its own cgroup: the cpu time is the cgroup's (every member's,
// however it was reaped: no ledger); the tree is listed only for the caps the cgroup does
// not hold (memory without its controller, processes, tasks).
sample sampled_caps::take_cgroup_sample()
{
    sample s;
    const auto cpu = cgroup_->run_cpu();
    if (!cpu)
    {
        last_failure_ = "reading the cgroup's cpu.stat failed";
        return s;
    }
    const auto& l = budget_.limits();
    if (l.memory_bytes > 0 || l.max_processes > 0 || l.max_tasks > 0)
    {
        if (int err = list_(s.members); err != 0)
        {
            last_failure_ = std::string("reading /proc failed: ") + std::strerror(err);
            return s;
        }
        s.usage = tally(s.members).usage;
    }
    s.ok = true;
    last_failure_.clear();
    s.usage.cpu = *cpu;
    s.wants_pss = l.memory_bytes > 0 && s.usage.footprint_bytes >= l.memory_bytes;
    return s;
}

// The footprint of a tree whose RSS sum reached the memory cap. One member's private memory
// alone at the cap settles it at once: the PSS read walks page tables and waits behind the
// memory-map lock of a tree that is faulting memory in, the very tree to stop soonest.
awaitable sampled_caps::judge_footprint(sample& s)
{
    const auto floor = largest_private_bytes(s.members);
    if (floor >= budget_.limits().memory_bytes)
    {
        s.usage.footprint_bytes = floor;
        co_return;
    }
    co_await measure_pss(s);
}

// The footprint of a tree whose RSS sum reached the memory cap: its PSS, read off the loop.
// A read that fails fails the sample; one that is late leaves the RSS sum to be judged.
awaitable sampled_caps::measure_pss(sample& s)
{
    if (!pss_)
        pss_ = std::make_shared<pss_reader>(ctx_);
    auto reader = pss_;
    const auto rss = s.usage.footprint_bytes;
    const auto cap = budget_.limits().memory_bytes;
    auto out = co_await reader->read(std::move(s.members), pss_limits_for(rss, cap),
                                     [] { return rss_sum_now(); });
    if (!samples(phase()))
        co_return;
    switch (out.what)
    {
    case pss_outcome::kind::done: s.usage.footprint_bytes = out.bytes; break;
    case pss_outcome::kind::failed:
        s.ok = false;
        last_failure_ = out.why;
        break;
    case pss_outcome::kind::late:
        last_failure_ = "judged by the RSS sum: " + out.why;
        break;
    }
}

// Holds the sample to the caps; a cap that trips (or too many failed samples) stops the
// tree. Returns the usage of a good sample.
std::optional<tree_usage> sampled_caps::apply_caps(const sample& s)
{
    cap_decision d = s.ok ? budget_.on_sample(s.usage) : budget_.on_failure();
    if (!s.ok)
        ++failed_;
    if (d.action != cap_action::keep_going)
    {
        const auto why = d.action == cap_action::kill_budget ? end_reason::budget
                                                             : end_reason::unenforceable;
        stop_detail detail;
        detail.decision = d;
        trip_({event_kind::stop, why}, detail);
    }
    return s.ok ? std::optional<tree_usage>(s.usage) : std::nullopt;
}

awaitable sampled_caps::gate_loop(ptr /*self*/)
{
    asio::steady_timer settle(ctx_);
    const int fd = gate_->native_handle();
    while (judges_forks(phase()))
    {
        // Wake-ups are edge-triggered and two forks can come as one: take every request
        // waiting before waiting again. Readable also means the tree is gone (no process
        // uses the filter): then there is nothing to receive (before Linux 6.6 receiving
        // would block for good).
        const auto state = gate_state(fd);
        if (state == gate_listener::tree_gone)
            co_return;
        boost::system::error_code ec;
        if (state == gate_listener::idle)
        {
            co_await gate_->async_wait(asio::posix::stream_descriptor::wait_read,
                                       asio::redirect_error(asio::use_awaitable, ec));
            if (ec)
                co_return;
            continue;
        }
        fork_request req;
        if (int err = receive_fork(fd, req); err == ENOENT || err == EINTR)
            continue; // the task asking was killed meanwhile
        else if (err != 0)
            co_return gate_broke("receiving a fork failed", err);
        if (!is_fork_call(req.call.data.arch, static_cast<std::uint32_t>(req.call.data.nr)))
        {
            if (other_calls_)
                other_calls_(req.call); // answered on a thread of the broker's
            else
                co_return gate_broke("the fork gate received another call", EPROTO);
            continue;
        }
        if (forks_->at_cap() && !co_await count_at_the_cap(req.pid, settle))
            co_return;
        on_fork(fd, req);
    }
}

// A fork at the cap: lists the tree (once the forks of other tasks admitted just now have had
// time to land), and while the fork still does not fit, up to four times more a settle time
// apart (20 ms in all), since a member being killed may still be listed until it gets a cpu.
// The tree waits meanwhile: every fork of it is held until answered. False when the
// execution ended meanwhile.
asio::awaitable<bool> sampled_caps::count_at_the_cap(pid_t asking, asio::steady_timer& settle)
{
    auto relist = [this] {
        std::vector<subtree_member> members;
        list_subtree(members); // on an error, what could be read (a lower bound)
        forks_->on_listing(live_count(members));
    };
    auto wait_until = [&](std::chrono::steady_clock::time_point t) -> asio::awaitable<bool> {
        boost::system::error_code ec;
        settle.expires_at(t);
        co_await settle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        co_return judges_forks(phase());
    };
    if (auto until = forks_->list_after(asking, std::chrono::steady_clock::now()))
        if (!co_await wait_until(*until))
            co_return false;
    relist();
    for (int recount = 0; recount < 4 && forks_->at_cap(); ++recount)
    {
        if (!co_await wait_until(std::chrono::steady_clock::now() + fork_settle_time))
            co_return false;
        relist();
    }
    co_return true;
}

// One fork of the tree asks to go ahead: admitted while the count stays within the cap;
// otherwise refused, and the tree is killed as over budget, as the sampler would on seeing
// one process too many (during a graceful stop a refusal is all: the grace's end kills).
void sampled_caps::on_fork(int listener, const fork_request& req)
{
    const bool allow = forks_->admit(req.pid, std::chrono::steady_clock::now());
    const int err = answer_fork(listener, req, allow);
    if (err != 0 && err != ENOENT) // the task would wait for good
        return gate_broke("answering a fork failed", err);
    if (allow || err == ENOENT) // (the task asking is gone)
        return;
    stop_detail d;
    d.decision = {cap_action::kill_budget, budget_kind::processes,
                  static_cast<std::int64_t>(forks_->wanted()),
                  static_cast<std::int64_t>(forks_->cap())};
    trip_({event_kind::fork_refused, end_reason::budget}, d);
}

// The listener failed in a way that could leave a fork waiting for good: the cap cannot be
// held, so the tree goes, as unenforceable.
void sampled_caps::gate_broke(const char* what, int err)
{
    stop_detail d;
    d.decision = {cap_action::kill_unenforceable, budget_kind::processes, 0,
                  static_cast<std::int64_t>(forks_->cap())};
    d.failure = std::string(what) + ": " + std::strerror(err);
    trip_({event_kind::stop, end_reason::unenforceable}, d);
}

} // namespace

nanoseconds children_cpu()
{
    struct rusage ru{};
    ::getrusage(RUSAGE_CHILDREN, &ru);
    return tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
}

std::shared_ptr<cap_enforcer> make_sampled_caps(asio::io_context& ctx, sampled_setup setup,
                                                trip_fn trip)
{
    return std::make_shared<sampled_caps>(ctx, std::move(setup), std::move(trip));
}

} // namespace sandbox::detail
