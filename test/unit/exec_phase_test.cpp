// test/unit/exec_phase_test.cpp: the exec core's phases and what each event makes it do
// (lib/exec/exec_phase.hpp): a table over every phase and event, then whole runs as the core
// sees them (a kill asked for before the plan is out, a terminate then a cancel, pipes held
// by a process outside the tree, a failure before the worker).
#include "exec/exec_phase.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

namespace sd = sandbox::detail;
using sd::exec_event;
using sd::exec_machine;
using sd::exec_phase;
using sd::exec_step;
using sd::kill_request;
using sd::stop_request;
using std::chrono::nanoseconds;

namespace {

using kind = exec_event::kind;
constexpr auto acquiring = exec_phase::acquiring;
constexpr auto sending = exec_phase::sending;
constexpr auto running = exec_phase::running;
constexpr auto draining = exec_phase::draining;
constexpr auto abandoned = exec_phase::abandoned;
constexpr auto done = exec_phase::done;
constexpr std::uint32_t none = sd::act_none;

exec_event ev(kind k)
{
    return {k};
}
exec_event plan_out(bool whole)
{
    return {kind::plan_out, whole};
}
exec_event cancel(nanoseconds grace = nanoseconds{0})
{
    return {kind::cancel, false, false, grace};
}
exec_event terminate(nanoseconds grace)
{
    return {kind::terminate, false, false, grace};
}
exec_event drain_limit(bool paused)
{
    return {kind::drain_limit, false, paused};
}

// A machine brought to `p` the way the core gets there, with `open` streams still open.
exec_machine machine_in(exec_phase p, int open)
{
    exec_machine m(2);
    for (int i = 0; i < 2 - open; ++i)
        m.on(ev(kind::stream_end)); // before the end: only counted
    if (p == acquiring)
        return m;
    m.on(plan_out(p != sending));
    if (p == sending || p == running)
        return m;
    if (p == done)
    {
        m.on(ev(kind::failed)); // ignored once the plan is out
        m.on(ev(kind::worker_done));
        for (int i = 0; i < open; ++i)
            m.on(ev(kind::stream_end));
        return m;
    }
    m.on(ev(kind::worker_done));
    if (p == abandoned)
        m.on(drain_limit(false));
    return m;
}

std::string name_of(kind k)
{
    switch (k)
    {
    case kind::plan_out: return "plan_out";
    case kind::rest_out: return "rest_out";
    case kind::failed: return "failed";
    case kind::cancel: return "cancel";
    case kind::terminate: return "terminate";
    case kind::worker_done: return "worker_done";
    case kind::stream_end: return "stream_end";
    case kind::drain_limit: return "drain_limit";
    }
    return "?";
}

} // namespace

BOOST_AUTO_TEST_SUITE(exec_phase_machine)

