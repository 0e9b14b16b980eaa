// test/unit/budget_test.cpp: the sampler's decisions, fed synthetic samples (no I/O).
#include "helper/budget.hpp"

#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
using sandbox::budget_kind;
using sandbox::detail::cap_action;
using sandbox::detail::cap_budget;
using sandbox::detail::cap_limits;
using sandbox::detail::cpu_ledger;
using sandbox::detail::process_gate;
using sandbox::detail::tree_usage;

BOOST_AUTO_TEST_SUITE(budget)

BOOST_AUTO_TEST_CASE(under_caps_keeps_going_and_tracks_peaks)
{
    cap_budget b({100, 1s, 5});
    BOOST_TEST((b.on_sample({50, 100ms, 2}).action == cap_action::keep_going));
    BOOST_TEST((b.on_sample({20, 200ms, 5}).action == cap_action::keep_going));
    BOOST_TEST(b.peak_footprint_bytes() == 50u);
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

BOOST_AUTO_TEST_CASE(memory_reach_time_is_the_room_to_the_bound_at_the_fault_rate)
{
    using sandbox::detail::fault_bytes_per_second;
    constexpr std::uint64_t mib = 1 << 20;
    cap_budget none({0, 10s, 10});
    BOOST_TEST((none.memory_reach_time(2) == std::chrono::nanoseconds::max()));
    cap_budget b({100 * mib, 0s, 0});
    auto seconds = [](std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); };
    // No sample yet: 120 MiB of room for one task.
    const double one = 120.0 * mib / fault_bytes_per_second;
    BOOST_TEST(seconds(b.memory_reach_time(1)) == one, boost::test_tools::tolerance(1e-6));
    b.on_sample({60 * mib, 0s, 1, 8}); // half the room is left
    BOOST_TEST(seconds(b.memory_reach_time(1)) == one / 2, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(seconds(b.memory_reach_time(4)) == one / 8, boost::test_tools::tolerance(1e-6));
    BOOST_TEST(b.last_tasks() == 8u);
    b.on_sample({130 * mib, 0s, 1, 0}); // past the bound: look again at once
    BOOST_TEST(b.memory_reach_time(1).count() == 0);
    BOOST_TEST(b.last_tasks() == 1u); // (never fewer than one)
}

BOOST_AUTO_TEST_CASE(cpu_reach_time_is_the_rest_of_the_budget_at_full_speed)
{
    cap_budget none({1 << 20, 0s, 10});
    BOOST_TEST((none.cpu_reach_time(2) == std::chrono::nanoseconds::max()));
    cap_budget b({0, 10s, 0});
    BOOST_TEST((b.cpu_reach_time(1) == std::chrono::nanoseconds(10s))); // no sample yet
    b.on_sample({0, 4s, 1, 1});
    BOOST_TEST((b.cpu_reach_time(1) == std::chrono::nanoseconds(6s)));
    BOOST_TEST((b.cpu_reach_time(2) == std::chrono::nanoseconds(3s))); // two cpus: twice as fast
    b.on_sample({0, 12s, 1, 1});
    BOOST_TEST(b.cpu_reach_time(2).count() == 0);
}

namespace {
using pacer_clock = std::chrono::steady_clock;
using sandbox::detail::pace_input;
constexpr auto far = std::chrono::nanoseconds::max();
long long us(std::chrono::nanoseconds d)
{
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}
// A sample of a quiet tree: one process, one task, 10 MiB, `cpu` used in all.
tree_usage quiet(std::chrono::nanoseconds cpu) { return {10 << 20, cpu, 1, 1}; }
pace_input at(double pressure, std::chrono::nanoseconds time_to_bound = far,
              std::chrono::nanoseconds time_to_bound_all_cpus = far,
              std::chrono::nanoseconds took = 0ms)
{
    return {pressure, time_to_bound, time_to_bound_all_cpus, took};
}
} // namespace

BOOST_AUTO_TEST_CASE(pacer_ramps_tightens_near_caps_and_keeps_within_reach)
{
    using sandbox::detail::sample_pacer;
    sample_pacer p(50ms, false);
    auto t = pacer_clock::now();
    BOOST_TEST(us(p.first()) == 2000);
    // Young: doubling up to the interval (a task cap: never beyond it, idle or not).
    std::vector<long long> waits;
    for (int i = 0; i < 7; ++i)
        waits.push_back(us(p.after_sample(quiet(0ms), t += 10ms, at(0.0))));
    BOOST_TEST(waits == (std::vector<long long>{4000, 8000, 16000, 32000, 50000, 50000, 50000}),
               boost::test_tools::per_element());
    BOOST_TEST(us(p.after_sample(quiet(0ms), t += 50ms, at(0.5))) == 12500); // half a cap
    BOOST_TEST(us(p.after_sample(quiet(0ms), t += 50ms, at(0.8))) == 2000);  // 80 %
    BOOST_TEST(us(p.after_sample(quiet(0ms), t += 50ms, at(0.0, 5ms))) == 4000); // doubling...
    BOOST_TEST(us(p.after_sample(quiet(0ms), t += 50ms, at(0.0, 5ms))) == 5000); // ...in reach
    BOOST_TEST(us(p.after_sample(quiet(0ms), t += 50ms, at(0.0, 0ms))) == 2000); // not sooner
    BOOST_TEST(us(p.after_failure(at(0.0))) == 4000);
    // Never sooner than the sample took (a huge tree: half a cpu at most).
    BOOST_TEST(us(p.after_sample(quiet(0ms), t += 50ms, at(1.0, far, far, 7ms))) == 7000);
    sample_pacer fast(1ms, true);
    BOOST_TEST(us(fast.after_sample(quiet(0ms), t, at(0.9, 0ms))) == 1000); // nor later than 1 ms
}

BOOST_AUTO_TEST_CASE(pacer_lets_an_idle_tree_wait_longer_and_wakes_on_any_change)
{
    using sandbox::detail::sample_pacer;
    sample_pacer p(50ms, true);
    auto t = pacer_clock::now();
    auto cpu = 0ms;
    long long wait = 0;
    for (int i = 0; i < 12; ++i) // quiet: under 1 % of a cpu between samples
    {
        t += std::chrono::microseconds(wait);
        cpu += std::chrono::milliseconds(wait / 1000 / 200);
        wait = us(p.after_sample(quiet(cpu), t, at(0.0)));
    }
    BOOST_TEST(wait == 400000); // 8x the interval
    // Whatever changes brings the interval back.
    BOOST_TEST(us(p.after_sample(quiet(cpu + 10ms), t += 400ms, at(0.0))) == 50000); // cpu 2.5 %
    BOOST_TEST(us(p.after_sample(quiet(cpu + 10ms), t += 50ms, at(0.0))) == 100000);
    tree_usage forked = quiet(cpu + 10ms);
    forked.processes = 2;
    forked.tasks = 2;
    BOOST_TEST(us(p.after_sample(forked, t += 100ms, at(0.0))) == 50000);
    BOOST_TEST(us(p.after_sample(forked, t += 50ms, at(0.0))) == 100000);
    tree_usage grown = forked;
    grown.footprint_bytes += 2 << 20;
    BOOST_TEST(us(p.after_sample(grown, t += 100ms, at(0.0))) == 50000);
    BOOST_TEST(us(p.after_failure(at(0.0))) == 50000);
}

BOOST_AUTO_TEST_CASE(pacer_waits_past_the_interval_only_where_every_cpu_could_not_pass_a_bound)
{
    // Idle, far from its caps at its own pace (`time_to_bound`), but every cpu running for it (threads
    // made at once, no gate) could use a cpu budget's rest in 120 ms: it waits no longer, and
    // never less than the interval for being idle.
    using sandbox::detail::sample_pacer;
    sample_pacer p(50ms, true);
    auto t = pacer_clock::now();
    long long wait = 0;
    for (int i = 0; i < 12; ++i)
        wait = us(p.after_sample(quiet(0ms), t += std::chrono::microseconds(wait), at(0.0, far, 120ms)));
    BOOST_TEST(wait == 120000);
    for (int i = 0; i < 3; ++i)
        wait = us(p.after_sample(quiet(0ms), t += std::chrono::microseconds(wait), at(0.0, far, 10ms)));
    BOOST_TEST(wait == 50000);
    BOOST_TEST(us(p.after_sample(quiet(0ms), t += 50ms, at(0.0, 30ms, 10ms))) == 30000);
}

namespace {
constexpr pid_t self = 1; // the sampling subreaper
using ms = std::chrono::milliseconds;
using members = std::vector<cpu_ledger::member>;
auto none_ended = [](pid_t, std::uint64_t) { return false; };
auto all_ended = [](pid_t, std::uint64_t) { return true; };
long long as_ms(std::chrono::nanoseconds d)
{
    return std::chrono::duration_cast<ms>(d).count();
}
// Member 10 (a child of the subreaper), as seen at one sample.
cpu_ledger::member parent(ms own, ms reaped, bool ignores_chld)
{
    return {10, self, 7, own, reaped, ignores_chld};
}
} // namespace

BOOST_AUTO_TEST_CASE(ledger_child_waited_for_by_a_member_is_not_lost)
{
    cpu_ledger l;
    l.update(members{parent(100ms, 0ms, false), {11, 10, 8, 50ms, 0ms}}, all_ended);
    // 11 ended and 10 waited for it: 10's children time grew by (at least) 11's last use.
    BOOST_TEST(as_ms(l.update(members{parent(110ms, 60ms, false)}, all_ended)) == 0);
}

BOOST_AUTO_TEST_CASE(ledger_waiting_parent_never_loses_a_child_whatever_the_listing_order)
{
    // A listing reads 10's record before it reaches 10's children, and 10 may wait for a
    // child in between: 11 is gone, 10's record does not show it yet (the next one will).
    cpu_ledger stale;
    stale.update(members{parent(100ms, 0ms, false), {11, 10, 8, 100ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(stale.update(members{parent(110ms, 0ms, false)}, all_ended)) == 0);
    BOOST_TEST(as_ms(stale.update(members{parent(110ms, 100ms, false)}, all_ended)) == 0);

    // Or just after it read 10's record and before it read 11 (a zombie then): 11 is listed
    // and 10's record already shows it. Next time 11 is gone and 10's time did not grow.
    cpu_ledger early;
    early.update(members{parent(100ms, 0ms, false), {11, 10, 8, 90ms, 0ms}}, all_ended);
    early.update(members{parent(100ms, 100ms, false), {11, 10, 8, 100ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(early.update(members{parent(100ms, 100ms, false)}, all_ended)) == 0);
}

BOOST_AUTO_TEST_CASE(ledger_child_reaped_by_the_kernel_is_kept)
{
    cpu_ledger l;
    l.update(members{parent(100ms, 0ms, true), {11, 10, 8, 300ms, 0ms}, {12, 10, 9, 200ms, 20ms}},
             all_ended);
    // 10 ignores SIGCHLD: its children vanish and its children time does not move.
    BOOST_TEST(as_ms(l.update(members{parent(120ms, 0ms, true)}, all_ended)) == 520);
    // Nothing is counted twice on later samples.
    BOOST_TEST(as_ms(l.update(members{parent(130ms, 0ms, true)}, all_ended)) == 520);
}

BOOST_AUTO_TEST_CASE(ledger_parent_ignoring_sigchld_at_either_look_is_judged)
{
    // 10 ignored SIGCHLD when last seen and restored it since: 11 may have gone unwaited.
    cpu_ledger before;
    before.update(members{parent(100ms, 0ms, true), {11, 10, 8, 300ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(before.update(members{parent(100ms, 0ms, false)}, all_ended)) == 300);
    // 10 started ignoring it after 11 was seen.
    cpu_ledger after;
    after.update(members{parent(100ms, 0ms, false), {11, 10, 8, 300ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(after.update(members{parent(100ms, 0ms, true)}, all_ended)) == 300);
    // What the parent's children time grew by was waited for (a zombie from before it
    // ignored SIGCHLD): only the rest is lost.
    cpu_ledger part;
    part.update(members{parent(100ms, 0ms, true), {11, 10, 8, 300ms, 0ms}, {12, 10, 9, 50ms, 0ms}},
                all_ended);
    BOOST_TEST(as_ms(part.update(members{parent(100ms, 60ms, true)}, all_ended)) == 290);
}

BOOST_AUTO_TEST_CASE(ledger_members_we_reap_show_in_our_children_time)
{
    cpu_ledger l;
    l.update(members{parent(100ms, 40ms, false)}, all_ended);
    // We reaped 10 (orphan or leader): our RUSAGE_CHILDREN holds its whole use.
    BOOST_TEST(as_ms(l.update({}, all_ended)) == 0);
}

BOOST_AUTO_TEST_CASE(ledger_member_missed_by_a_listing_is_not_taken_for_ended)
{
    cpu_ledger l;
    l.update(members{parent(100ms, 0ms, true), {11, 10, 8, 300ms, 0ms}}, none_ended);
    // 11 is missing from this listing but still alive: no loss, and it is still tracked.
    BOOST_TEST(as_ms(l.update(members{parent(100ms, 0ms, true)}, none_ended)) == 0);
    BOOST_TEST(as_ms(l.update(members{parent(100ms, 0ms, true)}, all_ended)) == 300);
}

BOOST_AUTO_TEST_CASE(ledger_child_of_a_parent_the_listing_missed_is_judged_later)
{
    // A busy host: the listing misses parent 10 (alive, ignoring SIGCHLD) in the very sample
    // in which its child 11 ended. 10's children time is unknown then, so 11 is judged once
    // 10 is seen again.
    auto alive_10 = [](pid_t pid, std::uint64_t) { return pid != 10; };
    cpu_ledger l;
    l.update(members{parent(100ms, 0ms, true), {11, 10, 8, 270ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(l.update({}, alive_10)) == 0);
    BOOST_TEST(as_ms(l.update(members{parent(110ms, 0ms, true)}, all_ended)) == 270);

    // The same, but 10 had waited for 11 after all (its children time grew): nothing lost.
    cpu_ledger k;
    k.update(members{parent(100ms, 0ms, true), {11, 10, 8, 270ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(k.update({}, alive_10)) == 0);
    BOOST_TEST(as_ms(k.update(members{parent(110ms, 280ms, true)}, all_ended)) == 0);
}

BOOST_AUTO_TEST_CASE(ledger_parent_ignoring_sigchld_that_ended_too_lost_its_children)
{
    // 10 ignored SIGCHLD and ended right after its child 11: the kernel reaped 11, and no
    // parent is left whose children time could show it (10's own time reaches its reaper).
    cpu_ledger l;
    l.update(members{parent(100ms, 0ms, true), {11, 10, 8, 270ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(l.update({}, all_ended)) == 270);
    // 11 outlived 10 and fell to us, and we reaped it: our children time holds it.
    cpu_ledger orphan;
    orphan.update(members{parent(100ms, 0ms, true), {11, 10, 8, 270ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(orphan.update({}, all_ended, [](pid_t p) { return p == 11; })) == 0);
    // 11 outlived 10 and fell to member 20, which reaps orphans (a subreaper, a pid
    // namespace's init) and waited for it: 20's children time grew by what 11 had used,
    // more than 20's own ended children explain. Nothing is lost (it was counted twice).
    cpu_ledger adopted;
    adopted.update(members{{20, self, 5, 10ms, 0ms, false}, {10, 20, 7, 100ms, 0ms, true},
                           {11, 10, 8, 270ms, 0ms}},
                   all_ended);
    BOOST_TEST(as_ms(adopted.update(members{{20, self, 5, 10ms, 370ms, false}}, all_ended)) == 0);
    // Only what the growth does not cover is lost.
    cpu_ledger partly;
    partly.update(members{{20, self, 5, 10ms, 0ms, false}, {10, 20, 7, 100ms, 0ms, true},
                          {11, 10, 8, 270ms, 0ms}, {12, 10, 9, 200ms, 0ms}},
                  all_ended);
    BOOST_TEST(as_ms(partly.update(members{{20, self, 5, 10ms, 370ms, false}}, all_ended)) == 200);
    // A parent that did not ignore SIGCHLD waited for its child, or its child fell to us.
    cpu_ledger waited;
    waited.update(members{parent(100ms, 0ms, false), {11, 10, 8, 270ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(waited.update({}, all_ended)) == 0);
}

// Member 20, which reaps orphans, with `reaped` of children time.
cpu_ledger::member reaper_with(ms reaped)
{
    return {20, self, 5, 10ms, reaped, false};
}
const cpu_ledger::member reaper = reaper_with(0ms);

BOOST_AUTO_TEST_CASE(ledger_orphan_reaped_across_two_samples_is_not_lost)
{
    // 11 outlived 10 (ignoring SIGCHLD) and fell to reaper 20, but the listing read 20's
    // record before 20 waited for it: the growth shows at the next sample only.
    cpu_ledger late;
    late.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}, {11, 10, 8, 270ms, 0ms}},
                all_ended);
    late.update(members{reaper}, all_ended); // counted lost for now
    BOOST_TEST(as_ms(late.update(members{reaper_with(370ms)}, all_ended)) == 0);
    // Growth a sample late pays back only what was counted lost, and only once.
    BOOST_TEST(as_ms(late.update(members{reaper_with(500ms)}, all_ended)) == 0);

    // The other way: the listing read 10 and 11 alive, then both ended and 20 waited for
    // them before its own record was read: the growth shows a sample early.
    cpu_ledger early;
    early.update(members{reaper, {10, 20, 7, 90ms, 0ms, true}, {11, 10, 8, 260ms, 0ms}},
                 all_ended);
    early.update(
        members{reaper_with(370ms), {10, 20, 7, 100ms, 0ms, true}, {11, 10, 8, 270ms, 0ms}},
        all_ended);
    BOOST_TEST(as_ms(early.update(members{reaper_with(370ms)}, all_ended)) == 0);

    // A reaper that waits for the orphan several samples later (it was not scheduled
    // sooner): the growth still pays the time back.
    cpu_ledger later;
    later.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}, {11, 10, 8, 270ms, 0ms}},
                 all_ended);
    // (the sample that sees it gone, then orphan_debt_samples - 1 more)
    for (int i = 0; i < sandbox::detail::orphan_debt_samples; ++i)
        BOOST_TEST(as_ms(later.update(members{reaper}, all_ended)) == 270);
    BOOST_TEST(as_ms(later.update(members{reaper_with(370ms)}, all_ended)) == 0);

    // Time really lost stays lost when no growth comes within that many samples.
    cpu_ledger lost;
    lost.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}, {11, 10, 8, 270ms, 0ms}},
                all_ended);
    for (int i = 0; i <= sandbox::detail::orphan_debt_samples; ++i)
        lost.update(members{reaper}, all_ended);
    BOOST_TEST(as_ms(lost.update(members{reaper_with(370ms)}, all_ended)) == 270);
}

BOOST_AUTO_TEST_CASE(ledger_orphan_of_a_zombie_parent_reaped_by_a_reaper_is_not_lost)
{
    // 10 ignores SIGCHLD and has ended, but is still listed (a zombie its parent has not
    // waited for yet); its child 11 fell to reaper 20, which waited for it: 11 is gone, 10's
    // children time did not grow, 20's did by 11's time. Counted lost as well, that time was
    // counted twice (1 run in 12).
    cpu_ledger l;
    l.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}, {11, 10, 8, 270ms, 0ms}}, all_ended);
    BOOST_TEST(as_ms(l.update(members{reaper_with(270ms), {10, 20, 7, 100ms, 0ms, true}},
                              all_ended)) == 0);
    // The same growth a few samples later (the reaper was not scheduled sooner).
    cpu_ledger late;
    late.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}, {11, 10, 8, 270ms, 0ms}},
                all_ended);
    late.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}}, all_ended);
    late.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}}, all_ended);
    BOOST_TEST(as_ms(late.update(members{reaper_with(270ms), {10, 20, 7, 100ms, 0ms, true}},
                                 all_ended)) == 0);
    // No reaper grows: the kernel reaped it, and it stays lost.
    cpu_ledger lost;
    lost.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}, {11, 10, 8, 270ms, 0ms}},
                all_ended);
    for (int i = 0; i <= sandbox::detail::orphan_debt_samples; ++i)
        lost.update(members{reaper, {10, 20, 7, 100ms, 0ms, true}}, all_ended);
    BOOST_TEST(as_ms(lost.lost()) == 270);
}

