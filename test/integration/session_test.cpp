// test/integration/session_test.cpp: sessions of the local runner on real processes, pipes
// and a real pseudo-terminal: streams and exit codes, the terminal (size, resize, Ctrl-C,
// Ctrl-D), signals, terminate and close, the registry (ids, conflicts, order, retention),
// replay after a reconnect, gaps, lag, cancellation of reads and writes, and leaks.
#include <boost/test/unit_test.hpp>

#include "session_support.hpp"
#include "support.hpp"

#include <sandbox/error.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace asio::experimental::awaitable_operators;
using sandbox::errc;
using sandbox::exec_status;
using sandbox::session;
using sandbox::session_spec;

using sbx_test::drained;
using sbx_test::read_all;
using sbx_test::read_until;
using sbx_test::run_coro;
using sbx_test::shell;

errc code_of(const sandbox::error& e) { return static_cast<errc>(e.code().value()); }

template <class F>
asio::awaitable<errc> error_of(F f)
{
    try
    {
        co_await f();
    }
    catch (const sandbox::error& e)
    {
        BOOST_TEST((e.code().category() == sandbox::error_category()));
        co_return code_of(e);
    }
    co_return errc{};
}

bool contains_(const std::string& haystack, const std::string& needle)
{
    return haystack.find(needle) != std::string::npos;
}

void touch(const std::filesystem::path& p) { std::ofstream(p).put('x'); }

std::size_t open_fds()
{
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
        ++n;
    return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sessions)

BOOST_FIXTURE_TEST_CASE(pipes_keep_streams_apart_and_report_the_exit_code, sbx_test::local_fixture)
{
    auto* pm = runner.sessions();
    BOOST_REQUIRE(pm != nullptr);
    sandbox::noop_runner noop(ioc.get_executor());
    BOOST_TEST(noop.sessions() == nullptr); // no sessions: null, never a stand-in
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await pm->start(shell("printf OUT; printf ERR >&2; exit 7"));
        BOOST_TEST(s->pid() > 0);
        BOOST_TEST(!s->is_tty());
        auto d = co_await read_all(*s);
        BOOST_TEST(d.out == "OUT");
        BOOST_TEST(d.err == "ERR");
        BOOST_TEST(d.next == 6u);
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::exited));
        BOOST_TEST(r.exit_code == 7);
        // Output stays readable after the exit, and after wait, until close.
        auto again = co_await read_all(*s);
        BOOST_TEST(again.out + again.err == "OUTERR");
        co_await s->close();
        BOOST_TEST(s->closed());
        BOOST_TEST((co_await error_of([&] { return s->read(0, 10); }) == errc::session_closed));
        auto after = co_await s->wait(); // still answers
        BOOST_TEST(after.exit_code == 7);
    });
}

