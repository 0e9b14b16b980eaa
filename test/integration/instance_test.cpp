// test/integration/instance_test.cpp: instances (sandbox/instance.hpp) on the real bubblewrap
// and on the local backend: many commands in one sandbox, each with its own tree kill,
// timeout, caps and exit status; nothing of one command reaching the next; hostile commands
// that stop or kill the worker keeping their deadline; closing mid-command; dropping the
// handle; the refusals of a command that would widen the instance.
#include <boost/test/unit_test.hpp>

#include "session_support.hpp"
#include "support.hpp"

#include <sandbox/backend/instance.hpp>
#include <sandbox/bwrap_runner.hpp>
#include <sandbox/error.hpp>
#include <sandbox/instance.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/policy.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandbox::errc;
using sandbox::exec_status;
using sbx_test::contains;

// Runs `body` on `ioc` until it completes (bounded); fails the test otherwise.
template <class T>
T finish(asio::io_context& ioc, asio::awaitable<T> body, std::chrono::seconds limit = 30s)
{
    std::optional<T> out;
    std::exception_ptr failed;
    asio::co_spawn(ioc, std::move(body), [&](std::exception_ptr e, T v) {
        failed = e;
        out = std::move(v);
    });
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!out && !failed && std::chrono::steady_clock::now() < until)
    {
        if (ioc.stopped()) // ran out of work before: the body's work is new
            ioc.restart();
        ioc.run_one_for(100ms);
    }
    if (failed)
        std::rethrow_exception(failed);
    BOOST_REQUIRE_MESSAGE(out, "the operation did not complete within the time limit");
    return std::move(*out);
}

// Runs `ioc` until it has no work left (bounded): what an instance left behind is gone.
bool drains(asio::io_context& ioc, std::chrono::seconds limit = 10s)
{
    const auto until = std::chrono::steady_clock::now() + limit;
    ioc.restart();
    while (std::chrono::steady_clock::now() < until)
        if (ioc.run_one_for(100ms) == 0 && ioc.stopped())
            return true;
    return false;
}

sandbox::exec_request sh(const std::string& script, sandbox::exec_options o = {})
{
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", script};
    req.options = std::move(o);
    if (req.options.timeout == std::chrono::nanoseconds(0))
        req.options.timeout = 20s;
    return req;
}

sandbox::exec_outcome exec_in(asio::io_context& ioc, sandbox::instance& i,
                              sandbox::exec_request req)
{
    return finish(ioc, i.try_exec(std::move(req)));
}

std::shared_ptr<sandbox::instance> open(asio::io_context& ioc, sandbox::runner& r,
                                        sandbox::instance_spec spec = {})
{
    auto o = finish(ioc, r.try_open(std::move(spec)));
    BOOST_REQUIRE_MESSAGE(o.has_value(), (o ? "" : o.error().diag.message));
    return *o;
}

// A root the sandbox user (nobody, for a root caller) can write.
struct owned_dir : sbx_test::temp_dir
{
    owned_dir()
    {
        if (::geteuid() != 0)
            return;
        const passwd* pw = ::getpwnam("nobody");
        const group* gr = ::getgrnam("nogroup");
        BOOST_REQUIRE(::chown(path().c_str(), pw ? pw->pw_uid : 65534, gr ? gr->gr_gid : 65534) ==
                      0);
    }
};

struct bwrap_instance_fixture
{
    asio::io_context ioc;
    owned_dir root;
    sandbox::bwrap_runner runner;

    bwrap_instance_fixture() : runner(ioc.get_executor(), options(root.str())) {}
    ~bwrap_instance_fixture()
    {
        auto left = sbx_test::helper_processes();
        BOOST_CHECK_MESSAGE(sbx_test::wait_gone(left), "helper processes survived the test");
        for (pid_t p : sbx_test::helper_processes())
            ::kill(p, SIGKILL);
    }
    static sandbox::bwrap_runner_options options(std::string root)
    {
        sandbox::bwrap_runner_options o;
        o.root = std::move(root);
        o.cgroup = sbx_test::cgroup_setting();
        return o;
    }
};

// The instances' processes below this test process: their inits (named sandbox-init,
// running the supervisor program) and the inits' children (the workers inside).
std::vector<pid_t> instance_processes()
{
    const std::string program = std::filesystem::canonical(SBX_SUPERVISOR).string();
    auto field = [](pid_t p, const char* file) {
        std::ifstream in("/proc/" + std::to_string(p) + "/" + file);
        std::string text;
        std::getline(in, text);
        return text;
    };
    auto parent = [&](pid_t p) {
        const std::string stat = field(p, "stat");
        const auto close = stat.rfind(')');
        return close == std::string::npos ? -1 : std::atoi(stat.c_str() + close + 4);
    };
    // Ours only: other test processes (ctest -j) run cold bwrap execs with the same init.
    auto ours = [&](pid_t p) {
        for (int hops = 0; p > 1 && hops < 64; ++hops, p = parent(p))
            if (p == ::getpid())
                return true;
        return false;
    };
    std::vector<pid_t> inits, out;
    const auto all = sbx_test::proc_pids();
    for (pid_t p : all)
        if (field(p, "comm") == "sandbox-init" && sbx_test::exe_of(p) == program &&
            sbx_test::alive(p) && ours(p))
            inits.push_back(p);
    for (pid_t p : all)
        if (std::find(inits.begin(), inits.end(), p) != inits.end() ||
            std::find(inits.begin(), inits.end(), parent(p)) != inits.end())
            out.push_back(p);
    return out;
}

