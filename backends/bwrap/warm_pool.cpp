// backends/bwrap/warm_pool.cpp: the runner's warm sandboxes (warm_pool.hpp).
#include "warm_pool.hpp"
#include "instance.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

namespace sandbox::bwrap {

namespace asio = boost::asio;

bool pool_usable(const net_policy& warm_net) noexcept
{
    return warm_net.mode == net_mode::inherit || warm_net.mode == net_mode::deny_all;
}

bool pool_serves(const exec_request& r, const net_policy& warm_net) noexcept
{
    return pool_usable(warm_net) && !r.tty && r.http.empty() && r.options.net == warm_net &&
           !r.options.limits.has_sampled_caps();
}

warm_pool::warm_pool(asio::any_io_executor ex, std::size_t size, const bwrap_runner_options& o,
                     std::shared_ptr<bwrap_runner::state> st)
    : ex_(std::move(ex)), size_(size), opts_(std::make_shared<const bwrap_runner_options>(o)),
      st_(std::move(st))
{}

warm_instance warm_pool::take()
{
    const auto now = std::chrono::steady_clock::now();
    warm_instance out;
    while (!out.inst && !ready_.empty())
    {
        out = std::move(ready_.front());
        ready_.pop_front();
        // Ended by itself while it waited (killed from outside), or waited too long: its
        // destruction kills it.
        if (!out.inst->is_open() || now - out.opened > warm_max_age)
            out = {};
    }
    if (!out.inst)
        refill();
    return out;
}

void warm_pool::refill(const enforcement_report& e)
{
    report_ = e;
    refill();
}

void warm_pool::refill()
{
    if (!report_ || !st_->probed || st_->unusable || st_->setup_error ||
        std::chrono::steady_clock::now() - failed_at_ < warm_retry_after)
        return;
    const auto& e = *report_;
    while (ready_.size() + opening_ < size_)
    {
        ++opening_;
        asio::co_spawn(ex_, open_one(weak_from_this(), ex_, opts_, st_, e), asio::detached);
    }
}

// One instance opened for the pool and primed: a first command starts the instance's first
// worker inside and pages in what every command runs (twice the time of the next command
// here), done now rather than in the call that will take it. Kept only if the prime ran
// cleanly; when the pool has gone meanwhile (its runner destroyed), closed at once.
asio::awaitable<void> warm_pool::open_one(std::weak_ptr<warm_pool> pool, asio::any_io_executor ex,
                                          std::shared_ptr<const bwrap_runner_options> o,
                                          std::shared_ptr<bwrap_runner::state> st,
                                          enforcement_report e)
{
    // However this ends (an exception included), the open is no longer under way; unless it
    // is kept, it failed.
    struct settle
    {
        std::weak_ptr<warm_pool> pool;
        bool kept = false;
        ~settle()
        {
            if (auto p = pool.lock())
            {
                --p->opening_;
                if (!kept)
                    p->failed_at_ = std::chrono::steady_clock::now();
            }
        }
    } settled{pool};
    instance_spec spec; // a named object: GCC 12 mishandles a temporary argument of a
                        // coroutine called in a co_await
    spec.options.net = o->warm_net;
    auto records = std::make_shared<net_record_handler>();
    spec.on_net_record = [records](const net_record& r) {
        if (*records)
            (*records)(r);
    };
    auto opened = co_await open_instance(ex, *o, st, std::move(e), std::move(spec));
    if (!opened)
        co_return;
    bool primed = false;
    if (!pool.expired())
    {
        exec_request prime;
        prime.command = "/bin/true";
        auto ran = co_await (*opened)->try_exec(std::move(prime));
        primed = !ran.ec && ran.result.status == exec_status::exited && ran.result.exit_code == 0;
    }
    auto p = pool.lock();
    if (!p || !primed || !(*opened)->is_open())
    {
        co_await (*opened)->close();
        co_return;
    }
    settled.kept = true;
    p->ready_.push_back(
        warm_instance{std::move(*opened), std::move(records), std::chrono::steady_clock::now()});
}

} // namespace sandbox::bwrap
