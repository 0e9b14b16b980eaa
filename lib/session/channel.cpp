// lib/session/channel.cpp: session_channel, a bounded queue fed by a watcher (the lag rule is
// event_queue's, tested without I/O).
#include <sandbox/session.hpp>

#include "front_end.hpp"
#include "session/event_queue.hpp"
#include "session/session_state.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandbox {

namespace asio = boost::asio;

struct session_channel::impl
{
    impl(std::shared_ptr<detail::session_state> s, channel_options o)
        : st(std::move(s)), queue(o.capacity, o.on_lag), changed(st->ex)
    {
        changed.expires_at(std::chrono::steady_clock::time_point::max());
    }
    std::shared_ptr<detail::session_state> st;
    detail::event_queue queue;
    asio::steady_timer changed; // cancelled at each change: the reader's wake-up
    asio::cancellation_signal stop;
    void notify() { changed.cancel(); }
};

namespace {

// The producer: the watcher's events into the queue, as they come, never waiting for the
// reader. It ends with the session's `closed` event, a lag under lag_policy::close, the
// channel's close(), or the session's close before the watcher saw it.
asio::awaitable<void> produce(std::shared_ptr<session_channel::impl> me, session_watcher w)
{
    for (bool more = true; more;)
    {
        try
        {
            session_event ev = co_await w.next();
            more = me->queue.offer(std::move(ev));
        }
        catch (const error& e)
        {
            if (e.code() == errc::sequence_gap) // the log dropped bytes before we read them
                more = me->queue.offer_gap(static_cast<std::uint64_t>(e.diag().configured),
                                           static_cast<std::uint64_t>(e.diag().observed));
            else // closed before the watcher's `closed` event: the stream ends here
            {
                session_event closed;
                closed.what = session_event::kind::closed;
                closed.offset = w.position();
                me->queue.offer(std::move(closed));
                more = false;
            }
        }
        catch (const boost::system::system_error&) // close(): cancelled
        {
            more = false;
        }
        me->notify();
    }
}

} // namespace

session_channel::session_channel(std::shared_ptr<detail::session_state> st, channel_options o)
    : impl_(std::make_shared<impl>(st, o))
{
    session_watcher w(st, o.from, 64 * 1024);
    asio::co_spawn(st->ex, produce(impl_, std::move(w)),
                   asio::bind_cancellation_slot(impl_->stop.slot(), asio::detached));
}

session_channel::session_channel(session_channel&&) noexcept = default;

session_channel& session_channel::operator=(session_channel&& other) noexcept
{
    if (this != &other)
    {
        close();
        impl_ = std::move(other.impl_);
    }
    return *this;
}

session_channel::~session_channel()
{
    close();
}

void session_channel::close() noexcept
{
    if (!impl_ || impl_->queue.finished())
        return;
    impl_->queue.close();
    impl_->stop.emit(asio::cancellation_type::terminal);
    impl_->notify();
}

std::size_t session_channel::size() const noexcept
{
    return impl_ ? impl_->queue.size() : 0;
}

session_channel::executor_type session_channel::get_executor() const noexcept
{
    return impl_ ? impl_->st->ex : executor_type{};
}

asio::awaitable<session_event> session_channel::receive()
{
    auto body = [](std::shared_ptr<impl> me) -> asio::awaitable<session_event> {
        if (!me)
            detail::throw_failure(errc::validation, "this channel was moved from");
        for (;;)
        {
            if (auto ev = me->queue.take())
                co_return std::move(*ev); // (the producer never waits for room)
            if (me->queue.finished())
            {
                diagnostics d;
                d.message = "the channel of session " + me->st->id + " has ended";
                throw error(asio::experimental::error::channel_closed, std::move(d));
            }
            boost::system::error_code ec;
            co_await me->changed.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            auto cs = co_await asio::this_coro::cancellation_state;
            if (cs.cancelled() != asio::cancellation_type::none)
                throw boost::system::system_error(asio::error::operation_aborted);
        }
    };
    if (!impl_)
        return body(nullptr);
    return detail::on_executor(impl_->st->ex, body(impl_));
}

namespace detail {

void async_receive_impl(session_channel* c, diagnostics_sink sink, value_handler<session_event> h)
{
    auto ex = c->get_executor();
    if (!ex)
        ex = asio::system_executor();
    launch(std::move(ex), c->receive(), std::move(sink), std::move(h));
}

} // namespace detail

} // namespace sandbox