BOOST_FIXTURE_TEST_CASE(input_written_reaches_the_command_in_order, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(shell("cat"));
        // Two writes issued together are serialized: all of the first, then the second.
        const std::string a(300 * 1024, 'a'), b(300 * 1024, 'b');
        auto ex = co_await asio::this_coro::executor;
        int done = 0;
        asio::co_spawn(ex, s->write(a), [&](std::exception_ptr e) { done += e ? 100 : 1; });
        asio::co_spawn(ex, s->write(b), [&](std::exception_ptr e) { done += e ? 100 : 1; });
        std::string got;
        std::uint64_t at = 0;
        while (got.size() < a.size() + b.size())
        {
            auto o = co_await s->read(at, 1 << 20);
            at = o.next;
            for (auto& c : o.chunks)
                got += c.data;
        }
        BOOST_TEST(done == 2);
        BOOST_TEST((got == a + b));
        BOOST_TEST(!s->close_input());
        auto r = co_await s->wait();
        BOOST_TEST(r.exit_code == 0);
        // Writing after the exit is the OS error, not a hang.
        try
        {
            co_await s->write("late");
            BOOST_FAIL("write after exit succeeded");
        }
        catch (const sandbox::error& e)
        {
            BOOST_TEST(e.code() == boost::system::errc::broken_pipe);
        }
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(a_terminal_has_its_size_resizes_and_types_ctrl_c, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        session_spec spec;
        spec.command = "/bin/sh";
        spec.tty = sandbox::terminal_size{};
        auto s = co_await runner.sessions()->start(spec);
        BOOST_TEST(s->is_tty());
        std::uint64_t at = 0;
        co_await s->write("stty size\n");
        BOOST_TEST(contains_(co_await read_until(*s, at, "24 80"), "24 80"));
        BOOST_TEST(!s->resize({40, 120}));
        co_await s->write("stty size\n");
        BOOST_TEST(contains_(co_await read_until(*s, at, "40 120"), "40 120"));
        BOOST_TEST((s->resize({0, 10}) == errc::validation));
        co_await s->write("exit 3\n");
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::exited));
        BOOST_TEST(r.exit_code == 3);
        BOOST_TEST((s->resize({10, 10}) == errc::not_available));
        // Issue 33, item 8: a terminal's output is tagged tty, never stdout or stderr.
        auto all = co_await s->read(0, 1 << 20);
        BOOST_TEST_REQUIRE(!all.chunks.empty());
        for (const auto& c : all.chunks)
            BOOST_TEST((c.stream == sandbox::output_stream::tty));
        BOOST_TEST(std::string(sandbox::to_string(all.chunks[0].stream)) == "tty");
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(ctrl_c_on_a_terminal_interrupts_cat, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        session_spec spec;
        spec.command = "cat";
        spec.tty = sandbox::terminal_size{};
        auto s = co_await runner.sessions()->start(spec);
        std::uint64_t at = 0;
        co_await s->write("hello\n");
        // The terminal echoes the line, then cat writes it: "hello" twice.
        auto seen = co_await read_until(*s, at, "hello\r\nhello\r\n");
        BOOST_TEST(contains_(seen, "hello\r\nhello\r\n"));
        BOOST_TEST(!s->signal(sandbox::session_signal::interrupt));
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::signaled));
        BOOST_TEST(r.signal == SIGINT);
        // After the exit a signal has no process to reach.
        BOOST_TEST(s->signal(sandbox::session_signal::interrupt) ==
                   boost::system::errc::no_such_process);
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(ctrl_d_ends_input_on_a_terminal, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        session_spec spec;
        spec.command = "cat";
        spec.tty = sandbox::terminal_size{};
        auto s = co_await runner.sessions()->start(spec);
        BOOST_TEST(!s->close_input());
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::exited));
        BOOST_TEST(r.exit_code == 0);
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(interrupt_reaches_a_trapping_shell_on_pipes_and_on_a_terminal,
                        sbx_test::local_fixture)
{
    for (bool tty : {false, true})
    {
        BOOST_TEST_CONTEXT("tty " << tty)
        run_coro(ioc, [&]() -> asio::awaitable<void> {
            auto spec = shell("trap 'echo caught; exit 0' INT; echo ready; "
                              "while :; do sleep 0.02; done");
            if (tty)
                spec.tty = sandbox::terminal_size{};
            auto s = co_await runner.sessions()->start(spec);
            std::uint64_t at = 0;
            co_await read_until(*s, at, "ready");
            BOOST_TEST(!s->signal(sandbox::session_signal::interrupt));
            BOOST_TEST(contains_(co_await read_until(*s, at, "caught"), "caught"));
            auto r = co_await s->wait();
            BOOST_TEST((r.status == exec_status::exited));
            BOOST_TEST(r.exit_code == 0);
            co_await s->close();
        });
    }
}

BOOST_FIXTURE_TEST_CASE(resize_needs_a_terminal, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(shell("read x"));
        BOOST_TEST((s->resize({40, 120}) == errc::not_available));
        co_await s->close();
        BOOST_TEST((s->resize({40, 120}) == errc::session_closed));
        BOOST_TEST((s->signal(sandbox::session_signal::interrupt) == errc::session_closed));
    });
}

BOOST_FIXTURE_TEST_CASE(a_timeout_ends_a_session_and_is_its_exit, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto spec = shell("exec sleep 30");
        spec.options.timeout = 300ms;
        auto s = co_await runner.sessions()->start(spec);
        auto r = co_await s->wait(); // a result, not an exception
        BOOST_TEST((r.status == exec_status::timed_out));
        BOOST_TEST(r.diag.limit == "timeout");
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(caps_apply_to_sessions, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto spec = shell("while :; do :; done");
        spec.options.timeout = 20s;
        spec.options.limits.cpu_millicores = 10; // 200 ms of cpu
        auto s = co_await runner.sessions()->start(spec);
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::budget_exceeded));
        BOOST_TEST((r.budget == sandbox::budget_kind::cpu));
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(terminate_is_terminated_unless_the_command_exits_itself,
                        sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(shell("exec sleep 30"));
        auto r = co_await s->terminate();
        BOOST_TEST((r.status == exec_status::terminated));
        BOOST_TEST(r.signal == SIGTERM);
        BOOST_TEST(!s->running());
        co_await s->close();

        auto t = co_await runner.sessions()->start(
            shell("trap 'exit 5' TERM; echo ready; while :; do sleep 0.02; done"));
        std::uint64_t at = 0;
        co_await read_until(*t, at, "ready");
        auto r2 = co_await t->terminate(10s);
        BOOST_TEST((r2.status == exec_status::exited));
        BOOST_TEST(r2.exit_code == 5);
        co_await t->close();

        // A command that ignores SIGTERM gets SIGKILL after the grace.
        auto u = co_await runner.sessions()->start(
            shell("trap '' TERM; echo ready; while :; do sleep 0.02; done"));
        at = 0;
        co_await read_until(*u, at, "ready");
        auto r3 = co_await u->terminate(200ms);
        BOOST_TEST((r3.status == exec_status::terminated));
        BOOST_TEST(r3.signal == SIGKILL);
        co_await u->close();
    });
}

