// lib/session/watch_cursor.cpp: the next event of a session watcher.
#include "session/watch_cursor.hpp"

#include <algorithm>

namespace sandbox::detail {

std::optional<session_event> watch_cursor::next(const output_log& log, bool exited, bool closed)
{
    if (closed_sent_)
        return std::nullopt;
    session_event e;
    at_ = std::min(at_, log.end());
    if (at_ < log.begin())
    {
        e.what = session_event::kind::lag;
        e.missed_from = at_;
        e.offset = log.begin();
        at_ = log.begin();
        return e;
    }
    if (at_ < log.end())
    {
        auto pieces = log.read(at_, std::max<std::size_t>(max_chunk_, 1));
        if (pieces && !pieces->empty())
        {
            auto& p = pieces->front();
            e.what = session_event::kind::output;
            e.stream = p.stream;
            e.offset = p.offset;
            e.data = std::move(p.data);
            at_ += e.data.size();
            return e;
        }
    }
    if (exited && !exit_sent_)
    {
        exit_sent_ = true;
        e.what = session_event::kind::exited;
        e.offset = at_;
        return e;
    }
    if (closed)
    {
        closed_sent_ = true;
        e.what = session_event::kind::closed;
        e.offset = at_;
        return e;
    }
    return std::nullopt;
}

} // namespace sandbox::detail
