// helper/worker_start.cpp: the start of a run in the worker (worker_run.hpp): the command
// spawned (or a caller's process watched), its cgroup leaf, the enforcers of its caps, the
// unix-socket broker, and the timers of the deadline, the set-up and the grace.
#include "helper/worker_run.hpp"

#include "helper/cap_enforcer.hpp"
#include "helper/cgroup.hpp"
#include "helper/cgroup_caps.hpp"
#include "helper/channel.hpp"
#include "helper/connect_broker.hpp"
#include "helper/fork_gate.hpp"
#include "helper/inside_paths.hpp"
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

namespace sandbox::detail::worker_impl {

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

// A plan for a worker inside an instance (proto::opt_inside): its work directory, opened
// here in the sandbox's view into `dir`, its command looked up on its own PATH, and its terminal
// by the descriptor that came with the plan (the host's name for it, /dev/pts/N, is not in
// the sandbox's /dev). 0, or the errno and the stage it belongs to.
int resolve_inside(const proto::plan& p, spawn_args& a, unique_fd& dir, proto::spawn_stage& stage)
{
    if (!a.tty_path.empty())
    {
        a.tty_fd = a.stdout_fd; // the slave, held until the spawn
        a.tty_path.clear();
    }
    if (!p.work_dir_path.empty())
    {
        dir.reset(::open(p.work_dir_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!dir)
        {
            stage = proto::stage_work_dir;
            return errno;
        }
        a.work_dir_fd = dir.get();
    }
    if (a.executable.find('/') != std::string::npos)
        return 0;
    int err = 0;
    const std::string cwd = p.work_dir_path.empty() ? std::string(".") : p.work_dir_path;
    std::string found = find_on_path(a.executable, path_of(a.envp), cwd, probe_executable, err);
    if (found.empty())
        return err;
    a.executable = std::move(found);
    return 0;
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
    unique_fd inside_dir;
    if (f.options & proto::opt_inside)
    {
        proto::spawn_stage stage = proto::stage_command;
        if (int err = resolve_inside(p, a, inside_dir, stage); err != 0)
        {
            plan_fds_.clear();
            return spawn_failed(err, stage);
        }
    }
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
    struct rusage self
    {
    };
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
    if (spare_leaf_)                  // (only kept where no controller holds a cap: nothing to set)
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

} // namespace sandbox::detail::worker_impl
