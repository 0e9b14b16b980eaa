// test/integration/front_end_test.cpp: the completion-token front end (callbacks, futures,
// as_tuple, deferred, parallel groups), the coroutine interface, executors, per-operation
// cancellation, thread use, refusals before anything runs, and enforcement reports.
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <sandbox/enforcement.hpp>
#include <sandbox/error.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/sampler.hpp>
#include <sandbox/with_diagnostics.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

using sbx_test::contains;

using sbx_test::pid_options;

/// Runs a coroutine on `ioc` to completion and `ioc` until it has no work left (bounded),
/// rethrowing what escapes the coroutine.
void run_until_idle(asio::io_context& ioc, std::function<asio::awaitable<void>()> f)
{
    bool done = false;
    std::exception_ptr failure;
    asio::co_spawn(ioc, std::move(f), [&](std::exception_ptr e) {
        failure = e;
        done = true;
    });
    ioc.restart();
    ioc.run_for(30s);
    BOOST_REQUIRE_MESSAGE(done, "coroutine did not complete within the time limit");
    if (failure)
        std::rethrow_exception(failure);
}

std::size_t thread_count()
{
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task"))
        ++n;
    return n;
}

// --- what the coroutine tests record (checked outside the coroutines) ---

struct tuple_record
{
    boost::system::error_code ec;
    sandbox::exec_result r;
};

asio::awaitable<void> as_tuple_case(sandbox::runner& runner, tuple_record& out)
{
    auto req = sbx_test::helper({"print", "tuple"});
    auto [ec, r] = co_await sandbox::async_exec(runner, std::move(req),
                                                asio::as_tuple(asio::use_awaitable));
    out.ec = ec;
    out.r = std::move(r);
}

struct deferred_record
{
    std::optional<sandbox::exec_result> ok;
    bool threw = false;
    boost::system::error_code code;
};

asio::awaitable<void> deferred_case(sandbox::runner& runner, deferred_record& out)
{
    auto req = sbx_test::helper({"print", "deferred"});
    sandbox::exec_result r = co_await sandbox::async_exec(runner, std::move(req));
    out.ok = std::move(r);

    sandbox::exec_options o;
    o.timeout = 200ms;
    auto slow = sbx_test::helper({"sleep", "60000"}, o);
    try
    {
        sandbox::exec_result never = co_await sandbox::async_exec(runner, std::move(slow));
        (void)never;
    }
    catch (const sandbox::error& e)
    {
        out.threw = true;
        out.code = e.code();
    }
}

// --- one timed-out command through every front end ---

/// What one front end delivered for a command that printed, then timed out.
struct partial_record
{
    bool completed = false;
    bool sandbox_error = false; // delivered as a sandbox::error exception
    boost::system::error_code code;
    sandbox::exec_result r;     // the partial result, however it arrived
};

void record_exception(std::exception_ptr ep, partial_record& out)
{
    out.completed = true;
    try
    {
        std::rethrow_exception(ep);
    }
    catch (const sandbox::error& e)
    {
        out.sandbox_error = true;
        out.code = e.code();
        if (e.partial_result())
            out.r = *e.partial_result();
    }
    catch (const boost::system::system_error& e)
    {
        out.code = e.code(); // a plain system_error: the partial result is lost
    }
}

template <class Await>
asio::awaitable<void> catching(Await make, partial_record& out)
{
    try
    {
        out.r = co_await make();
        out.completed = true;
    }
    catch (...)
    {
        record_exception(std::current_exception(), out);
    }
}

struct exec_record
{
    bool threw = false;
    boost::system::error_code code;
    bool has_partial = false;
    sandbox::exec_result partial;
    sandbox::diagnostics diag;
};

asio::awaitable<void> direct_exec_case(sandbox::runner& runner, sandbox::exec_request req,
                                       exec_record& out)
{
    try
    {
        sandbox::exec_result r = co_await runner.exec(std::move(req));
        (void)r;
    }
    catch (const sandbox::error& e)
    {
        out.threw = true;
        out.code = e.code();
        out.diag = e.diag();
        out.has_partial = e.partial_result() != nullptr;
        if (e.partial_result())
            out.partial = *e.partial_result();
    }
}

