// lib/session/watch_cursor.hpp: what a session watcher is told next, decided from the output
// log and the session's state. Pure (no I/O).
//
// A watcher holds no copy of the output: it holds an offset into the session's bounded log.
// The producer therefore never blocks and never queues per watcher; the only way to fall
// behind is for the log to drop bytes the watcher had not reached, and that is announced as
// a lag event carrying the first offset missed and the offset where the stream resumes (the
// session turns it into the `sequence_gap` error of `next()`, the rule `read` follows). So
// there is no "queue exactly full" state to deadlock on, and nothing is lost beyond what the
// lag event names.
#ifndef SANDBOX_LIB_SESSION_WATCH_CURSOR_HPP
#define SANDBOX_LIB_SESSION_WATCH_CURSOR_HPP

#include "session/output_log.hpp"

#include <sandbox/session.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace sandbox::detail {

/// \brief A watcher's position: replay from an offset, then live output, then exit and
/// close, each exactly once and in that order.
class watch_cursor
{
public:
    /// Starts at `from` (the log's `begin()` to replay everything retained). A `from` past
    /// the log's end starts at the end.
    watch_cursor(std::uint64_t from, std::size_t max_chunk) : at_(from), max_chunk_(max_chunk)
    {
    }

    /// \brief The next event, or nothing when the watcher is up to date (wait for news).
    ///
    /// `exited` and `closed` are the session's state now. Output that is in the log comes
    /// before the exit event (the log holds everything read up to the exit); the close event
    /// comes last and ends the watch. A session closed before its command was seen to end
    /// (close gave up waiting) has no exit event: none is made up.
    /// The event is the public one, but for `exit` (the session fills it in); a `lag` event
    /// (bytes `[missed_from, offset)` were dropped before this watcher got them) is what the
    /// session reports as a `sequence_gap` error.
    std::optional<session_event> next(const output_log& log, bool exited, bool closed);

    std::uint64_t position() const noexcept { return at_; }
    bool finished() const noexcept { return closed_sent_; }

private:
    std::uint64_t at_;
    std::size_t max_chunk_;
    bool exit_sent_ = false;
    bool closed_sent_ = false;
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SESSION_WATCH_CURSOR_HPP
