// test/integration/unix_socket_policy_test.cpp: the bwrap backend's unix-socket policy (the
// worker's connect broker, helper/connect_broker.hpp) against real sockets on the host and a
// hostile command inside (test/helper/sbx_socket_probe.cpp): only the listed host sockets and
// the sandbox's own can be connected to by path, however the command names them or races the
// check; datagram sockets and io_uring cannot be made; the server sees the
// sandbox user's credentials. Each check also runs with the policy off, where the same
// command gets through, so that a check that passes proves the policy did it.
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <sandbox/backend/supervise.hpp>
#include <sandbox/bwrap_runner.hpp>
#include <sandbox/error.hpp>
#include <sandbox/local_runner.hpp>

#include <boost/asio/io_context.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

using sbx_test::host_dir;

// A host listener at `path` anyone may connect to; counts the connections it got.
struct listener
{
    int fd = -1;
    explicit listener(const std::string& path, int backlog = 4096)
    {
        fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
        BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        BOOST_REQUIRE(::listen(fd, backlog) == 0);
        ::chmod(path.c_str(), 0777); // connecting needs write access to the socket
    }
    ~listener()
    {
        if (fd >= 0)
            ::close(fd);
    }
    int release() { return std::exchange(fd, -1); }
    // Accepts what is queued; the number, and the uid of the last peer (-1: none).
    int drain(uid_t* last_uid = nullptr)
    {
        int n = 0;
        while (true)
        {
            const int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0)
                return n;
            ucred cr{};
            socklen_t len = sizeof cr;
            if (last_uid && ::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
                *last_uid = cr.uid;
            ::close(c);
            ++n;
        }
    }
};

// The probe where the sandbox user can run it (a copy under /var/tmp).
const std::string& probe()
{
    static const host_dir dir;
    static const std::string path = [] {
        const auto p = dir.path() / "sbx_socket_probe";
        fs::copy_file(SBX_SOCKET_PROBE, p);
        ::chmod(p.c_str(), 0755);
        return p.string();
    }();
    return path;
}

struct policy_fixture
{
    asio::io_context ioc;
    sbx_test::temp_dir root;
    host_dir hosts;
    std::string listed = (hosts.path() / "listed.sock").string();
    std::string unlisted = (hosts.path() / "unlisted.sock").string();
    listener good{listed}, bad{unlisted};

    policy_fixture() { ::chmod(root.str().c_str(), 0777); }

    sbx_test::run_outcome run(const std::string& script, bool hold = true,
                              sandbox::net_mode mode = sandbox::net_mode::deny_all,
                              std::int64_t max_processes = 0)
    {
        sandbox::bwrap_runner_options o;
        o.root = root.str();
        o.hold_unix_socket_policy = hold;
        sandbox::bwrap_runner r(ioc.get_executor(), o);
        sandbox::exec_request req;
        req.command = "/bin/sh";
        req.args = {"-c", script};
        req.options.net.mode = mode;
        if (mode == sandbox::net_mode::allow_list)
            req.options.net.allow_hosts = {"example.invalid"};
        req.options.net.unix_sockets = {listed};
        req.options.limits.max_processes = max_processes;
        req.options.timeout = 60s;
        return sbx_test::run(ioc, r, std::move(req), 90s);
    }
};

boost::test_tools::assertion_result policy_usable(boost::unit_test::test_unit_id)
{
    if (sandbox::backend::unix_socket_policy_usable() || std::getenv("CI"))
        return true;
    boost::test_tools::assertion_result r(false);
    r.message() << "the unix-socket policy cannot be held here (root and seccomp needed)";
    return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(unix_socket_policy, *boost::unit_test::precondition(policy_usable))

BOOST_FIXTURE_TEST_CASE(the_runner_claims_it, policy_fixture)
{
    sandbox::bwrap_runner_options o;
    o.root = root.str();
    BOOST_TEST(sandbox::bwrap_runner(ioc.get_executor(), o).enforcement().unix_socket_policy);
    o.hold_unix_socket_policy = false;
    BOOST_TEST(!sandbox::bwrap_runner(ioc.get_executor(), o).enforcement().unix_socket_policy);
}

// The listed socket, and the sandbox's own (by path and by a relative name), connect; an
// unlisted host socket outside /tmp and /run, reachable by visibility, does not, in any
// isolated mode, and its server never sees the attempt.
BOOST_FIXTURE_TEST_CASE(only_listed_host_sockets_and_the_sandboxs_own, policy_fixture)
{
    const std::string script = probe() + " connect " + listed + "; " + probe() + " connect " +
                               unlisted + "; " + probe() + " serve /tmp/own.sock";
    const std::string held = "connect ok\nconnect EACCES\nserve ok\nrelative ok\n";
    for (auto mode : {sandbox::net_mode::deny_all, sandbox::net_mode::allow_list})
    {
        auto r = run(script, true, mode);
        BOOST_TEST(!r.ec, r.result.diag);
        BOOST_TEST(r.result.out.data == held, r.result.err.data);
    }
    BOOST_TEST(bad.drain() == 0);
    BOOST_TEST(good.drain() == 2);
    auto off = run(script, false);
    BOOST_TEST(!off.ec, off.result.diag);
    BOOST_TEST(off.result.out.data == "connect ok\nconnect ok\nserve ok\nrelative ok\n");
    BOOST_TEST(bad.drain() == 1);
}

// Under a process cap the fork gate's filter comes first and this one after it (the gate's
// leaves refusing new listeners to this one): both hold.
BOOST_FIXTURE_TEST_CASE(with_a_process_cap_both_filters_hold, policy_fixture)
{
    auto r = run(probe() + " connect " + listed + "; " + probe() + " connect " + unlisted +
                     "; for i in 1 2 3 4 5 6 7 8; do /bin/true; done; echo forked",
                 true, sandbox::net_mode::deny_all, 64);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "connect ok\nconnect EACCES\nforked\n",
               r.result.out.data + r.result.err.data);
    auto capped = run("for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & done; wait", true,
                      sandbox::net_mode::deny_all, 4);
    BOOST_TEST((capped.ec == sandbox::errc::budget_exceeded), capped.ec.message());
    BOOST_TEST(bad.drain() == 0);
}