/// A refused request: through async_exec (status not_started, a diagnostic) and through
/// runner.exec (sandbox::error without a partial result); nothing is spawned.
void expect_refused(sbx_test::local_fixture& f, const sandbox::exec_request& req,
                    sandbox::errc want, const std::filesystem::path& pidfile,
                    const std::function<void(const sandbox::diagnostics&)>& check_diag = {})
{
    auto [ec, r] = f.run(req);
    BOOST_TEST(ec == want);
    BOOST_TEST(r.status == sandbox::exec_status::not_started);
    BOOST_TEST(r.exit_code == -1);
    BOOST_TEST(!r.diag.message.empty());
    BOOST_TEST(r.out.data.empty());
    if (check_diag)
        check_diag(r.diag);

    exec_record rec;
    run_until_idle(f.ioc, [&]() { return direct_exec_case(f.runner, req, rec); });
    BOOST_TEST(rec.threw);
    BOOST_TEST(rec.code == want);
    BOOST_TEST(!rec.has_partial);
    if (check_diag)
        check_diag(rec.diag);

    BOOST_TEST(!std::filesystem::exists(pidfile), "the refused command ran");
    std::error_code ignored;
    std::filesystem::remove(pidfile, ignored);
}

/// Calls `f` once `file` exists (polled every 5 ms with `t`), unless `done` is set first.
void when_exists(asio::steady_timer& t, std::filesystem::path file, const bool& done,
                 std::function<void()> f)
{
    t.expires_after(5ms);
    t.async_wait([&t, file = std::move(file), &done, f = std::move(f)](
                     boost::system::error_code ec) mutable {
        if (ec || done)
            return;
        if (std::filesystem::exists(file))
            return f();
        when_exists(t, std::move(file), done, std::move(f));
    });
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(front_end, sbx_test::local_fixture)

// --- completion tokens ---

BOOST_AUTO_TEST_CASE(callback_token)
{
    bool called = false;
    boost::system::error_code got;
    sandbox::exec_result res;
    auto req = sbx_test::helper({"print", "hello", "--then", "exit", "3"});
    sandbox::async_exec(runner, std::move(req),
                        [&](boost::system::error_code ec, sandbox::exec_result r) {
                            called = true;
                            got = ec;
                            res = std::move(r);
                        });
    BOOST_TEST(!called);
    ioc.run_for(30s);
    BOOST_REQUIRE(called);
    BOOST_TEST(ioc.stopped());
    BOOST_TEST(!got);
    BOOST_TEST(res.status == sandbox::exec_status::exited);
    BOOST_TEST(res.exit_code == 3); // a non-zero exit code is a result, not an error
    BOOST_TEST(res.out.data == "hello");
}

BOOST_AUTO_TEST_CASE(use_future_token)
{
    auto req = sbx_test::helper({"print", "future"});
    std::future<sandbox::exec_result> fut =
        sandbox::async_exec(runner, std::move(req), asio::use_future);

    sandbox::exec_options o;
    o.timeout = 200ms;
    auto slow = sbx_test::helper({"sleep", "60000"}, o);
    std::future<sandbox::exec_result> failing =
        sandbox::async_exec(runner, std::move(slow), asio::use_future);

    ioc.run_for(30s);
    BOOST_REQUIRE(fut.wait_for(0s) == std::future_status::ready);
    BOOST_REQUIRE(failing.wait_for(0s) == std::future_status::ready);
    sandbox::exec_result r = fut.get();
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.out.data == "future");
    BOOST_CHECK_EXCEPTION(failing.get(), boost::system::system_error,
                          [](const boost::system::system_error& e) {
                              return e.code() == sandbox::errc::timeout;
                          });
}

BOOST_AUTO_TEST_CASE(as_tuple_use_awaitable_token)
{
    tuple_record rec;
    run_until_idle(ioc, [&]() { return as_tuple_case(runner, rec); });
    BOOST_TEST(!rec.ec);
    BOOST_TEST(rec.r.exit_code == 0);
    BOOST_TEST(rec.r.out.data == "tuple");
}

BOOST_AUTO_TEST_CASE(default_deferred_token_in_a_coroutine)
{
    deferred_record rec;
    run_until_idle(ioc, [&]() { return deferred_case(runner, rec); });
    BOOST_REQUIRE(rec.ok.has_value());
    BOOST_TEST(rec.ok->exit_code == 0);
    BOOST_TEST(rec.ok->out.data == "deferred");
    BOOST_TEST(rec.threw);
    BOOST_TEST(rec.code == sandbox::errc::timeout);
}