BOOST_AUTO_TEST_CASE(the_table)
{
    struct row
    {
        exec_phase from;
        int open; // output streams still open
        exec_event ev;
        exec_phase next;
        std::uint32_t actions;
        nanoseconds kill_grace{0};
    };
    const nanoseconds g{2'000'000'000};
    const auto kill = sd::act_send_kill;
    const auto abandon = sd::act_abandon_pipes;
    const auto ended_open = sd::act_close_input | sd::act_arm_drain;
    const auto ended_closed = sd::act_close_input | sd::act_finish;
    const row table[] = {
        // acquiring: requests wait for the plan; a failure ends it with nothing run.
        {acquiring, 2, plan_out(true), running, none},
        {acquiring, 2, plan_out(false), sending, none},
        {acquiring, 2, ev(kind::rest_out), acquiring, none},
        {acquiring, 2, ev(kind::failed), done, sd::act_fail},
        {acquiring, 2, cancel(), acquiring, none},
        {acquiring, 2, terminate(g), acquiring, none},
        {acquiring, 2, ev(kind::stream_end), acquiring, none},
        {acquiring, 2, drain_limit(false), acquiring, none},
        // sending: the same, until the rest is out.
        {sending, 2, ev(kind::rest_out), running, none},
        {sending, 2, plan_out(true), running, none},
        {sending, 2, cancel(g), sending, none},
        {sending, 2, ev(kind::worker_done), draining, ended_open},
        {sending, 0, ev(kind::worker_done), done, ended_closed},
        // running: requests go out at once; the worker's end starts the drain.
        {running, 2, cancel(), running, kill},
        {running, 2, cancel(g), running, kill, g},
        {running, 2, terminate(g), running, kill, g},
        {running, 2, ev(kind::worker_done), draining, ended_open},
        {running, 1, ev(kind::worker_done), draining, ended_open},
        {running, 0, ev(kind::worker_done), done, ended_closed},
        {running, 2, ev(kind::stream_end), running, none},
        {running, 1, ev(kind::stream_end), running, none},
        {running, 2, ev(kind::failed), running, none},
        {running, 2, ev(kind::rest_out), running, none},
        {running, 2, drain_limit(false), running, none},
        // draining: the last stream's end decides; a cancel or the limit gives up the pipes.
        {draining, 2, ev(kind::stream_end), draining, none},
        {draining, 1, ev(kind::stream_end), done, sd::act_finish},
        {draining, 2, cancel(), abandoned, abandon},
        {draining, 2, terminate(g), draining, none},
        {draining, 2, drain_limit(true), draining, sd::act_arm_drain},
        {draining, 2, drain_limit(false), abandoned, abandon},
        {draining, 2, ev(kind::worker_done), draining, none},
        {draining, 2, ev(kind::failed), draining, none},
        // abandoned: only the streams' ends are left.
        {abandoned, 2, ev(kind::stream_end), abandoned, none},
        {abandoned, 1, ev(kind::stream_end), done, sd::act_finish},
        {abandoned, 2, cancel(), abandoned, none},
        {abandoned, 2, drain_limit(false), abandoned, none},
        // done: whatever crossed the end does nothing.
        {done, 0, cancel(), done, none},
        {done, 0, terminate(g), done, none},
        {done, 0, ev(kind::stream_end), done, none},
        {done, 0, ev(kind::worker_done), done, none},
        {done, 0, ev(kind::failed), done, none},
        {done, 0, drain_limit(false), done, none},
    };
    for (const row& r : table)
    {
        BOOST_TEST_CONTEXT(r.from << " (" << r.open << " open) + " << name_of(r.ev.what))
        {
            exec_machine m = machine_in(r.from, r.open);
            BOOST_TEST_REQUIRE(m.phase() == r.from);
            const exec_step s = m.on(r.ev);
            BOOST_TEST(s.from == r.from);
            BOOST_TEST(s.next == r.next);
            BOOST_TEST(m.phase() == r.next);
            BOOST_TEST(s.actions == r.actions);
            if (s.has(sd::act_send_kill))
                BOOST_TEST(s.kill.grace.count() == r.kill_grace.count());
        }
    }
}

BOOST_AUTO_TEST_CASE(every_event_in_every_phase_finishes_at_most_once)
{
    // Whatever the order, the result is decided once and nothing moves after it; a failure
    // and a finish never both happen.
    for (auto from : {acquiring, sending, running, draining, abandoned, done})
        for (int k = 0; k <= static_cast<int>(kind::drain_limit); ++k)
            for (int open = 0; open <= 2; ++open)
            {
                exec_machine m = machine_in(from, open);
                if (m.phase() != from)
                    continue; // (no open stream left: draining is passed through)
                const auto s = m.on(exec_event{static_cast<kind>(k)});
                BOOST_TEST_CONTEXT(from << " (" << open << " open) + "
                                        << name_of(static_cast<kind>(k)))
                {
                    const bool ends = s.has(sd::act_finish) || s.has(sd::act_fail);
                    BOOST_TEST(ends == (s.next == done && from != done));
                    BOOST_TEST(!(s.has(sd::act_finish) && s.has(sd::act_fail)));
                    if (s.has(sd::act_send_kill))
                        BOOST_TEST((from == running || from == sending || from == acquiring));
                    if (s.has(sd::act_fail))
                        BOOST_TEST(!sd::plan_out(from));
                }
            }
}

BOOST_AUTO_TEST_CASE(a_kill_asked_for_before_the_plan_goes_out_with_it)
{
    exec_machine m;
    const nanoseconds g{5'000};
    BOOST_TEST(m.on(cancel(g)).actions == none);
    BOOST_TEST(m.on(plan_out(false)).actions == none); // the rest is still to send
    const auto s = m.on(ev(kind::rest_out));
    BOOST_TEST(s.next == running);
    BOOST_TEST(s.actions == sd::act_send_kill);
    BOOST_TEST(s.kill.grace.count() == g.count());
    BOOST_TEST((s.kill.why == sd::proto::end_reason::cancelled));
    // Sent once: a later event does not send it again.
    BOOST_TEST(m.on(ev(kind::stream_end)).actions == none);
    BOOST_TEST((m.request() == stop_request::cancel));
}

BOOST_AUTO_TEST_CASE(of_two_kills_held_the_harder_goes_out)
{
    exec_machine m;
    m.on(terminate(nanoseconds{9'000}));
    m.on(cancel(nanoseconds{0}));
    m.on(terminate(nanoseconds{7'000}));
    const auto s = m.on(plan_out(true));
    BOOST_TEST(s.has(sd::act_send_kill));
    BOOST_TEST(s.kill.grace.count() == 0);
    // A cancellation outranks a terminate, whichever came first.
    BOOST_TEST((m.request() == stop_request::cancel));
}

BOOST_AUTO_TEST_CASE(a_terminate_alone_reads_as_terminate)
{
    exec_machine m;
    m.on(plan_out(true));
    BOOST_TEST((m.request() == stop_request::none));
    m.on(terminate(nanoseconds{1}));
    BOOST_TEST((m.request() == stop_request::terminate));
    m.on(cancel());
    BOOST_TEST((m.request() == stop_request::cancel));
}

BOOST_AUTO_TEST_CASE(pipes_held_outside_the_tree_are_given_up_once_no_chunk_is_out)
{
    exec_machine m;
    m.on(plan_out(true));
    m.on(ev(kind::worker_done));
    m.on(ev(kind::stream_end)); // stderr ended; stdout is held by a process outside
    BOOST_TEST(m.on(drain_limit(true)).actions == sd::act_arm_drain); // a chunk with the caller
    auto s = m.on(drain_limit(false));
    BOOST_TEST(s.next == abandoned);
    BOOST_TEST(s.actions == sd::act_abandon_pipes);
    s = m.on(ev(kind::stream_end)); // its wait was cancelled
    BOOST_TEST(s.actions == sd::act_finish);
    BOOST_TEST(s.from == abandoned); // the classification says the pipes were given up
    BOOST_TEST(m.phase() == done);
}

BOOST_AUTO_TEST_CASE(a_cancel_after_the_worker_ended_gives_up_the_pipes_and_counts)
{
    exec_machine m;
    m.on(plan_out(true));
    m.on(ev(kind::worker_done));
    const auto s = m.on(cancel());
    BOOST_TEST(s.actions == sd::act_abandon_pipes);
    BOOST_TEST((m.request() == stop_request::cancel));
}

BOOST_AUTO_TEST_CASE(a_terminal_waits_for_one_stream)
{
    exec_machine m(1);
    m.on(plan_out(true));
    m.on(ev(kind::stream_end));
    const auto s = m.on(ev(kind::worker_done));
    BOOST_TEST(s.next == done);
    BOOST_TEST(s.actions == (sd::act_close_input | sd::act_finish));
}

BOOST_AUTO_TEST_CASE(phases_say_what_can_be_sent)
{
    BOOST_TEST(!sd::plan_out(acquiring));
    BOOST_TEST(!sd::plan_out(sending));
    BOOST_TEST(sd::plan_out(running));
    BOOST_TEST(sd::tree_running(running));
    BOOST_TEST(!sd::tree_running(draining));
    BOOST_TEST(!sd::tree_running(sending));
    BOOST_TEST(sd::worker_done(abandoned));
    BOOST_TEST(!sd::worker_done(running));
    BOOST_TEST(std::string(sd::to_string(abandoned)) == "abandoned");
}

BOOST_AUTO_TEST_SUITE_END()