BOOST_AUTO_TEST_CASE(ledger_orphan_whose_reaper_ended_after_the_last_listing_is_not_lost)
{
    // Shell 30 (our child) runs reaper 20, which runs 10 (ignoring SIGCHLD) with child 11.
    // 10 ended, 11 fell to 20, 20 waited for both and ended, and 30 waited for 20, all after
    // 30's record was read: the last listing holds 30 alone, 11 is counted lost for now, and
    // no listing follows (the tree ends). Its time shows in our children time only, which
    // grew by the whole of 30 (710 ms for 600 counted, 1 run in 40).
    const cpu_ledger::member shell{30, self, 4, 0ms, 0ms, false};
    const cpu_ledger::member reaper_below{20, 30, 5, 10ms, 490ms, false};
    auto seen_before = [&] {
        return members{shell, reaper_below, {10, 20, 7, 1ms, 0ms, true}, {11, 10, 8, 98ms, 0ms}};
    };
    cpu_ledger l;
    l.update(seen_before(), all_ended);
    BOOST_TEST(as_ms(l.update(members{shell}, all_ended)) == 98);
    BOOST_TEST(as_ms(l.finish(610ms)) == 0);

    // 11 ended before 10 (the kernel reaped it): our children time grew by 30's time less
    // 11's. It stays lost.
    cpu_ledger lost;
    lost.update(seen_before(), all_ended);
    lost.update(members{shell, {20, 30, 5, 10ms, 491ms, false}}, all_ended);
    BOOST_TEST(as_ms(lost.finish(501ms)) == 98);

    // The same at the end with 10 and 11 still in the last listing.
    cpu_ledger at_end;
    at_end.update(seen_before(), all_ended);
    BOOST_TEST(as_ms(at_end.finish(500ms)) == 98); // 11 lost with 10
    cpu_ledger reaped_at_end;
    reaped_at_end.update(seen_before(), all_ended);
    BOOST_TEST(as_ms(reaped_at_end.finish(600ms)) == 0); // 11 fell to 20
}