BOOST_AUTO_TEST_CASE(partial_output_after_a_timeout_through_every_front_end)
{
    auto request = [] {
        sandbox::exec_options o;
        o.timeout = 1s;
        return sbx_test::helper({"print", "so-far", "--then", "sleep", "60000"}, o);
    };
    std::map<std::string, partial_record> got;
    auto& rn = runner;

    // Coroutines: runner::exec, the default token, with_diagnostics(use_awaitable), as_tuple.
    auto spawn = [&](asio::awaitable<void> a) { asio::co_spawn(ioc, std::move(a), asio::detached); };
    spawn(catching([&rn, req = request()]() mutable { return rn.exec(std::move(req)); },
                   got["runner.exec"]));
    spawn(catching([&rn, req = request()]() mutable {
                       return sandbox::async_exec(rn, std::move(req));
                   },
                   got["default token"]));
    spawn(catching(
        [&rn, req = request()]() mutable {
            return sandbox::async_exec(rn, std::move(req),
                                       sandbox::with_diagnostics(asio::use_awaitable));
        },
        got["with_diagnostics(use_awaitable)"]));
    // A const lvalue token is copied from (Asio's idiom of a token kept in a constant).
    static constexpr auto diag_awaitable = sandbox::with_diagnostics(asio::use_awaitable);
    spawn(catching([&rn, req = request()]() mutable {
                       return sandbox::async_exec(rn, std::move(req), diag_awaitable);
                   },
                   got["const with_diagnostics(use_awaitable) lvalue"]));
    spawn([](sandbox::runner& rn, sandbox::exec_request req,
             partial_record& out) -> asio::awaitable<void> {
        auto [ec, r] =
            co_await sandbox::async_exec(rn, std::move(req), asio::as_tuple(asio::use_awaitable));
        out = {true, false, ec, std::move(r)};
    }(rn, request(), got["as_tuple(use_awaitable)"]));

    // Callbacks: plain, through deferred, and the default token's deferred operation.
    sandbox::async_exec(rn, request(),
                        [&out = got["callback"]](boost::system::error_code ec,
                                                 sandbox::exec_result r) {
                            out = {true, false, ec, std::move(r)};
                        });
    sandbox::async_exec(rn, request(), asio::deferred)(
        [&out = got["deferred"]](boost::system::error_code ec, sandbox::exec_result r) {
            out = {true, false, ec, std::move(r)};
        });
    sandbox::async_exec(rn, request())(
        [&out = got["default token, callback"]](std::exception_ptr ep, sandbox::exec_result r) {
            record_exception(ep, out);
            BOOST_TEST(r.out.data == "so-far"); // the handler gets the result as well
        });

    // Futures: with_diagnostics keeps the partial result in the exception.
    auto fut = sandbox::async_exec(rn, request(), sandbox::with_diagnostics(asio::use_future));
    ioc.run_for(30s);
    try
    {
        fut.get();
    }
    catch (...)
    {
        record_exception(std::current_exception(), got["with_diagnostics(use_future)"]);
    }

    BOOST_TEST(got.size() == 9u);
    for (const auto& [name, rec] : got)
    {
        BOOST_TEST_CONTEXT(name)
        {
            BOOST_TEST(rec.completed);
            BOOST_TEST(rec.code == sandbox::errc::timeout);
            BOOST_TEST(rec.r.status == sandbox::exec_status::timed_out);
            BOOST_TEST(rec.r.out.data == "so-far");
            BOOST_TEST(rec.r.diag.limit == "timeout");
            const bool throws = name != "as_tuple(use_awaitable)" && name != "callback" &&
                                name != "deferred";
            BOOST_TEST(rec.sandbox_error == throws);
        }
    }
}

BOOST_AUTO_TEST_CASE(runner_exec_throws_sandbox_error_with_partial_result)
{
    sandbox::exec_options o;
    o.timeout = 1s; // room for the print on a loaded host (ASan)
    auto slow = sbx_test::helper({"print", "so-far", "--then", "sleep", "60000"}, o);
    exec_record timed_out;
    run_until_idle(ioc, [&]() { return direct_exec_case(runner, std::move(slow), timed_out); });
    BOOST_TEST(timed_out.threw);
    BOOST_TEST(timed_out.code == sandbox::errc::timeout);
    BOOST_REQUIRE(timed_out.has_partial);
    BOOST_TEST(timed_out.partial.status == sandbox::exec_status::timed_out);
    BOOST_TEST(timed_out.partial.out.data == "so-far");
    BOOST_TEST(timed_out.diag.limit == "timeout");

    sandbox::exec_request missing;
    missing.command = "sbx-no-such-command-for-this-test";
    exec_record not_found;
    run_until_idle(ioc, [&]() { return direct_exec_case(runner, std::move(missing), not_found); });
    BOOST_TEST(not_found.threw);
    BOOST_TEST(not_found.code == sandbox::errc::not_found);
    BOOST_TEST(!not_found.has_partial);
}

