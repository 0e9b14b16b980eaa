// lib/policy/approval.cpp: asking the approver under a deadline, cancellable by the caller.
#include "policy/policy_runner.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandbox::detail {

namespace asio = boost::asio;

namespace {

// Shared by the waiting call and the approver's completion, which may come later (an
// approver that ignores cancellation): whichever goes last frees it.
struct pending_approval
{
    explicit pending_approval(const asio::any_io_executor& ex) : wake(ex) {}
    asio::steady_timer wake;
    asio::cancellation_signal cancel;
    bool done = false;
    asked answer;
};

std::string what_of(std::exception_ptr ep)
{
    try
    {
        std::rethrow_exception(ep);
    }
    catch (const std::exception& e)
    {
        return std::string("the approver threw: ") + e.what();
    }
    catch (...)
    {
        return "the approver threw";
    }
}

// Runs the approver with its own copy of the function object and of the request: it may
// outlive the call that asked, and the runner that held the function.
asio::awaitable<approval_decision> run_approver(approver ask, approval_request rq)
{
    co_return co_await ask(std::move(rq));
}

} // namespace

asio::awaitable<asked> ask_within(const approver& ask, approval_request rq,
                                  std::chrono::nanoseconds deadline)
{
    auto ex = co_await asio::this_coro::executor;
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
        co_return asked{std::nullopt, {}, true}; // cancelled before anyone was asked
    auto st = std::make_shared<pending_approval>(ex);
    try
    {
        asio::co_spawn(ex, run_approver(ask, std::move(rq)),
                       asio::bind_cancellation_slot(
                           st->cancel.slot(),
                           [st](std::exception_ptr ep, approval_decision d) {
                               if (st->done)
                                   return;
                               st->done = true;
                               if (ep)
                                   st->answer.failure = what_of(ep);
                               else
                                   st->answer.decision = std::move(d);
                               st->wake.cancel();
                           }));
    }
    catch (...)
    {
        // The approver failed before it returned a coroutine.
        co_return asked{std::nullopt, what_of(std::current_exception()), false};
    }
    st->wake.expires_after(deadline);
    boost::system::error_code ec;
    try
    {
        co_await st->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    catch (const boost::system::system_error& e)
    {
        ec = e.code(); // a cancellation that came before the wait began
    }
    // The caller's cancellation wins, even over an answer that came at the same moment.
    const bool cancelled =
        (co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none;
    if (st->done && !cancelled)
        co_return std::move(st->answer);
    const bool answered = st->done;
    st->done = true; // a late answer is ignored
    if (!answered)
        st->cancel.emit(asio::cancellation_type::terminal);
    asked late;
    if (cancelled || ec == asio::error::operation_aborted)
        late.cancelled = true; // only the caller's cancellation stops the wait early
    else
        late.failure = "no answer within the approval deadline";
    co_return late;
}

} // namespace sandbox::detail