// The processes a command inside sees, one "pid cmdline" per line.
const std::string list_processes =
    "for p in /proc/[0-9]*; do printf '%s ' ${p#/proc/}; tr '\\0' ' ' < $p/cmdline; echo; "
    "done 2>/dev/null";

} // namespace

BOOST_AUTO_TEST_SUITE(instance_bwrap)

BOOST_FIXTURE_TEST_CASE(commands_share_the_sandbox_and_nothing_else, bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    BOOST_TEST(inst->is_open());
    BOOST_TEST(inst->id().rfind("i-", 0) == 0);
    auto a = exec_in(ioc, *inst, sh("echo one > /tmp/kept; echo hi; exit 3"));
    BOOST_TEST(!a.ec, a.result.diag);
    BOOST_TEST(a.result.exit_code == 3);
    BOOST_TEST(a.result.out.data == "hi\n");
    // The private /tmp persists between commands; each command is pid-namespaced with the
    // instance (one init: pid 1).
    auto b = exec_in(ioc, *inst, sh("cat /tmp/kept; cat /proc/1/comm"));
    BOOST_TEST(!b.ec, b.result.diag);
    BOOST_TEST(b.result.out.data == "one\nsandbox-init\n");
    // The command is looked up on its PATH inside; a missing one is not_found.
    sandbox::exec_request echo;
    echo.command = "echo";
    echo.args = {"found"};
    auto c = exec_in(ioc, *inst, echo);
    BOOST_TEST(c.result.out.data == "found\n", c.result.diag);
    sandbox::exec_request missing;
    missing.command = "no-such-command-anywhere";
    auto m = exec_in(ioc, *inst, missing);
    BOOST_TEST((m.ec == errc::not_found), m.result.diag);
    BOOST_TEST((m.result.status == exec_status::not_started));
    // A work dir under the root: entered inside; one that does not exist is refused.
    std::filesystem::create_directory(root.path() / "sub");
    BOOST_REQUIRE(::chown((root.path() / "sub").c_str(), ::geteuid() == 0 ? 65534 : ::geteuid(),
                          ::geteuid() == 0 ? 65534 : ::getegid()) == 0 ||
                  ::geteuid() != 0);
    sandbox::exec_options in_sub;
    in_sub.work_dir = "sub";
    auto d = exec_in(ioc, *inst, sh("pwd", in_sub));
    BOOST_TEST(d.result.out.data == (root.path() / "sub").string() + "\n", d.result.diag);
    finish(ioc, [&]() -> asio::awaitable<bool> {
        co_await inst->close();
        co_return true;
    }());
    BOOST_TEST(!inst->is_open());
    auto after = exec_in(ioc, *inst, sh("true"));
    BOOST_TEST((after.ec == errc::instance_closed), after.result.diag);
    inst.reset();
    BOOST_TEST(drains(ioc));
}

// Processes (a setsid'd daemon, a double fork), descriptors and variables of one command
// are gone when the next starts.
BOOST_FIXTURE_TEST_CASE(nothing_of_one_command_reaches_the_next, bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    sandbox::exec_options o;
    o.env.inject["SECRET_OF_ONE"] = "1";
    auto a = exec_in(ioc, *inst,
                     sh("setsid sh -c 'sleep 1001 & sleep 1002' > /dev/null 2>&1 & "
                        "(sleep 1003 &) ; exec 7>/tmp/held; sleep 0.2; " +
                            list_processes,
                        o));
    BOOST_TEST(!a.ec, a.result.diag);
    BOOST_TEST(contains(a.result.out.data, "sleep 1001")); // they really ran
    BOOST_TEST(contains(a.result.out.data, "sleep 1003"));
    auto b =
        exec_in(ioc, *inst, sh(list_processes + "; ls /proc/self/fd; echo ${SECRET_OF_ONE-unset}"));
    BOOST_TEST(!b.ec, b.result.diag);
    BOOST_TEST(!contains(b.result.out.data, "sleep 100"), b.result.out.data);
    BOOST_TEST(contains(b.result.out.data, "\nunset\n"), b.result.out.data);
    // Only stdio (and ls's own directory) is open in the next command.
    BOOST_TEST(contains(b.result.out.data, "\n0\n1\n2\n3\nunset\n"), b.result.out.data);
    inst.reset();
    BOOST_TEST(drains(ioc));
}

