// helper/worker.cpp: the per-execution subreaper (see worker.hpp). Coroutines on the
// worker's own io_context, on its main thread, read the channel, watch the helper's lifeline,
// reap children (SIGCHLD through a signalfd: blocked in every thread, which inherit the
// mask), answer the fork gate and sample the caps; only the memory cap's PSS reads run on a
// thread of their own (pss_reader.hpp). The coroutines decide nothing about the run's life
// cycle: they feed what they saw to `worker::feed`, which asks worker_phase.hpp's transition
// what to do and does it.
#include "helper/worker.hpp"

#include "helper/spawn.hpp"
#include "helper/fork_gate.hpp"
#include "helper/pss_reader.hpp"
#include "helper/budget.hpp"
#include "helper/cgroup.hpp"
#include "helper/channel.hpp"
#include "protocol/protocol.hpp"
#include "helper/subtree.hpp"
#include "helper/worker_phase.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

namespace asio = boost::asio;
using backend::unique_fd;
using proto::end_reason;
using std::chrono::nanoseconds;
using awaitable = asio::awaitable<void>;

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

nanoseconds children_cpu()
{
    struct rusage ru{};
    ::getrusage(RUSAGE_CHILDREN, &ru);
    return tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
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

// Closes every descriptor but those in `keep` (-1s ignored) and 0-2 (/dev/null).
void close_other_fds(std::initializer_list<int> keep)
{
    std::vector<unsigned> k;
    for (int fd : keep)
        if (fd > 2)
            k.push_back(static_cast<unsigned>(fd));
    std::sort(k.begin(), k.end());
    unsigned next = 3;
    for (unsigned fd : k)
    {
        if (next < fd)
            ::syscall(SYS_close_range, next, fd - 1, 0u);
        next = std::max(next, fd + 1);
    }
    ::syscall(SYS_close_range, next, ~0u, 0u);
}

/// One execution: its phase (worker_phase.hpp), what its report needs, and its watchers.
/// The coroutines that watch it share it and stop once its phase is idle (it was reported),
/// so none of them compares ids: an event fed for a finished execution finds it idle.
struct execution
{
    execution(asio::io_context& ctx, cap_limits l)
        : budget(l), sample_timer(ctx), grace_timer(ctx), deadline_timer(ctx)
    {
    }

    worker_phase phase = worker_phase::idle;
    pid_t pid = -1;
    // The command's end, once reaped (kept from the first reap: its pid is free after it).
    struct leader_end
    {
        int status = 0;
        struct rusage ru{};
    };
    std::optional<leader_end> ended;
    // The first cause (claimed once, by the transition) and the cap decision behind it.
    end_reason reason = end_reason::none;
    cap_decision decision{};
    // Sampling.
    cap_budget budget;
    cpu_ledger ledger;
    nanoseconds children_base{0};
    std::uint64_t samples = 0, failed = 0, killed_after = 0;
    std::uint32_t faults_left = 0;
    // Members' children are reaped by the kernel (SIGCHLD ignored): seen from a loss the
    // ledger found (kept), or predicted from a live member that ignores SIGCHLD (per sample).
    bool kernel_reaps = false;
    bool kernel_reaper_alive = false;
    // The last sampling failure, or what broke the fork gate (sent after the report).
    std::string last_failure;
    // Members we reaped since the last sample (the ledger leaves them out: they are in our
    // RUSAGE_CHILDREN).
    std::unordered_set<pid_t> reaped_since_sample;
    asio::steady_timer sample_timer, grace_timer, deadline_timer;
    // Measures the footprint once the RSS sum reaches the memory cap.
    std::shared_ptr<pss_reader> pss;
    // Under a process cap: the fork gate's listener and its decisions (fork_gate.hpp).
    std::optional<asio::posix::stream_descriptor> gate;
    std::optional<process_gate> forks;
    // The tree's own cgroup (the cgroup path), the caps its controllers hold (0: the
    // sampler's), and a watch on its event files while the kernel holds one.
    cgroup_leaf leaf;
    std::chrono::microseconds leaf_cpu_base{0}; // its cpu.stat before this run (a reused leaf)
    bool leaf_killed = false; // cgroup.kill was written: never reused (see keep_or_remove)
    cgroup_limits kernel_caps{};
    std::optional<asio::posix::stream_descriptor> leaf_events;

    // The run is over: every watcher ends now.
    void stop_watchers()
    {
        for (auto* t : {&sample_timer, &grace_timer, &deadline_timer})
            t->cancel();
        if (pss)
            pss->cancel(); // a sample waiting for it ends now (the tree is gone)
        boost::system::error_code ignored;
        if (gate)
            gate->close(ignored); // the tree is gone: nothing can ask any more
        if (leaf_events)
            leaf_events->close(ignored); // (a copy of the leaf's)
    }
};
using execution_ptr = std::shared_ptr<execution>;

// The exit report of an execution whose tree is all reaped, with its text: built here only.
std::string make_exit_report(const execution& x)
{
    proto::exit_report_msg r;
    r.pid = x.pid;
    r.wait_status = x.ended ? x.ended->status : 0;
    r.reason = x.reason;
    r.budget_which = static_cast<std::uint32_t>(x.decision.which);
    r.observed = x.decision.observed;
    r.configured = x.decision.configured;
    // Everything is reaped now, so the children's rusage holds the whole tree; a cgroup's
    // cpu.stat holds every member's, however it was reaped.
    nanoseconds cpu =
        std::max(children_cpu() - x.children_base + x.ledger.lost(), x.budget.cpu_used());
    std::uint64_t peak = x.budget.peak_footprint_bytes();
    if (x.leaf)
    {
        r.flags |= proto::report_in_cgroup;
        if (auto got = x.leaf.read())
        {
            cpu = std::max<nanoseconds>(cpu, got->cpu - x.leaf_cpu_base);
            if (x.kernel_caps.memory_bytes > 0)
                peak = std::max(peak, got->memory_peak);
        }
    }
    r.cpu_ns = cpu.count();
    const auto leader_maxrss = x.ended ? x.ended->ru.ru_maxrss : 0;
    r.peak_memory_bytes =
        std::max<std::uint64_t>(peak, static_cast<std::uint64_t>(leader_maxrss) * 1024);
    r.samples = x.samples;
    r.failed_samples = x.failed;
    r.killed_after_exit = x.killed_after;
    std::string payload(proto::as_bytes(r));
    payload += x.last_failure.substr(0, 1024);
    return payload;
}

// What a stop brings besides its reason: the grace, and the decision and text that the
// report carries when it is the first cause.
struct stop_detail
{
    nanoseconds grace{0};
    cap_decision decision{};
    std::string failure{};
};

// One sample: the listing and its usage (`ok` false when it failed), the members, and
// whether the memory cap needs their PSS before the usage can be judged.
struct sample
{
    bool ok = false;
    tree_usage usage;
    std::vector<subtree_member> members;
    bool wants_pss = false;
};

using event = worker_event;
using event_kind = worker_event::kind;

class worker
{
public:
    worker(asio::io_context& ctx, int chan, int lifeline, int sigfd, worker_cgroup cg)
        : ctx_(ctx), chan_(ctx, chan), lifeline_(ctx, lifeline), sigfd_(ctx, sigfd), cg_(cg)
    {
    }

    void start()
    {
        asio::co_spawn(ctx_, read_channel(), asio::detached);
        asio::co_spawn(ctx_, watch_lifeline(), asio::detached);
        asio::co_spawn(ctx_, reap_loop(), asio::detached);
    }

private:
    // Coroutines: each performs I/O and feeds what it saw.
    awaitable read_channel();
    awaitable watch_lifeline();
    awaitable reap_loop();
    awaitable deadline_wait(execution_ptr x, nanoseconds grace);
    awaitable grace_wait(execution_ptr x);
    awaitable sample_loop(execution_ptr x, nanoseconds interval);
    awaitable gate_loop(execution_ptr x);
    awaitable leaf_loop(execution_ptr x);
    asio::awaitable<bool> count_at_the_cap(execution_ptr x, pid_t asking,
                                           asio::steady_timer& settle);

    // The one place events go in and actions come out.
    worker_step feed(execution_ptr x, const event& ev, const stop_detail& d = {});
    void claim(execution& x, end_reason why, const stop_detail& d);
    void report(execution& x);

    // Messages and the start of a run.
    void on_message(proto::message& m);
    void on_plan_chunk(proto::message& m);
    void start_exec(const proto::plan& p);
    int make_leaf(const proto::plan_fixed& f, cgroup_leaf& leaf, cgroup_limits& kernel,
                  std::chrono::microseconds& cpu_base);
    void keep_or_remove(cgroup_leaf& leaf, bool killed = false);
    bool leaves_reusable() const { return (cg_.controllers & (cgc_memory | cgc_pids)) == 0; }
    void watch(const execution_ptr& x, const proto::plan_fixed& f);
    void spawn_failed(int err, proto::spawn_stage stage = proto::stage_command);
    void signal_group(int signo);

    // Reaping.
    void on_sigchld();
    void on_reaped(pid_t p, int status, const struct rusage& ru);
    reap_fn reaper()
    {
        return [this](pid_t p, int st, const struct rusage& ru) { on_reaped(p, st, ru); };
    }

    // Sampling: list the tree, measure its footprint if it needs it, apply the caps.
    sample take_sample(execution& x);
    sample take_cgroup_sample(execution& x);
    asio::awaitable<void> measure_pss(execution_ptr x, sample& s);
    std::optional<tree_usage> apply_caps(const execution_ptr& x, const sample& s);
    pace_input pace_of(const execution& x, nanoseconds took) const;

    // The fork gate.
    void on_fork(const execution_ptr& x, int listener, const fork_request& req);
    void gate_broke(const execution_ptr& x, const char* what, int err);

    worker_phase phase() const { return cur_ ? cur_->phase : worker_phase::idle; }

    asio::io_context& ctx_;
    asio::posix::stream_descriptor chan_, lifeline_, sigfd_;
    std::string plan_buf_;
    std::vector<unique_fd> plan_fds_;
    execution_ptr cur_;
    worker_cgroup cg_;
    unsigned leaves_made_ = 0;
    // The last execution's cgroup, empty, kept for the next one where no controller holds a
    // cap (nothing in it to reset but the cpu time, taken as the next run's base): its mkdir
    // and rmdir (60-80 us) leave the exec path.
    cgroup_leaf spare_leaf_;
    std::chrono::microseconds spare_cpu_{0};
};

awaitable worker::read_channel()
{
    co_await read_messages(chan_, [this](proto::message& m) { on_message(m); });
    // The library let go of this channel, or died.
    feed(cur_, {event_kind::channel_lost, end_reason::abandoned});
}

awaitable worker::watch_lifeline()
{
    boost::system::error_code ec;
    co_await lifeline_.async_wait(asio::posix::stream_descriptor::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
    // Only the helper holds the write end and never writes: readable means it is gone.
    feed(cur_, {event_kind::channel_lost, end_reason::supervisor_lost});
}

awaitable worker::reap_loop()
{
    co_await on_each_sigchld(sigfd_, [this] { on_sigchld(); });
}

worker_step worker::feed(execution_ptr x, const event& ev, const stop_detail& d)
{
    const worker_step step = transition(x ? x->phase : worker_phase::idle, ev);
    if (x)
        x->phase = step.next;
    if (step.has(act_refuse_busy))
        spawn_failed(EBUSY);
    if (step.has(act_claim))
        claim(*x, step.cause, d);
    if (step.has(act_sigterm_tree))
        signal_subtree(SIGTERM);
    if (step.has(act_arm_grace))
    {
        x->grace_timer.expires_after(d.grace);
        asio::co_spawn(ctx_, grace_wait(x), asio::detached);
    }
    if (step.has(act_kill_tree))
    {
        if (x && x->leaf && x->leaf.populated().value_or(true))
        {
            x->leaf.kill(); // every member at once; the walk below reaps them (and any
                            // member that left the cgroup)
            x->leaf_killed = true;
        }
        const auto killed = kill_subtree(reaper());
        if (x)
            x->killed_after += killed;
    }
    if (step.has(act_report))
        report(*x);
    if (step.has(act_exit))
        ::_exit(0);
    return step;
}

void worker::claim(execution& x, end_reason why, const stop_detail& d)
{
    x.reason = why;
    x.decision = d.decision;
    if (!d.failure.empty())
        x.last_failure = d.failure;
}

void worker::report(execution& x)
{
    const std::string payload = make_exit_report(x);
    x.stop_watchers();
    cur_.reset();
    proto::send_message(chan_.native_handle(), proto::msg_type::exit_report, 0, payload);
    if (x.leaf)
        keep_or_remove(x.leaf, x.leaf_killed);
}

// Every member is reaped, so the cgroup is empty: kept for the next execution where that is
// allowed, else removed. One that is not empty (a process moved into it from outside) is
// killed and left to the helper's tear-down.
//
// A cgroup that was killed is not reused: Linux 6.18 kills at once every child later started
// into it with CLONE_INTO_CGROUP (measured: each such spawn ended by SIGKILL before its
// exec), so only a tree that left nothing behind (no kill needed: the common case) hands its
// cgroup on.
void worker::keep_or_remove(cgroup_leaf& leaf, bool killed)
{
    const auto got =
        leaves_reusable() && !killed && !spare_leaf_ ? leaf.read() : std::nullopt;
    if (got && !got->populated)
    {
        spare_cpu_ = got->cpu;
        spare_leaf_ = std::move(leaf);
        return;
    }
    if (leaf.remove(cg_.tree_fd) != 0)
        leaf.kill();
}

void worker::on_message(proto::message& m)
{
    switch (m.head.type)
    {
    case proto::msg_type::plan_chunk: on_plan_chunk(m); break;
    case proto::msg_type::kill:
    {
        proto::kill_msg k;
        if (proto::from_bytes(m.payload, k) &&
            (k.reason == end_reason::timed_out || k.reason == end_reason::cancelled))
        {
            const nanoseconds grace(std::max<std::int64_t>(k.grace_ns, 0));
            feed(cur_, {event_kind::stop, k.reason, grace > nanoseconds(0)}, {grace});
        }
        break;
    }
    case proto::msg_type::signal:
    {
        proto::signal_msg sig;
        if (proto::from_bytes(m.payload, sig) && sig.signo > 0 && sig.signo < NSIG)
            signal_group(sig.signo);
        break;
    }
    default:
        break; // nothing else is sent to a worker
    }
}

void worker::on_plan_chunk(proto::message& m)
{
    if (plan_buf_.empty() && plan_fds_.empty())
        plan_fds_ = std::move(m.fds);
    plan_buf_ += m.payload;
    if ((m.head.flags & proto::flag_last) == 0)
        return;
    auto p = proto::decode_plan(plan_buf_);
    plan_buf_.clear();
    if (feed(cur_, {event_kind::plan}).has(act_start))
    {
        if (p)
            start_exec(*p);
        else
            spawn_failed(EPROTO);
    }
    plan_fds_.clear();
}

// The command leads its process group, so its pid names the group; while the leader is
// unreaped (a zombie at worst) neither the pid nor the group id can be reused.
void worker::signal_group(int signo)
{
    if (!leader_alive(phase()))
        return; // (during a graceful stop too: a SIGKILL may not wait for the grace)
    if (::kill(-cur_->pid, signo) != 0)
        ::kill(cur_->pid, signo); // the group is gone (the leader left it): the leader alone
}

void worker::spawn_failed(int err, proto::spawn_stage stage)
{
    proto::spawn_failed_msg f{err, stage};
    proto::send_message(chan_.native_handle(), proto::msg_type::spawn_failed, 0,
                        proto::as_bytes(f));
}

// What the plan asks to run, with the descriptors that came with it (false: they do not
// match what it says).
bool spawn_args_of(const proto::plan& p, const std::vector<unique_fd>& fds, spawn_args& a)
{
    const auto& f = p.fixed;
    const std::size_t want = 2 + ((f.fds & proto::fd_stdin) ? 1 : 0) +
                             ((f.fds & proto::fd_work_dir) ? 1 : 0) + f.extra_fds;
    if (f.extra_fds > proto::max_extra_fds || fds.size() != want)
        return false;
    a.executable = p.executable;
    a.argv = p.argv;
    a.envp = p.envp;
    a.stdout_fd = fds[0].get();
    a.stderr_fd = fds[1].get();
    std::size_t next = 2;
    if (f.fds & proto::fd_stdin)
        a.stdin_fd = fds[next++].get();
    if (f.fds & proto::fd_work_dir)
        a.work_dir_fd = fds[next++].get();
    while (next < fds.size())
        a.extra_fds.push_back(fds[next++].get());
    a.ignore_job_signals = (f.options & proto::opt_ignore_job_signals) != 0;
    if (f.options & proto::opt_tty)
        a.tty_path = p.tty_path;
    return true;
}

void worker::start_exec(const proto::plan& p)
{
    const auto& f = p.fixed;
    spawn_args a;
    if (!spawn_args_of(p, plan_fds_, a))
        return spawn_failed(EPROTO);
    cgroup_leaf leaf;
    cgroup_limits kernel{};
    std::chrono::microseconds cpu_base{0};
    if (int err = make_leaf(f, leaf, kernel, cpu_base); err != 0)
        return spawn_failed(err, proto::stage_cgroup);
    a.cgroup_fd = leaf ? leaf.fd() : -1;
    pid_t pid = -1;
    unique_fd listener;
    bool gate_failed = false;
    int rc = f.caps.max_processes > 0 ? spawn_gated(a, pid, listener, gate_failed)
                                      : spawn_command(a, pid);
    // Our copies of the command's pipes go now, or the library never sees EOF.
    plan_fds_.clear();
    if (rc != 0)
    {
        if (leaf)
            keep_or_remove(leaf);
        return spawn_failed(rc, gate_failed ? proto::stage_fork_gate : proto::stage_command);
    }
    // What the kernel holds is not sampled.
    cap_limits sampled = f.caps;
    if (kernel.memory_bytes > 0)
        sampled.memory_bytes = 0;
    if (kernel.max_tasks > 0)
        sampled.max_tasks = 0;
    auto x = std::make_shared<execution>(ctx_, sampled);
    x->leaf = std::move(leaf);
    x->leaf_cpu_base = cpu_base;
    x->kernel_caps = kernel;
    x->pid = pid;
    x->children_base = children_cpu();
    x->faults_left = f.sample_faults;
    if (listener)
        x->gate.emplace(ctx_, listener.release());
    cur_ = x;
    feed(x, {event_kind::spawned});
    if (f.options & proto::opt_report_spawn)
    {
        proto::spawned_msg sm{pid, 0};
        proto::send_message(chan_.native_handle(), proto::msg_type::spawned, 0,
                            proto::as_bytes(sm));
    }
    watch(x, f);
}

// The execution's own cgroup, when the plan asks for one and the helper has a tree: 0 (a
// leaf, or none when none is needed) or the errno that fails a spawn requiring one. The caps
// whose controller the tree has go to the kernel (`kernel`).
int worker::make_leaf(const proto::plan_fixed& f, cgroup_leaf& leaf, cgroup_limits& kernel,
                      std::chrono::microseconds& cpu_base)
{
    if ((f.options & proto::opt_cgroup) == 0)
        return 0;
    const bool required = (f.options & proto::opt_cgroup_required) != 0;
    if (cg_.tree_fd < 0)
        return required ? ENOENT : 0; // the helper could not make its tree
    if (spare_leaf_) // (only kept where no controller holds a cap: nothing to set)
    {
        leaf = std::move(spare_leaf_);
        cpu_base = spare_cpu_;
        return 0;
    }
    if (cg_.controllers & cgc_memory)
        kernel.memory_bytes = f.caps.memory_bytes;
    if (cg_.controllers & cgc_pids)
        kernel.max_tasks = f.caps.max_tasks;
    const std::string name =
        "x-" + std::to_string(::getpid()) + "-" + std::to_string(++leaves_made_);
    std::string why;
    int err = cgroup_leaf::make(cg_.tree_fd, name, kernel, cg_.controllers, leaf, why);
    if (err == 0 || required)
        return err;
    kernel = {}; // auto: run without a cgroup; the sampler holds every cap
    return 0;
}

// Starts the watchers a run needs: the fork gate, the deadline, the sampler, the cgroup's
// events while the kernel holds a cap.
void worker::watch(const execution_ptr& x, const proto::plan_fixed& f)
{
    if (x->leaf && (x->kernel_caps.memory_bytes > 0 || x->kernel_caps.max_tasks > 0))
    {
        const int copy = ::fcntl(x->leaf.events_fd(), F_DUPFD_CLOEXEC, 3);
        if (copy >= 0)
        {
            x->leaf_events.emplace(ctx_, copy);
            asio::co_spawn(ctx_, leaf_loop(x), asio::detached);
        }
    }
    if (x->gate)
    {
        x->forks.emplace(f.caps.max_processes, fork_settle_time);
        x->forks->on_listing(1); // the command
        asio::co_spawn(ctx_, gate_loop(x), asio::detached);
    }
    if (f.timeout_ns > 0)
    {
        x->deadline_timer.expires_after(nanoseconds(f.timeout_ns));
        const nanoseconds grace(std::max<std::int64_t>(f.kill_grace_ns, 0));
        asio::co_spawn(ctx_, deadline_wait(x, grace), asio::detached);
    }
    if (x->budget.limits().any())
    {
        const auto interval = nanoseconds(std::max<std::int64_t>(f.sample_interval_ns, 1'000'000));
        asio::co_spawn(ctx_, sample_loop(x, interval), asio::detached);
    }
}

// The cgroup's event files changed: an OOM kill in it is the memory cap's trip, a fork the
// pids controller refused the task cap's, as the sampler would have judged them.
awaitable worker::leaf_loop(execution_ptr x)
{
    while (samples(x->phase))
    {
        boost::system::error_code ec;
        co_await x->leaf_events->async_wait(asio::posix::stream_descriptor::wait_read,
                                            asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !samples(x->phase))
            co_return;
        x->leaf.clear_events();
        const auto got = x->leaf.read();
        if (!got)
            continue;
        stop_detail d;
        if (got->oom_kills > 0 && x->kernel_caps.memory_bytes > 0)
            d.decision = {cap_action::kill_budget, budget_kind::memory,
                          static_cast<std::int64_t>(got->memory_peak),
                          static_cast<std::int64_t>(x->kernel_caps.memory_bytes)};
        else if (got->pids_refused > 0 && x->kernel_caps.max_tasks > 0)
            d.decision = {cap_action::kill_budget, budget_kind::tasks,
                          static_cast<std::int64_t>(x->kernel_caps.max_tasks + 1),
                          static_cast<std::int64_t>(x->kernel_caps.max_tasks)};
        else
            continue;
        feed(x, {event_kind::stop, end_reason::budget}, d);
        co_return;
    }
}

// The timeout, counted from the spawn (watch arms the timer): the same stop a kill request
// for it makes.
awaitable worker::deadline_wait(execution_ptr x, nanoseconds grace)
{
    boost::system::error_code ec;
    co_await x->deadline_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec)
        feed(x, {event_kind::stop, end_reason::timed_out, grace > nanoseconds(0)}, {grace});
}

awaitable worker::grace_wait(execution_ptr x)
{
    boost::system::error_code ec;
    co_await x->grace_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec)
        feed(x, {event_kind::grace_over});
}