BOOST_FIXTURE_TEST_CASE(the_registry_keeps_ids_order_and_records, sbx_test::local_fixture)
{
    auto& pm = *runner.sessions();
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await pm.start(shell("exec sleep 30", "known"));
        BOOST_TEST(s->id() == "known");
        BOOST_TEST((co_await error_of([&] { return pm.start(shell("true", "known")); }) ==
                    errc::conflict));
        auto g = co_await pm.start(shell("exec sleep 30"));
        BOOST_TEST(g->id().size() == 20u);
        auto l = pm.list();
        BOOST_REQUIRE(l.size() == 2u);
        BOOST_TEST(l[0].id == "known"); // start order
        BOOST_TEST(l[1].id == g->id());
        BOOST_TEST(l[0].running);
        BOOST_TEST(l[0].pid > 0);
        BOOST_TEST((l[0].argv == std::vector<std::string>{"/bin/sh", "-c", "exec sleep 30"}));
        BOOST_TEST(pm.find("known") == s);
        BOOST_TEST((co_await error_of([&] { return pm.terminate("missing"); }) ==
                    errc::not_found));
        auto r = co_await pm.terminate("known");
        BOOST_TEST((r.status == exec_status::terminated));
        l = pm.list(); // already updated when terminate returns
        BOOST_TEST(!l[0].running);
        BOOST_REQUIRE(l[0].exit.has_value());
        BOOST_TEST((l[0].exit->status == exec_status::terminated));
        // Terminating an ended session succeeds again with the same exit.
        BOOST_TEST((((co_await pm.terminate("known")).status == exec_status::terminated)));
        co_await s->close();
        co_await s->close(); // idempotent
        BOOST_TEST(pm.list().size() == 1u);
        BOOST_TEST(pm.find("known") == nullptr);
        auto again = co_await pm.start(shell("true", "known")); // the id is free again
        co_await again->close();
        co_await g->close();
        BOOST_TEST(pm.list().empty());
    });
}

BOOST_FIXTURE_TEST_CASE(bad_starts_are_classified_and_leave_no_record, sbx_test::local_fixture)
{
    auto& pm = *runner.sessions();
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        session_spec missing;
        missing.command = "no-such-command-here";
        BOOST_TEST((co_await error_of([&] { return pm.start(missing); }) == errc::not_found));
        BOOST_TEST((co_await error_of([&] { return pm.start(shell("true", "bad id")); }) ==
                    errc::validation));
        BOOST_TEST((co_await error_of([&] { return pm.start(session_spec{}); }) ==
                    errc::validation));
        auto with_input = shell("cat");
        with_input.options.input = "x";
        BOOST_TEST((co_await error_of([&] { return pm.start(with_input); }) ==
                    errc::validation));
        auto no_net = shell("true");
        no_net.options.net.mode = sandbox::net_mode::deny_all;
        BOOST_TEST((co_await error_of([&] { return pm.start(no_net); }) ==
                    errc::not_available));
        auto outside = shell("true");
        outside.options.work_dir = "/etc";
        BOOST_TEST((co_await error_of([&] { return pm.start(outside); }) == errc::forbidden));
        BOOST_TEST(pm.list().empty());
    });
}

// try_start returns the failure as a value (nothing thrown inside); start throws it at the
// edge with the same code and diagnostics.
BOOST_FIXTURE_TEST_CASE(a_failed_start_is_a_value_and_start_throws_it_at_the_edge,
                        sbx_test::local_fixture)
{
    auto& pm = *runner.sessions();
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        session_spec missing;
        missing.command = "no-such-command-here";
        bool threw = false;
        std::optional<sandbox::failure> f;
        try
        {
            auto o = co_await pm.try_start(missing);
            if (!o)
                f = o.error();
        }
        catch (...)
        {
            threw = true;
        }
        BOOST_TEST(!threw);
        BOOST_TEST_REQUIRE(f.has_value());
        BOOST_TEST(f->code == errc::not_found);
        BOOST_TEST(f->diag.message.find("no-such-command-here") != std::string::npos);
        try
        {
            co_await pm.start(missing);
            BOOST_FAIL("a missing command started");
        }
        catch (const sandbox::error& e)
        {
            BOOST_TEST(e.code() == errc::not_found);
            BOOST_TEST(e.diag().message == f->diag.message);
        }
        auto busy = shell("sleep 30", "busy");
        auto s = co_await pm.start(busy);
        auto again = co_await pm.try_start(busy);
        BOOST_TEST_REQUIRE(!again);
        BOOST_TEST(again.error().code == errc::conflict);
        BOOST_TEST(again.error().diag.limit == "id");
        co_await s->close();
    });
    BOOST_TEST(runner.sessions()->list().empty());
}

