// backends/bwrap/warm_pool.hpp: `bwrap_runner_options::warm`: sandboxes opened ahead of the
// one-shot calls that will use them. Each is an instance of the runner's own policy (no
// options of its own), used by one call and closed after it: nothing a command leaves in it
// (files in its /tmp, its writes) reaches another call.
#ifndef SANDBOX_BACKENDS_BWRAP_WARM_POOL_HPP
#define SANDBOX_BACKENDS_BWRAP_WARM_POOL_HPP

#include "runner_state.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/instance.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>

namespace sandbox::bwrap {

/// Does this one-shot call run in a warm instance (opened with `warm_net`, no caps) exactly
/// as it runs cold? Only with `warm_net` as its network, and that one without an egress
/// proxy (whose records and inspection a cold exec settles before its result); no caps
/// (a cold exec's memory cap also bounds its /tmp, and its caps go in its cgroup); no
/// terminal, no hooks of inspected requests.
bool pool_serves(const exec_request& r, const net_policy& warm_net) noexcept;

/// Can warm instances with this network serve anything (`pool_serves`)?
bool pool_usable(const net_policy& warm_net) noexcept;

/// How long a warm instance may wait for a call: what was resolved at its open (write-deny
/// and read-deny binds, which a host rename detaches; bound sockets; the stand-ins on the
/// host) is then as fresh as a cold exec's within this bound. An older one is dropped.
inline constexpr std::chrono::seconds warm_max_age{30};

/// After an open fails, none is tried for this long.
inline constexpr std::chrono::seconds warm_retry_after{5};

/// A warm instance and where its network records go: to the call that takes it.
struct warm_instance
{
    std::shared_ptr<instance> inst;
    std::shared_ptr<net_record_handler> records;
    std::chrono::steady_clock::time_point opened{};
};

class warm_pool : public std::enable_shared_from_this<warm_pool>
{
public:
    warm_pool(boost::asio::any_io_executor ex, std::size_t size, const bwrap_runner_options& o,
              std::shared_ptr<bwrap_runner::state> st);

    /// An open instance, taken out of the pool (those past `warm_max_age` are dropped); none
    /// ready: null, and the pool refills. (After a call the runner refills: a replacement
    /// opening beside the call would slow it.)
    warm_instance take();

    /// Opens instances in the background until `size` are ready or opening, `e` being the
    /// runner's enforcement (kept for later refills). Nothing while bwrap is not known to
    /// work here, nor within `warm_retry_after` of a failed open.
    void refill(const enforcement_report& e);
    /// The same with the enforcement kept (nothing before the first `refill(e)`).
    void refill();
    bool has_report() const noexcept { return report_.has_value(); }

    std::size_t ready() const noexcept { return ready_.size(); }

private:
    static boost::asio::awaitable<void> open_one(std::weak_ptr<warm_pool> pool,
                                                 boost::asio::any_io_executor ex,
                                                 std::shared_ptr<const bwrap_runner_options> o,
                                                 std::shared_ptr<bwrap_runner::state> st,
                                                 enforcement_report e);

    boost::asio::any_io_executor ex_;
    std::size_t size_;
    std::shared_ptr<const bwrap_runner_options> opts_; // held by the opens under way too
    std::shared_ptr<bwrap_runner::state> st_;
    std::deque<warm_instance> ready_;
    std::optional<enforcement_report> report_;
    std::size_t opening_ = 0;
    std::chrono::steady_clock::time_point failed_at_{}; // the last failed open
};

} // namespace sandbox::bwrap

#endif // SANDBOX_BACKENDS_BWRAP_WARM_POOL_HPP
