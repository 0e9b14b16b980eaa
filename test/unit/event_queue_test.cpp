// test/unit/event_queue_test.cpp: the bounded queue of a session channel and its lag rule:
// what a reader that falls behind is told, under both policies (no I/O).
#include "session/event_queue.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using sandbox::lag_policy;
using sandbox::session_event;
using sandbox::detail::event_queue;
using kind = session_event::kind;

namespace {

session_event output(std::uint64_t offset, std::string data)
{
    session_event e;
    e.offset = offset;
    e.data = std::move(data);
    return e;
}

session_event end(kind k, std::uint64_t offset)
{
    session_event e;
    e.what = k;
    e.offset = offset;
    return e;
}

// The next event's kind and offset, "none" when the queue has none.
std::string next(event_queue& q)
{
    auto e = q.take();
    if (!e)
        return "none";
    switch (e->what)
    {
    case kind::output: return "output@" + std::to_string(e->offset);
    case kind::exited: return "exited@" + std::to_string(e->offset);
    case kind::closed: return "closed@" + std::to_string(e->offset);
    case kind::lag:
        return "lag[" + std::to_string(e->missed_from) + "," + std::to_string(e->offset) + ")";
    }
    return "?";
}

} // namespace

BOOST_AUTO_TEST_SUITE(event_queue_suite)

BOOST_AUTO_TEST_CASE(a_reader_that_keeps_up_gets_everything_in_order)
{
    event_queue q(2, lag_policy::close);
    BOOST_TEST(q.offer(output(0, "abc")));
    BOOST_TEST(next(q) == "output@0");
    BOOST_TEST(next(q) == "none");
    BOOST_TEST(!q.finished());
    BOOST_TEST(q.offer(end(kind::exited, 3)));
    BOOST_TEST(!q.offer(end(kind::closed, 3))); // the last one: the producer may stop
    BOOST_TEST(!q.offer(output(3, "late")));
    BOOST_TEST(next(q) == "exited@3");
    BOOST_TEST(!q.finished());
    BOOST_TEST(next(q) == "closed@3");
    BOOST_TEST(q.finished());
}

BOOST_AUTO_TEST_CASE(a_full_queue_owes_a_lag_and_then_ends_under_close)
{
    event_queue q(2, lag_policy::close);
    BOOST_TEST(q.offer(output(0, "aaa")));
    BOOST_TEST(q.offer(output(3, "bbb")));
    BOOST_TEST(!q.offer(output(6, "ccc"))); // dropped: the lag is owed, the producer stops
    BOOST_TEST(q.size() == 2u);             // the bound holds
    BOOST_TEST(!q.offer(output(9, "ddd")));
    BOOST_TEST(next(q) == "output@0");
    BOOST_TEST(next(q) == "output@3");
    BOOST_TEST(next(q) == "lag[6,9)");
    BOOST_TEST(next(q) == "none");
    BOOST_TEST(q.finished());
}

BOOST_AUTO_TEST_CASE(under_resume_output_is_dropped_until_there_is_room_and_the_end_kept)
{
    event_queue q(2, lag_policy::resume);
    BOOST_TEST(q.offer(output(0, "aaa")));
    BOOST_TEST(q.offer(output(3, "bbb")));
    BOOST_TEST(q.offer(output(6, "ccc")));      // dropped: lag from 6
    BOOST_TEST(q.offer(output(9, "ddd")));      // dropped too
    BOOST_TEST(q.offer(end(kind::exited, 12))); // kept for after the lag
    BOOST_TEST(next(q) == "output@0");          // room: the lag, then the exit, queued
    BOOST_TEST(q.offer(end(kind::closed, 12)) == false);
    BOOST_TEST(next(q) == "output@3");
    BOOST_TEST(next(q) == "lag[6,12)");
    BOOST_TEST(next(q) == "exited@12");
    BOOST_TEST(next(q) == "closed@12");
    BOOST_TEST(q.finished());
}

// One lag event per stretch of misses: output dropped while the lag event waits in the
// queue widens it instead of owing another.
BOOST_AUTO_TEST_CASE(under_resume_events_go_on_after_one_lag_per_stretch)
{
    event_queue q(1, lag_policy::resume);
    BOOST_TEST(q.offer(output(0, "a")));
    BOOST_TEST(q.offer(output(1, "b"))); // dropped
    BOOST_TEST(next(q) == "output@0");
    BOOST_TEST(q.offer(output(2, "c"))); // the lag holds the place: it grows
    BOOST_TEST(q.size() == 1u);
    BOOST_TEST(next(q) == "lag[1,3)");
    BOOST_TEST(q.offer(output(3, "d")));
    BOOST_TEST(next(q) == "output@3");
    // Only an end dropped (no bytes missed): it comes without a lag event.
    event_queue e(1, lag_policy::resume);
    BOOST_TEST(e.offer(output(0, "a")));
    BOOST_TEST(e.offer(end(kind::exited, 1)));
    BOOST_TEST(next(e) == "output@0");
    BOOST_TEST(next(e) == "exited@1");
    // Under close the reader learns it lost the end.
    event_queue c(1, lag_policy::close);
    BOOST_TEST(c.offer(output(0, "a")));
    BOOST_TEST(!c.offer(end(kind::exited, 1)));
    BOOST_TEST(next(c) == "output@0");
    BOOST_TEST(next(c) == "lag[1,1)");
    BOOST_TEST(c.finished());
}

BOOST_AUTO_TEST_CASE(a_log_gap_is_a_lag_too)
{
    event_queue q(4, lag_policy::resume);
    BOOST_TEST(q.offer_gap(0, 100));
    BOOST_TEST(q.offer(output(100, "x")));
    BOOST_TEST(next(q) == "lag[0,100)");
    BOOST_TEST(next(q) == "output@100");
    event_queue c(4, lag_policy::close);
    BOOST_TEST(!c.offer_gap(0, 100));
    BOOST_TEST(next(c) == "lag[0,100)");
    BOOST_TEST(c.finished());
}

BOOST_AUTO_TEST_CASE(close_drops_everything_and_stops_the_producer)
{
    event_queue q(4, lag_policy::close);
    BOOST_TEST(q.offer(output(0, "a")));
    q.close();
    BOOST_TEST(q.finished());
    BOOST_TEST(q.producer_done());
    BOOST_TEST(!q.offer(output(1, "b")));
    BOOST_TEST(next(q) == "none");
}

BOOST_AUTO_TEST_SUITE_END()