// --- executors ---

BOOST_AUTO_TEST_CASE(never_completes_inline)
{
    int calls = 0;
    auto count = [&](boost::system::error_code, sandbox::exec_result) { ++calls; };

    auto ok = sbx_test::helper({"exit", "0"});
    sandbox::async_exec(runner, std::move(ok), count);
    BOOST_TEST(calls == 0);

    sandbox::exec_request empty; // fails validation at once
    sandbox::async_exec(runner, std::move(empty), count);
    BOOST_TEST(calls == 0);

    // Also when initiated from inside the io_context (where dispatch could run inline).
    bool inline_call = true;
    asio::post(ioc, [&] {
        int before = calls;
        sandbox::exec_request bad;
        sandbox::async_exec(runner, std::move(bad), count);
        inline_call = calls != before;
    });
    ioc.run_for(30s);
    BOOST_TEST(ioc.stopped());
    BOOST_TEST(calls == 3);
    BOOST_TEST(!inline_call);
}

BOOST_AUTO_TEST_CASE(handler_runs_on_its_associated_executor)
{
    auto strand = asio::make_strand(ioc);
    int calls = 0;
    int on_strand = 0;
    auto handler = [&](boost::system::error_code, sandbox::exec_result) {
        ++calls;
        if (strand.running_in_this_thread())
            ++on_strand;
    };
    auto ok = sbx_test::helper({"exit", "0"});
    sandbox::async_exec(runner, std::move(ok), asio::bind_executor(strand, handler));
    sandbox::exec_request empty;
    sandbox::async_exec(runner, std::move(empty), asio::bind_executor(strand, handler));
    ioc.run_for(30s);
    BOOST_TEST(calls == 2);
    BOOST_TEST(on_strand == 2);
}

// --- per-operation cancellation ---