BOOST_FIXTURE_TEST_CASE(a_client_replays_after_reconnecting, sbx_test::local_fixture)
{
    const auto go = root.path() / "go";
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(
            shell("printf first; while [ ! -e " + go.string() + " ]; do sleep 0.01; done; "
                  "printf second"));
        std::uint64_t at = 0;
        BOOST_TEST(co_await read_until(*s, at, "first") == "first");
        // The client goes away holding offset 5; another picks the session up by id.
        auto again = runner.sessions()->find(s->id());
        BOOST_REQUIRE(again);
        touch(go);
        auto rest = co_await read_all(*again, at);
        BOOST_TEST(rest.out == "second");
        auto whole = co_await read_all(*again, 0); // full replay
        BOOST_TEST(whole.out == "firstsecond");
        auto part = co_await again->read(3, 4);
        BOOST_REQUIRE(part.chunks.size() == 1u);
        BOOST_TEST(part.chunks[0].data == "stse");
        BOOST_TEST(part.chunks[0].offset == 3u);
        BOOST_TEST(part.next == 7u);
        BOOST_TEST(!part.eof);
        BOOST_TEST((co_await error_of([&] { return s->read(12, 4); }) == errc::validation));
        BOOST_TEST((co_await error_of([&] { return s->read(0, 0); }) == errc::validation));
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(a_dropped_offset_is_a_gap_that_names_where_to_resume,
                        sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto spec = shell("head -c 300 /dev/zero | tr '\\0' x");
        spec.options.limits.max_output_bytes = 100;
        auto s = co_await runner.sessions()->start(spec);
        co_await s->wait();
        try
        {
            co_await s->read(0, 10);
            BOOST_FAIL("read of a dropped offset succeeded");
        }
        catch (const sandbox::error& e)
        {
            BOOST_TEST((code_of(e) == errc::sequence_gap));
            BOOST_TEST(e.diag().observed == 200);
        }
        // Through a plain token the value says where to resume; the default token throws.
        auto [ec, o] = co_await sandbox::async_read(*s, 0, 10, asio::as_tuple(asio::deferred));
        BOOST_TEST((ec == errc::sequence_gap));
        BOOST_TEST(o.next == 200u);
        BOOST_TEST(o.chunks.empty());
        std::int64_t resume = 0;
        try
        {
            co_await sandbox::async_read(*s, 0, 10);
        }
        catch (const sandbox::error& e)
        {
            resume = e.diag().observed;
        }
        BOOST_TEST(resume == 200);
        auto d = co_await read_all(*s, 200);
        BOOST_TEST(d.out == std::string(100, 'x'));
        BOOST_TEST(d.next == 300u);
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(a_watcher_replays_then_follows_live_output, sbx_test::local_fixture)
{
    const auto go = root.path() / "go";
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(
            shell("printf first; while [ ! -e " + go.string() + " ]; do sleep 0.01; done; "
                  "printf second; exit 4"));
        std::uint64_t at = 0;
        co_await read_until(*s, at, "first");
        auto w = s->watch(); // replays "first", then live
        std::string seen;
        int exits = 0;
        std::uint64_t exit_offset = 0;
        for (;;)
        {
            auto ev = co_await w.next();
            if (ev.what == sandbox::session_event::kind::output)
            {
                BOOST_TEST(ev.offset == seen.size());
                seen += ev.data;
                if (seen == "first")
                    touch(go);
            }
            else if (ev.what == sandbox::session_event::kind::exited)
            {
                ++exits;
                exit_offset = ev.offset;
                BOOST_REQUIRE(ev.exit.has_value());
                BOOST_TEST(ev.exit->exit_code == 4);
                break;
            }
            else
                BOOST_FAIL("unexpected event");
        }
        BOOST_TEST(seen == "firstsecond");
        BOOST_TEST(exits == 1);
        BOOST_TEST(exit_offset == 11u);
        BOOST_TEST((co_await read_all(*s)).next == 11u);
        co_await s->close();
        auto ev = co_await w.next();
        BOOST_TEST((ev.what == sandbox::session_event::kind::closed));
        BOOST_TEST((co_await error_of([&] { return w.next(); }) == errc::session_closed));
        try
        {
            s->watch();
            BOOST_FAIL("watch after close succeeded");
        }
        catch (const sandbox::error& e)
        {
            BOOST_TEST((code_of(e) == errc::session_closed));
        }
    });
}

// The reference deadlocks when exactly its queue size (256) of chunks is retained at exit,
// and drops one event when a watcher lags. Here a watcher holds an offset, not a queue.
BOOST_FIXTURE_TEST_CASE(a_watcher_replays_256_chunks_and_the_exit, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto spec = shell("head -c 16777216 /dev/zero");
        spec.options.limits.max_output_bytes = 16 << 20;
        auto s = co_await runner.sessions()->start(spec);
        co_await s->wait();
        auto w = s->watch();
        int outputs = 0;
        std::uint64_t bytes = 0;
        for (;;)
        {
            auto ev = co_await w.next();
            if (ev.what != sandbox::session_event::kind::output)
            {
                BOOST_TEST((ev.what == sandbox::session_event::kind::exited));
                BOOST_TEST(ev.offset == 16u << 20);
                break;
            }
            ++outputs;
            BOOST_TEST(ev.offset == bytes);
            bytes += ev.data.size();
        }
        BOOST_TEST(outputs == 256); // 64 KiB events
        BOOST_TEST(bytes == 16u << 20);
        co_await s->close();
        BOOST_TEST(((co_await w.next()).what == sandbox::session_event::kind::closed));
    });
}