BOOST_AUTO_TEST_CASE(ledger_recycled_pid_is_a_new_member)
{
    cpu_ledger l;
    l.update(members{parent(100ms, 0ms, true), {11, 10, 8, 300ms, 0ms}}, all_ended);
    // Pid 11 now belongs to another process (other start time): the old one ended unwaited.
    BOOST_TEST(as_ms(l.update(members{parent(100ms, 0ms, true), {11, 10, 99, 1ms, 0ms}},
                              all_ended)) == 300);
}

namespace {
using tp = process_gate::time_point;
const tp t0{};
} // namespace

BOOST_AUTO_TEST_CASE(gate_admits_up_to_the_cap_without_listing)
{
    process_gate g(4, 5ms);
    g.on_listing(1);
    for (int i = 0; i < 3; ++i)
    {
        BOOST_TEST(!g.at_cap());
        BOOST_TEST(g.admit(100 + i, t0));
    }
    // 1 listed + 3 admitted = the cap: the next fork needs a fresh count.
    BOOST_TEST(g.at_cap());
    BOOST_TEST(!g.admit(200, t0));
    BOOST_TEST(g.wanted() == 5u);
    BOOST_TEST(g.cap() == 4u);
}

BOOST_AUTO_TEST_CASE(gate_listing_makes_room_for_processes_that_ended)
{
    process_gate g(3, 5ms);
    g.on_listing(1);
    BOOST_TEST(g.admit(10, t0));
    BOOST_TEST(g.admit(10, t0));
    BOOST_TEST(g.at_cap());
    g.on_listing(2); // one of the three ended
    BOOST_TEST(!g.at_cap());
    BOOST_TEST(g.admit(10, t0));
    BOOST_TEST(g.at_cap());
    g.on_listing(3); // none ended: the fork asked for would be the fourth
    BOOST_TEST(!g.admit(10, t0));
    BOOST_TEST(g.wanted() == 4u);
}

