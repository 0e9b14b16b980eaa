// lib/session/event_queue.cpp: see event_queue.hpp.
#include "session/event_queue.hpp"

#include <utility>

namespace sandbox::detail {

namespace {

std::uint64_t end_of(const session_event& ev)
{
    return ev.what == session_event::kind::output ? ev.offset + ev.data.size() : ev.offset;
}

} // namespace

event_queue::event_queue(std::size_t capacity, lag_policy on_lag)
    : capacity_(capacity ? capacity : 1), on_lag_(on_lag)
{}

bool event_queue::offer(session_event ev)
{
    if (producer_done())
        return false;
    const bool last = ev.what == session_event::kind::closed;
    if (!lagging_ && q_.size() < capacity_)
        q_.push_back(std::move(ev));
    else if (!lagging_ && extends_queued_lag(ev)) // one lag event per stretch of misses
        q_.back().offset = end_of(ev);
    else
    {
        if (!lagging_)
            start_lag(ev.offset, end_of(ev));
        else if (ev.what == session_event::kind::output)
            resume_ = end_of(ev);
        if (ev.what != session_event::kind::output)
            held_.push_back(std::move(ev));
        if (on_lag_ == lag_policy::close)
            ended_ = true;
    }
    if (last)
        ended_ = true;
    return !producer_done();
}

bool event_queue::offer_gap(std::uint64_t missed_from, std::uint64_t offset)
{
    if (producer_done())
        return false;
    if (lagging_)
        resume_ = offset;
    else
    {
        start_lag(missed_from, offset);
        settle_lag(); // at once when there is room
    }
    if (on_lag_ == lag_policy::close)
        ended_ = true;
    return !producer_done();
}

std::optional<session_event> event_queue::take()
{
    if (closed_ || q_.empty())
        return std::nullopt;
    session_event ev = std::move(q_.front());
    q_.pop_front();
    settle_lag();
    return ev;
}

bool event_queue::finished() const noexcept
{
    return closed_ || (ended_ && q_.empty() && !lagging_);
}

void event_queue::close() noexcept
{
    closed_ = true;
    lagging_ = false;
    q_.clear();
    held_.clear();
}

// Output right after a lag event still queued: that event grows instead of another coming.
bool event_queue::extends_queued_lag(const session_event& ev) const
{
    return ev.what == session_event::kind::output && !q_.empty() &&
           q_.back().what == session_event::kind::lag && q_.back().offset == ev.offset;
}

void event_queue::start_lag(std::uint64_t missed_from, std::uint64_t resume)
{
    lagging_ = true;
    missed_from_ = missed_from;
    resume_ = resume;
}

// The owed lag event takes the first free place; under resume, what ended the stream while
// it lagged follows it.
void event_queue::settle_lag()
{
    if (!lagging_ || q_.size() >= capacity_)
        return;
    // Under resume, an end dropped alone (no bytes missed) just comes late, without a lag.
    if (missed_from_ < resume_ || held_.empty() || on_lag_ == lag_policy::close)
    {
        session_event lag;
        lag.what = session_event::kind::lag;
        lag.missed_from = missed_from_;
        lag.offset = resume_;
        q_.push_back(std::move(lag));
    }
    lagging_ = false;
    if (on_lag_ == lag_policy::resume)
        for (auto& ev : held_)
            q_.push_back(std::move(ev));
    held_.clear();
}

} // namespace sandbox::detail