void worker::on_reaped(pid_t p, int status, const struct rusage& ru)
{
    if (!cur_)
        return;
    if (cur_->budget.limits().any())
        cur_->reaped_since_sample.insert(p);
    if (p == cur_->pid && !cur_->ended)
        cur_->ended = execution::leader_end{status, ru};
}

void worker::on_sigchld()
{
    const bool children_left = reap_exited(reaper());
    auto x = cur_; // (feeding may end the run)
    if (!x)
        return;
    if (x->ended && leader_alive(x->phase))
        feed(x, {event_kind::leader_reaped});
    if (!children_left)
        feed(x, {event_kind::tree_empty});
}

// What the pacer needs of the last sample (sample_pacer). A memory cap's bound counts the
// tree's own tasks (at most one per cpu) faulting at once, a cpu budget's every cpu; an idle
// tree waits longer only where even every cpu could not pass a bound meanwhile.
pace_input worker::pace_of(const execution& x, nanoseconds took) const
{
    const auto& b = x.budget;
    const unsigned cpus = online_cpus();
    const auto tasks = static_cast<unsigned>(std::min<std::uint64_t>(b.last_tasks(), cpus));
    pace_input in;
    // (as often as can be while a member's children are reaped by the kernel: see tally)
    in.pressure = x.kernel_reaps || x.kernel_reaper_alive ? 1.0 : b.pressure();
    in.time_to_bound = std::min(b.memory_reach_time(tasks), b.cpu_reach_time(cpus));
    in.time_to_bound_all_cpus = std::min(b.memory_reach_time(cpus), b.cpu_reach_time(cpus));
    in.took = took;
    return in;
}