BOOST_AUTO_TEST_CASE(terminal_cancellation_kills_and_keeps_partial_output)
{
    const auto pidfile = root.path() / "pids";
    const auto ready = root.path() / "ready";
    auto req = sbx_test::helper({"pidfile", "--then", "print", "x", "--then", "touch",
                                 ready.string(), "--then", "sleep", "60000"},
                                pid_options(pidfile));
    asio::cancellation_signal sig;
    bool called = false;
    boost::system::error_code got;
    sandbox::exec_result res;
    sandbox::async_exec(runner, std::move(req),
                        asio::bind_cancellation_slot(
                            sig.slot(), [&](boost::system::error_code ec, sandbox::exec_result r) {
                                called = true;
                                got = ec;
                                res = std::move(r);
                            }));
    // Cancel once "x" is written (the target says so with a marker file).
    asio::steady_timer t(ioc);
    when_exists(t, ready, called, [&] { sig.emit(asio::cancellation_type::terminal); });
    ioc.run_for(30s);

    BOOST_REQUIRE(called);
    BOOST_TEST(ioc.stopped());
    BOOST_TEST(got == asio::error::operation_aborted);
    BOOST_TEST(res.status == sandbox::exec_status::cancelled);
    BOOST_TEST(res.out.data == "x");
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 1u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

BOOST_AUTO_TEST_CASE(partial_cancellation_sends_sigterm_first)
{
    sandbox::exec_options o;
    o.kill_grace = 2s;
    // The target marks when its SIGTERM handler is in place; only then do we cancel (a
    // fixed delay races the handler's installation on a loaded machine).
    const auto ready = root.path() / "ready";
    auto req = sbx_test::helper(
        {"trap-term", "3", "--then", "touch", ready.string(), "--then", "sleep", "60000"}, o);
    asio::cancellation_signal sig;
    bool called = false;
    boost::system::error_code got;
    sandbox::exec_result res;
    sandbox::async_exec(runner, std::move(req),
                        asio::bind_cancellation_slot(
                            sig.slot(), [&](boost::system::error_code ec, sandbox::exec_result r) {
                                called = true;
                                got = ec;
                                res = std::move(r);
                            }));
    asio::steady_timer t(ioc);
    when_exists(t, ready, called, [&] { sig.emit(asio::cancellation_type::partial); });
    ioc.run_for(30s);

    BOOST_REQUIRE(called);
    BOOST_TEST(got == asio::error::operation_aborted);
    BOOST_TEST(res.status == sandbox::exec_status::cancelled);
    BOOST_TEST(contains(res.out.data, "got TERM"), "stdout: '" << res.out.data << "'");
}

BOOST_AUTO_TEST_CASE(parallel_group_cancels_the_losing_exec)
{
    const auto pidfile = root.path() / "pids";
    auto req = sbx_test::helper({"pidfile", "--then", "sleep", "60000"}, pid_options(pidfile));
    // Long enough for the target to record itself first, even under ASan on a loaded host.
    asio::steady_timer t(ioc, 1s);
    bool called = false;
    std::array<std::size_t, 2> order{};
    boost::system::error_code exec_ec, timer_ec;
    sandbox::exec_result res;
    asio::experimental::make_parallel_group(sandbox::async_exec(runner, std::move(req),
                                                                asio::deferred),
                                            t.async_wait(asio::deferred))
        .async_wait(asio::experimental::wait_for_one(),
                    [&](std::array<std::size_t, 2> o, boost::system::error_code e1,
                        sandbox::exec_result r, boost::system::error_code e2) {
                        called = true;
                        order = o;
                        exec_ec = e1;
                        res = std::move(r);
                        timer_ec = e2;
                    });
    ioc.run_for(30s);

    BOOST_REQUIRE(called);
    BOOST_TEST(ioc.stopped());
    BOOST_TEST(order[0] == 1u); // the timer won
    BOOST_TEST(!timer_ec);
    BOOST_TEST(exec_ec == asio::error::operation_aborted);
    BOOST_TEST(res.status == sandbox::exec_status::cancelled);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(pids.size() == 1u);
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
}

// --- threads ---

BOOST_AUTO_TEST_CASE(library_creates_no_threads)
{
    const std::size_t before = thread_count();
    std::size_t most = before;
    std::vector<sandbox::exec_request> reqs;
    for (int i = 0; i < 8; ++i)
        reqs.push_back(sbx_test::helper({"print", std::to_string(i)}));
    sandbox::exec_options capped;
    capped.limits.memory_bytes = 1024LL * 1024 * 1024;
    capped.limits.max_processes = 100;
    capped.timeout = 30s;
    reqs.push_back(sbx_test::helper({"sleep", "300"}, capped));
    sandbox::exec_options short_timeout;
    short_timeout.timeout = 100ms;
    reqs.push_back(sbx_test::helper({"sleep", "60000"}, short_timeout));

    int completed = 0;
    for (auto& req : reqs)
        sandbox::async_exec(runner, std::move(req),
                            [&](boost::system::error_code, sandbox::exec_result) {
                                ++completed;
                                most = std::max(most, thread_count());
                            });
    // Also look while the capped and the timed-out executions are running.
    asio::steady_timer t(ioc, 50ms);
    t.async_wait([&](boost::system::error_code) { most = std::max(most, thread_count()); });
    ioc.run_for(30s);

    BOOST_TEST(completed == 10);
    BOOST_TEST(most == before);
    BOOST_TEST(thread_count() == before);
}

// --- refusals before anything runs ---

BOOST_AUTO_TEST_CASE(refusals_before_anything_runs)
{
    const auto pidfile = root.path() / "pids";
    auto base = [&](sandbox::exec_options o = {}) {
        o.env.inject["SBX_PIDFILE"] = pidfile.string();
        return sbx_test::helper({"pidfile"}, o);
    };

    {
        sandbox::exec_request r;
        BOOST_TEST_CONTEXT("empty command") expect_refused(*this, r, sandbox::errc::validation,
                                                           pidfile);
    }
    {
        auto r = base();
        r.args.push_back(std::string("a\0b", 3));
        BOOST_TEST_CONTEXT("NUL in an argument")
        expect_refused(*this, r, sandbox::errc::validation, pidfile);
    }
    {
        sandbox::exec_options o;
        o.limits.memory_bytes = -1;
        BOOST_TEST_CONTEXT("negative memory")
        expect_refused(*this, base(o), sandbox::errc::validation, pidfile,
                       [](const sandbox::diagnostics& d) { BOOST_TEST(d.limit == "memory"); });
    }
    {
        sandbox::exec_options o;
        o.timeout = -1s;
        BOOST_TEST_CONTEXT("negative timeout")
        expect_refused(*this, base(o), sandbox::errc::validation, pidfile);
    }
    {
        sandbox::exec_options o;
        o.limits.disk_bytes = 1;
        BOOST_TEST_CONTEXT("disk quota")
        expect_refused(*this, base(o), sandbox::errc::not_available, pidfile);
    }
    {
        sandbox::exec_options o;
        o.limits.cpu_millicores = 500;
        BOOST_TEST_CONTEXT("cpu cap without a timeout")
        expect_refused(*this, base(o), sandbox::errc::not_available, pidfile);
    }
    {
        sandbox::exec_options o;
        o.net.mode = sandbox::net_mode::deny_all;
        BOOST_TEST_CONTEXT("net deny_all on the local backend")
        expect_refused(*this, base(o), sandbox::errc::not_available, pidfile);
    }
    {
        sandbox::exec_options o;
        o.net.mode = sandbox::net_mode::inherit;
        o.net.proxy = "http://proxy.example:3128";
        BOOST_TEST_CONTEXT("proxy URL under mode inherit")
        expect_refused(*this, base(o), sandbox::errc::validation, pidfile);
    }
    {
        sandbox::exec_options o;
        o.env.inject["BAD=NAME"] = "x";
        BOOST_TEST_CONTEXT("env name with '='")
        expect_refused(*this, base(o), sandbox::errc::validation, pidfile);
    }
    {
        sandbox::exec_options o;
        o.work_dir = "../..";
        BOOST_TEST_CONTEXT("work dir escape")
        expect_refused(*this, base(o), sandbox::errc::forbidden, pidfile,
                       [](const sandbox::diagnostics& d) {
                           BOOST_TEST(contains(d.path, "../.."), "diag.path: '" << d.path << "'");
                       });
    }
    {
        sandbox::exec_options o;
        o.work_dir = "no-such-dir";
        BOOST_TEST_CONTEXT("missing work dir")
        expect_refused(*this, base(o), sandbox::errc::not_found, pidfile);
    }
}

// --- noop runner and enforcement reports ---

// --- streamed output ---

BOOST_AUTO_TEST_CASE(on_output_streams_as_the_command_writes)
{
    // The command prints, then waits for a file that only the output handler creates: it
    // can finish only if the first line arrives while it runs.
    const auto marker = root.path() / "seen-first";
    auto req = sbx_test::helper({"println", "first", "--then", "wait-file", marker.string(),
                                 "--then", "println", "second", "--then", "eprint", "on err"});
    req.options.timeout = 25s;
    sbx_test::streamed got;
    req.on_output = got.handler(marker, "first\n");
    auto res = run(std::move(req));
    BOOST_TEST(!res.ec, res.result.diag);
    BOOST_TEST(res.result.exit_code == 0, got.err);
    BOOST_TEST(got.out == "first\nsecond\n");
    BOOST_TEST(got.err == "on err");
    // Streamed, not captured.
    BOOST_TEST(res.result.out.data.empty());
    BOOST_TEST(res.result.err.data.empty());
}

BOOST_AUTO_TEST_CASE(on_output_can_stop_the_run)
{
    for (bool throws : {false, true})
    {
        BOOST_TEST_CONTEXT((throws ? "throwing" : "returning false"))
        {
            const auto pidfile = root.path() / (throws ? "pids-throw" : "pids-false");
            auto req = sbx_test::helper({"pidfile", "--then", "println", "hello", "--then",
                                         "sleep", "60000"},
                                        pid_options(pidfile));
            req.options.timeout = 25s;
            int calls = 0;
            req.on_output = [&](sandbox::output_stream, std::string_view) -> bool {
                ++calls;
                if (throws)
                    throw std::runtime_error("consumer broke");
                return false;
            };
            auto res = run(std::move(req));
            BOOST_TEST(res.ec == asio::error::operation_aborted);
            BOOST_TEST(res.result.status == sandbox::exec_status::cancelled);
            BOOST_TEST(res.result.diag.limit == "output");
            BOOST_TEST(contains(res.result.diag.message, throws ? "consumer broke" : "stopped"),
                       res.result.diag.message);
            BOOST_TEST(calls == 1);
            const auto pids = sbx_test::read_pids(pidfile);
            BOOST_TEST(pids.size() == 1u);
            BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
        }
    }
}

// Back-pressure: each chunk is held by the consumer for a while and resumed later, some from
// another thread and some twice (a copy of the resume called again must do nothing). A stream
// is never handed a chunk while its last one is out, nothing is lost or reordered, and the
// exec completes only after the last chunk came back.
BOOST_AUTO_TEST_CASE(on_output_async_reads_a_stream_again_only_once_resumed)
{
    constexpr std::uint64_t n = 3 << 20;
    auto req = sbx_test::helper({"spam", std::to_string(n), "both"});
    req.options.timeout = 25s;
    std::string got[2];
    int out_at_once[2] = {0, 0};
    int overlaps = 0, chunks = 0;
    std::vector<std::pair<int, sandbox::output_resume>> held;
    asio::steady_timer tick(ioc);
    bool armed = false;
    // Armed while a chunk is held, so the loop runs out of work once the exec is over.
    auto release_soon = [&] {
        if (std::exchange(armed, true))
            return;
        tick.expires_after(200us);
        tick.async_wait([&](boost::system::error_code) {
            armed = false;
            for (auto& [s, resume] : held)
            {
                --out_at_once[s];
                if (chunks % 3 == 0) // from another thread, as the contract allows
                    std::thread([resume = resume] { resume(true); }).join();
                else
                    resume(true);
                if (chunks % 5 == 0)
                    resume(true); // a second call: must not read the stream twice at once
            }
            held.clear();
        });
    };
    req.on_output_async = [&](sandbox::output_stream s, std::string_view data,
                              sandbox::output_resume resume) {
        const int i = s == sandbox::output_stream::err ? 1 : 0;
        if (++out_at_once[i] > 1)
            ++overlaps;
        ++chunks;
        got[i].append(data);
        held.emplace_back(i, std::move(resume));
        release_soon();
    };
    auto res = run(std::move(req));
    const int still_held = static_cast<int>(held.size());
    BOOST_TEST(!res.ec, res.result.diag);
    BOOST_TEST(res.result.exit_code == 0);
    BOOST_TEST(overlaps == 0);
    BOOST_TEST(still_held == 0); // completed only once every chunk was resumed
    BOOST_TEST(chunks > 2);
    for (const auto& g : got)
    {
        BOOST_TEST(g.size() == n);
        bool in_order = true;
        for (std::size_t k = 0; k < g.size() && in_order; ++k)
            in_order = g[k] == "0123456789abcdef"[k % 16];
        BOOST_TEST(in_order);
    }
    BOOST_TEST(res.result.out.data.empty()); // streamed, not captured
}

BOOST_AUTO_TEST_CASE(on_output_async_can_stop_the_run)
{
    for (int how : {0, 1, 2}) // resume(false) later, resume(false) at once, throw
    {
        BOOST_TEST_CONTEXT("how " << how)
        {
            const auto pidfile = root.path() / ("pids-async-" + std::to_string(how));
            auto req = sbx_test::helper(
                {"pidfile", "--then", "println", "hello", "--then", "sleep", "60000"},
                pid_options(pidfile));
            req.options.timeout = 25s;
            int calls = 0;
            req.on_output_async = [&](sandbox::output_stream, std::string_view,
                                      sandbox::output_resume resume) {
                ++calls;
                if (how == 2)
                    throw std::runtime_error("async consumer broke");
                if (how == 1)
                    return resume(false);
                asio::post(ioc, [resume] { resume(false); });
            };
            auto res = run(std::move(req));
            BOOST_TEST(res.ec == asio::error::operation_aborted);
            BOOST_TEST(res.result.status == sandbox::exec_status::cancelled);
            BOOST_TEST(res.result.diag.limit == "output");
            BOOST_TEST(
                contains(res.result.diag.message, how == 2 ? "async consumer broke" : "stopped"),
                res.result.diag.message);
            BOOST_TEST(calls == 1);
            const auto pids = sbx_test::read_pids(pidfile);
            BOOST_TEST(pids.size() == 1u);
            BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));
        }
    }
}