BOOST_FIXTURE_TEST_CASE(a_lagging_watcher_learns_the_exact_first_offset_it_missed,
                        sbx_test::local_fixture)
{
    const auto go = root.path() / "go";
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto spec = shell("head -c 60 /dev/zero | tr '\\0' a; while [ ! -e " + go.string() +
                          " ]; do sleep 0.01; done; head -c 140 /dev/zero | tr '\\0' b");
        spec.options.limits.max_output_bytes = 100;
        auto s = co_await runner.sessions()->start(spec);
        auto w = s->watch();
        std::string seen;
        while (seen.size() < 60)
            seen += (co_await w.next()).data;
        BOOST_TEST(seen == std::string(60, 'a'));
        touch(go);
        co_await s->wait(); // the log holds [100, 200): [60, 100) the watcher never got
        // The gap is the read's: sequence_gap, with where it resumes; the next call goes on.
        auto [ec, lag] = co_await sandbox::async_next(w, asio::as_tuple(asio::deferred));
        BOOST_TEST((ec == errc::sequence_gap));
        BOOST_TEST(lag.missed_from == 60u);
        BOOST_TEST(lag.offset == 100u);
        BOOST_TEST(w.position() == 100u);
        std::string rest;
        for (;;)
        {
            auto ev = co_await w.next();
            if (ev.what != sandbox::session_event::kind::output)
                break;
            BOOST_TEST(ev.offset == 100u + rest.size());
            rest += ev.data;
        }
        BOOST_TEST(rest == std::string(100, 'b'));
        co_await s->close();
    });
}

// Issue 33, item 6: the channel front end. A reader that keeps up gets output, the exit and
// the close, then channel_closed; with a callback token as well as a coroutine.
BOOST_FIXTURE_TEST_CASE(a_channel_delivers_output_exit_and_close, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(shell("read x; echo got $x; exit 5"));
        auto ch = s->watch_channel({.capacity = 4});
        co_await s->write("one\n");
        std::string out;
        sandbox::session_event ev;
        while ((ev = co_await ch.receive()).what == sandbox::session_event::kind::output)
            out += ev.data;
        BOOST_TEST(out == "got one\n");
        BOOST_TEST((ev.what == sandbox::session_event::kind::exited));
        BOOST_TEST_REQUIRE(ev.exit.has_value());
        BOOST_TEST(ev.exit->exit_code == 5);
        co_await s->close();
        // A callback token: the closed event, then the end of the channel.
        std::vector<std::pair<boost::system::error_code, sandbox::session_event::kind>> got;
        auto note = [&](boost::system::error_code ec, sandbox::session_event e) {
            got.emplace_back(ec, e.what);
        };
        sandbox::async_receive(ch, note);
        auto ex = co_await asio::this_coro::executor;
        asio::steady_timer t(ex, 50ms);
        co_await t.async_wait(asio::use_awaitable);
        auto [ec, last] = co_await sandbox::async_receive(ch, asio::as_tuple(asio::deferred));
        BOOST_TEST_REQUIRE(got.size() == 1u);
        BOOST_TEST(!got[0].first);
        BOOST_TEST((got[0].second == sandbox::session_event::kind::closed));
        BOOST_TEST((ec == asio::experimental::error::channel_closed));
    });
}

// A reader that does not read: the command is never held up (it ends while nothing is
// read), the queue keeps its bound, and the reader is told exactly which bytes it missed:
// under close the channel then ends, under resume the exit and close still come.
BOOST_FIXTURE_TEST_CASE(a_channel_that_falls_behind_gets_a_lag_event, sbx_test::local_fixture)
{
    for (auto policy : {sandbox::lag_policy::close, sandbox::lag_policy::resume})
    {
        BOOST_TEST_CONTEXT("policy " << static_cast<int>(policy))
        {
            ioc.restart();
            run_coro(ioc, [&]() -> asio::awaitable<void> {
                // 200 lines, each its own write a little apart: many events.
                auto s = co_await runner.sessions()->start(
                    shell("for i in $(seq 1 200); do echo line$i; sleep 0.001; done"));
                auto ch = s->watch_channel({.capacity = 3, .on_lag = policy});
                auto r = co_await s->wait(); // ends without a single receive
                BOOST_TEST(r.exit_code == 0);
                BOOST_TEST(ch.size() <= 3u); // the bound holds
                std::uint64_t next = 0;
                bool lagged = false, exited = false;
                for (;;)
                {
                    auto [ec, ev] =
                        co_await sandbox::async_receive(ch, asio::as_tuple(asio::deferred));
                    if (ec)
                    {
                        BOOST_TEST((ec == asio::experimental::error::channel_closed));
                        break;
                    }
                    if (ev.what == sandbox::session_event::kind::closed)
                        continue;
                    if (ev.what == sandbox::session_event::kind::exited)
                        exited = true;
                    else if (ev.what == sandbox::session_event::kind::lag)
                    {
                        BOOST_TEST(ev.missed_from == next); // exactly where delivery stopped
                        BOOST_TEST(ev.offset > ev.missed_from);
                        auto missed = co_await s->read(ev.missed_from, 1 << 20); // still held
                        BOOST_TEST(!missed.chunks.empty());
                        lagged = true;
                        next = ev.offset;
                    }
                    else
                    {
                        BOOST_TEST(ev.offset == next);
                        next += ev.data.size();
                    }
                    if (ev.what == sandbox::session_event::kind::exited)
                        co_await s->close(); // the closed event follows under resume
                }
                BOOST_TEST(lagged);
                BOOST_TEST(exited == (policy == sandbox::lag_policy::resume));
                if (policy == sandbox::lag_policy::close)
                    co_await s->close();
            });
        }
    }
}

