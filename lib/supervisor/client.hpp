// lib/supervisor/client.hpp: the library's side of the supervisor helper. One service per
// execution context: it starts `sandbox-supervisor` on first use, keeps a pool of channels
// to idle workers, and closes everything (so the helper kills every tree) on shutdown.
// Nothing here waits on the caller's thread: a full control socket, a helper to replace and
// a dead helper to reap are waited for on the caller's executor.
#ifndef SANDBOX_LIB_SUPERVISOR_CLIENT_HPP
#define SANDBOX_LIB_SUPERVISOR_CLIENT_HPP

#include "kernel/cgroup_site.hpp"
#include "protocol/idle_claim.hpp"
#include "protocol/protocol.hpp"

#include <sandbox/failure.hpp>
#include <sandbox/sampler.hpp>
#include <sandbox/unique_fd.hpp>
#include <sandbox/worker_pool.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace sandbox::detail {

class supervisor_service : public boost::asio::execution_context::service
{
public:
    using key_type = supervisor_service;
    static boost::asio::execution_context::id id;

    explicit supervisor_service(boost::asio::execution_context& ctx);
    ~supervisor_service() override;

    using channel_handler = std::function<void(outcome<backend::unique_fd>)>;

    /// \brief A non-blocking channel to an idle worker, ready for one plan, for `h`.
    ///
    /// `h` runs inline when a worker was asked for at once (an idle one, or a request the
    /// control socket took: the helper forks the worker meanwhile, the plan waits in the
    /// channel), else later through `ex`. Starts the helper when needed, and again when it
    /// died: its posix_spawn is the only system call here that waits (a vfork, back once the
    /// helper's exec began). A full control socket is waited for on `ex`; a helper that
    /// takes nothing for 100 ms is killed and replaced, and a dead one is reaped on `ex`.
    /// Errors: `not_available` when the helper program is missing; `internal` (with the OS
    /// error as cause) when it cannot be started or reached.
    void async_acquire(const boost::asio::any_io_executor& ex, channel_handler h);

    /// \brief Returns the channel of a worker that finished a plan normally (idle again).
    /// It waits in the pool (worker_pool.hpp). One that finds `keep_idle` others waiting is
    /// told to retire after `retire_after` (it keeps the time itself, see idle_claim.hpp);
    /// one that finds `max_idle` is let go at once.
    void release(backend::unique_fd channel);

    /// The pool's bounds (set_worker_pool_options).
    void set_pool_options(const worker_pool_options& o);
    worker_pool_options pool_options() const;
    worker_pool_stats pool_stats() const;
    /// \brief The plan options (`proto::opt_cgroup`, `opt_cgroup_required`) for a runner's
    /// `cgroup` setting ("" or "off", "auto", a directory). The first runner to ask decides
    /// where this context's helper puts its tree; another directory later is refused, and
    /// so is a directory where the cgroup path cannot be used (`not_available`). "auto"
    /// where it cannot be used asks for nothing (the sampler holds the caps).
    outcome<std::uint32_t> cgroup_options(const std::string& request);

    /// \brief Keeps a backend's resources for a tree whose end was not reported (its worker
    /// was lost, or the caller went away mid-run) until the helper that ran it is reaped: the
    /// helper kills and reaps every tree before it exits. Released at once when no helper
    /// runs (after shutdown).
    void keep_until_helper_gone(std::shared_ptr<void> resources);

    /// Counters, fed by the executions.
    void on_capped_start() noexcept { ++watched_; }
    void on_capped_end(const proto::exit_report_msg* report) noexcept;
    sampler_stats stats() const noexcept;

    /// Pid of the running helper, or -1 (for tests).
    pid_t helper_pid() const;

private:
    struct waiter
    {
        boost::asio::any_io_executor ex;
        channel_handler h;
    };
    struct room_wait;
    struct retired
    {
        pid_t pid;
        std::uint64_t generation;
        std::string tree; // its cgroup tree, killed with it; removed once it is reaped
    };
    using kept_list = std::vector<std::pair<std::uint64_t, std::shared_ptr<void>>>;
    struct idle_worker
    {
        backend::unique_fd channel;
        proto::idle_claim claim; // empty: kept however long it waits
    };

    void shutdown() override;
    outcome<void> start_helper_locked();
    void stop_helper_locked(bool wait);
    backend::unique_fd idle_channel_locked();
    void prune_retired_locked(std::vector<idle_worker>& gone);
    outcome<backend::unique_fd> request_worker_locked(const boost::asio::any_io_executor& ex);
    void wait_for_room_locked(const boost::asio::any_io_executor& ex);
    void on_room(const std::shared_ptr<room_wait>& w, bool wedged);
    void retire_helper_locked(const boost::asio::any_io_executor& ex);
    void reap_later(const boost::asio::any_io_executor& ex, pid_t pid, backend::unique_fd pidfd);
    void wait_exit(const boost::asio::any_io_executor& ex, pid_t pid);
    void reaped(pid_t pid);
    kept_list take_kept_locked(std::uint64_t generation);

    // The cgroup request of this context (set once) and where its helpers' trees go.
    std::optional<std::string> cgroup_request_;
    cgroup_site cgroup_site_;
    std::string helper_tree_; // the running helper's tree ("" without one)
    void kill_helper_tree_locked();

    mutable std::mutex mu_;
    backend::unique_fd control_;
    backend::unique_fd helper_pidfd_;
    pid_t helper_pid_ = -1;
    std::uint64_t generation_ = 0;      // of the helper running (or the next one)
    std::vector<idle_worker> idle_;     // oldest first; the newest serves next
    worker_pool_options pool_;
    std::uint64_t retired_workers_ = 0;
    std::deque<waiter> waiting_;         // for room on the control socket, in order
    std::vector<retired> retired_;       // killed helpers not reaped yet
    kept_list kept_;                     // by the generation of the helper that ran them
    std::atomic<std::size_t> watched_{0};
    std::atomic<std::uint64_t> samples_{0}, failed_{0}, budget_kills_{0}, unenforceable_kills_{0};
    std::atomic<std::int64_t> longest_gap_ns_{0};
};

/// Where the helper program is (see supervisor/program_lookup.hpp). Empty when no candidate is
/// usable.
std::string supervisor_program();

/// Runs `sandbox-supervisor --probe-fork-gate` and waits for it (a few milliseconds; once
/// per process, from `fork_gate_usable`): 0 when the fork gate's real filter installs, else
/// the errno it failed with (ENOENT: no helper program).
int probe_fork_gate_in_helper();

/// \brief True when a process cap surely cannot be held here, from what costs no process:
/// the kernel's version and a seccomp() call that installs nothing, or the probe of
/// `fork_gate_usable` when it already ran. Never starts the probe: the exec path asks this,
/// and a gate that only fails once installed fails the spawn (`fork_gate_unavailable`).
bool fork_gate_ruled_out() noexcept;

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SUPERVISOR_CLIENT_HPP