awaitable worker::sample_loop(execution_ptr x, nanoseconds interval)
{
    // A young tree is sampled often so that a fork bomb or a fast allocator is caught
    // early, a tree near a cap more often again, an idle one far from its caps less often,
    // and none later than it could pass a cap's bound (sample_pacer, pace_of).
    sample_pacer pacer(interval, x->budget.limits().max_tasks == 0);
    auto delay = pacer.first();
    while (samples(x->phase))
    {
        x->sample_timer.expires_after(delay);
        boost::system::error_code ec;
        co_await x->sample_timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !samples(x->phase))
            co_return;
        const auto began = std::chrono::steady_clock::now();
        auto taken = take_sample(*x);
        if (taken.wants_pss)
        {
            co_await measure_pss(x, taken);
            if (!samples(x->phase))
                co_return;
        }
        const auto usage = apply_caps(x, taken);
        const auto now = std::chrono::steady_clock::now();
        const auto in = pace_of(*x, now - began);
        delay = usage ? pacer.after_sample(*usage, now, in) : pacer.after_failure(in);
    }
}

awaitable worker::gate_loop(execution_ptr x)
{
    asio::steady_timer settle(ctx_);
    const int fd = x->gate->native_handle();
    while (judges_forks(x->phase))
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
            co_await x->gate->async_wait(asio::posix::stream_descriptor::wait_read,
                                         asio::redirect_error(asio::use_awaitable, ec));
            if (ec)
                co_return;
            continue;
        }
        fork_request req;
        if (int err = receive_fork(fd, req); err == ENOENT || err == EINTR)
            continue; // the task asking was killed meanwhile
        else if (err != 0)
            co_return gate_broke(x, "receiving a fork failed", err);
        if (x->forks->at_cap() && !co_await count_at_the_cap(x, req.pid, settle))
            co_return;
        on_fork(x, fd, req);
    }
}

