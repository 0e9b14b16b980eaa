// lib/runner.cpp: noop_runner, and the compiled half of every completion-token front end
// (lib/front_end.hpp).
#include <sandbox/runner.hpp>

#include "front_end.hpp"

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

// The edge: the one place an exec's failure becomes an exception.
asio::awaitable<exec_result> runner::exec(exec_request req)
{
    exec_outcome o = co_await try_exec(std::move(req));
    if (o.ec)
        detail::throw_failed(o.ec, std::move(o.result));
    co_return std::move(o.result);
}

asio::awaitable<exec_outcome> noop_runner::try_exec(exec_request)
{
    exec_outcome o;
    o.result.exit_code = 0;
    o.result.status = exec_status::exited;
    co_return o;
}

namespace detail {

caught catch_exception(std::exception_ptr ep)
{
    caught c;
    try
    {
        std::rethrow_exception(ep);
    }
    catch (const sandbox::error& e)
    {
        c.code = e.code();
        c.diag = e.diag();
        if (e.partial_result())
            c.partial = *e.partial_result();
    }
    catch (const boost::system::system_error& e)
    {
        c.code = e.code();
        c.diag.message = e.what();
    }
    catch (const std::exception& e)
    {
        c.code = make_error_code(errc::internal);
        c.diag.message = e.what();
    }
    catch (...)
    {
        c.code = make_error_code(errc::internal);
        c.diag.message = "unknown exception";
    }
    return c;
}

exec_outcome outcome_of(caught c)
{
    exec_outcome o;
    o.ec = c.code;
    fill_failed(o.result, c);
    return o;
}

void throw_failed(boost::system::error_code ec, exec_result&& r)
{
    if (r.status == exec_status::not_started) // nothing ran: no partial result
        throw error(ec, std::move(r.diag));
    diagnostics d = r.diag; // the exception's own, beside the partial result's
    throw error(ec, std::move(d), std::move(r));
}

void fill_failed(exec_result& r, const caught& c)
{
    if (c.partial)
        r = *c.partial;
    if (r.diag.empty())
        r.diag = c.diag;
}

void launch(asio::any_io_executor ex, asio::awaitable<void> body, diagnostics_sink sink,
            asio::any_completion_handler<void(boost::system::error_code)> handler)
{
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto hex = asio::get_associated_executor(handler, ex);
    asio::co_spawn(ex, accept_cancellation(std::move(body)),
                   asio::bind_cancellation_slot(
                       slot, asio::bind_executor(hex, [h = std::move(handler),
                                                       sink = std::move(sink)](
                                                          std::exception_ptr ep) mutable {
                           boost::system::error_code ec;
                           if (ep)
                           {
                               caught c = catch_exception(ep);
                               ec = c.code;
                               if (sink)
                                   *sink = std::move(c.diag);
                           }
                           std::move(h)(ec);
                       })));
}

void launch(asio::any_io_executor ex, asio::awaitable<exec_outcome> body, diagnostics_sink sink,
            asio::any_completion_handler<void(boost::system::error_code, exec_result)> handler)
{
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto hex = asio::get_associated_executor(handler, ex);
    auto complete = [h = std::move(handler), sink = std::move(sink)](std::exception_ptr ep,
                                                                     exec_outcome o) mutable {
        if (ep) // not a failed run (those are values): a runner of the caller's that threw
            o = outcome_of(catch_exception(ep));
        if (o.ec && sink)
            *sink = o.result.diag; // the result keeps its own
        std::move(h)(o.ec, std::move(o.result));
    };
    asio::co_spawn(
        ex, accept_cancellation(std::move(body)),
        asio::bind_cancellation_slot(slot, asio::bind_executor(hex, std::move(complete))));
}

void async_exec_impl(runner* r, exec_request req, diagnostics_sink sink, exec_handler handler)
{
    launch(r->get_executor(), r->try_exec(std::move(req)), std::move(sink), std::move(handler));
}

} // namespace detail
} // namespace sandbox
