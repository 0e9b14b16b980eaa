// lib/runner.cpp: the completion-token front end (co_spawn over runner::exec) and noop_runner.
#include <sandbox/runner.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>

#include <exception>
#include <utility>

namespace sandbox {

namespace asio = boost::asio;

runner::~runner() = default;

asio::awaitable<exec_result> noop_runner::exec(exec_request)
{
    exec_result r;
    r.exit_code = 0;
    r.status = exec_status::exited;
    co_return r;
}

namespace detail {
namespace {

using outcome_pair = std::pair<boost::system::error_code, exec_result>;

outcome_pair from_exception(std::exception_ptr ep)
{
    outcome_pair p;
    try
    {
        std::rethrow_exception(ep);
    }
    catch (const sandbox::error& e)
    {
        if (e.partial_result())
            p.second = *e.partial_result();
        if (p.second.diag.empty())
            p.second.diag = e.diag();
        p.first = e.code();
    }
    catch (const boost::system::system_error& e)
    {
        p.first = e.code();
        p.second.diag.message = e.what();
    }
    catch (const std::exception& e)
    {
        p.first = make_error_code(errc::internal);
        p.second.diag.message = e.what();
    }
    catch (...)
    {
        p.first = make_error_code(errc::internal);
        p.second.diag.message = "unknown exception";
    }
    return p;
}

asio::awaitable<outcome_pair> run_one(runner& r, exec_request req)
{
    // Let partial cancellation through to the backend (SIGTERM, then SIGKILL after grace).
    co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
    try
    {
        exec_result res = co_await r.exec(std::move(req));
        co_return outcome_pair{boost::system::error_code{}, std::move(res)};
    }
    catch (...)
    {
        co_return from_exception(std::current_exception());
    }
}

} // namespace

void async_exec_impl(runner& r, exec_request req, exec_handler handler)
{
    auto ex = r.get_executor();
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto hex = asio::get_associated_executor(handler, ex);
    asio::co_spawn(
        ex, run_one(r, std::move(req)),
        asio::bind_cancellation_slot(
            slot, asio::bind_executor(hex, [h = std::move(handler)](std::exception_ptr ep,
                                                                    outcome_pair p) mutable {
                if (ep)
                    p = from_exception(ep);
                std::move(h)(p.first, std::move(p.second));
            })));
}

} // namespace detail
} // namespace sandbox
