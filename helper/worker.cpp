// helper/worker.cpp: the per-execution subreaper (see worker.hpp). Coroutines on the
// worker's own io_context, on its main thread, read the channel, watch the helper's lifeline,
// reap children (SIGCHLD through a signalfd: blocked in every thread, which inherit the
// mask) and keep the deadline; the caps are held by the execution's enforcers
// (cap_enforcer.hpp), whose trips come back here as events. The coroutines decide nothing
// about the run's life cycle: they feed what they saw to `worker::feed`, which asks
// worker_phase.hpp's transition what to do and does it.
#include "helper/worker.hpp"

#include "helper/cap_enforcer.hpp"
#include "helper/cgroup.hpp"
#include "helper/cgroup_caps.hpp"
#include "helper/channel.hpp"
#include "helper/connect_broker.hpp"
#include "helper/fork_gate.hpp"
#include "helper/sampled_caps.hpp"
#include "helper/spawn.hpp"
#include "helper/subtree.hpp"
#include "helper/worker_phase.hpp"
#include "protocol/idle_claim.hpp"
#include "protocol/protocol.hpp"

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
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

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

/// One execution: its phase (worker_phase.hpp), what its report needs, its timers and the
/// enforcers that hold its caps (cap_enforcer.hpp). The coroutines that watch it share it
/// and stop once its phase is idle (it was reported), so none of them compares ids: an
/// event fed for a finished execution finds it idle.
struct execution
{
    explicit execution(asio::io_context& ctx)
        : grace_timer(ctx), deadline_timer(ctx), started(ctx), leader_fd(ctx)
    {}

    worker_phase phase = worker_phase::idle;
    pid_t pid = -1;
    // The command's end, once reaped (kept from the first reap: its pid is free after it).
    struct leader_end
    {
        int status = 0;
        struct rusage ru{};
    };
    std::optional<leader_end> ended;
    // Our own peak RSS once the command was started (KiB): its exec took over the peak of the
    // address space it replaced (ours: the command starts from a child sharing it, as
    // posix_spawn's does), so the leader's ru_maxrss is at least that.
    long spawner_maxrss_kib = 0;
    // The first cause (claimed once, by the transition), the cap decision behind it, and
    // what broke an enforcer when that was the cause (sent after the report).
    end_reason reason = end_reason::none;
    cap_decision decision{};
    std::string failure;
    nanoseconds children_base{0};
    std::uint64_t killed_after = 0;
    asio::steady_timer grace_timer, deadline_timer;
    // A wrapped command's status pipe (proto::fd_started), until the init said "started".
    asio::posix::stream_descriptor started;
    // A cap watch (proto::opt_watch): `pid` is a process the library's caller started, not
    // ours; this pidfd pins it and turns readable when it ends.
    bool watching = false;
    asio::posix::stream_descriptor leader_fd;
    // The watched process's whole cpu time, read from its record once it ended (a zombie's
    // holds every thread's and its reaped children's): the samples end a little before.
    nanoseconds final_cpu{0};
    // The tree's own cgroup (the cgroup path), if any, and whether cgroup.kill was written
    // (then it is never reused: see keep_or_remove).
    std::shared_ptr<exec_cgroup> cgroup;
    bool leaf_killed = false;
    std::vector<std::shared_ptr<cap_enforcer>> enforcers;
    // The unix-socket policy's broker (proto::opt_connect_broker), if any.
    std::shared_ptr<connect_broker> broker;

    void set_phase(worker_phase p)
    {
        phase = p;
        for (auto& e : enforcers)
            e->set_phase(p);
    }