// Other names for the unlisted socket: a link in the sandbox's /tmp, a relative path that
// climbs out of the working directory, the shell's root link in /proc (a magic link: none
// is followed), and /proc/self (which names the process looking: the broker, which has no
// pid in the sandbox's /proc, so the name does not resolve at all).
// A connect the broker makes blocks as the command's own would (a listed server that
// accepts nothing, its queue full). When the tree ends, the broker's connect is withdrawn
// too: the server never gets a connection from a command that is gone, and the worker keeps
// no thread blocked on it.
BOOST_FIXTURE_TEST_CASE(a_blocked_connect_ends_with_its_tree, policy_fixture)
{
    const std::string stuck_path = (hosts.path() / "stuck.sock").string();
    listener stuck(stuck_path, 0); // one queued connection, then connects block
    sandbox::bwrap_runner_options o;
    o.root = root.str();
    sandbox::bwrap_runner r(ioc.get_executor(), o);
    sandbox::exec_request req;
    req.command = probe();
    req.args = {"fill", stuck_path};
    req.options.net.mode = sandbox::net_mode::deny_all;
    req.options.net.unix_sockets = {stuck_path};
    req.options.timeout = 2s;
    auto out = sbx_test::run(ioc, r, std::move(req), 60s);
    BOOST_TEST(out.result.out.data.find("connected 1\n") != std::string::npos,
               out.result.out.data + out.result.err.data);
    BOOST_TEST(out.result.out.data.find("connected 3\n") == std::string::npos);
    BOOST_TEST(out.result.out.data.find("connect ") == std::string::npos);
    // Room again for one: a connect still pending would now get in.
    const int one = ::accept4(stuck.fd, nullptr, nullptr, SOCK_CLOEXEC);
    BOOST_TEST(one >= 0);
    ::close(one);
    std::this_thread::sleep_for(300ms);
    BOOST_TEST(stuck.drain() == 0);
}

// A listed socket passes while its host path names it. Here the listed file has a second
// name (a hard link, outside the list, which leads to the very same socket), and its service
// removes the listed name during the call while it keeps listening: without the policy the
// command still connects by the other name; with it, that socket is no longer the listed
// one (it is what keeps an inode number the host hands out again from naming any socket).
BOOST_FIXTURE_TEST_CASE(a_listed_socket_removed_by_its_service_no_longer_passes, policy_fixture)
{
    const std::string marker = (hosts.path() / "removed").string();
    const std::string other = (hosts.path() / "other.sock").string();
    const std::string script = probe() + " connect " + other + "; while [ ! -e " + marker +
                               " ]; do sleep 0.05; done; " + probe() + " connect " + other;
    for (bool hold : {true, false})
    {
        BOOST_TEST_REQUIRE(::link(listed.c_str(), other.c_str()) == 0);
        // The host: once the first connection is queued, the listed name goes, then the
        // marker says so.
        std::thread service([&] {
            pollfd p{good.fd, POLLIN, 0};
            if (::poll(&p, 1, 30000) == 1)
                ::unlink(listed.c_str());
            std::ofstream(marker) << "x";
        });
        auto r = run(script, hold);
        service.join();
        BOOST_TEST(!r.ec, r.result.diag);
        BOOST_TEST(r.result.out.data ==
                       (hold ? "connect ok\nconnect EACCES\n" : "connect ok\nconnect ok\n"),
                   r.result.out.data + r.result.err.data);
        BOOST_TEST(good.drain() == (hold ? 1 : 2));
        // The next round's files: the listed socket anew at its path, no marker, no link.
        ::unlink(marker.c_str());
        ::unlink(other.c_str());
        ::close(good.fd);
        good.fd = listener(listed).release();
    }
}

