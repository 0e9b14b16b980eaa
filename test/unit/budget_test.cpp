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

BOOST_AUTO_TEST_CASE(tasks_trip_above_cap_and_processes_do_not_count_threads)
{
    cap_limits l;
    l.max_processes = 5;
    l.max_tasks = 20;
    cap_budget b(l);
    tree_usage many_threads{0, 0s, 1, 20}; // one process, 20 threads
    BOOST_TEST((b.on_sample(many_threads).action == cap_action::keep_going));
    BOOST_TEST(b.pressure() == 1.0);
    tree_usage over{0, 0s, 1, 21};
    auto d = b.on_sample(over);
    BOOST_TEST((d.action == cap_action::kill_budget));
    BOOST_TEST((d.which == budget_kind::tasks));
    BOOST_TEST(d.observed == 21);
    BOOST_TEST(d.configured == 20);
    // Processes are judged first when both are over.
    auto both = b.on_sample({0, 0s, 6, 30});
    BOOST_TEST((both.which == budget_kind::processes));
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

BOOST_AUTO_TEST_CASE(pressure_is_the_closest_cap)
{
    cap_budget b({1000, 10s, 10});
    BOOST_TEST(b.pressure() == 0.0);
    b.on_sample({500, 1s, 2}); // memory at 50 %, cpu at 10 %, processes at 20 %
    BOOST_TEST(b.pressure() == 0.5);
    b.on_sample({100, 1s, 9}); // processes at 90 %
    BOOST_TEST(b.pressure() == 0.9);
    cap_budget none({0, 0s, 0});
    none.on_sample({1 << 30, 5s, 100});
    BOOST_TEST(none.pressure() == 0.0);
}

namespace {
constexpr pid_t self = 1; // the sampling subreaper
using ms = std::chrono::milliseconds;
auto none_ended = [](pid_t, std::uint64_t) { return false; };
auto all_ended = [](pid_t, std::uint64_t) { return true; };
long long as_ms(std::chrono::nanoseconds d)
{
    return std::chrono::duration_cast<ms>(d).count();
}
} // namespace

BOOST_AUTO_TEST_CASE(ledger_child_waited_for_by_a_member_is_not_lost)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}, {11, 10, 8, 50ms, 0ms}},
             self, 0ms, all_ended);
    // 11 ended and 10 waited for it: 10's children time grew by (at least) 11's last use.
    auto lost = l.update(std::vector<cpu_ledger::member>{{10, self, 7, 110ms, 60ms}}, self, 0ms,
                         all_ended);
    BOOST_TEST(as_ms(lost) == 0);
}

BOOST_AUTO_TEST_CASE(ledger_child_reaped_by_the_kernel_is_kept)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}, {11, 10, 8, 300ms, 0ms},
                                             {12, 10, 9, 200ms, 20ms}},
             self, 0ms, all_ended);
    // 10 ignores SIGCHLD: its children vanish and its children time does not move.
    auto lost = l.update(std::vector<cpu_ledger::member>{{10, self, 7, 120ms, 0ms}}, self, 0ms,
                         all_ended);
    BOOST_TEST(as_ms(lost) == 520);
    // Nothing is counted twice on later samples.
    lost = l.update(std::vector<cpu_ledger::member>{{10, self, 7, 130ms, 0ms}}, self, 0ms,
                    all_ended);
    BOOST_TEST(as_ms(lost) == 520);
}

BOOST_AUTO_TEST_CASE(ledger_members_we_reap_show_in_our_children_time)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 40ms}}, self, 0ms, all_ended);
    // We reaped 10 (orphan or leader): our RUSAGE_CHILDREN grew by its whole use.
    BOOST_TEST(as_ms(l.update({}, self, 150ms, all_ended)) == 0);
}

BOOST_AUTO_TEST_CASE(ledger_member_missed_by_a_listing_is_not_taken_for_ended)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}, {11, 10, 8, 300ms, 0ms}},
             self, 0ms, none_ended);
    // 11 is missing from this listing but still alive: no loss, and it is still tracked.
    BOOST_TEST(as_ms(l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}}, self,
                              0ms, none_ended)) == 0);
    BOOST_TEST(as_ms(l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}}, self,
                              0ms, all_ended)) == 300);
}

BOOST_AUTO_TEST_CASE(ledger_child_of_a_parent_the_listing_missed_is_judged_later)
{
    // A busy host: the listing misses parent 10 (alive) in the very sample in which its
    // child 11 ended and was waited for. 10's children time is unknown now, so 11 must not be
    // declared lost (10's cutime will show it next time: that would count it twice).
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}, {11, 10, 8, 270ms, 0ms}},
             self, 0ms, all_ended);
    auto alive_10 = [](pid_t pid, std::uint64_t) { return pid != 10; };
    BOOST_TEST(as_ms(l.update({}, self, 0ms, alive_10)) == 0);
    // Seen again: its children time grew by 11's whole use. Nothing lost.
    BOOST_TEST(as_ms(l.update(std::vector<cpu_ledger::member>{{10, self, 7, 110ms, 280ms}}, self,
                              0ms, all_ended)) == 0);

    // The same, but 10 ignores SIGCHLD: the loss is found once 10 is seen again.
    cpu_ledger k;
    k.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}, {11, 10, 8, 270ms, 0ms}},
             self, 0ms, all_ended);
    BOOST_TEST(as_ms(k.update({}, self, 0ms, alive_10)) == 0);
    BOOST_TEST(as_ms(k.update(std::vector<cpu_ledger::member>{{10, self, 7, 110ms, 0ms}}, self,
                              0ms, all_ended)) == 270);
}

BOOST_AUTO_TEST_CASE(ledger_recycled_pid_is_a_new_member)
{
    cpu_ledger l;
    l.update(std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}, {11, 10, 8, 300ms, 0ms}},
             self, 0ms, all_ended);
    // Pid 11 now belongs to another process (other start time): the old one ended unwaited.
    auto lost = l.update(
        std::vector<cpu_ledger::member>{{10, self, 7, 100ms, 0ms}, {11, 10, 99, 1ms, 0ms}}, self,
        0ms, all_ended);
    BOOST_TEST(as_ms(lost) == 300);
}

BOOST_AUTO_TEST_SUITE_END()