    // The run is over: every watcher ends now.
    void stop_watchers()
    {
        for (auto* t : {&grace_timer, &deadline_timer})
            t->cancel();
        boost::system::error_code ignored;
        started.close(ignored);
        leader_fd.close(ignored);
        for (auto& e : enforcers)
            e->stop();
        if (broker)
            broker->stop();
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
    cap_report caps;
    for (const auto& e : x.enforcers)
        e->add_to(caps);
    // Everything is reaped now, so the children's rusage holds the whole tree but for what
    // the kernel reaped; a cgroup's cpu.stat holds every member's, however it was reaped.
    const nanoseconds cpu =
        std::max({children_cpu() - x.children_base + caps.lost_cpu, caps.cpu, x.final_cpu});
    if (x.cgroup)
        r.flags |= proto::report_in_cgroup;
    r.cpu_ns = cpu.count();
    // Where a footprint was sampled, the leader's peak counts only above ours at its start
    // (below that it may be ours); without samples it is all there is (and includes ours:
    // a few MiB, more under a sanitizer).
    const long leader_maxrss = x.ended ? x.ended->ru.ru_maxrss : 0;
    const bool sampled = caps.peak_memory_bytes > 0;
    const long own_peak =
        !sampled || leader_maxrss > x.spawner_maxrss_kib ? leader_maxrss : 0;
    r.peak_memory_bytes = std::max<std::uint64_t>(caps.peak_memory_bytes,
                                                  static_cast<std::uint64_t>(own_peak) * 1024);
    r.samples = caps.samples;
    r.failed_samples = caps.failed_samples;
    r.longest_sample_gap_ns = caps.longest_sample_gap.count();
    r.killed_after_exit = x.killed_after;
    std::string payload(proto::as_bytes(r));
    payload += (x.failure.empty() ? caps.last_failure : x.failure).substr(0, 1024);
    return payload;
}

using event = worker_event;
using event_kind = worker_event::kind;

class worker
{
public:
    worker(asio::io_context& ctx, int chan, int lifeline, int sigfd, worker_cgroup cg)
        : ctx_(ctx), chan_(ctx, chan), lifeline_(ctx, lifeline), sigfd_(ctx, sigfd),
          retire_timer_(ctx), cg_(cg)
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
    awaitable started_wait(execution_ptr x, nanoseconds timeout, nanoseconds grace);
    awaitable grace_wait(execution_ptr x);
    awaitable retire_wait();
    awaitable leader_exit_wait(execution_ptr x);

    // The one place events go in and actions come out.
    worker_step feed(execution_ptr x, const event& ev, const stop_detail& d = {});
    void claim(execution& x, end_reason why, const stop_detail& d);
    void report(execution& x);

    // Messages and the start of a run.
    void on_message(proto::message& m);
    void on_plan_chunk(proto::message& m);
    void on_retire(proto::message& m);
    void start_exec(const proto::plan& p);
    void start_watch(const proto::plan& p);
    void stop_watched(execution& x, int sig);
    int make_leaf(const proto::plan_fixed& f, exec_cgroup& cg);
    void keep_or_remove(cgroup_leaf& leaf, bool killed = false);
    bool leaves_reusable() const { return (cg_.controllers & (cgc_memory | cgc_pids)) == 0; }
    void add_enforcers(const execution_ptr& x, const proto::plan_fixed& f, unique_fd gate);
    void start_broker(execution& x, const spawn_filters& filters, unique_fd& listener,
                      const std::vector<proto::socket_file>& allowed);
    trip_fn trip_of(const execution_ptr& x);
    void watch(const execution_ptr& x, const proto::plan_fixed& f, unique_fd started);
    void arm_deadline(const execution_ptr& x, nanoseconds after, nanoseconds grace);
    void spawn_failed(int err, proto::spawn_stage stage = proto::stage_command);
    void signal_group(int signo);

    // Reaping.
    void on_sigchld();
    void on_reaped(pid_t p, int status, const struct rusage& ru);
    reap_fn reaper()
    {
        return [this](pid_t p, int st, const struct rusage& ru) { on_reaped(p, st, ru); };
    }

    worker_phase phase() const { return cur_ ? cur_->phase : worker_phase::idle; }

