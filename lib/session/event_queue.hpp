// lib/session/event_queue.hpp: the bounded queue behind `session_channel` and its lag rule
// (pure logic, unit-tested without I/O). The producer offers the watcher's events; when the
// queue is full, an offered event is dropped and the queue owes the reader a `lag` event,
// which takes the first free place: `missed_from` is the first byte not delivered, `offset`
// the first byte delivered again. Under `lag_policy::close` nothing follows the lag event;
// under `lag_policy::resume` the producer goes on, dropping output until there is room, and
// an `exited` or `closed` event it had to drop comes right after the lag event.
#ifndef SANDBOX_LIB_SESSION_EVENT_QUEUE_HPP
#define SANDBOX_LIB_SESSION_EVENT_QUEUE_HPP

#include <sandbox/session.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace sandbox::detail {

class event_queue
{
public:
    /// `capacity` 0 counts as 1.
    event_queue(std::size_t capacity, lag_policy on_lag);

    /// The producer's event. False once the producer should stop: the queue ended (closed
    /// event queued, a lag under `lag_policy::close`, `close()`).
    bool offer(session_event ev);
    /// Bytes `[missed_from, offset)` that the session's log dropped before the producer read
    /// them (the watcher's `sequence_gap`): a lag event, as for a full queue.
    bool offer_gap(std::uint64_t missed_from, std::uint64_t offset);

    /// The next event for the reader, if one is queued.
    std::optional<session_event> take();
    /// No event will come any more: the producer ended and everything was taken, or
    /// `close()` was called.
    bool finished() const noexcept;
    /// The producer may stop: nothing it offers will be delivered.
    bool producer_done() const noexcept { return ended_ || closed_; }
    /// The reader's end: queued events are dropped, the producer stops.
    void close() noexcept;
    std::size_t size() const noexcept { return q_.size(); }

private:
    bool extends_queued_lag(const session_event& ev) const;
    void start_lag(std::uint64_t missed_from, std::uint64_t resume);
    void settle_lag();

    std::deque<session_event> q_;
    std::size_t capacity_;
    lag_policy on_lag_;
    bool lagging_ = false;
    std::uint64_t missed_from_ = 0;
    std::uint64_t resume_ = 0;
    std::vector<session_event> held_; // exited / closed dropped while lagging
    bool ended_ = false;              // the producer's last event is queued
    bool closed_ = false;             // close() by the reader
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SESSION_EVENT_QUEUE_HPP