BOOST_FIXTURE_TEST_CASE(timeouts_caps_and_statuses_are_per_command, bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    sandbox::exec_options quick;
    quick.timeout = 300ms;
    auto t = exec_in(ioc, *inst, sh("sleep 30 & sleep 30", quick));
    BOOST_TEST((t.ec == errc::timeout), t.result.diag);
    BOOST_TEST((t.result.status == exec_status::timed_out));
    auto s = exec_in(ioc, *inst, sh("kill -TERM $$"));
    BOOST_TEST((s.result.status == exec_status::signaled), s.result.diag);
    BOOST_TEST(s.result.signal == SIGTERM);
    sandbox::exec_options capped;
    capped.limits.max_processes = 4;
    auto bomb = exec_in(ioc, *inst, sh("while :; do sleep 5 & done", capped));
    BOOST_TEST((bomb.result.status == exec_status::budget_exceeded), bomb.result.diag);
    // The instance lives on: the next command runs, and nothing of the others is left.
    auto next = exec_in(ioc, *inst, sh(list_processes));
    BOOST_TEST(!next.ec, next.result.diag);
    BOOST_TEST(!contains(next.result.out.data, "sleep"), next.result.out.data);
    BOOST_TEST(next.result.cpu_time > std::chrono::nanoseconds(0));
    inst.reset();
    BOOST_TEST(drains(ioc));
}

// The instance's own timeout and caps hold over everything in it: when they end it, a
// command running there ends with instance_closed, and `ended()` says why.
BOOST_FIXTURE_TEST_CASE(the_instance_s_own_timeout_ends_it, bwrap_instance_fixture)
{
    sandbox::instance_spec spec;
    spec.options.timeout = 1500ms;
    auto inst = open(ioc, runner, spec);
    auto first = exec_in(ioc, *inst, sh("echo quick"));
    BOOST_TEST(first.result.out.data == "quick\n", first.result.diag);
    auto cut = exec_in(ioc, *inst, sh("echo started; sleep 30"));
    BOOST_TEST((cut.ec == errc::instance_closed), cut.result.diag);
    BOOST_TEST(cut.result.out.data == "started\n"); // the partial output is kept
    BOOST_REQUIRE(inst->ended() != nullptr);
    BOOST_TEST((inst->ended()->result.status == exec_status::timed_out));
    BOOST_TEST(!inst->is_open());
    inst.reset();
    BOOST_TEST(drains(ioc));
}

// Inside an instance a command runs as the user of the worker that keeps its deadline: a
// worker it stops is killed by the init (with the command's tree), one it kills takes the
// tree with it; the instance serves the next command either way.
BOOST_FIXTURE_TEST_CASE(a_command_that_stops_or_kills_its_worker_ends_only_itself,
                        bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    for (const char* sig : {"STOP", "KILL"})
    {
        sandbox::exec_options o;
        o.timeout = 60s;
        const auto t0 = std::chrono::steady_clock::now();
        auto r =
            exec_in(ioc, *inst,
                    sh(std::string("setsid sleep 1004 & kill -") + sig + " $PPID; sleep 1005", o));
        BOOST_TEST(sbx_test::ms_since(t0) < 10'000, sig); // not the 60 s timeout
        BOOST_TEST((r.ec == errc::internal), sig << ": " << r.result.diag);
        BOOST_TEST((r.result.status == exec_status::unenforceable), sig);
        BOOST_TEST(inst->is_open());
        // Give the init its moment to sweep the orphans, then look.
        auto next = exec_in(ioc, *inst, sh("sleep 0.3; " + list_processes));
        BOOST_TEST(!next.ec, next.result.diag);
        BOOST_TEST(!contains(next.result.out.data, "sleep 100"),
                   sig << ": " << next.result.out.data);
    }
    // Nor can it lower the limits of its worker (which would starve its tree kill of
    // descriptors) or of the init (which every later worker inherits), or renice them;
    // its own limits are its to change.
    auto tamper = exec_in(ioc, *inst,
                          sh("prlimit --pid $PPID --nofile=0:0 2>&1; echo \"worker $?\"; "
                             "prlimit --pid 1 --nofile=0:0 2>&1; echo \"init $?\"; "
                             "renice -n 19 -p $PPID >/dev/null 2>&1; echo \"renice $?\"; "
                             "ulimit -n 64; echo \"own $(ulimit -n)\""));
    BOOST_TEST(contains(tamper.result.out.data, "worker 1\n"), tamper.result.out.data);
    BOOST_TEST(contains(tamper.result.out.data, "init 1\n"), tamper.result.out.data);
    BOOST_TEST(contains(tamper.result.out.data, "renice 1\n"), tamper.result.out.data);
    BOOST_TEST(contains(tamper.result.out.data, "own 64\n"), tamper.result.out.data);
    auto still = exec_in(ioc, *inst, sh("ulimit -n"));
    BOOST_TEST(still.result.out.data != "0\n", still.result.diag);
    inst.reset();
    BOOST_TEST(drains(ioc));
}

BOOST_FIXTURE_TEST_CASE(closing_mid_command_ends_it_with_instance_closed, bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    std::optional<sandbox::exec_outcome> running;
    asio::co_spawn(ioc, inst->try_exec(sh("setsid sleep 1006 & sleep 1007")),
                   [&](std::exception_ptr, sandbox::exec_outcome o) { running = std::move(o); });
    asio::steady_timer t(ioc, 300ms);
    finish(ioc, [&]() -> asio::awaitable<bool> {
        co_await t.async_wait(asio::use_awaitable);
        co_await inst->close();
        co_return true;
    }());
    while (!running && ioc.run_one_for(5s) > 0)
    {}
    BOOST_REQUIRE(running);
    BOOST_TEST((running->ec == errc::instance_closed), running->result.diag);
    BOOST_TEST((running->result.status == exec_status::cancelled), running->result.diag);
    BOOST_TEST(inst->ended() != nullptr);
    inst.reset();
    BOOST_TEST(drains(ioc));
    BOOST_TEST(instance_processes().empty());
}

// An init stopped from the host (SIGSTOP) starts no new command: one asked for then waits
// (its worker is never forked, so its own deadline does not run yet), and closing the
// instance ends it with instance_closed; nothing is left.
BOOST_FIXTURE_TEST_CASE(a_stopped_init_holds_new_commands_until_the_close, bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    const auto inside = instance_processes();
    BOOST_REQUIRE(inside.size() == 1u); // the init alone: no command ran yet
    BOOST_REQUIRE(::kill(inside[0], SIGSTOP) == 0);
    std::optional<sandbox::exec_outcome> waiting;
    sandbox::exec_options o;
    o.timeout = 1s;
    asio::co_spawn(ioc, inst->try_exec(sh("echo never", o)),
                   [&](std::exception_ptr, sandbox::exec_outcome r) { waiting = std::move(r); });
    asio::steady_timer t(ioc, 1500ms);
    finish(ioc, [&]() -> asio::awaitable<bool> {
        co_await t.async_wait(asio::use_awaitable);
        BOOST_TEST(!waiting.has_value());
        co_await inst->close();
        co_return true;
    }());
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!waiting && std::chrono::steady_clock::now() < until)
        ioc.run_one_for(100ms);
    BOOST_REQUIRE(waiting);
    BOOST_TEST((waiting->ec == errc::instance_closed), waiting->result.diag);
    BOOST_TEST(waiting->result.out.data.empty());
    inst.reset();
    BOOST_TEST(drains(ioc));
    BOOST_TEST(sbx_test::wait_gone(inside));
}

