// test/unit/budget_test.cpp: the sampler's decisions, fed synthetic samples (no I/O).
#include "sampler/budget.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
using sandbox::budget_kind;
using sandbox::detail::cap_action;
using sandbox::detail::cap_budget;
using sandbox::detail::cap_limits;
using sandbox::detail::cpu_ledger;
using sandbox::detail::tree_usage;

BOOST_AUTO_TEST_SUITE(budget)

BOOST_AUTO_TEST_CASE(under_caps_keeps_going_and_tracks_peaks)
{
    cap_budget b({100, 1s, 5});
    BOOST_TEST((b.on_sample({50, 100ms, 2}).action == cap_action::keep_going));
    BOOST_TEST((b.on_sample({20, 200ms, 5}).action == cap_action::keep_going));
    BOOST_TEST(b.peak_rss_bytes() == 50u);
    BOOST_TEST(b.peak_processes() == 5u);
    BOOST_TEST(b.cpu_used().count() == std::chrono::nanoseconds(200ms).count());
}

BOOST_AUTO_TEST_CASE(memory_trips_at_cap)
{
    cap_budget b({100, 0s, 0});
    auto d = b.on_sample({100, 0s, 1});
    BOOST_TEST((d.action == cap_action::kill_budget));
    BOOST_TEST((d.which == budget_kind::memory));
    BOOST_TEST(d.observed == 100);
    BOOST_TEST(d.configured == 100);
    BOOST_TEST((cap_budget({100, 0s, 0}).on_sample({99, 0s, 1}).action == cap_action::keep_going));
}

BOOST_AUTO_TEST_CASE(cpu_trips_at_cap_and_memory_wins)
{
    cap_budget b({0, 1s, 0});
    BOOST_TEST((b.on_sample({1 << 30, 999ms, 1}).action == cap_action::keep_going));
    auto d = b.on_sample({0, 1s, 1});
    BOOST_TEST((d.which == budget_kind::cpu));
    cap_budget both({10, 1s, 1});
    BOOST_TEST((both.on_sample({10, 2s, 2}).which == budget_kind::memory));
}

BOOST_AUTO_TEST_CASE(processes_trip_above_cap)
{
    cap_budget b({0, 0s, 3});
    BOOST_TEST((b.on_sample({0, 0s, 3}).action == cap_action::keep_going));
    auto d = b.on_sample({0, 0s, 4});
    BOOST_TEST((d.which == budget_kind::processes));
    BOOST_TEST(d.observed == 4);
}

BOOST_AUTO_TEST_CASE(no_caps_never_trip)
{
    cap_budget b({});
    BOOST_TEST((b.on_sample({~0ull, 1000h, 100000}).action == cap_action::keep_going));
}

BOOST_AUTO_TEST_CASE(three_failures_in_a_row_are_unenforceable)
{
    cap_budget b({100, 0s, 0});
    BOOST_TEST((b.on_failure().action == cap_action::keep_going));
    BOOST_TEST((b.on_failure().action == cap_action::keep_going));
    BOOST_TEST(b.consecutive_failures() == 2);
    BOOST_TEST((b.on_failure().action == cap_action::kill_unenforceable));
}

BOOST_AUTO_TEST_CASE(a_good_sample_resets_the_failure_count)
{
    cap_budget b({100, 0s, 0});
    b.on_failure();
    b.on_failure();
    BOOST_TEST((b.on_sample({1, 0s, 1}).action == cap_action::keep_going));
    BOOST_TEST(b.consecutive_failures() == 0);
    b.on_failure();
    BOOST_TEST((b.on_failure().action == cap_action::keep_going));
    BOOST_TEST((b.on_failure().action == cap_action::kill_unenforceable));
}

BOOST_AUTO_TEST_CASE(ledger_sums_live_members)
{
    cpu_ledger l;
    std::vector<cpu_ledger::member> live{{10, 1, 100ms}, {11, 10, 50ms}};
    BOOST_TEST(l.update(live).count() == std::chrono::nanoseconds(150ms).count());
}

BOOST_AUTO_TEST_CASE(ledger_child_reaped_by_member_is_not_double_counted)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, 1, 100ms}, {11, 10, 50ms}});
    // 11 was reaped by 10: its time now shows in 10's reaped-children time.
    auto t = l.update(std::vector<cpu_ledger::member>{{10, 1, 160ms}});
    BOOST_TEST(t.count() == std::chrono::nanoseconds(160ms).count());
}

BOOST_AUTO_TEST_CASE(ledger_keeps_orphans_reaped_elsewhere)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, 1, 100ms}, {12, 1, 300ms}});
    // 12's parent (init) is no member: its 300 ms must not vanish with it.
    auto t = l.update(std::vector<cpu_ledger::member>{{10, 1, 120ms}});
    BOOST_TEST(t.count() == std::chrono::nanoseconds(420ms).count());
}

BOOST_AUTO_TEST_CASE(ledger_total_never_decreases)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, 1, 500ms}});
    auto t = l.update(std::vector<cpu_ledger::member>{{10, 1, 100ms}});
    BOOST_TEST(t.count() == std::chrono::nanoseconds(500ms).count());
}

BOOST_AUTO_TEST_SUITE_END()
