// test/unit/watch_cursor_test.cpp: what a session watcher is told, in order, with lag
// announced at the exact first missed offset (no I/O).
#include "session/watch_cursor.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using sandbox::output_stream;
using sandbox::detail::output_log;
using sandbox::detail::watch_cursor;
using kind = sandbox::session_event::kind;

BOOST_AUTO_TEST_SUITE(watch_cursor_suite)

BOOST_AUTO_TEST_CASE(replay_then_live_then_exit_then_close)
{
    output_log log(1024);
    log.append(output_stream::out, "retained ");
    watch_cursor w(log.begin(), 4096);
    auto e = w.next(log, false, false);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::output));
    BOOST_TEST(e->data == "retained ");
    BOOST_TEST(!w.next(log, false, false).has_value()); // up to date: wait

    log.append(output_stream::err, "live");
    e = w.next(log, false, false);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->data == "live");
    BOOST_TEST((e->stream == output_stream::err));
    BOOST_TEST(e->offset == 9u);

    // Output still in the log comes before the exit; exit and close come once each.
    log.append(output_stream::out, "last words");
    e = w.next(log, true, true);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->data == "last words");
    e = w.next(log, true, true);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::exited));
    e = w.next(log, true, true);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::closed));
    BOOST_TEST(w.finished());
    log.append(output_stream::out, "after close");
    BOOST_TEST(!w.next(log, true, true).has_value());
}

BOOST_AUTO_TEST_CASE(a_close_comes_after_an_exit_and_never_invents_one)
{
    output_log log(64);
    watch_cursor w(0, 4096);
    auto e = w.next(log, true, true); // ended, then closed: both, in that order
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::exited));
    e = w.next(log, true, true);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::closed));
    BOOST_TEST(!w.next(log, true, true).has_value());

    watch_cursor v(0, 4096); // closed before its command was seen to end
    e = v.next(log, false, true);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::closed));
    BOOST_TEST(!v.next(log, false, true).has_value());
}

BOOST_AUTO_TEST_CASE(lag_names_the_first_missed_offset_and_loses_nothing_else)
{
    output_log log(10);
    watch_cursor w(0, 4096);
    log.append(output_stream::out, "0123456789");
    log.append(output_stream::out, "abcdefghij");
    log.append(output_stream::out, "ABCDEFGHIJ"); // the log now holds [20, 30)
    auto e = w.next(log, false, false);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::lag));
    BOOST_TEST(e->missed_from == 0u);
    BOOST_TEST(e->offset == 20u);
    e = w.next(log, false, false);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->data == "ABCDEFGHIJ"); // every retained byte, the first one included
    BOOST_TEST(e->offset == 20u);

    // Falling behind in the middle: the lag starts exactly where the watcher was.
    watch_cursor mid(25, 4096);
    log.append(output_stream::out, "0123456"); // holds [27, 37)
    e = mid.next(log, false, false);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST((e->what == kind::lag));
    BOOST_TEST(e->missed_from == 25u);
    BOOST_TEST(e->offset == 27u);
    e = mid.next(log, false, false);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->data == "HIJ0123456");
}

BOOST_AUTO_TEST_CASE(exactly_256_retained_chunks_then_more)
{
    // The reference deadlocks when the replay fills its 256-slot queue exactly; a cursor has
    // no queue to fill.
    output_log log(1 << 20);
    for (int i = 0; i < 256; ++i)
        log.append(i % 2 ? output_stream::err : output_stream::out, "chunk" + std::to_string(i));
    watch_cursor w(log.begin(), 4096);
    int seen = 0;
    while (auto e = w.next(log, false, false))
    {
        BOOST_TEST_REQUIRE((e->what == kind::output));
        BOOST_TEST_REQUIRE(e->data == "chunk" + std::to_string(seen));
        ++seen;
    }
    BOOST_TEST(seen == 256);
    log.append(output_stream::err, "chunk256");
    auto e = w.next(log, false, false);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(e->data == "chunk256");
}

BOOST_AUTO_TEST_CASE(chunks_are_bounded_and_a_late_start_waits_at_the_end)
{
    output_log log(1024);
    log.append(output_stream::out, std::string(100, 'x'));
    watch_cursor w(0, 40);
    std::vector<std::size_t> sizes;
    while (auto e = w.next(log, false, false))
        sizes.push_back(e->data.size());
    BOOST_TEST((sizes == std::vector<std::size_t>{40, 40, 20}));

    watch_cursor late(5000, 40); // past the end: starts at the end
    BOOST_TEST(!late.next(log, false, false).has_value());
    BOOST_TEST(late.position() == 100u);
}

BOOST_AUTO_TEST_SUITE_END()
