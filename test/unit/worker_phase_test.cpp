// test/unit/worker_phase_test.cpp: the worker's phases and what each event makes it do
// (helper/worker_phase.hpp): a table over every phase, then a few runs end to end.
#include "helper/worker_phase.hpp"

#include <boost/test/unit_test.hpp>

#include <sstream>
#include <string>

using sandbox::detail::transition;
using sandbox::detail::worker_event;
using sandbox::detail::worker_phase;
using sandbox::detail::worker_step;
using sandbox::detail::proto::end_reason;
namespace sd = sandbox::detail;

namespace {

using kind = worker_event::kind;
constexpr auto idle = worker_phase::idle;
constexpr auto running = worker_phase::running;
constexpr auto grace = worker_phase::grace;
constexpr auto draining = worker_phase::draining;
constexpr std::uint32_t none = sd::act_none;
constexpr std::uint32_t end_now = sd::act_kill_tree | sd::act_report;
constexpr std::uint32_t claim_end = sd::act_claim | end_now;
constexpr std::uint32_t begin_grace = sd::act_claim | sd::act_sigterm_tree | sd::act_arm_grace;
constexpr std::uint32_t lost = end_now | sd::act_exit;

worker_event stop(end_reason why, bool graceful) { return {kind::stop, why, graceful}; }
worker_event ev(kind k, end_reason why = end_reason::none) { return {k, why, false}; }

std::string name_of(kind k)
{
    switch (k)
    {
    case kind::plan: return "plan";
    case kind::spawned: return "spawned";
    case kind::stop: return "stop";
    case kind::fork_refused: return "fork_refused";
    case kind::grace_over: return "grace_over";
    case kind::leader_reaped: return "leader_reaped";
    case kind::tree_empty: return "tree_empty";
    case kind::channel_lost: return "channel_lost";
    }
    return "?";
}

} // namespace

BOOST_AUTO_TEST_SUITE(worker_phase_machine)

BOOST_AUTO_TEST_CASE(the_table)
{
    struct row
    {
        worker_phase from;
        worker_event ev;
        worker_step want;
    };
    const auto cut = end_reason::cancelled;
    const auto tmo = end_reason::timed_out;
    const auto bud = end_reason::budget;
    const auto nat = end_reason::natural;
    const auto aba = end_reason::abandoned;
    const auto lostr = end_reason::supervisor_lost;
    const auto unf = end_reason::unenforceable;
    const row table[] = {
        // idle: a plan starts; whatever else comes crossed the report and does nothing.
        {idle, ev(kind::plan), {idle, sd::act_start}},
        {idle, ev(kind::spawned), {running, none}},
        {idle, stop(cut, false), {idle, none}},
        {idle, stop(tmo, true), {idle, none}},
        {idle, ev(kind::fork_refused, bud), {idle, none}},
        {idle, ev(kind::grace_over), {idle, none}},
        {idle, ev(kind::leader_reaped), {idle, none}},
        {idle, ev(kind::tree_empty), {idle, none}},
        {idle, ev(kind::channel_lost, aba), {idle, sd::act_kill_tree | sd::act_exit}},
        // running: the first cause is claimed.
        {running, ev(kind::plan), {running, sd::act_refuse_busy}},
        {running, ev(kind::spawned), {running, none}},
        {running, stop(cut, false), {idle, claim_end, cut}},
        {running, stop(tmo, true), {grace, begin_grace, tmo}},
        {running, stop(bud, false), {idle, claim_end, bud}},
        {running, stop(unf, false), {idle, claim_end, unf}},
        {running, ev(kind::fork_refused, bud), {idle, claim_end, bud}},
        {running, ev(kind::grace_over), {running, none}},
        {running, ev(kind::leader_reaped), {idle, claim_end, nat}},
        {running, ev(kind::tree_empty), {running, none}},
        {running, ev(kind::channel_lost, aba), {idle, sd::act_claim | lost, aba}},
        {running, ev(kind::channel_lost, lostr), {idle, sd::act_claim | lost, lostr}},
        // grace: the first cause stands; only a harder stop or the grace's end kills.
        {grace, ev(kind::plan), {grace, sd::act_refuse_busy}},
        {grace, ev(kind::spawned), {grace, none}},
        {grace, stop(cut, true), {grace, none}},
        {grace, stop(cut, false), {idle, end_now}},
        {grace, stop(unf, false), {idle, end_now}},
        {grace, ev(kind::fork_refused, bud), {grace, none}},
        {grace, ev(kind::grace_over), {idle, end_now}},
        {grace, ev(kind::leader_reaped), {draining, none}},
        {grace, ev(kind::tree_empty), {grace, none}},
        {grace, ev(kind::channel_lost, aba), {idle, lost}},
        // draining: as grace, and done early once the tree is empty.
        {draining, ev(kind::plan), {draining, sd::act_refuse_busy}},
        {draining, ev(kind::spawned), {draining, none}},
        {draining, stop(tmo, true), {draining, none}},
        {draining, stop(cut, false), {idle, end_now}},
        {draining, ev(kind::fork_refused, bud), {draining, none}},
        {draining, ev(kind::grace_over), {idle, end_now}},
        {draining, ev(kind::leader_reaped), {draining, none}},
        {draining, ev(kind::tree_empty), {idle, sd::act_report}},
        {draining, ev(kind::channel_lost, lostr), {idle, lost}},
    };
    for (const row& r : table)
    {
        BOOST_TEST_CONTEXT(r.from << " + " << name_of(r.ev.what)
                                  << (r.ev.graceful ? " (graceful)" : ""))
        {
            BOOST_TEST(transition(r.from, r.ev) == r.want);
        }
    }
}