BOOST_AUTO_TEST_CASE(gate_listing_above_the_cap_refuses)
{
    // Forks in flight when the tree was listed can show up later: the count on hand may
    // already be past the cap, and then nothing more is admitted.
    process_gate g(2, 5ms);
    g.on_listing(5);
    BOOST_TEST(g.at_cap());
    BOOST_TEST(!g.admit(1, t0));
    BOOST_TEST(g.wanted() == 6u);
}

BOOST_AUTO_TEST_CASE(gate_waits_for_forks_of_other_tasks_before_listing)
{
    process_gate g(10, 5ms);
    g.on_listing(1);
    BOOST_TEST(g.admit(10, t0));
    BOOST_TEST(g.admit(11, t0 + 1ms));
    BOOST_TEST(g.admit(12, t0 + 2ms));
    // Task 12 asks again: its own fork is done, 10's and 11's may not be: wait until 5 ms
    // after the later of them.
    auto until = g.list_after(12, t0 + 3ms);
    BOOST_TEST_REQUIRE(until.has_value());
    BOOST_TEST((*until == t0 + 6ms));
    // Later, the wait is over for 10 (6 ms old) but not for 11.
    until = g.list_after(12, t0 + 5500us);
    BOOST_TEST_REQUIRE(until.has_value());
    BOOST_TEST((*until == t0 + 6ms));
    BOOST_TEST(!g.list_after(12, t0 + 6ms).has_value());
}

BOOST_AUTO_TEST_CASE(gate_never_waits_for_the_asking_task_itself)
{
    // A shell at its cap running one command after another: each fork comes from the same
    // task, whose earlier fork has returned, so it is listed at once.
    process_gate g(2, 5ms);
    g.on_listing(1);
    BOOST_TEST(g.admit(10, t0));
    BOOST_TEST(g.at_cap());
    BOOST_TEST(!g.list_after(10, t0 + 1us).has_value());
    g.on_listing(1); // the command ended
    BOOST_TEST(g.admit(10, t0 + 1ms));
    // A task the listener cannot name (pid 0) is never taken for another.
    BOOST_TEST(g.admit(0, t0 + 2ms) == false); // at the cap
    g.on_listing(1);
    BOOST_TEST(g.admit(0, t0 + 2ms));
    BOOST_TEST(g.list_after(0, t0 + 3ms).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
