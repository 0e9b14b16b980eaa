// helper/worker_run.hpp: the worker's insides, private to it (worker.hpp is its entry): one
// execution's state and the worker that runs it. Its members live in two files by concern:
//   worker.cpp        the life cycle: the channel, the lifeline, reaping, the transitions
//                     (worker_phase.hpp) and the report
//   worker_start.cpp  the start of a run: the spawn or the watch, the cgroup leaf, the
//                     enforcers, the deadline and grace timers
#ifndef SANDBOX_HELPER_WORKER_RUN_HPP
#define SANDBOX_HELPER_WORKER_RUN_HPP

#include "helper/cap_enforcer.hpp"
#include "helper/cgroup.hpp"
#include "helper/connect_broker.hpp"
#include "helper/fork_gate.hpp"
#include "helper/spawn.hpp"
#include "helper/subtree.hpp"
#include "helper/worker.hpp"
#include "helper/worker_phase.hpp"
#include "protocol/idle_claim.hpp"
#include "protocol/protocol.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/resource.h>

namespace sandbox::detail::worker_impl {

namespace asio = boost::asio;
using backend::unique_fd;
using proto::end_reason;
using std::chrono::nanoseconds;
using awaitable = asio::awaitable<void>;

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
        struct rusage ru
        {
        };
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

/// The exit report of an execution whose tree is all reaped, with its text.
std::string make_exit_report(const execution& x);

using event = worker_event;
using event_kind = worker_event::kind;

class worker
{
public:
    worker(asio::io_context& ctx, int chan, int lifeline, int sigfd, worker_cgroup cg)
        : ctx_(ctx), chan_(ctx, chan), lifeline_(ctx, lifeline), sigfd_(ctx, sigfd),
          retire_timer_(ctx), cg_(cg)
    {}

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

} // namespace sandbox::detail::worker_impl

#endif // SANDBOX_HELPER_WORKER_RUN_HPP