    asio::io_context& ctx_;
    asio::posix::stream_descriptor chan_, lifeline_, sigfd_;
    // While idle beyond the library's pool: when to retire, and the word that decides
    // whether the library took this worker first (idle_claim.hpp).
    asio::steady_timer retire_timer_;
    proto::idle_claim idle_claim_;
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
        x->set_phase(step.next);
    if (step.has(act_refuse_busy))
        spawn_failed(EBUSY);
    if (step.has(act_claim))
        claim(*x, step.cause, d);
    if (step.has(act_sigterm_tree))
    {
        if (x && x->watching)
            stop_watched(*x, SIGTERM);
        else
            signal_subtree(SIGTERM);
    }
    if (step.has(act_arm_grace))
    {
        x->grace_timer.expires_after(d.grace);
        asio::co_spawn(ctx_, grace_wait(x), asio::detached);
    }
    if (step.has(act_kill_tree) && x && x->watching)
        stop_watched(*x, SIGKILL);
    else if (step.has(act_kill_tree))
    {
        // Every member at once; the walk below reaps them (and any member that left the
        // cgroup).
        if (x && x->cgroup && x->cgroup->leaf.populated().value_or(true))
        {
            x->cgroup->leaf.kill();
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
        x.failure = d.failure;
}

void worker::report(execution& x)
{
    const std::string payload = make_exit_report(x);
    x.stop_watchers();
    cur_.reset();
    proto::send_message(chan_.native_handle(), proto::msg_type::exit_report, 0, payload);
    if (x.cgroup)
        keep_or_remove(x.cgroup->leaf, x.leaf_killed);
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
    if (leaves_reusable() && !killed && !spare_leaf_ && leaf.populated() == false)
    {
        if (const auto cpu = leaf.cpu())
        {
            spare_cpu_ = *cpu;
            spare_leaf_ = std::move(leaf);
            return;
        }
    }
    if (leaf.remove(cg_.tree_fd) != 0)
        leaf.kill();
}

void worker::on_message(proto::message& m)
{
    switch (m.head.type)
    {
    case proto::msg_type::plan_chunk: on_plan_chunk(m); break;
    case proto::msg_type::retire: on_retire(m); break;
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
    // The library took this worker (its claim says so): no retiring now.
    retire_timer_.cancel();
    idle_claim_ = {};
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

// The library put this idle worker beyond its pool's `keep_idle`: it leaves after the wait
// unless a plan comes first. (A message out of turn, or a claim that cannot be mapped, is
// ignored: the worker then simply stays.)
void worker::on_retire(proto::message& m)
{
    proto::retire_msg r;
    if (phase() != worker_phase::idle || m.fds.size() != 1 || !proto::from_bytes(m.payload, r) ||
        r.after_ns <= 0)
        return;
    idle_claim_ = proto::idle_claim::map(m.fds[0].get());
    if (!idle_claim_)
        return;
    retire_timer_.expires_after(nanoseconds(r.after_ns));
    asio::co_spawn(ctx_, retire_wait(), asio::detached);
}

// Retires only by winning the claim: when the library took this worker a moment before, its
// plan is on the way and the worker stays.
awaitable worker::retire_wait()
{
    boost::system::error_code ec;
    co_await retire_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || phase() != worker_phase::idle || !idle_claim_.retire())
        co_return;
    feed(cur_, {event_kind::channel_lost, end_reason::abandoned}); // exits: nothing runs
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
                             ((f.fds & proto::fd_work_dir) ? 1 : 0) +
                             ((f.fds & proto::fd_started) ? 1 : 0) + f.extra_fds;
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
    if (f.fds & proto::fd_started)
        ++next; // ours (started_of), not the command's
    while (next < fds.size())
        a.extra_fds.push_back(fds[next++].get());
    a.ignore_job_signals = (f.options & proto::opt_ignore_job_signals) != 0;
    if (f.options & proto::opt_tty)
        a.tty_path = p.tty_path;
    return true;
}

// The status pipe that came with a plan (proto::fd_started), taken out of `fds`.
unique_fd started_of(const proto::plan_fixed& f, std::vector<unique_fd>& fds)
{
    if ((f.fds & proto::fd_started) == 0)
        return {};
    const std::size_t at =
        2 + ((f.fds & proto::fd_stdin) ? 1 : 0) + ((f.fds & proto::fd_work_dir) ? 1 : 0);
    return std::move(fds.at(at));
}

void worker::start_exec(const proto::plan& p)
{
    const auto& f = p.fixed;
    if (f.options & proto::opt_watch)
        return start_watch(p);
    spawn_args a;
    if (!spawn_args_of(p, plan_fds_, a))
        return spawn_failed(EPROTO);
    exec_cgroup cg;
    if (int err = make_leaf(f, cg); err != 0)
        return spawn_failed(err, proto::stage_cgroup);
    a.cgroup_fd = cg.leaf ? cg.leaf.fd() : -1;
    pid_t pid = -1;
    const spawn_filters filters{f.caps.max_processes > 0,
                                (f.options & proto::opt_connect_broker) != 0};
    unique_fd listener;
    proto::spawn_stage stage = proto::stage_command;
    int rc = filters.fork_gate || filters.connect_broker
                 ? spawn_filtered(a, filters, pid, listener, stage)
                 : spawn_command(a, pid);
    // Taken after the spawn: our peak then covers the address space the command's exec
    // replaced (the child's stack included), whose peak its ru_maxrss takes over.
    struct rusage self{};
    ::getrusage(RUSAGE_SELF, &self);
    // Our copies of the command's pipes go now, or the library never sees EOF.
    unique_fd started = started_of(f, plan_fds_);
    plan_fds_.clear();
    if (rc != 0)
    {
        if (cg.leaf)
            keep_or_remove(cg.leaf);
        return spawn_failed(rc, stage);
    }
    auto x = std::make_shared<execution>(ctx_);
    if (cg.leaf)
        x->cgroup = std::make_shared<exec_cgroup>(std::move(cg));
    x->pid = pid;
    x->spawner_maxrss_kib = self.ru_maxrss;
    x->children_base = children_cpu();
    start_broker(*x, filters, listener, p.allowed_sockets);
    add_enforcers(x, f, std::move(listener));
    cur_ = x;
    feed(x, {event_kind::spawned});
    if (f.options & proto::opt_report_spawn)
    {
        proto::spawned_msg sm{pid, 0};
        proto::send_message(chan_.native_handle(), proto::msg_type::spawned, 0,
                            proto::as_bytes(sm));
    }
    watch(x, f, std::move(started));
}

// The pid a pidfd names in our pid namespace (its fdinfo), or -1 once it has ended (or when
// it cannot be read).
pid_t pid_of_pidfd(int fd)
{
    std::FILE* f = std::fopen(("/proc/self/fdinfo/" + std::to_string(fd)).c_str(), "re");
    if (!f)
        return -1;
    pid_t pid = -1;
    char line[256];
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "Pid: %d", &pid) == 1)
            break;
    std::fclose(f);
    return pid;
}

// A cap watch (proto::opt_watch): the caps of the plan held by sampling on a process the
// library's caller started and on its descendants. Nothing is spawned and nothing of that
// tree is ours to reap: the watch ends when a cap trips (the tree is killed) or when the
// process ends (its pidfd turns readable), and the cancelled watch's channel closing leaves
// the tree alone (end_reason::abandoned).
void worker::start_watch(const proto::plan& p)
{
    const auto& f = p.fixed;
    if (plan_fds_.size() != 1 || !f.caps.any())
        return spawn_failed(EPROTO);
    unique_fd pidfd = std::move(plan_fds_[0]);
    plan_fds_.clear();
    const pid_t pid = pid_of_pidfd(pidfd.get());
    if (pid <= 0)
        return spawn_failed(ESRCH);
    auto x = std::make_shared<execution>(ctx_);
    x->pid = pid;
    x->watching = true;
    x->children_base = children_cpu();
    sampled_setup s;
    s.limits = f.caps;
    s.interval = nanoseconds(f.sample_interval_ns);
    s.faults = f.sample_faults;
    s.children_base = x->children_base;
    s.list = [pid](std::vector<subtree_member>& out) { return list_tree_of(pid, out); };
    x->enforcers.push_back(make_sampled_caps(ctx_, std::move(s), trip_of(x)));
    x->leader_fd.assign(pidfd.release());
    cur_ = x;
    feed(x, {event_kind::spawned});
    for (auto& e : x->enforcers)
        e->start();
    asio::co_spawn(ctx_, leader_exit_wait(x), asio::detached);
}

// A watched tree is stopped only for a cause of ours (a cap, its sampling failing): not when
// its process ended by itself, nor when the library let go of the watch.
void worker::stop_watched(execution& x, int sig)
{
    if (x.reason == end_reason::natural || x.reason == end_reason::abandoned ||
        !x.leader_fd.is_open())
        return;
    x.killed_after += signal_tree_of(x.pid, x.leader_fd.native_handle(), sig);
}

// The watched process ended (a pidfd turns readable then): the watch is over.
awaitable worker::leader_exit_wait(execution_ptr x)
{
    boost::system::error_code ec;
    co_await x->leader_fd.async_wait(asio::posix::stream_descriptor::wait_read,
                                     asio::redirect_error(asio::use_awaitable, ec));
    if (ec || x->phase != worker_phase::running)
        co_return;
    // Still unreaped (its pidfd still names it): its record is its final account.
    int err = 0;
    if (pid_of_pidfd(x->leader_fd.native_handle()) == x->pid)
        if (const auto st = read_proc_stat(x->pid, err))
            x->final_cpu = nanoseconds(static_cast<std::int64_t>(
                st->cpu_ticks() *
                (1'000'000'000ull / static_cast<std::uint64_t>(clock_ticks_per_second()))));
    feed(x, {event_kind::leader_reaped});
}

// The execution's own cgroup, when the plan asks for one and the helper has a tree: 0 (a
// leaf in `cg`, or none when none is needed) or the errno that fails a spawn requiring one.
// The caps whose controller the tree has go to the kernel (`cg.kernel`).
int worker::make_leaf(const proto::plan_fixed& f, exec_cgroup& cg)
{
    if ((f.options & proto::opt_cgroup) == 0)
        return 0;
    const bool required = (f.options & proto::opt_cgroup_required) != 0;
    if (cg_.tree_fd < 0)
        return required ? ENOENT : 0; // the helper could not make its tree
    if (spare_leaf_) // (only kept where no controller holds a cap: nothing to set)
    {
        cg.leaf = std::move(spare_leaf_);
        cg.cpu_base = spare_cpu_;
        return 0;
    }
    if (cg_.controllers & cgc_memory)
        cg.kernel.memory_bytes = f.caps.memory_bytes;
    if (cg_.controllers & cgc_pids)
        cg.kernel.max_tasks = f.caps.max_tasks;
    const std::string name =
        "x-" + std::to_string(::getpid()) + "-" + std::to_string(++leaves_made_);
    std::string why;
    int err = cgroup_leaf::make(cg_.tree_fd, name, cg.kernel, cg_.controllers, cg.leaf, why);
    if (err == 0 || required)
        return err;
    cg.kernel = {}; // auto: run without a cgroup; the sampler holds every cap
    return 0;
}

// The enforcers of the plan's caps: the cgroup's, for those its controllers hold (and the
// report's cpu time), the sampler for the rest (and the fork gate's listener).
void worker::add_enforcers(const execution_ptr& x, const proto::plan_fixed& f, unique_fd gate)
{
    std::function<void(const seccomp_notif&)> other_calls;
    if (x->broker && gate)
        other_calls = [b = x->broker](const seccomp_notif& n) { b->serve(n); };
    if (x->cgroup)
        x->enforcers.push_back(make_cgroup_caps(ctx_, x->cgroup, trip_of(x)));
    sampled_setup s;
    s.limits = f.caps;
    if (x->cgroup && x->cgroup->kernel.memory_bytes > 0)
        s.limits.memory_bytes = 0;
    if (x->cgroup && x->cgroup->kernel.max_tasks > 0)
        s.limits.max_tasks = 0;
    if (!s.limits.any() && !gate)
        return;
    s.interval = nanoseconds(f.sample_interval_ns);
    s.faults = f.sample_faults;
    s.children_base = x->children_base;
    s.gate = std::move(gate);
    s.other_calls = std::move(other_calls);
    s.cgroup = x->cgroup;
    x->enforcers.push_back(make_sampled_caps(ctx_, std::move(s), trip_of(x)));
}

// The unix-socket policy's broker, on the filter's listener: its own receiver, or under a
// process cap a copy of the listener the fork gate receives on (one listener per tree), the
// gate passing it the connects. Without a broker (no thread or descriptor to be had) every
// connect fails: ENOSYS once the listener is gone, or the gate stops the tree as
// unenforceable at the first one.
void worker::start_broker(execution& x, const spawn_filters& filters, unique_fd& listener,
                          const std::vector<proto::socket_file>& allowed)
{
    if (!filters.connect_broker)
        return;
    unique_fd own = filters.fork_gate ? unique_fd(::fcntl(listener.get(), F_DUPFD_CLOEXEC, 3))
                                      : std::move(listener);
    if (own)
        x.broker = connect_broker::start(std::move(own), allowed, !filters.fork_gate);
}

// An enforcer's trip is fed like any event (the execution, which holds its enforcers, is
// held weakly: a trip after its end finds nothing to stop).
trip_fn worker::trip_of(const execution_ptr& x)
{
    return [this, weak = std::weak_ptr<execution>(x)](const event& ev, const stop_detail& d) {
        if (auto run = weak.lock())
            feed(run, ev, d);
    };
}

// Starts the watchers a run needs: the enforcers, the deadline. A wrapped command's
// deadline is its set-up bound until the init says "started", then its timeout.
void worker::watch(const execution_ptr& x, const proto::plan_fixed& f, unique_fd started)
{
    for (auto& e : x->enforcers)
        e->start();
    const nanoseconds grace(std::max<std::int64_t>(f.kill_grace_ns, 0));
    if (!started)
        return arm_deadline(x, nanoseconds(f.timeout_ns), grace);
    arm_deadline(x, nanoseconds(f.setup_timeout_ns), grace);
    x->started.assign(started.release());
    asio::co_spawn(ctx_, started_wait(x, nanoseconds(f.timeout_ns), grace), asio::detached);
}

// Arms the deadline `after` from now (0: none), replacing one armed before.
void worker::arm_deadline(const execution_ptr& x, nanoseconds after, nanoseconds grace)
{
    x->deadline_timer.cancel();
    if (after <= nanoseconds(0))
        return;
    x->deadline_timer.expires_after(after);
    asio::co_spawn(ctx_, deadline_wait(x, grace), asio::detached);
}

// The status pipe turns readable once the init has said "started" (or every writer is
// gone: then the wrapper is ending anyway): from then on the timeout counts. The pipe is
// not read here; the library reads it after the tree is gone.
awaitable worker::started_wait(execution_ptr x, nanoseconds timeout, nanoseconds grace)
{
    boost::system::error_code ec;
    co_await x->started.async_wait(asio::posix::stream_descriptor::wait_read,
                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec || x->reason != end_reason::none || x->phase != worker_phase::running)
        co_return; // stopped, or the set-up bound ran out first
    x->started.close(ec);
    arm_deadline(x, timeout, grace);
}

// The deadline (watch arms the timer): the same stop a kill request for it makes. A wait
// whose timer was re-armed ends aborted and stops nothing.
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
    for (auto& e : cur_->enforcers)
        e->on_reaped(p);
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
