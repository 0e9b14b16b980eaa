// lib/sampler/sampler_service.hpp: one /proc cap sampler per execution context, shared by
// every supervised tree on it (one timer, one pass over the due trees per tick).
#ifndef SANDBOX_LIB_SAMPLER_SAMPLER_SERVICE_HPP
#define SANDBOX_LIB_SAMPLER_SAMPLER_SERVICE_HPP

#include "process/tree.hpp"
#include "sampler/budget.hpp"

#include <sandbox/backend/unique_fd.hpp>

#include <sandbox/sampler.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace sandbox::detail {

/// Why a supervised tree was stopped. The first party to claim a reason wins, so a kill is
/// never attributed to the wrong cause (for example a cap sample racing a timeout).
enum class end_reason : int
{
    none = 0,
    natural,       // the leader exited by itself first
    timed_out,
    cancelled,
    budget,        // the sampler killed it for a cap
    unenforceable, // the sampler killed it after repeated sampling failures
};

class kill_arbiter
{
public:
    bool claim(end_reason r) noexcept
    {
        int expected = 0;
        return reason_.compare_exchange_strong(expected, static_cast<int>(r));
    }
    end_reason get() const noexcept { return static_cast<end_reason>(reason_.load()); }

private:
    std::atomic<int> reason_{0};
};

class sampler_service;

/// \brief The sampler's view of one tree. Shared by the supervisor and the sampler.
class tree_watch
{
public:
    tree_watch(pid_t leader, cap_limits limits, std::chrono::nanoseconds interval,
               std::shared_ptr<kill_arbiter> arbiter);

    /// After this returns the sampler never reads or signals the tree again. Idempotent.
    void stop();

    /// The decision that ended sampling (`keep_going` when it did not kill).
    cap_decision decision() const;
    std::uint64_t peak_rss_bytes() const;
    std::chrono::nanoseconds cpu_used() const;
    /// Members seen at the last sample (with start times, for a safe kill).
    std::vector<known_process> members() const;
    /// Text of the last sampling failure.
    std::string last_failure() const;

private:
    friend class sampler_service;
    std::vector<known_process> members_locked() const;
    struct member_rec
    {
        std::uint64_t starttime = 0;
        pid_t ppid = 0;
        // Kept open between ticks (for the first members of a tree) to save the /proc
        // path walk: one pread per file per tick.
        backend::unique_fd stat_fd{};
        backend::unique_fd children_fd{};
    };

    mutable std::mutex mu_;
    bool stopped_ = false;
    bool done_ = false;
    pid_t leader_;
    cap_budget budget_;
    cpu_ledger ledger_;
    std::unordered_map<pid_t, member_rec> members_;
    std::shared_ptr<kill_arbiter> arbiter_;
    cap_decision decision_{};
    std::string last_failure_;
    std::chrono::nanoseconds interval_;
    std::chrono::steady_clock::time_point next_due_;
};

/// \brief The execution-context service. Create it with
/// `boost::asio::use_service<sampler_service>(ctx)`.
class sampler_service : public boost::asio::execution_context::service
{
public:
    using key_type = sampler_service;
    static boost::asio::execution_context::id id;

    explicit sampler_service(boost::asio::execution_context& ctx);
    ~sampler_service() override;

    /// Starts watching the tree of `leader` (also its process group id). The first sample is
    /// taken one interval from now. The returned watch must be stopped before the leader is
    /// reaped.
    std::shared_ptr<tree_watch> watch(const boost::asio::any_io_executor& ex, pid_t leader,
                                      cap_limits limits, std::chrono::nanoseconds interval,
                                      std::shared_ptr<kill_arbiter> arbiter);

    sampler_stats stats() const;

    /// Test seam: when set and returning true for a leader, that tree's sample fails.
    void set_fault_injector(std::function<bool(pid_t)> f);

private:
    void shutdown() override;
    void arm_locked(std::chrono::steady_clock::time_point when);
    void on_tick();
    bool sample(tree_watch& w, const std::unordered_map<pid_t, std::vector<pid_t>>* by_group,
                const std::function<bool(pid_t)>& fault, tree_usage& u, int& err);

    mutable std::mutex mu_;
    std::optional<boost::asio::any_io_executor> strand_;
    std::optional<boost::asio::steady_timer> timer_;
    std::optional<std::chrono::steady_clock::time_point> armed_for_;
    std::vector<std::shared_ptr<tree_watch>> watches_;
    std::function<bool(pid_t)> fault_;
    std::chrono::steady_clock::time_point next_full_scan_{};
    bool shut_down_ = false;

    std::atomic<std::uint64_t> ticks_{0}, samples_{0}, failed_{0}, budget_kills_{0},
        unenforceable_kills_{0};
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SAMPLER_SAMPLER_SERVICE_HPP
