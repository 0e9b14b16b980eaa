// test/threads/two_threads_test.cpp: the thread rule. A runner (a policy chain over a local
// runner) lives on one thread's io_context; coroutines on another thread's io_context call
// every entry point: the awaitable members and the front ends, execs and sessions. Built
// normally and, by `scripts/test.sh --tsan`, under ThreadSanitizer (build-tsan/), where any
// access to the runner's state from the calling thread is reported as a data race.
#define BOOST_TEST_MODULE sandbox_thread_tests
#include <boost/test/unit_test.hpp>

#include <sandbox/local_runner.hpp>
#include <sandbox/policy.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr int rounds = 6;
constexpr int callers = 3;

/// A scratch root, removed at the end.
struct scratch_root
{
    scratch_root()
    {
        std::string t = (std::filesystem::temp_directory_path() / "sbx-threads-XXXXXX").string();
        BOOST_REQUIRE(::mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~scratch_root()
    {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    std::filesystem::path path;
};

/// Two threads: `owner` runs the runner's io_context, `caller` the coroutines that use it.
struct two_threads
{
    asio::io_context owner_ctx, caller_ctx;
    scratch_root root;
    std::unique_ptr<sandbox::runner> runner;
    std::atomic<int> failures{0};

    two_threads()
    {
        sandbox::local_runner_options o;
        o.root = root.path.string();
        sandbox::local_policy p;
        p.allowed_commands = std::vector<std::string>{"sh", "cat", "echo"};
        runner = sandbox::compose_local(
            std::make_unique<sandbox::local_runner>(asio::make_strand(owner_ctx), o), std::move(p));
    }

    /// Runs `n` copies of `body` on the caller thread while the owner thread serves them.
    template <class Body>
    void run(int n, Body body)
    {
        auto guard = asio::make_work_guard(owner_ctx);
        std::thread owner([this] { owner_ctx.run(); });
        std::atomic<int> left{n};
        for (int i = 0; i < n; ++i)
            asio::co_spawn(asio::make_strand(caller_ctx), body(i), [&](std::exception_ptr e) {
                if (e)
                {
                    ++failures;
                    try
                    {
                        std::rethrow_exception(e);
                    }
                    catch (const std::exception& x)
                    {
                        BOOST_TEST_MESSAGE("caller failed: " << x.what());
                    }
                }
                if (--left == 0)
                    guard.reset();
            });
        std::thread caller([this] { caller_ctx.run(); });
        caller.join();
        owner.join();
    }
};

sandbox::exec_request echo(int i)
{
    sandbox::exec_request req;
    req.command = "echo";
    req.args = {"call-" + std::to_string(i)};
    return req;
}

sandbox::session_spec cat()
{
    sandbox::session_spec spec;
    spec.command = "cat";
    return spec;
}

// Reads from `at` until `want` has been seen; returns everything read.
asio::awaitable<std::string> read_until(sandbox::session& s, std::uint64_t& at,
                                        const std::string& want)
{
    std::string seen;
    while (seen.find(want) == std::string::npos)
    {
        sandbox::session_output o = co_await s.read(at, 4096);
        for (auto& c : o.chunks)
            seen += c.data;
        at = o.next;
        if (o.eof)
            break;
    }
    co_return seen;
}

asio::awaitable<std::optional<sandbox::session_watcher>> watch_of(
    std::shared_ptr<sandbox::session> s)
{
    co_return s->watch();
}

} // namespace

BOOST_FIXTURE_TEST_CASE(execs_from_another_thread_run_on_the_runners, two_threads)
{
    std::atomic<int> ok{0};
    run(callers, [&](int who) -> asio::awaitable<void> {
        for (int i = 0; i < rounds; ++i)
        {
            auto req = echo(who * 100 + i);
            sandbox::exec_result a = co_await runner->exec(req);
            auto again = echo(who * 100 + i);
            sandbox::exec_result b = co_await sandbox::async_exec(*runner, again);
            auto refused = echo(0);
            refused.command = "true"; // not on the allow-list: refused by the chain
            auto [ec, c] = co_await sandbox::async_exec(*runner, refused,
                                                        asio::as_tuple(asio::deferred));
            const std::string want = "call-" + std::to_string(who * 100 + i) + "\n";
            if (a.out.data == want && b.out.data == want && ec == sandbox::errc::policy_denied)
                ++ok;
        }
    });
    BOOST_TEST(failures == 0);
    BOOST_TEST(ok == callers * rounds);
}

BOOST_FIXTURE_TEST_CASE(sessions_from_another_thread_run_on_the_runners, two_threads)
{
    std::atomic<int> ok{0};
    run(callers, [&](int who) -> asio::awaitable<void> {
        auto& pm = *runner->sessions();
        for (int i = 0; i < rounds; ++i)
        {
            std::shared_ptr<sandbox::session> s;
            if (i % 2 == 0)
                s = co_await pm.start(cat());
            else
                s = co_await sandbox::async_start(pm, cat());
            const std::string line = "line-" + std::to_string(who) + "-" + std::to_string(i);
            co_await s->write(line + "\n");
            std::uint64_t at = 0;
            std::string seen = co_await read_until(*s, at, line);
            co_await sandbox::async_write(*s, "more\n");
            seen += co_await read_until(*s, at, "more");
            // watch() is synchronous: made on the session's executor; next() hops by itself.
            auto w = co_await asio::co_spawn(s->get_executor(), watch_of(s), asio::use_awaitable);
            sandbox::session_event ev = co_await w->next();
            auto again = co_await sandbox::async_find(pm, s->id());
            co_await sandbox::async_close_input(*s);
            sandbox::exec_result r = co_await s->wait();
            sandbox::session_output tail = co_await sandbox::async_read(*s, at, 4096);
            co_await s->close();
            if (seen == line + "\nmore\n" && ev.data.rfind(line, 0) == 0 && again == s &&
                r.exit_code == 0 && tail.eof)
                ++ok;
        }
    });
    BOOST_TEST(failures == 0);
    BOOST_TEST(ok == callers * rounds);
}

BOOST_FIXTURE_TEST_CASE(terminating_from_another_thread_ends_the_tree, two_threads)
{
    std::atomic<int> ok{0};
    run(callers, [&](int) -> asio::awaitable<void> {
        auto& pm = *runner->sessions();
        for (int i = 0; i < rounds; ++i)
        {
            std::shared_ptr<sandbox::session> s = co_await pm.start(cat());
            sandbox::exec_result r; // no co_await inside ?: (GCC 12 miscompiles it)
            if (i % 2 == 0)
                r = co_await s->terminate(0ns);
            else
                r = co_await pm.terminate(s->id(), 0ns);
            co_await sandbox::async_close(*s);
            if (r.status == sandbox::exec_status::terminated)
                ++ok;
        }
    });
    BOOST_TEST(failures == 0);
    BOOST_TEST(ok == callers * rounds);
}

// The backend alone (no policy chain in front): its exec and its sessions' start hop too.
BOOST_AUTO_TEST_CASE(a_bare_local_runner_serves_another_thread)
{
    asio::io_context owner_ctx, caller_ctx;
    scratch_root root;
    sandbox::local_runner_options o;
    o.root = root.path.string();
    sandbox::local_runner runner(asio::make_strand(owner_ctx), o);
    auto guard = asio::make_work_guard(owner_ctx);
    std::thread owner([&] { owner_ctx.run(); });
    int ok = 0;
    asio::co_spawn(
        caller_ctx,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < rounds; ++i)
            {
                auto req = echo(i);
                sandbox::exec_result r = co_await runner.exec(req);
                auto s = co_await runner.sessions()->start(cat());
                co_await s->write("x\n");
                std::uint64_t at = 0;
                std::string seen = co_await read_until(*s, at, "x");
                co_await s->close();
                if (r.out.data == "call-" + std::to_string(i) + "\n" && seen == "x\n")
                    ++ok;
            }
        },
        [&](std::exception_ptr e) {
            BOOST_TEST(!e);
            guard.reset();
        });
    caller_ctx.run();
    owner.join();
    BOOST_TEST(ok == rounds);
}