BOOST_FIXTURE_TEST_CASE(close_wakes_a_blocked_read_and_kills_the_tree, sbx_test::local_fixture)
{
    const auto pidfile = root.path() / "pids";
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(
            shell("sleep 30 & echo $! > " + pidfile.string() + "; echo started; wait"));
        std::uint64_t at = 0;
        co_await read_until(*s, at, "started");
        auto ex = co_await asio::this_coro::executor;
        errc read_error{};
        bool read_done = false;
        asio::co_spawn(ex, error_of([&] { return s->read(at, 100); }),
                       [&](std::exception_ptr, errc e) {
                           read_error = e;
                           read_done = true;
                       });
        asio::steady_timer t(ex, 20ms); // let the read park
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(!read_done);
        co_await s->close();
        t.expires_after(10ms);
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(read_done);
        BOOST_TEST((read_error == errc::session_closed));
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::terminated));
        BOOST_TEST(r.signal == SIGKILL);
    });
    BOOST_TEST(sbx_test::wait_gone(sbx_test::read_pids(pidfile)));
}

BOOST_FIXTURE_TEST_CASE(a_cancelled_read_consumes_nothing_and_a_cancelled_write_stops,
                        sbx_test::local_fixture)
{
    const auto go = root.path() / "go";
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        // The command reads nothing until told, then counts what reached its stdin.
        auto s = co_await runner.sessions()->start(
            shell("echo ready; while [ ! -e " + go.string() + " ]; do sleep 0.01; done; wc -c"));
        std::uint64_t at = 0;
        co_await read_until(*s, at, "ready");
        auto ex = co_await asio::this_coro::executor;
        asio::steady_timer t(ex, 100ms);
        auto v = co_await (s->read(at, 10) || t.async_wait(asio::use_awaitable));
        BOOST_TEST(v.index() == 1u); // the timer won; the read was cancelled

        t.expires_after(200ms);
        const std::string big(4 << 20, 'z'); // far more than a pipe holds
        bool write_cancelled = false;
        try
        {
            auto w = co_await (s->write(big) || t.async_wait(asio::use_awaitable));
            BOOST_TEST(w.index() == 1u);
            write_cancelled = w.index() == 1u;
        }
        catch (const boost::system::system_error&)
        {
            write_cancelled = true;
        }
        BOOST_TEST(write_cancelled);
        BOOST_TEST(!s->close_input());
        touch(go);
        auto out = co_await read_all(*s, at);
        const auto counted = std::stoull(out.out);
        BOOST_TEST(counted > 0u);
        BOOST_TEST(counted < big.size()); // nothing landed after the cancellation
        co_await s->close();
    });
}

BOOST_AUTO_TEST_CASE(ended_sessions_nobody_closes_are_released_after_the_retention)
{
    sandbox::local_runner_options o;
    o.sessions.retention = 200ms;
    sbx_test::local_fixture f(o);
    auto& pm = *f.runner.sessions();
    std::weak_ptr<session> gone;
    run_coro(f.ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await pm.start(shell("true"));
        gone = s;
        co_await s->wait();
        BOOST_TEST(pm.list().size() == 1u); // ended, still readable
    });
    f.ioc.restart();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!pm.list().empty() && std::chrono::steady_clock::now() < deadline)
        f.ioc.run_one_for(100ms);
    BOOST_TEST(pm.list().empty());
    BOOST_TEST(gone.expired());
}

BOOST_AUTO_TEST_CASE(destroying_the_runner_kills_the_sessions_it_holds)
{
    sbx_test::temp_dir dir;
    const auto pidfile = dir.path() / "pids";
    asio::io_context ioc;
    {
        sandbox::local_runner_options o;
        o.root = dir.str();
        sandbox::local_runner r(ioc.get_executor(), o);
        run_coro(ioc, [&]() -> asio::awaitable<void> {
            auto s = co_await r.sessions()->start(
                shell("setsid sleep 30 & echo $! > " + pidfile.string() + "; echo up; wait"));
            std::uint64_t at = 0;
            co_await read_until(*s, at, "up");
        });
    }
    ioc.restart();
    ioc.run_for(2s);
    BOOST_TEST(sbx_test::wait_gone(sbx_test::read_pids(pidfile)));
}

