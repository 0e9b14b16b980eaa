// lib/supervisor/client.hpp: the library's side of the supervisor helper. One service per
// execution context: it starts `sandbox-supervisor` on first use, keeps a pool of channels
// to idle workers, and closes everything (so the helper kills every tree) on shutdown.
#ifndef SANDBOX_LIB_SUPERVISOR_CLIENT_HPP
#define SANDBOX_LIB_SUPERVISOR_CLIENT_HPP

#include "protocol/protocol.hpp"

#include <sandbox/unique_fd.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/sampler.hpp>

#include <boost/asio/execution_context.hpp>

#include <atomic>
#include <mutex>
#include <string>
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

    /// A non-blocking channel to an idle worker, ready for one plan. Starts the helper when
    /// needed (and again when it died). Errors: `not_available` when the helper program is
    /// missing; `internal` (with the OS error as cause) when it cannot be started or reached.
    outcome<backend::unique_fd> acquire();

    /// Returns the channel of a worker that finished a plan normally (idle again).
    void release(backend::unique_fd channel);

    /// Counters, fed by the executions.
    void on_capped_start() noexcept { ++watched_; }
    void on_capped_end(const proto::exit_report_msg* report) noexcept;
    sampler_stats stats() const noexcept;

    /// Pid of the running helper, or -1 (for tests).
    pid_t helper_pid() const;

private:
    void shutdown() override;
    outcome<void> start_helper_locked();
    void stop_helper_locked(bool wait);

    mutable std::mutex mu_;
    backend::unique_fd control_;
    backend::unique_fd helper_pidfd_;
    pid_t helper_pid_ = -1;
    std::vector<backend::unique_fd> idle_;
    std::atomic<std::size_t> watched_{0};
    std::atomic<std::uint64_t> samples_{0}, failed_{0}, budget_kills_{0}, unenforceable_kills_{0};
};

/// Where the helper program is: $SANDBOX_SUPERVISOR, else the installed copy, else the one in
/// the build tree. Empty when none is executable.
std::string supervisor_program();

/// Runs `sandbox-supervisor --probe-fork-gate` and waits for it (about a millisecond; once
/// per process, from `fork_gate_usable`): 0 when the fork gate's real filter installs, else
/// the errno it failed with (ENOENT: no helper program).
int probe_fork_gate_in_helper();

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SUPERVISOR_CLIENT_HPP