// The last handle going kills what the instance runs; so does the io_context's end.
BOOST_FIXTURE_TEST_CASE(dropping_the_instance_kills_what_it_ran, bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    auto a = exec_in(ioc, *inst, sh("echo ok"));
    BOOST_TEST(a.result.out.data == "ok\n", a.result.diag);
    const auto inside = instance_processes();
    BOOST_TEST(inside.size() == 2u); // the init and the idle worker
    inst.reset();
    BOOST_TEST(drains(ioc));
    BOOST_TEST(sbx_test::wait_gone(inside));
}

// Host processes whose command line holds `text`.
std::vector<pid_t> host_processes_running(const std::string& text)
{
    std::vector<pid_t> out;
    for (pid_t p : sbx_test::proc_pids())
    {
        std::ifstream in("/proc/" + std::to_string(p) + "/cmdline");
        std::string line((std::istreambuf_iterator<char>(in)), {});
        std::replace(line.begin(), line.end(), '\0', ' ');
        if (contains(line, text) && sbx_test::alive(p))
            out.push_back(p);
    }
    return out;
}

// The caller killed (SIGKILL: nothing of it runs after) while a command runs in its
// instance: the instance, its init, the worker inside and the command all die with it.
BOOST_AUTO_TEST_CASE(the_instance_dies_with_its_caller)
{
    owned_dir root;
    int out[2];
    BOOST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    const pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0)
    {
        asio::io_context ioc;
        sandbox::bwrap_runner r(ioc.get_executor(), bwrap_instance_fixture::options(root.str()));
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                auto inst = co_await r.open({});
                auto req = sh("echo ready; exec sleep 1008", {});
                req.on_output = [&](sandbox::output_stream, std::string_view data) {
                    [[maybe_unused]] auto n = ::write(out[1], data.data(), data.size());
                    return true;
                };
                co_await inst->exec(std::move(req));
            },
            asio::detached);
        ioc.run();
        ::_exit(0);
    }
    ::close(out[1]);
    char line[16] = {};
    pollfd ready{out[0], POLLIN, 0};
    ssize_t n = -1;
    if (::poll(&ready, 1, 30'000) == 1) // the command runs (bounded: a stalled child fails)
        n = ::read(out[0], line, sizeof line - 1);
    ::close(out[0]);
    const auto inside = instance_processes();
    const auto sleeper = host_processes_running("sleep 1008");
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    BOOST_TEST(std::string(line, n > 0 ? static_cast<std::size_t>(n) : 0) == "ready\n");
    BOOST_TEST(inside.size() == 2u);
    BOOST_TEST(sleeper.size() == 1u);
    BOOST_TEST(sbx_test::wait_gone(inside, 10s));
    BOOST_TEST(sbx_test::wait_gone(sleeper, 10s));
    BOOST_TEST(instance_processes().empty());
}

// Sessions and terminals inside an instance: each is a command of the instance (its /tmp,
// its pid namespace, its init), with the session API of the runner's; a terminal is the
// command's controlling terminal inside (its size, resize, Ctrl-C to its foreground group).
BOOST_FIXTURE_TEST_CASE(sessions_and_terminals_run_inside_the_instance, bwrap_instance_fixture)
{
    auto inst = open(ioc, runner);
    BOOST_TEST(exec_in(ioc, *inst, sh("echo kept > /tmp/kept")).result.exit_code == 0);
    sandbox::process_manager* pm = inst->sessions();
    BOOST_REQUIRE(pm != nullptr);
    BOOST_TEST(pm != runner.sessions()); // the instance's own, not the runner's cold ones
    finish(ioc, [&]() -> asio::awaitable<bool> {
        const auto piped =
            sbx_test::shell("cat /tmp/kept; cat /proc/1/comm; read x; echo got $x", "in-pipes");
        auto pipes = co_await pm->start(piped);
        BOOST_TEST(!pipes->is_tty());
        co_await pipes->write("hello\n");
        auto d = co_await sbx_test::read_all(*pipes);
        BOOST_TEST(d.out == "kept\nsandbox-init\ngot hello\n", d.err);
        auto r = co_await pipes->wait();
        BOOST_TEST((r.status == exec_status::exited && r.exit_code == 0), r.diag);
        co_await pipes->close();

        sandbox::session_spec t = sbx_test::shell(
            "test -t 0 && echo on-a-terminal; stty size; read x; echo got $x; stty size; exec cat");
        t.tty = sandbox::terminal_size{};
        auto term = co_await pm->start(t);
        BOOST_TEST(term->is_tty());
        std::uint64_t at = 0;
        auto seen = co_await sbx_test::read_until(*term, at, "24 80");
        BOOST_TEST(contains(seen, "on-a-terminal"), seen);
        BOOST_TEST(contains(seen, "24 80"), seen);
        BOOST_TEST(!term->resize({40, 120}));
        co_await term->write("line\n");
        seen = co_await sbx_test::read_until(*term, at, "40 120");
        BOOST_TEST(contains(seen, "got line"), seen);
        BOOST_TEST(contains(seen, "40 120"), seen);
        BOOST_TEST(pm->list().size() == 1u);
        // (Once cat reads: the shell itself catches SIGINT under -c.)
        co_await term->write("ping\n");
        seen = co_await sbx_test::read_until(*term, at, "ping\r\nping\r\n");
        BOOST_TEST(contains(seen, "ping\r\nping\r\n"), seen);
        // Ctrl-C reaches the foreground group through the terminal's line discipline: the
        // terminal is the command's controlling terminal inside the sandbox.
        BOOST_TEST(!term->signal(sandbox::session_signal::interrupt));
        r = co_await term->wait();
        BOOST_TEST((r.status == exec_status::signaled), r.diag);
        BOOST_TEST(r.signal == SIGINT);
        co_await term->close();

        // A one-shot call may have a terminal too.
        auto e = sh("test -t 1 && stty size");
        e.tty = sandbox::terminal_size{30, 100};
        auto o = co_await inst->try_exec(e);
        BOOST_TEST(!o.ec, o.result.diag);
        BOOST_TEST(contains(o.result.out.data, "30 100"), o.result.out.data);

        // Closing the instance ends what runs in it; later starts are refused.
        const auto sleeper = sbx_test::shell("sleep 301");
        auto left = co_await pm->start(sleeper);
        co_await inst->close();
        r = co_await left->wait();
        BOOST_TEST((r.status == exec_status::cancelled), r.diag);
        BOOST_TEST(r.diag.limit == "instance", r.diag);
        const auto after_close = sbx_test::shell("true");
        auto late = co_await pm->try_start(after_close);
        BOOST_TEST((!late && late.error().code == errc::instance_closed));
        co_return true;
    }());
    auto survivors = instance_processes();
    BOOST_TEST(survivors.empty(), survivors.size() << " processes of the instance survived");
    inst.reset();
    BOOST_TEST(drains(ioc));
}

BOOST_FIXTURE_TEST_CASE(a_command_may_not_widen_the_instance, bwrap_instance_fixture)
{
    sandbox::instance_spec with_input;
    with_input.options.input = "x";
    auto bad = finish(ioc, runner.try_open(with_input));
    BOOST_TEST((!bad && bad.error().code == errc::validation));
    sandbox::instance_spec spec;
    spec.options.net.mode = sandbox::net_mode::deny_all;
    auto inst = open(ioc, runner, spec);
    sandbox::exec_options wider;
    wider.net.mode = sandbox::net_mode::inherit;
    wider.net.allow_hosts = {"example.com"};
    auto w = exec_in(ioc, *inst, sh("true", wider));
    BOOST_TEST((w.ec == errc::validation), w.result.diag);
    BOOST_TEST(w.result.diag.limit == "net");
    // A session follows the same rules.
    sandbox::session_spec wide_session = sbx_test::shell("true");
    wide_session.options = wider;
    auto ws = finish(ioc, inst->sessions()->try_start(wide_session));
    BOOST_TEST((!ws && ws.error().code == errc::validation));
    sandbox::session_spec hooked = sbx_test::shell("true");
    hooked.on_net_record = [](const sandbox::net_record&) {};
    auto hs = finish(ioc, inst->sessions()->try_start(hooked));
    BOOST_TEST((!hs && hs.error().code == errc::validation && hs.error().diag.limit == "net"));
    // A command's own process cap would replace the instance's (one fork gate answers).
    inst.reset();
    BOOST_TEST(drains(ioc));
    sandbox::instance_spec gated;
    gated.options.limits.max_processes = 64;
    gated.options.net.mode = sandbox::net_mode::deny_all;
    inst = open(ioc, runner, gated);
    // A stricter one is refused; one no stricter than the instance's is the instance's.
    sandbox::exec_options own_cap;
    own_cap.limits.max_processes = 4;
    auto cap = exec_in(ioc, *inst, sh("true", own_cap));
    BOOST_TEST((cap.ec == errc::not_available), cap.result.diag);
    BOOST_TEST(cap.result.diag.limit == "limits.max_processes");
    own_cap.limits.max_processes = 1000;
    auto loose = exec_in(ioc, *inst, sh("echo ran", own_cap));
    BOOST_TEST(loose.result.out.data == "ran\n", loose.result.diag);
    // A terminal under the instance's fork gate (its filter refuses clone3).
    auto on_tty = sh("stty size");
    on_tty.tty = sandbox::terminal_size{21, 61};
    auto t = exec_in(ioc, *inst, on_tty);
    BOOST_TEST(contains(t.result.out.data, "21 61"), t.result.diag << t.result.out.data);
    // The instance's own network: only loopback, for every command.
    auto n = exec_in(ioc, *inst, sh("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"));
    BOOST_TEST(n.result.out.data == "lo\n", n.result.diag << n.result.err.data);
    inst.reset();
    BOOST_TEST(drains(ioc));
}

// Keeps every audit record.
struct memory_sink final : sandbox::audit_sink
{
    boost::system::error_code write(const sandbox::audit_record& r) noexcept override
    {
        records.push_back(r);
        return {};
    }
    std::vector<sandbox::audit_record> records;
};

// Through the policy chain: the instance opens with the defaults merged in, each command in
// it is judged by the gate (as an exec) and recorded with the instance's id, and the open
// and close are recorded.
BOOST_AUTO_TEST_CASE(the_chain_judges_each_command_of_an_instance)
{
    asio::io_context ioc;
    owned_dir root;
    auto sink = std::make_shared<memory_sink>();
    sandbox::exec_options defaults;
    defaults.env.inject["FROM_DEFAULTS"] = "d";
    auto chain = sandbox::allow_commands(
        sandbox::with_audit(sandbox::with_defaults(std::make_unique<sandbox::bwrap_runner>(
                                                       ioc.get_executor(),
                                                       bwrap_instance_fixture::options(root.str())),
                                                   defaults),
                            sink),
        {"/bin/sh"});
    auto inst = open(ioc, *chain);
    auto ok = exec_in(ioc, *inst, sh("echo $FROM_DEFAULTS"));
    BOOST_TEST(ok.result.out.data == "d\n", ok.result.diag);
    sandbox::exec_request other;
    other.command = "/bin/true";
    auto denied = exec_in(ioc, *inst, other);
    BOOST_TEST((denied.ec == errc::policy_denied), denied.result.diag);
    // Its sessions too: judged by the gate, given the defaults, recorded with the instance.
    BOOST_REQUIRE(inst->sessions() != nullptr);
    finish(ioc, [&]() -> asio::awaitable<bool> {
        sandbox::session_spec no = sbx_test::shell("true");
        no.command = "/bin/true";
        auto refused = co_await inst->sessions()->try_start(no);
        BOOST_TEST((!refused && refused.error().code == errc::policy_denied));
        const auto defaults_shown = sbx_test::shell("echo $FROM_DEFAULTS; cat /proc/1/comm");
        auto s = co_await inst->sessions()->start(defaults_shown);
        auto d = co_await sbx_test::read_all(*s);
        BOOST_TEST(d.out == "d\nsandbox-init\n", d.err);
        BOOST_TEST(inst->sessions()->list().size() == 1u);
        co_await s->close();
        co_await inst->close();
        co_return true;
    }());
    const std::string id = inst->id();
    inst.reset();
    chain.reset();
    BOOST_TEST(drains(ioc));
    std::vector<std::string> seen;
    for (const auto& r : sink->records)
    {
        seen.push_back(std::string(sandbox::to_string(r.event)) + " " + r.command);
        BOOST_TEST(r.instance_id == id, sandbox::to_string(r.event));
    }
    // (The gate is outside the audit layer: what it refuses is not recorded.)
    const std::vector<std::string> want{"instance_opened ", "allowed /bin/sh", "finished /bin/sh",
                                        "allowed /bin/sh",  "started /bin/sh", "finished /bin/sh",
                                        "instance_closed "};
    BOOST_TEST(seen == want, boost::test_tools::per_element());
}

// A bwrap runner under `root` keeping `n` warm sandboxes.
std::unique_ptr<sandbox::bwrap_runner> warm_runner(asio::io_context& ioc, const owned_dir& root,
                                                   std::size_t n)
{
    auto o = bwrap_instance_fixture::options(root.str());
    o.warm = n;
    return std::make_unique<sandbox::bwrap_runner>(ioc.get_executor(), o);
}

// Waits (at most 10 s) until `r` has `n` warm sandboxes ready.
bool wait_warm(asio::io_context& ioc, const sandbox::bwrap_runner& r, std::size_t n)
{
    return finish(ioc, [&]() -> asio::awaitable<bool> {
        asio::steady_timer t(ioc);
        for (int i = 0; i < 2000 && r.warm_ready() < n; ++i)
        {
            t.expires_after(5ms);
            co_await t.async_wait(asio::use_awaitable);
        }
        co_return r.warm_ready() >= n;
    }());
}

// bwrap_runner_options::warm: one-shot calls served by sandboxes opened ahead, each used by
// one call and closed before it completes; calls a warm sandbox would run otherwise go cold.
BOOST_AUTO_TEST_CASE(one_shot_calls_take_warm_sandboxes_one_each)
{
    asio::io_context ioc;
    owned_dir root;
    auto r = warm_runner(ioc, root, 2);
    auto wait_ready = [&](std::size_t n) { return wait_warm(ioc, *r, n); };
    BOOST_TEST(r->warm_ready() == 0u); // nothing opens before bwrap is known to work here
    auto cold = finish(ioc, r->try_exec(sh("cat /proc/1/comm")));
    BOOST_TEST(!cold.ec, cold.result.diag);
    BOOST_TEST(cold.result.out.data == "sandbox-init\n");
    BOOST_REQUIRE(wait_ready(2));
    BOOST_TEST(!instance_processes().empty());
    // A warm call leaves a file in its /tmp and a daemon behind; neither reaches the next.
    auto a = finish(ioc, r->try_exec(sh("echo one > /tmp/left; setsid sleep 1004 & "
                                        "echo $$; exit 5")));
    BOOST_TEST(!a.ec, a.result.diag);
    BOOST_TEST(a.result.exit_code == 5);
    BOOST_TEST(r->warm_ready() <= 1u); // taken (a replacement may be ready already)
    BOOST_REQUIRE(wait_ready(2));
    auto b = finish(ioc, r->try_exec(sh("cat /tmp/left 2>&1; " + list_processes)));
    BOOST_TEST(!b.ec, b.result.diag);
    BOOST_TEST(contains(b.result.out.data, "No such file"), b.result.out.data);
    BOOST_TEST(!contains(b.result.out.data, "sleep 1004"), b.result.out.data);
    BOOST_TEST(host_processes_running("sleep 1004").empty());
    // Its own timeout and status, as cold.
    sandbox::exec_options quick;
    quick.timeout = 300ms;
    BOOST_REQUIRE(wait_ready(2));
    auto t = finish(ioc, r->try_exec(sh("sleep 30", quick)));
    BOOST_TEST((t.result.status == exec_status::timed_out), t.result.diag);
    // A call with a network of its own runs cold: no warm sandbox is taken.
    BOOST_REQUIRE(wait_ready(2));
    sandbox::exec_options own_net;
    own_net.net.mode = sandbox::net_mode::deny_all;
    auto n = finish(ioc, r->try_exec(sh("echo cold", own_net)));
    BOOST_TEST(n.result.out.data == "cold\n", n.result.diag);
    BOOST_TEST(r->warm_ready() == 2u);
    // So does a call with a cap (a cold exec's memory cap bounds its /tmp too).
    sandbox::exec_options capped;
    capped.limits.memory_bytes = std::int64_t{256} << 20;
    auto c = finish(ioc, r->try_exec(sh("echo capped", capped)));
    BOOST_TEST(c.result.out.data == "capped\n", c.result.diag);
    BOOST_TEST(r->warm_ready() == 2u);
    // The runner's end kills its warm sandboxes.
    BOOST_TEST(!instance_processes().empty());
    r.reset();
    BOOST_TEST(drains(ioc));
    BOOST_TEST(instance_processes().empty());
    auto left = sbx_test::helper_processes();
    BOOST_CHECK_MESSAGE(sbx_test::wait_gone(left), "helper processes survived the test");
}

// The parent pid of `p` (its stat's fourth field), -1 when gone.
pid_t parent_of(pid_t p)
{
    std::ifstream in("/proc/" + std::to_string(p) + "/stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');
    return close == std::string::npos ? -1 : std::atoi(stat.c_str() + close + 4);
}

// A warm sandbox killed from outside after the pool last looked at it: the call it is handed
// to finds it dead before its command starts, and runs cold instead of failing.
BOOST_AUTO_TEST_CASE(a_warm_sandbox_found_dead_sends_the_call_cold)
{
    asio::io_context ioc;
    owned_dir root;
    auto r = warm_runner(ioc, root, 1);
    auto first = finish(ioc, r->try_exec(sh("true")));
    BOOST_TEST(!first.ec, first.result.diag);
    BOOST_REQUIRE(wait_warm(ioc, *r, 1));
    // The warm sandbox's init and its primed worker, and bwrap above them; killed while the
    // loop does not run, so the pool cannot have seen the end.
    auto inside = instance_processes();
    BOOST_REQUIRE(!inside.empty());
    const auto init = std::find_if(inside.begin(), inside.end(), [&](pid_t p) {
        return std::find(inside.begin(), inside.end(), parent_of(p)) == inside.end();
    });
    BOOST_REQUIRE(init != inside.end());
    const pid_t bwrap = parent_of(*init);
    BOOST_REQUIRE(bwrap > 1);
    BOOST_REQUIRE(::kill(*init, SIGKILL) == 0);
    inside.push_back(bwrap);
    BOOST_REQUIRE(sbx_test::wait_gone(inside));
    BOOST_TEST(r->warm_ready() == 1u); // still counted: its end is not handled yet
    auto c = finish(ioc, r->try_exec(sh("echo ran; cat /proc/1/comm")));
    BOOST_TEST(!c.ec, c.result.diag);
    BOOST_TEST(c.result.out.data == "ran\nsandbox-init\n");
    r.reset();
    BOOST_TEST(drains(ioc));
    BOOST_TEST(instance_processes().empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(instance_local)

BOOST_AUTO_TEST_CASE(a_local_instance_runs_each_command_on_its_runner)
{
    asio::io_context ioc;
    sbx_test::temp_dir root;
    sandbox::local_runner r(ioc.get_executor(), {.root = root.str()});
    sandbox::instance_spec capped;
    capped.options.limits.memory_bytes = 64 * sbx_test::mib;
    auto refused = finish(ioc, r.try_open(capped));
    BOOST_TEST((!refused && refused.error().code == errc::not_available));
    sandbox::instance_spec spec;
    spec.options.env.inject["FROM_INSTANCE"] = "yes";
    auto inst = open(ioc, r, spec);
    auto a = exec_in(ioc, *inst, sh("echo $FROM_INSTANCE; exit 4"));
    BOOST_TEST(a.result.out.data == "yes\n", a.result.diag);
    BOOST_TEST(a.result.exit_code == 4);
    std::optional<sandbox::exec_outcome> running;
    asio::co_spawn(ioc, inst->try_exec(sh("sleep 30")),
                   [&](std::exception_ptr, sandbox::exec_outcome o) { running = std::move(o); });
    asio::steady_timer t(ioc, 200ms);
    finish(ioc, [&]() -> asio::awaitable<bool> {
        co_await t.async_wait(asio::use_awaitable);
        co_await inst->close();
        co_return true;
    }());
    BOOST_REQUIRE(running);
    BOOST_TEST((running->ec == errc::instance_closed), running->result.diag);
    BOOST_TEST((running->result.status == exec_status::cancelled)); // it ran: not not_started
    auto after = exec_in(ioc, *inst, sh("true"));
    BOOST_TEST((after.ec == errc::instance_closed));
    inst.reset();
    BOOST_TEST(drains(ioc));
    // Through a chain whose defaults carry a timeout: each command's, not the instance's.
    sandbox::exec_options defaults;
    defaults.timeout = 10s;
    auto chain = sandbox::with_defaults(
        std::make_unique<sandbox::local_runner>(ioc.get_executor(),
                                                sandbox::local_runner_options{.root = root.str()}),
        defaults);
    auto chained = open(ioc, *chain);
    auto c = exec_in(ioc, *chained, sh("echo through"));
    BOOST_TEST(c.result.out.data == "through\n", c.result.diag);
    chained.reset();
    chain.reset();
    BOOST_TEST(drains(ioc));
}

// A local instance's sessions are its runner's, narrowed to the instance; its books hold
// only its own, and its close ends those still running.
BOOST_AUTO_TEST_CASE(a_local_instance_has_sessions_of_its_own)
{
    asio::io_context ioc;
    sbx_test::temp_dir root;
    sandbox::local_runner r(ioc.get_executor(), {.root = root.str()});
    sandbox::instance_spec spec;
    spec.options.env.inject["FROM_INSTANCE"] = "yes";
    auto inst = open(ioc, r, spec);
    sandbox::process_manager* pm = inst->sessions();
    BOOST_REQUIRE(pm != nullptr);
    finish(ioc, [&]() -> asio::awaitable<bool> {
        const auto out_spec = sbx_test::shell("sleep 30", "outside");
        const auto in_spec = sbx_test::shell("echo $FROM_INSTANCE; sleep 30", "inside");
        auto outside = co_await r.sessions()->start(out_spec);
        auto s = co_await pm->start(in_spec);
        std::uint64_t at = 0;
        BOOST_TEST(contains(co_await sbx_test::read_until(*s, at, "yes\n"), "yes\n"));
        auto rows = pm->list();
        BOOST_TEST_REQUIRE(rows.size() == 1u);
        BOOST_TEST(rows[0].id == "inside");
        BOOST_TEST(!pm->find("outside"));
        BOOST_TEST(pm->find("inside") == s);
        auto wider = sbx_test::shell("true");
        wider.options.net.mode = sandbox::net_mode::deny_all;
        auto w = co_await pm->try_start(wider);
        BOOST_TEST((!w && w.error().code == errc::validation));
        co_await inst->close();
        BOOST_TEST(!s->running());
        BOOST_TEST(outside->running()); // the runner's own sessions are not the instance's
        const auto after_close = sbx_test::shell("true");
        auto late = co_await pm->try_start(after_close);
        BOOST_TEST((!late && late.error().code == errc::instance_closed));
        co_await s->close();
        co_await outside->close();
        co_return true;
    }());
    inst.reset();
    BOOST_TEST(drains(ioc));
}

BOOST_AUTO_TEST_SUITE_END()