BOOST_AUTO_TEST_CASE(every_phase_and_event_has_a_row_that_reports_at_most_once)
{
    // Whatever comes, a report leaves the worker idle (nothing left to report), and only a
    // phase with a run in it reports.
    for (auto from : {idle, running, grace, draining})
        for (int k = 0; k <= static_cast<int>(kind::channel_lost); ++k)
            for (bool graceful : {false, true})
            {
                const worker_event e{static_cast<kind>(k), end_reason::cancelled, graceful};
                const auto s = transition(from, e);
                BOOST_TEST_CONTEXT(from << " + " << name_of(e.what))
                {
                    if (s.has(sd::act_report))
                        BOOST_TEST((s.next == idle && from != idle));
                    if (s.has(sd::act_claim))
                        BOOST_TEST(from == running); // the first cause only
                    if (s.has(sd::act_kill_tree) && from != idle)
                        BOOST_TEST(s.has(sd::act_report));
                }
            }
}

BOOST_AUTO_TEST_CASE(a_timeout_with_a_grace_then_a_cancel_ends_as_timed_out)
{
    auto p = transition(idle, ev(kind::spawned)).next;
    auto s = transition(p, stop(end_reason::timed_out, true));
    BOOST_TEST((s.cause == end_reason::timed_out));
    BOOST_TEST(s.has(sd::act_sigterm_tree));
    s = transition(s.next, ev(kind::leader_reaped));
    BOOST_TEST(s.next == draining);
    // The cancel escalates to a kill but claims nothing: the timeout stands.
    s = transition(s.next, stop(end_reason::cancelled, false));
    BOOST_TEST(!s.has(sd::act_claim));
    BOOST_TEST(s.has(sd::act_kill_tree));
    BOOST_TEST(s.has(sd::act_report));
    BOOST_TEST(s.next == idle);
    // A grace timer that fired meanwhile finds the run over.
    BOOST_TEST(transition(s.next, ev(kind::grace_over)) == (worker_step{idle, none}));
}

BOOST_AUTO_TEST_CASE(phases_say_what_runs)
{
    BOOST_TEST(sd::leader_alive(running));
    BOOST_TEST(sd::leader_alive(grace));
    BOOST_TEST(!sd::leader_alive(draining));
    BOOST_TEST(!sd::leader_alive(idle));
    BOOST_TEST(sd::judges_forks(grace));
    BOOST_TEST(sd::judges_forks(draining));
    BOOST_TEST(!sd::judges_forks(idle));
    BOOST_TEST(sd::samples(running));
    BOOST_TEST(!sd::samples(grace));
    std::ostringstream os;
    os << draining;
    BOOST_TEST(os.str() == "draining");
}

BOOST_AUTO_TEST_SUITE_END()