// A fork at the cap: lists the tree (once the forks of other tasks admitted just now have had
// time to land), and while the fork still does not fit, up to four times more a settle time
// apart (20 ms in all), since a member being killed may still be listed until it gets a cpu.
// The tree waits meanwhile: every fork of it is held until answered. False when the
// execution ended meanwhile.
asio::awaitable<bool> worker::count_at_the_cap(execution_ptr x, pid_t asking,
                                                asio::steady_timer& settle)
{
    auto relist = [&x] {
        std::vector<subtree_member> members;
        list_subtree(members); // on an error, what could be read (a lower bound)
        x->forks->on_listing(live_count(members));
    };
    auto wait_until = [&](std::chrono::steady_clock::time_point t) -> asio::awaitable<bool> {
        boost::system::error_code ec;
        settle.expires_at(t);
        co_await settle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        co_return judges_forks(x->phase);
    };
    if (auto until = x->forks->list_after(asking, std::chrono::steady_clock::now()))
        if (!co_await wait_until(*until))
            co_return false;
    relist();
    for (int recount = 0; recount < 4 && x->forks->at_cap(); ++recount)
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
void worker::on_fork(const execution_ptr& x, int listener, const fork_request& req)
{
    const bool allow = x->forks->admit(req.pid, std::chrono::steady_clock::now());
    const int err = answer_fork(listener, req, allow);
    if (err != 0 && err != ENOENT) // the task would wait for good
        return gate_broke(x, "answering a fork failed", err);
    if (allow || err == ENOENT) // (the task asking is gone)
        return;
    stop_detail d;
    d.decision = {cap_action::kill_budget, budget_kind::processes,
                  static_cast<std::int64_t>(x->forks->wanted()),
                  static_cast<std::int64_t>(x->forks->cap())};
    feed(x, {event_kind::fork_refused, end_reason::budget}, d);
}

// The listener failed in a way that could leave a fork waiting for good: the cap cannot be
// held, so the tree goes, as unenforceable.
void worker::gate_broke(const execution_ptr& x, const char* what, int err)
{
    stop_detail d;
    d.decision = {cap_action::kill_unenforceable, budget_kind::processes, 0,
                  static_cast<std::int64_t>(x->forks->cap())};
    d.failure = std::string(what) + ": " + std::strerror(err);
    feed(x, {event_kind::stop, end_reason::unenforceable}, d);
}

// Lists the tree and sums up its usage (the RSS sum as its footprint, for now).
sample worker::take_sample(execution& x)
{
    ++x.samples;
    sample s;
    if (x.faults_left > 0)
    {
        if (x.faults_left != 0xffffffffu)
            --x.faults_left;
        x.last_failure = "injected sampling fault";
        return s;
    }
    if (x.leaf)
        return take_cgroup_sample(x);
    if (int err = list_subtree(s.members); err != 0)
    {
        x.last_failure = std::string("reading /proc failed: ") + std::strerror(err);
        return s;
    }
    s.ok = true;
    x.last_failure.clear();
    // Reaped members are in our RUSAGE_CHILDREN or in a live member's cutime/cstime, so each
    // process's time is counted once; the ledger adds what the kernel reaped.
    const nanoseconds reaped = children_cpu() - x.children_base;
    tallied t = tally(s.members);
    s.usage = t.usage;
    s.usage.cpu += reaped;
    x.kernel_reaper_alive = t.kernel_reaper;
    const auto lost_before = x.ledger.lost();
    s.usage.cpu += x.ledger.update(t.seen, member_ended,
                                   [&x](pid_t p) { return x.reaped_since_sample.count(p) != 0; });
    x.reaped_since_sample.clear();
    // Children reaped by the kernel lose what they used after the last sample: while a member
    // ignores SIGCHLD, or once the tree is seen losing time that way, it is sampled as often
    // as can be (pace_of), so each such child loses at most one short interval.
    x.kernel_reaps = x.kernel_reaps || x.ledger.lost() > lost_before;
    // RSS counts a page shared by N members N times: an upper bound. Only when it reaches the
    // cap is the real footprint (PSS) read, which walks page tables.
    const auto cap = x.budget.limits().memory_bytes;
    s.wants_pss = cap > 0 && s.usage.footprint_bytes >= cap;
    return s;
}

// A sample of a tree in its own cgroup: the cpu time is the cgroup's (every member's,
// however it was reaped: no ledger); the tree is listed only for the caps the cgroup does
// not hold (memory without its controller, processes, tasks).
sample worker::take_cgroup_sample(execution& x)
{
    sample s;
    const auto cpu = x.leaf.cpu();
    if (!cpu)
    {
        x.last_failure = "reading the cgroup's cpu.stat failed";
        return s;
    }
    const auto& l = x.budget.limits();
    if (l.memory_bytes > 0 || l.max_processes > 0 || l.max_tasks > 0)
    {
        if (int err = list_subtree(s.members); err != 0)
        {
            x.last_failure = std::string("reading /proc failed: ") + std::strerror(err);
            return s;
        }
        s.usage = tally(s.members).usage;
    }
    s.ok = true;
    x.last_failure.clear();
    s.usage.cpu = *cpu - x.leaf_cpu_base;
    s.wants_pss = l.memory_bytes > 0 && s.usage.footprint_bytes >= l.memory_bytes;
    return s;
}

// The footprint of a tree whose RSS sum reached the memory cap: its PSS, read off the loop.
// A read that fails fails the sample; one that is late leaves the RSS sum to be judged.
asio::awaitable<void> worker::measure_pss(execution_ptr x, sample& s)
{
    if (!x->pss)
        x->pss = std::make_shared<pss_reader>(ctx_);
    auto reader = x->pss;
    const auto rss = s.usage.footprint_bytes;
    const auto cap = x->budget.limits().memory_bytes;
    auto out = co_await reader->read(std::move(s.members), pss_limits_for(rss, cap),
                                     [] { return rss_sum_now(); });
    if (!samples(x->phase))
        co_return;
    switch (out.what)
    {
    case pss_outcome::kind::done: s.usage.footprint_bytes = out.bytes; break;
    case pss_outcome::kind::failed:
        s.ok = false;
        x->last_failure = out.why;
        break;
    case pss_outcome::kind::late:
        x->last_failure = "judged by the RSS sum: " + out.why;
        break;
    }
}

// Holds the sample to the caps; a cap that trips (or too many failed samples) stops the
// tree. Returns the usage of a good sample.
std::optional<tree_usage> worker::apply_caps(const execution_ptr& x, const sample& s)
{
    cap_decision d = s.ok ? x->budget.on_sample(s.usage) : x->budget.on_failure();
    if (!s.ok)
        ++x->failed;
    if (d.action != cap_action::keep_going)
    {
        const auto why = d.action == cap_action::kill_budget ? end_reason::budget
                                                             : end_reason::unenforceable;
        stop_detail detail;
        detail.decision = d;
        feed(x, {event_kind::stop, why}, detail);
    }
    return s.ok ? std::optional<tree_usage>(s.usage) : std::nullopt;
}

} // namespace

void run_worker(int chan, int lifeline, const rlimit& command_nofile, worker_cgroup cgroup)
{
    close_other_fds({chan, lifeline, cgroup.tree_fd});
    ::setrlimit(RLIMIT_NOFILE, &command_nofile);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::prctl(PR_SET_NAME, "sbx-worker");
    // A command running as our user cannot ptrace us, nor take the fork gate's listener
    // with pidfd_getfd, to answer its own forks (what it runs is dumpable again at exec).
    ::prctl(PR_SET_DUMPABLE, 0);
    prepare_subtree_access();
    int sigfd = open_sigchld_fd();
    if (sigfd < 0)
        ::_exit(1); // the library sees the channel close and reports the supervisor lost
    {
        asio::io_context ctx(1);
        worker w(ctx, chan, lifeline, sigfd, cgroup);
        w.start();
        ctx.run();
    }
    ::_exit(0);
}

} // namespace sandbox::detail
