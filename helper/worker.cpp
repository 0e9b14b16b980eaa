// helper/worker.cpp: the per-execution subreaper (see worker.hpp), its life cycle; the
// start of a run is in worker_start.cpp, the class in worker_run.hpp. Coroutines on the
// worker's own io_context, on its main thread, read the channel, watch the helper's lifeline,
// reap children (SIGCHLD through a signalfd: blocked in every thread, which inherit the
// mask) and keep the deadline; the caps are held by the execution's enforcers
// (cap_enforcer.hpp), whose trips come back here as events. The coroutines decide nothing
// about the run's life cycle: they feed what they saw to `worker::feed`, which asks
// worker_phase.hpp's transition what to do and does it.
#include "helper/worker_run.hpp"

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

namespace worker_impl {

namespace {

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

} // namespace

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
    for (auto& e : x.enforcers)
        e->on_all_reaped();
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

} // namespace worker_impl

void run_worker(int chan, int lifeline, const rlimit& command_nofile, worker_cgroup cgroup)
{
    worker_impl::close_other_fds({chan, lifeline, cgroup.tree_fd});
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
        boost::asio::io_context ctx(1);
        worker_impl::worker w(ctx, chan, lifeline, sigfd, cgroup);
        w.start();
        ctx.run();
    }
    ::_exit(0);
}

} // namespace sandbox::detail