// --- terminals ---

BOOST_AUTO_TEST_CASE(a_terminal_run_leads_its_session_on_a_real_pty)
{
    auto req = sbx_test::helper({"tty-info", "--then", "eprint", "to stderr"});
    req.tty = sandbox::terminal_size{};
    auto res = run(std::move(req));
    BOOST_TEST(!res.ec, res.result.diag);
    BOOST_TEST(res.result.exit_code == 0);
    // The line discipline turns "\n" into "\r\n"; stderr arrives merged, in order.
    BOOST_TEST(res.result.out.data ==
               "tty 0 1 2: Y Y Y\r\nsize 24 80\r\nctty Y\r\nto stderr");
    BOOST_TEST(res.result.err.data.empty());

    // Pipes otherwise: no terminal at all.
    auto plain = run(sbx_test::helper({"tty-info"}));
    BOOST_TEST(plain.result.out.data == "tty 0 1 2: N N N\nsize none\nctty N\n");

    auto sized = sbx_test::helper({"tty-info"});
    sized.tty = sandbox::terminal_size{50, 132};
    auto s = run(std::move(sized));
    BOOST_TEST(s.result.out.data.find("size 50 132\r\n") != std::string::npos, s.result.out.data);
}

BOOST_AUTO_TEST_CASE(a_terminal_loses_no_output_when_the_command_exits)
{
    // 1 MiB written and the command gone at once: all of it is read from the master before
    // the exec completes (no newlines, so the terminal changes nothing).
    for (int round = 0; round < 3; ++round)
    {
        auto req = sbx_test::helper({"spam", "1048576"});
        req.tty = sandbox::terminal_size{};
        req.options.limits.max_output_bytes = 4 << 20;
        auto res = run(std::move(req));
        BOOST_TEST(!res.ec, res.result.diag);
        BOOST_TEST(res.result.out.data.size() == 1048576u);
        BOOST_TEST(!res.result.out.truncated);
    }
}