BOOST_FIXTURE_TEST_CASE(a_hundred_sessions_leave_no_descriptor_or_process,
                        sbx_test::local_fixture)
{
    auto& pm = *runner.sessions();
    auto round = [&]() -> asio::awaitable<std::size_t> {
        std::vector<std::shared_ptr<session>> all;
        for (int i = 0; i < 100; ++i)
        {
            auto spec = shell("exec cat");
            if (i % 2)
                spec.tty = sandbox::terminal_size{};
            all.push_back(co_await pm.start(spec));
        }
        BOOST_TEST(pm.list().size() == 100u);
        const auto busy = open_fds();
        for (auto& s : all)
            co_await s->close();
        all.clear();
        BOOST_TEST(pm.list().empty());
        co_return busy;
    };
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        // The first round also fills the supervisor's pool of idle workers (their channels
        // stay open, up to 64), so the second round must end exactly where it began.
        co_await round();
        const auto before = open_fds();
        const auto busy = co_await round();
        BOOST_TEST(busy > before + 200); // each running session held descriptors
        BOOST_TEST(open_fds() == before);
    });
}

BOOST_FIXTURE_TEST_CASE(completion_tokens_keep_the_diagnostics_and_cancel_one_operation,
                        sbx_test::local_fixture)
{
    auto& pm = *runner.sessions();
    std::shared_ptr<session> s;
    boost::system::error_code start_ec = errc::internal;
    sandbox::async_start(pm, shell("printf abc; exec cat"),
                         [&](boost::system::error_code ec, std::shared_ptr<session> got) {
                             start_ec = ec;
                             s = std::move(got);
                         });
    ioc.run_one_for(10s); // the start completes (the session keeps running)
    while (!s && ioc.run_one_for(10s))
    {
    }
    BOOST_REQUIRE(s);
    BOOST_TEST(!start_ec);
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        std::uint64_t at = 0;
        co_await read_until(*s, at, "abc");
    });

    // A read cancelled through its slot ends with operation_aborted; the command runs on.
    asio::cancellation_signal sig;
    boost::system::error_code cancelled;
    bool read_done = false;
    sandbox::async_read(*s, 3, 10,
                        asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code e,
                                                                     sandbox::session_output) {
                            cancelled = e;
                            read_done = true;
                        }));
    asio::post(ioc, [&] { sig.emit(asio::cancellation_type::terminal); });
    ioc.restart(); // run_coro stopped it
    while (!read_done && ioc.run_one_for(10s))
    {
    }
    BOOST_REQUIRE(read_done);
    BOOST_TEST(cancelled == asio::error::operation_aborted);
    BOOST_TEST(s->running());

    run_coro(ioc, [&]() -> asio::awaitable<void> {
        // A plain token gets the code; with_diagnostics around it adds the diagnostics.
        auto [ec, out] = co_await sandbox::async_read(*s, 9, 10, asio::as_tuple(asio::deferred));
        BOOST_TEST((ec == errc::validation)); // offset 9 is past the end (3)
        auto [e, again] = co_await sandbox::async_read(
            *s, 9, 10, sandbox::with_diagnostics(asio::as_tuple(asio::use_awaitable)));
        BOOST_REQUIRE(e);
        try
        {
            std::rethrow_exception(e);
        }
        catch (const sandbox::error& err)
        {
            BOOST_TEST((code_of(err) == errc::validation));
            BOOST_TEST(!err.diag().limit.empty()); // the member's diagnostics, not a bare code
        }
        co_await sandbox::async_write(*s, "xyz\n"); // the default token throws on failure
        std::uint64_t at = 0;
        BOOST_TEST(contains_(co_await read_until(*s, at, "xyz"), "abcxyz"));
        BOOST_TEST(at == 7u);
        auto r = co_await sandbox::async_terminate(*s, 0ns);
        BOOST_TEST((r.status == exec_status::terminated));
        BOOST_TEST(((co_await sandbox::async_wait(*s, asio::use_awaitable)).signal == SIGKILL));
        co_await sandbox::async_close(*s);
        bool threw = false;
        try
        {
            co_await sandbox::async_write(*s, "late");
        }
        catch (const sandbox::error& err)
        {
            threw = code_of(err) == errc::session_closed && !err.diag().message.empty();
        }
        BOOST_TEST(threw);
    });
}

// The manager holds what it started: a client that drops every handle (disconnects) finds
// the session again, still running, until it is closed.
BOOST_FIXTURE_TEST_CASE(dropping_every_handle_leaves_the_session_to_its_manager,
                        sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto& pm = *runner.sessions();
        std::string id;
        {
            auto s = co_await pm.start(shell("echo up; exec cat"));
            id = s->id();
            std::uint64_t at = 0;
            co_await read_until(*s, at, "up");
        } // our last handle goes here
        auto again = co_await sandbox::async_find(pm, id);
        BOOST_REQUIRE(again);
        BOOST_TEST(again->running());
        co_await again->write("still here\n");
        std::uint64_t at = 0;
        BOOST_TEST(contains_(co_await read_until(*again, at, "still here"), "up"));
        co_await again->close();
        BOOST_TEST(!pm.find(id));
        BOOST_TEST(!again->running());
    });
}