BOOST_FIXTURE_TEST_CASE(no_other_name_reaches_an_unlisted_socket, policy_fixture)
{
    const std::string rel = "../.." + unlisted; // from /tmp/d: /var/tmp/... via /
    auto r = run("ln -s " + unlisted + " /tmp/link && " + probe() +
                 " connect /tmp/link; "
                 "mkdir /tmp/d && cd /tmp/d && " +
                 probe() + " connect " + rel + "; " + probe() + " connect /proc/$$/root" +
                 unlisted + "; " + probe() + " connect /proc/self/root" + unlisted);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data ==
                   "connect EACCES\nconnect EACCES\nconnect EACCES\nconnect ENOENT\n",
               r.result.out.data + r.result.err.data);
    BOOST_TEST(bad.drain() == 0);
    // Without the policy every one of them gets through.
    auto off = run("ln -s " + unlisted + " /tmp/link && " + probe() + " connect /tmp/link; " +
                       probe() + " connect /proc/self/root" + unlisted,
                   false);
    BOOST_TEST(off.result.out.data == "connect ok\nconnect ok\n",
               off.result.out.data + off.result.err.data);
    BOOST_TEST(bad.drain() == 2);
}

// A thread that rewrites the address while another connects through it: whatever the broker
// read is what it connects, so the unlisted server gets nothing, while both outcomes occur.
BOOST_FIXTURE_TEST_CASE(a_thread_that_swaps_the_address_never_gets_through, policy_fixture)
{
    auto r = run(probe() + " race " + listed + " " + unlisted + " 3000");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST_MESSAGE("race: " << r.result.out.data);
    BOOST_TEST(r.result.out.data.rfind("race ok=", 0) == 0, r.result.out.data);
    BOOST_TEST(r.result.out.data.find(" denied=0 ") == std::string::npos, r.result.out.data);
    BOOST_TEST(r.result.out.data.find("race ok=0 ") == std::string::npos, r.result.out.data);
    BOOST_TEST(bad.drain() == 0);
    BOOST_TEST(good.drain() > 0);
}

BOOST_FIXTURE_TEST_CASE(datagram_sockets_and_io_uring_cannot_be_made, policy_fixture)
{
    const std::string script = probe() + " datagram";
    auto r = run(script);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "socket-dgram EACCES\nsocket-raw EACCES\n"
                                    "socketpair-dgram EACCES\nsocketpair-stream ok\n"
                                    "io_uring EPERM\n",
               r.result.err.data);
    auto off = run(script, false);
    BOOST_TEST(!off.ec, off.result.diag);
    BOOST_TEST(
        off.result.out.data.rfind("socket-dgram ok\nsocket-raw ok\nsocketpair-dgram ok\n", 0) == 0,
        off.result.out.data);
}

// The connection is made as the sandbox user: the server's SO_PEERCRED shows that user, not
// the supervisor's root.
BOOST_FIXTURE_TEST_CASE(the_server_sees_the_sandbox_user, policy_fixture)
{
    auto r = run(probe() + " connect " + listed);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "connect ok\n");
    uid_t uid = static_cast<uid_t>(-1);
    BOOST_TEST(good.drain(&uid) == 1);
    BOOST_TEST(uid != 0u);
    BOOST_TEST(uid == 65534u);
}

// From a document: `defaults.net.unix_sockets` passes bwrap's capability gate now, and
// sandbox-run through the entry reaches the listed socket and no other.
BOOST_FIXTURE_TEST_CASE(a_document_lists_the_sockets, policy_fixture)
{
    const auto file = (hosts.path() / "c.yaml").string();
    std::ofstream(file) << "version: v1\nsandboxes:\n  agent:\n    backend: bwrap\n    root: "
                        << root.str()
                        << "\n    defaults:\n      net:\n        mode: allow_list\n"
                           "        allow_hosts: [example.invalid]\n"
                           "        unix_sockets: ["
                        << listed << "]\n";
    auto cli = [&](std::vector<std::string> args) {
        asio::io_context ctx;
        sandbox::local_runner r(ctx.get_executor());
        sandbox::exec_request req;
        req.command = SBX_SANDBOX_RUN;
        req.args = std::move(args);
        req.options.timeout = 60s;
        return sbx_test::run(ctx, r, std::move(req), 90s);
    };
    auto check = cli({"--config", file, "--check"});
    BOOST_TEST(check.result.exit_code == 0, check.result.err.data);
    BOOST_TEST(check.result.out.data.find("\"unix_socket_policy\":true") != std::string::npos,
               check.result.out.data);
    auto ok = cli({"--config", file, "--sandbox", "agent", "--", probe(), "connect", listed});
    BOOST_TEST(ok.result.exit_code == 0, ok.result.err.data);
    BOOST_TEST(ok.result.out.data == "connect ok\n");
    auto no = cli({"--config", file, "--sandbox", "agent", "--", probe(), "connect", unlisted});
    BOOST_TEST(no.result.out.data == "connect EACCES\n", no.result.err.data);
    BOOST_TEST(good.drain() == 1);
    BOOST_TEST(bad.drain() == 0);
}

BOOST_AUTO_TEST_SUITE_END()
