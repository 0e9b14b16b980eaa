// bench/unix_policy_bench.cpp: what the bwrap backend's unix-socket policy costs (every
// connect() of the tree made by the supervisor's worker: docs/backends.md, "Unix-socket
// policy"), against the same runner with the policy off, side by side in one run.
//
// Cases (one JSON line per figure; ratio = value / baseline):
//   connect_unix_own     inside one deny_all sandbox, python3 connects N times to a unix socket
//                        it serves itself under /tmp (connect, accept, close): us per connect
//   connect_tcp_loopback the same over TCP to 127.0.0.1 inside the sandbox (the egress proxy's
//                        path under allow_list): us per connect
//   exec_true            one deny_all exec of /bin/true (the filter installed at each start,
//                        no connect): median us
//
// Usage: unix_policy_bench [--rounds R] [--connects N] [--execs E] [--quick]. Needs root,
// bwrap and python3 (--quick: 1 round, 50 connects, 2 execs: the smoke test).
#include "common.hpp"

#include <sandbox/backend/supervise.hpp>
#include <sandbox/bwrap_runner.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& why)
{
    std::fprintf(stderr, "unix_policy_bench: %s\n", why.c_str());
    std::exit(1);
}

const std::string& root()
{
    static const std::string dir = [] {
        std::string d = "/var/tmp/sbx-unix-policy-bench-" + std::to_string(::getpid());
        if (std::system(("mkdir -p " + d + " && chmod 777 " + d).c_str()) != 0)
            fail("cannot make " + d);
        static std::string remove = "rm -rf " + d;
        std::atexit([] { (void)std::system(remove.c_str()); });
        return d;
    }();
    return dir;
}

// Runs `script` under /bin/sh in a deny_all bwrap sandbox, the policy held or not; its
// stdout, or the test fails.
std::string run(const std::string& script, bool hold)
{
    asio::io_context ioc;
    sandbox::bwrap_runner_options o;
    o.root = root();
    o.hold_unix_socket_policy = hold;
    sandbox::bwrap_runner r(ioc.get_executor(), o);
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", script};
    req.options.net.mode = sandbox::net_mode::deny_all;
    req.options.timeout = std::chrono::seconds(120);
    std::string out;
    sandbox::async_exec(
        r, std::move(req), [&](boost::system::error_code ec, sandbox::exec_result x) {
            if (ec || x.exit_code != 0)
                fail("the sandboxed run failed: " + ec.message() + " " + x.err.data);
            out = x.out.data;
        });
    ioc.run();
    return out;
}

// python3 connecting `n` times inside the sandbox: us per connect.
double connects(bool unix_socket, int n, bool hold)
{
    const std::string family = unix_socket ? "socket.AF_UNIX" : "socket.AF_INET";
    const std::string where = unix_socket ? "'/tmp/bench.sock'" : "('127.0.0.1', 0)";
    const std::string script =
        "python3 -c \"\nimport socket, time\nl = socket.socket(" + family + ")\nl.bind(" + where +
        ")\nl.listen(4096)\na = l.getsockname()\nn = " + std::to_string(n) +
        "\nt = time.perf_counter()\nfor i in range(n):\n    c = socket.socket(" + family +
        ")\n    c.connect(a)\n    s, _ = l.accept()\n    s.close()\n    c.close()\n"
        "print((time.perf_counter() - t) / n * 1e6)\n\"";
    const std::string out = run(script, hold);
    try
    {
        return std::stod(out);
    }
    catch (const std::exception&)
    {
        fail("python printed no figure: " + out);
    }
}

double exec_true(bool hold)
{
    const auto t0 = clock_type::now();
    run("true", hold);
    return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

} // namespace

int main(int argc, char** argv)
{
    int rounds = 5, n = 2000, execs = 20;
    for (int i = 1; i < argc; i += 2)
    {
        const std::string a = argv[i];
        if (a == "--quick")
        {
            rounds = 1, n = 50, execs = 2;
            --i;
            continue;
        }
        if (i + 1 >= argc)
            fail("option " + a + " needs a value");
        const int v = std::atoi(argv[i + 1]);
        if (a == "--rounds")
            rounds = v;
        else if (a == "--connects")
            n = v;
        else if (a == "--execs")
            execs = v;
        else
            fail("unknown option " + a);
    }
    if (!sandbox::backend::unix_socket_policy_usable())
    {
        std::fprintf(stderr, "unix_policy_bench: the unix-socket policy cannot be held here "
                             "(root and seccomp needed); nothing measured\n");
        return 77; // the smoke test's "skipped"
    }
    bench::print_machine(stderr);
    auto unix_own = bench::measure_rounds(rounds, [&] {
        const double b = connects(true, n, false);
        return std::pair{connects(true, n, true), b};
    });
    bench::print_json("unix_policy_bench", "connect_unix_own", unix_own.ours_median(), "us",
                      unix_own.base_median());
    auto tcp = bench::measure_rounds(rounds, [&] {
        const double b = connects(false, n, false);
        return std::pair{connects(false, n, true), b};
    });
    bench::print_json("unix_policy_bench", "connect_tcp_loopback", tcp.ours_median(), "us",
                      tcp.base_median());
    auto start = bench::measure_rounds(execs, [&] {
        const double b = exec_true(false);
        return std::pair{exec_true(true), b};
    });
    bench::print_json("unix_policy_bench", "exec_true", start.ours_median(), "us",
                      start.base_median());
    return 0;
}