BOOST_FIXTURE_TEST_CASE(a_watcher_destroyed_while_waiting_is_harmless, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(shell("read x; echo $x"));
        auto ex = co_await asio::this_coro::executor;
        int completions = 0;
        {
            auto w = s->watch();
            sandbox::async_next(w, [&](boost::system::error_code, sandbox::session_event) {
                ++completions;
            });
        } // destroyed while its next() waits
        co_await s->write("late\n");
        co_await s->wait();
        co_await s->close();
        asio::steady_timer t(ex, 10ms);
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(completions == 1); // the pending next() completed, on its own state
    });
}

BOOST_FIXTURE_TEST_CASE(a_cancelled_close_still_closes, sbx_test::local_fixture)
{
    auto& pm = *runner.sessions();
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await pm.start(shell("exec sleep 30", "c1"));
        auto ex = co_await asio::this_coro::executor;
        auto v = co_await (s->close() || asio::post(ex, asio::use_awaitable));
        BOOST_TEST(v.index() == 1u); // the close was cancelled while it waited for the exit
        BOOST_TEST(s->closed());
        BOOST_TEST(pm.find("c1") == nullptr); // released, the id free again
        auto r = co_await s->wait(); // the kill was sent before the cancellation
        BOOST_TEST((r.status == exec_status::terminated));
        auto again = co_await pm.start(shell("true", "c1"));
        co_await again->close();
    });
}

BOOST_FIXTURE_TEST_CASE(close_input_waits_for_the_write_in_progress, sbx_test::local_fixture)
{
    const auto go = root.path() / "go";
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(
            shell("while [ ! -e " + go.string() + " ]; do sleep 0.01; done; wc -c"));
        auto ex = co_await asio::this_coro::executor;
        const std::string big(1 << 20, 'q'); // more than the pipe holds: the write parks
        bool written = false;
        asio::co_spawn(ex, s->write(big), [&](std::exception_ptr e) { written = !e; });
        asio::steady_timer t(ex, 20ms);
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(!written);
        BOOST_TEST(!s->close_input()); // issued after the write: applied after it
        touch(go);
        auto d = co_await read_all(*s);
        BOOST_TEST(written);
        BOOST_TEST(std::stoul(d.out) == big.size());
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(a_kill_signal_cuts_a_terminate_grace_short, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(
            shell("trap '' TERM; echo ready; while :; do sleep 0.02; done"));
        std::uint64_t at = 0;
        co_await read_until(*s, at, "ready");
        auto ex = co_await asio::this_coro::executor;
        const auto start = std::chrono::steady_clock::now();
        bool ended = false;
        sandbox::exec_result r;
        asio::co_spawn(ex, s->terminate(20s), [&](std::exception_ptr, sandbox::exec_result got) {
            r = std::move(got);
            ended = true;
        });
        asio::steady_timer t(ex, 50ms); // SIGTERM delivered and ignored
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(!s->signal(sandbox::session_signal::kill));
        co_await s->wait();
        BOOST_TEST((std::chrono::steady_clock::now() - start < 10s));
        t.expires_after(1ms);
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(ended);
        BOOST_TEST((r.status == exec_status::terminated));
        BOOST_TEST(r.signal == SIGKILL);
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(a_fork_bomb_in_a_session_meets_the_process_cap, sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto spec = shell("while :; do sleep 5 & done");
        spec.options.timeout = 30s;
        spec.options.limits.max_processes = 20;
        auto s = co_await runner.sessions()->start(spec);
        auto r = co_await s->wait();
        const std::string got = std::string(sandbox::to_string(r.status)) + ": " +
                                sandbox::to_string(r.diag); // outlives the lazy info
        BOOST_TEST_INFO(got);
        BOOST_TEST((r.status == exec_status::budget_exceeded));
        BOOST_TEST((r.budget == sandbox::budget_kind::processes));
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(a_command_that_closes_its_output_still_ends_with_eof,
                        sbx_test::local_fixture)
{
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(
            shell("echo before; exec >&- 2>&-; sleep 0.2; exit 4"));
        auto d = co_await read_all(*s); // EOF only once the command has ended
        BOOST_TEST(d.out == "before\n");
        BOOST_TEST(!s->running());
        BOOST_TEST((co_await s->wait()).exit_code == 4);
        co_await s->close();
    });
}

BOOST_FIXTURE_TEST_CASE(what_the_command_leaves_behind_dies_with_it, sbx_test::local_fixture)
{
    const auto pidfile = root.path() / "pids";
    run_coro(ioc, [&]() -> asio::awaitable<void> {
        // A daemon that left the session and the group, holding the output pipes: the
        // session still ends when the command does, and the daemon is killed.
        auto s = co_await runner.sessions()->start(
            shell("setsid sh -c 'echo $$ > " + pidfile.string() +
                  "; trap \"\" TERM HUP; while :; do sleep 1; done' & "
                  "while [ ! -s " + pidfile.string() + " ]; do sleep 0.01; done; echo bye"));
        auto d = co_await read_all(*s);
        BOOST_TEST(d.out == "bye\n");
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::exited));
        co_await s->close();
    });
    BOOST_TEST(sbx_test::wait_gone(sbx_test::read_pids(pidfile)));
}

BOOST_AUTO_TEST_SUITE_END()