BOOST_AUTO_TEST_CASE(a_terminal_run_is_contained_and_validated)
{
    // The tree on a terminal dies with the timeout like any other (a setsid chain included).
    const auto pidfile = root.path() / "pids";
    auto req = sbx_test::helper({"pidfile", "--then", "setsid-child", "60000", "--then",
                                 "sleep", "60000"},
                                pid_options(pidfile));
    req.tty = sandbox::terminal_size{};
    req.options.timeout = 1s;
    auto res = run(std::move(req));
    BOOST_TEST(res.ec == sandbox::errc::timeout);
    const auto pids = sbx_test::read_pids(pidfile);
    BOOST_TEST(!pids.empty());
    BOOST_TEST(sbx_test::wait_gone(pids, 5000ms));

    // Input to a terminal is not supported yet: refused, nothing runs.
    auto with_input = sbx_test::helper({"cat"});
    with_input.tty = sandbox::terminal_size{};
    with_input.options.input = "x";
    auto refused = run(std::move(with_input));
    BOOST_TEST(refused.ec == sandbox::errc::validation);
    BOOST_TEST(refused.result.diag.limit == "input");
    auto empty = sbx_test::helper({"cat"});
    empty.tty = sandbox::terminal_size{0, 80};
    BOOST_TEST(run(std::move(empty)).ec == sandbox::errc::validation);
}

