// lib/session/watcher.cpp: a session's watcher (session.hpp): a cursor over the output log
// (watch_cursor.hpp) whose next() waits for the next event, and its token front end.
#include <sandbox/session.hpp>

#include "front_end.hpp"
#include "session/session_state.hpp"
#include "session/watch_cursor.hpp"

#include <boost/asio/system_executor.hpp>

namespace sandbox {

namespace asio = boost::asio;
using detail::session_state;
using detail::throw_failure;

// ---- watcher -----------------------------------------------------------------------------

struct session_watcher::impl
{
    std::shared_ptr<session_state> st;
    detail::watch_cursor cursor;
};

session_watcher::session_watcher(std::shared_ptr<session_state> st, std::uint64_t from,
                                 std::size_t max_chunk)
    : impl_(std::make_shared<impl>(impl{std::move(st), detail::watch_cursor(from, max_chunk)}))
{}

session_watcher::session_watcher(session_watcher&&) noexcept = default;
session_watcher& session_watcher::operator=(session_watcher&&) noexcept = default;
session_watcher::~session_watcher() = default;

std::uint64_t session_watcher::position() const noexcept
{
    return impl_ ? impl_->cursor.position() : 0;
}

session_watcher::executor_type session_watcher::get_executor() const noexcept
{
    return impl_ ? impl_->st->ex : executor_type{};
}

namespace {

// The cursor's lag is the read's gap: `sequence_gap`, resuming at `offset`.
[[noreturn]] void throw_gap(const session_event& lag)
{
    failure f = make_failure(errc::sequence_gap,
                             "output [" + std::to_string(lag.missed_from) + ", " +
                                 std::to_string(lag.offset) +
                                 ") was dropped by the session's log before this watcher got it",
                             "max_output_bytes");
    f.diag.observed = static_cast<std::int64_t>(lag.offset);
    f.diag.configured = static_cast<std::int64_t>(lag.missed_from);
    throw error(f.code, std::move(f.diag));
}

} // namespace

asio::awaitable<session_event> session_watcher::next()
{
    // The watcher may be moved or destroyed while this waits: the operation keeps its state.
    auto body = [](std::shared_ptr<impl> me) -> asio::awaitable<session_event> {
        if (!me)
            throw_failure(errc::validation, "this watcher was moved from");
        auto st = me->st;
        for (;;)
        {
            if (me->cursor.finished())
                throw_failure(errc::session_closed, "session " + st->id + " is closed");
            if (auto e = me->cursor.next(st->log, st->exited, st->closed))
            {
                if (e->what == session_event::kind::lag)
                    throw_gap(*e);
                if (e->what == session_event::kind::exited)
                    e->exit = st->exit;
                co_return std::move(*e);
            }
            co_await st->wait_change();
        }
    };
    if (!impl_)
        return body(nullptr); // fails when awaited
    return detail::on_executor(impl_->st->ex, body(impl_));
}

namespace detail {

void async_next_impl(session_watcher* w, diagnostics_sink sink, value_handler<session_event> h)
{
    auto ex = w->get_executor(); // a moved-from watcher fails on the handler's executor
    if (!ex)
        ex = asio::system_executor();
    launch(std::move(ex), w->next(), std::move(sink), std::move(h));
}

} // namespace detail

} // namespace sandbox
