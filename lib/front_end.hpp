// lib/front_end.hpp: the compiled half of every completion-token front end, and the hop that
// makes the awaitable members safe to call from any executor.
#ifndef SANDBOX_LIB_FRONT_END_HPP
#define SANDBOX_LIB_FRONT_END_HPP

#include <sandbox/error.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/with_diagnostics.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <utility>

namespace sandbox::detail {

/// What a failed operation threw, as a code, its diagnostics and (exec) the partial result.
struct caught
{
    boost::system::error_code code{};
    diagnostics diag{};
    std::optional<exec_result> partial{};
};

/// Classifies an exception: `sandbox::error` keeps its code, diagnostics and partial result,
/// `system_error` its code, anything else is `errc::internal`.
caught catch_exception(std::exception_ptr ep);

/// The value a failed operation still delivers beside its code (`T{}` unless it says more).
void fill_failed(exec_result& r, const caught& c);
template <class T>
void fill_failed(T&, const caught&)
{
}

/// The outcome of an exec that threw `c` (its partial result kept), and the failure of any
/// other operation that threw it.
exec_outcome outcome_of(caught c);
inline failure failure_of(caught c)
{
    return failure{c.code, std::move(c.diag)};
}

/// \brief Awaits `a`; what it throws becomes the value `as(caught)` (`outcome_of` for an
/// exec, `failure_of` for the rest). The one place inside the library where an exception
/// becomes a value: a runner, a session manager or an approver of the caller's may throw, and
/// an Asio operation started after a cancellation does.
template <class T, class As> boost::asio::awaitable<T> catching(boost::asio::awaitable<T> a, As as)
{
    std::exception_ptr ep;
    try
    {
        co_return co_await std::move(a);
    }
    catch (...)
    {
        ep = std::current_exception();
    }
    co_return T(as(catch_exception(ep)));
}

/// Lets partial cancellation through: the caller's filter (or the handler's slot) has
/// already decided what reaches the operation.
template <class T>
boost::asio::awaitable<T> accept_cancellation(boost::asio::awaitable<T> a)
{
    co_await boost::asio::this_coro::reset_cancellation_state(
        boost::asio::enable_partial_cancellation());
    co_return co_await std::move(a);
}

/// \brief The awaitable a member returns: `body` runs on `ex`, the owner's executor, whatever
/// executor awaits it (the thread rule), and the caller resumes on its own. Cancellation of
/// the awaiting coroutine reaches the body through its own executor.
template <class T>
boost::asio::awaitable<T> on_executor(const boost::asio::any_io_executor& ex,
                                      boost::asio::awaitable<T> body)
{
    return boost::asio::co_spawn(ex, accept_cancellation(std::move(body)),
                                 boost::asio::use_awaitable);
}

/// \brief Runs `body` on `ex` and completes `handler` with `(error_code, T)` on the handler's
/// executor; on failure the diagnostics go to `sink` (when a token asked for them) and the
/// value is filled as `fill_failed` says. The handler's cancellation slot reaches the body.
template <class T>
void launch(boost::asio::any_io_executor ex, boost::asio::awaitable<T> body, diagnostics_sink sink,
            boost::asio::any_completion_handler<void(boost::system::error_code, T)> handler)
{
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    auto hex = boost::asio::get_associated_executor(handler, ex);
    boost::asio::co_spawn(
        ex, accept_cancellation(std::move(body)),
        boost::asio::bind_cancellation_slot(
            slot, boost::asio::bind_executor(hex, [h = std::move(handler), sink = std::move(sink)](
                                                      std::exception_ptr ep, T v) mutable {
                boost::system::error_code ec;
                if (ep)
                {
                    caught c = catch_exception(ep);
                    ec = c.code;
                    fill_failed(v, c);
                    if (sink)
                        *sink = std::move(c.diag);
                }
                std::move(h)(ec, std::move(v));
            })));
}

/// The value of `o`, or its failure thrown as `sandbox::error` (the edge of `open`, `start`:
/// the one place their failures become exceptions).
template <class T> T value_or_throw(outcome<T> o)
{
    if (!o)
    {
        failure f = std::move(o).error();
        throw error(f.code, std::move(f.diag));
    }
    return std::move(*o);
}

/// Throws what a failed exec outcome says: `sandbox::error` with the partial result, or
/// without one when nothing ran (status `not_started`).
[[noreturn]] void throw_failed(boost::system::error_code ec, exec_result&& r);

/// The same as `launch` for an exec, whose failures are values (`exec_outcome`): only an
/// exception (a runner of the caller's that throws) goes through `catch_exception`.
void launch(
    boost::asio::any_io_executor ex, boost::asio::awaitable<exec_outcome> body,
    diagnostics_sink sink,
    boost::asio::any_completion_handler<void(boost::system::error_code, exec_result)> handler);

/// \brief The same for an operation whose failures are values (`outcome<T>`): the handler
/// gets the value, or the failure's code and `T{}` (its diagnostics to `sink`).
template <class T>
void launch(boost::asio::any_io_executor ex, boost::asio::awaitable<outcome<T>> body,
            diagnostics_sink sink,
            boost::asio::any_completion_handler<void(boost::system::error_code, T)> handler)
{
    auto slot = boost::asio::get_associated_cancellation_slot(handler);
    auto hex = boost::asio::get_associated_executor(handler, ex);
    auto complete = [h = std::move(handler), sink = std::move(sink)](std::exception_ptr ep,
                                                                     outcome<T> o) mutable {
        if (ep) // not a failure (those are values): something of the caller's that threw
            o = failure_of(catch_exception(ep));
        if (o)
            return std::move(h)(boost::system::error_code{}, std::move(*o));
        failure f = std::move(o).error();
        if (sink)
            *sink = std::move(f.diag);
        std::move(h)(f.code, T{});
    };
    boost::asio::co_spawn(ex, accept_cancellation(std::move(body)),
                          boost::asio::bind_cancellation_slot(
                              slot, boost::asio::bind_executor(hex, std::move(complete))));
}

/// The same for an operation without a value: `void(error_code)`.
void launch(boost::asio::any_io_executor ex, boost::asio::awaitable<void> body,
            diagnostics_sink sink,
            boost::asio::any_completion_handler<void(boost::system::error_code)> handler);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_FRONT_END_HPP
