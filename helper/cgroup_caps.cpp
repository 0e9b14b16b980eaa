// helper/cgroup_caps.cpp: the kernel's caps of one execution (see cgroup_caps.hpp).
#include "helper/cgroup_caps.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <optional>

#include <fcntl.h>

namespace sandbox::detail {

namespace {

namespace asio = boost::asio;
using proto::end_reason;
using awaitable = asio::awaitable<void>;

class cgroup_caps final : public cap_enforcer, public std::enable_shared_from_this<cgroup_caps>
{
public:
    cgroup_caps(asio::io_context& ctx, std::shared_ptr<const exec_cgroup> cgroup, trip_fn trip)
        : ctx_(ctx), cgroup_(std::move(cgroup)), trip_(std::move(trip))
    {
    }

    // While the kernel holds a cap: a watch on the event files (a copy of the leaf's
    // descriptor, so that stop can close it).
    void start() override
    {
        const auto& kernel = cgroup_->kernel;
        if (kernel.memory_bytes == 0 && kernel.max_tasks == 0)
            return;
        const int copy = ::fcntl(cgroup_->leaf.events_fd(), F_DUPFD_CLOEXEC, 3);
        if (copy < 0)
            return;
        events_.emplace(ctx_, copy);
        asio::co_spawn(ctx_, watch_events(shared_from_this()), asio::detached);
    }

    void stop() override
    {
        boost::system::error_code ignored;
        if (events_)
            events_->close(ignored);
    }

    // The cgroup's cpu.stat holds every member's cpu time, however it was reaped; its
    // memory.peak is the tree's when the kernel held the memory cap.
    void add_to(cap_report& r) const override
    {
        if (const auto cpu = cgroup_->run_cpu())
            r.cpu = std::max(r.cpu, *cpu);
        if (cgroup_->kernel.memory_bytes == 0)
            return;
        if (const auto got = cgroup_->leaf.read())
            r.peak_memory_bytes = std::max(r.peak_memory_bytes, got->memory_peak);
    }

private:
    awaitable watch_events(std::shared_ptr<cgroup_caps> self);
    std::optional<cap_decision> tripped() const;

    asio::io_context& ctx_;
    std::shared_ptr<const exec_cgroup> cgroup_;
    trip_fn trip_;
    std::optional<asio::posix::stream_descriptor> events_;
};

// The cgroup's event files changed: an OOM kill in it is the memory cap's trip, a fork the
// pids controller refused the task cap's, as the sampler would have judged them.
awaitable cgroup_caps::watch_events(std::shared_ptr<cgroup_caps> /*self*/)
{
    while (samples(phase()))
    {
        boost::system::error_code ec;
        co_await events_->async_wait(asio::posix::stream_descriptor::wait_read,
                                     asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !samples(phase()))
            co_return;
        cgroup_->leaf.clear_events();
        if (const auto d = tripped())
        {
            stop_detail detail;
            detail.decision = *d;
            trip_({worker_event::kind::stop, end_reason::budget}, detail);
            co_return;
        }
    }
}

// What the event files say now: a cap the kernel held tripped, or nothing (nullopt, also
// when they cannot be read).
std::optional<cap_decision> cgroup_caps::tripped() const
{
    const auto got = cgroup_->leaf.read();
    if (!got)
        return std::nullopt;
    const auto& kernel = cgroup_->kernel;
    if (got->oom_kills > 0 && kernel.memory_bytes > 0)
        return cap_decision{cap_action::kill_budget, budget_kind::memory,
                            static_cast<std::int64_t>(got->memory_peak),
                            static_cast<std::int64_t>(kernel.memory_bytes)};
    if (got->pids_refused > 0 && kernel.max_tasks > 0)
        return cap_decision{cap_action::kill_budget, budget_kind::tasks,
                            static_cast<std::int64_t>(kernel.max_tasks + 1),
                            static_cast<std::int64_t>(kernel.max_tasks)};
    return std::nullopt;
}

} // namespace

std::shared_ptr<cap_enforcer> make_cgroup_caps(asio::io_context& ctx,
                                               std::shared_ptr<const exec_cgroup> cgroup,
                                               trip_fn trip)
{
    return std::make_shared<cgroup_caps>(ctx, std::move(cgroup), std::move(trip));
}

} // namespace sandbox::detail