BOOST_AUTO_TEST_CASE(noop_runner_runs_nothing)
{
    sandbox::noop_runner noop(ioc.get_executor());
    const auto pidfile = root.path() / "pids";
    auto req = sbx_test::helper({"pidfile", "--then", "print", "x", "--then", "exit", "3"},
                                pid_options(pidfile));
    auto [ec, r] = sbx_test::run(ioc, noop, std::move(req));
    BOOST_TEST(!ec);
    BOOST_TEST(r.status == sandbox::exec_status::exited);
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.out.data.empty());
    BOOST_TEST(r.err.data.empty());
    BOOST_TEST(!std::filesystem::exists(pidfile));

    const sandbox::enforcement_report none{};
    BOOST_TEST((noop.enforcement() == none));
    BOOST_TEST((sandbox::enforcement_of(&noop) == none));
    BOOST_TEST((sandbox::enforcement_of(nullptr) == none));
}

BOOST_AUTO_TEST_CASE(local_runner_enforcement_report)
{
    const auto e = runner.enforcement();
    BOOST_TEST(e.env_allow_list);
    BOOST_TEST(e.memory_cap == sandbox::sampler_usable());
    BOOST_TEST(e.net_modes.empty());
    BOOST_TEST(!e.filesystem_bounds);
    BOOST_TEST(!e.disk_cap);
    BOOST_TEST(e.tree_kill);
    BOOST_TEST((sandbox::enforcement_of(&runner) == e));
}

BOOST_AUTO_TEST_SUITE_END()
