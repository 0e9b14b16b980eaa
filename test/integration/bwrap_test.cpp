// test/integration/bwrap_test.cpp: the bwrap backend on the real bubblewrap, run as root
// (as CI is): the filesystem view, masks, the pid and network namespaces, no capabilities,
// the environment kept off the command line, the tree kill, timeouts, sessions, refusals.
#include <boost/test/unit_test.hpp>

#include "session_support.hpp"
#include "support.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/error.hpp>
#include <sandbox/process_manager.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sandbox::errc;
using sandbox::exec_status;

using sbx_test::contains;

using sbx_test::host_dir;

// The host user a root caller's commands run as by default (nobody and nogroup, else
// 65534); anyone else's run as themselves.
std::pair<uid_t, gid_t> sandbox_ids()
{
    if (::geteuid() != 0)
        return {::geteuid(), ::getegid()};
    const passwd* pw = ::getpwnam("nobody");
    const group* gr = ::getgrnam("nogroup");
    return {pw ? pw->pw_uid : 65534, gr ? gr->gr_gid : 65534};
}

// Gives `dir` and everything in it to the sandbox user, as a root caller must for what its
// commands are to change (the root and the writable paths, with what lies in them).
void give_to_sandbox_user(const std::filesystem::path& dir)
{
    const auto [uid, gid] = sandbox_ids();
    BOOST_REQUIRE(::lchown(dir.c_str(), uid, gid) == 0);
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
        BOOST_REQUIRE(::lchown(e.path().c_str(), uid, gid) == 0);
}

// A fresh temp dir that the sandbox user owns.
struct sandbox_dir : sbx_test::temp_dir
{
    sandbox_dir() { give_to_sandbox_user(path()); }
};

// The helper program where the sandbox user can run it: a copy under /var/tmp (visible
// inside, unlike /tmp; reachable by any user, unlike a build tree in a private directory
// such as CI's mktemp -d), counted by sbx_test::helper_processes like the original.
const std::string& target_inside()
{
    static const host_dir dir;
    static const std::string path = [] {
        const auto p = dir.path() / "sbx_test_target";
        std::filesystem::copy_file(sbx_test::target, p);
        sbx_test::count_as_helper(p.string());
        return p.string();
    }();
    return path;
}

struct bwrap_fixture
{
    asio::io_context ioc;
    sandbox_dir root;
    host_dir outside; // host files the sandbox must not reach
    sandbox::bwrap_runner runner;

    explicit bwrap_fixture(sandbox::bwrap_runner_options o = {})
        : runner(ioc.get_executor(), with_root(std::move(o), root.str()))
    {
    }
    ~bwrap_fixture()
    {
        auto left = sbx_test::helper_processes();
        BOOST_CHECK_MESSAGE(left.empty(), "helper processes survived the test");
        for (pid_t p : left)
            ::kill(p, SIGKILL);
    }
    static sandbox::bwrap_runner_options with_root(sandbox::bwrap_runner_options o,
                                                   std::string r)
    {
        o.root = std::move(r);
        return o;
    }

    sbx_test::run_outcome sh(const std::string& script, sandbox::exec_options o = {})
    {
        return run_sh(ioc, runner, script, std::move(o));
    }

    // `script` for /bin/sh, 20 s unless `o` sets a timeout.
    static sandbox::exec_request sh_request(const std::string& script, sandbox::exec_options o = {})
    {
        sandbox::exec_request req;
        req.command = "/bin/sh";
        req.args = {"-c", script};
        req.options = std::move(o);
        if (req.options.timeout == std::chrono::nanoseconds(0))
            req.options.timeout = 20s;
        return req;
    }

    // `script` run by /bin/sh on `r` (20 s unless `o` sets a timeout).
    static sbx_test::run_outcome run_sh(asio::io_context& ioc, sandbox::runner& r,
                                        const std::string& script, sandbox::exec_options o = {})
    {
        return sbx_test::run(ioc, r, sh_request(script, std::move(o)));
    }
};

// The suite needs a usable bwrap: on a host where its probe fails, the suite is skipped with
// the reason (Boost.Test prints it). Under CI (CI set), it runs anyway and fails loudly: CI
// installs bubblewrap and runs as root, so an unusable bwrap there is a defect.
boost::test_tools::assertion_result bwrap_usable(boost::unit_test::test_unit_id)
{
    static const std::optional<sandbox::failure> why = [] {
        asio::io_context ioc;
        sandbox::bwrap_runner_options o; // a root the sandbox user can write
        o.root = std::filesystem::temp_directory_path().string();
        sandbox::bwrap_runner r(ioc.get_executor(), o);
        std::optional<sandbox::failure> out;
        asio::co_spawn(ioc, r.check(), [&](std::exception_ptr, std::optional<sandbox::failure> f) {
            out = std::move(f);
        });
        ioc.run();
        return out;
    }();
    if (!why || std::getenv("CI"))
        return true;
    boost::test_tools::assertion_result res(false);
    res.message() << "bwrap is not usable on this host, so the bwrap tests are skipped: "
                  << why->diag.message;
    return res;
}


// Runs a shell line on the host, outside any sandbox; its exit status (-1: killed).
int on_host(const std::string& line)
{
    const int s = std::system(line.c_str());
    return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

// git on the host in `dir`, with no global or system configuration.
std::string host_git(const std::filesystem::path& dir)
{
    return "cd '" + dir.string() + "' && GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git "
           "-c user.name=t -c user.email=t@t -c protocol.file.allow=always "
           "-c safe.directory='*' ";
}

// A repository with one commit at `dir`, made on the host and given to the sandbox user (a
// root caller's commands run as that user: only the protection may stop a plant, not the
// repository's owner).
void host_repo(const std::filesystem::path& dir, bool for_the_sandbox = true)
{
    std::filesystem::create_directories(dir);
    BOOST_REQUIRE(on_host(host_git(dir) + "init -q . && " + host_git(dir) +
                          "commit -q --allow-empty -m init") == 0);
    if (for_the_sandbox)
        give_to_sandbox_user(dir);
}

// The start of a hostile command's script: hook.sh in the work directory touches `marker`
// (outside the sandbox, which cannot touch it itself) when the host runs it, and $FSM is a
// git config that makes every `git status` run it (core.fsmonitor).
std::string plant_prelude(const std::filesystem::path& marker)
{
    return "printf '#!/bin/sh\\ntouch " + marker.string() + "\\n' > hook.sh; chmod +x hook.sh; "
           "FSM=\"[core]\\n\\tfsmonitor = $PWD/hook.sh\\n\"; ";
}

// Sets (or, with nullptr, unsets) an environment variable for the guard's lifetime.
class env_guard
{
public:
    env_guard(std::string name, const char* value) : name_(std::move(name))
    {
        if (const char* old = std::getenv(name_.c_str()))
            old_ = old;
        value ? ::setenv(name_.c_str(), value, 1) : ::unsetenv(name_.c_str());
    }
    ~env_guard() { old_ ? ::setenv(name_.c_str(), old_->c_str(), 1) : ::unsetenv(name_.c_str()); }
    env_guard(const env_guard&) = delete;
    env_guard& operator=(const env_guard&) = delete;

private:
    std::string name_;
    std::optional<std::string> old_;
};

// A file written at `path` only when nothing is there (with its directory, when missing);
// removed on destruction with the directory it made, so what existed stays exactly as it was.
class planted_file
{
public:
    planted_file(std::filesystem::path path, const std::string& text) : path_(std::move(path))
    {
        namespace fs = std::filesystem;
        if (fs::exists(fs::symlink_status(path_)))
            return;
        if (!fs::exists(path_.parent_path()))
            made_dir_ = fs::create_directory(path_.parent_path());
        std::ofstream(path_) << text;
        planted_ = true;
    }
    ~planted_file()
    {
        std::error_code ec;
        if (planted_)
            std::filesystem::remove(path_, ec);
        if (made_dir_)
            std::filesystem::remove(path_.parent_path(), ec);
    }
    planted_file(const planted_file&) = delete;
    planted_file& operator=(const planted_file&) = delete;
    const std::filesystem::path& path() const { return path_; }
    bool planted() const { return planted_; }

private:
    std::filesystem::path path_;
    bool planted_ = false;
    bool made_dir_ = false;
};

// The host's SysV shared-memory segment ids.
std::vector<std::string> sysv_segments()
{
    std::ifstream in("/proc/sysvipc/shm");
    std::string line;
    std::getline(in, line); // the header
    std::vector<std::string> ids;
    while (std::getline(in, line))
    {
        std::istringstream fields(line);
        std::string key, id;
        fields >> key >> id;
        ids.push_back(id);
    }
    return ids;
}

} // namespace

BOOST_AUTO_TEST_SUITE(bwrap, *boost::unit_test::precondition(bwrap_usable))

BOOST_FIXTURE_TEST_CASE(runs_a_command_and_passes_its_exit_code_and_output, bwrap_fixture)
{
    auto r = sh("echo out; echo err >&2; exit 3");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.exit_code == 3);
    BOOST_TEST(r.result.out.data == "out\n");
    BOOST_TEST(r.result.err.data == "err\n");
    BOOST_TEST(r.result.diag.backend == "bwrap");
    auto e = runner.enforcement();
    BOOST_TEST(e.filesystem_bounds);
    BOOST_TEST(e.tree_kill);
}

BOOST_FIXTURE_TEST_CASE(the_host_is_read_only_and_the_root_writable, bwrap_fixture)
{
    const auto probe = outside.path() / "written-from-inside";
    auto r = sh("touch /etc/sbx-bwrap-probe 2>/dev/null && echo wrote-etc; "
                "touch " + probe.string() + " 2>/dev/null && echo wrote-outside; "
                "echo data > in-root && pwd");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(!contains(r.result.out.data, "wrote-"));
    BOOST_TEST(r.result.out.data == root.str() + "\n"); // it starts in the root
    BOOST_TEST(!std::filesystem::exists("/etc/sbx-bwrap-probe"));
    BOOST_TEST(!std::filesystem::exists(probe));
    std::ifstream in(root.path() / "in-root");
    std::string line;
    std::getline(in, line);
    BOOST_TEST(line == "data");
}

BOOST_FIXTURE_TEST_CASE(tmp_is_private, bwrap_fixture)
{
    const auto host_file = std::filesystem::path("/tmp") /
                           ("sbx-bwrap-host-" + std::to_string(::getpid()));
    std::ofstream(host_file) << "host";
    auto r = sh("test -e " + host_file.string() + " && echo visible; "
                "echo mine > /tmp/sbx-bwrap-inside-$$ && echo wrote");
    std::filesystem::remove(host_file);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "wrote\n"); // /tmp writable, the host's not visible
    for (const auto& e : std::filesystem::directory_iterator("/tmp"))
        BOOST_TEST(!contains(e.path().filename().string(), "sbx-bwrap-inside-"));
}

BOOST_FIXTURE_TEST_CASE(host_processes_are_out_of_sight_and_reach, bwrap_fixture)
{
    auto r = sh("kill -0 " + std::to_string(::getpid()) +
                " 2>/dev/null && echo reached; ls /proc | grep -c '^[0-9]'; echo pid=$$; "
                "cat /proc/1/comm; cat /proc/1/environ > /dev/null 2>&1 && echo read-init; "
                "kill -KILL 1 2>/dev/null; kill -TERM 1 2>/dev/null; echo init-survives");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(!contains(r.result.out.data, "reached"));
    BOOST_TEST(std::stoi(r.result.out.data) < 10); // the init, the shell, ls, grep
    // pid 1 is our status init: not dumpable (no ptrace, no reading its memory or
    // environment) and, as the namespace's init, out of the command's reach.
    BOOST_TEST(contains(r.result.out.data, "pid=2\nsandbox-init\ninit-survives\n"),
               r.result.out.data);
}

BOOST_FIXTURE_TEST_CASE(no_capabilities_even_for_root_no_remount_no_nested_namespaces,
                        bwrap_fixture)
{
    auto r = sh("grep CapEff /proc/self/status; id -u; "
                "mount -o remount,rw / 2>/dev/null && echo remounted; "
                "unshare -U true 2>/dev/null && echo nested");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(contains(r.result.out.data, "CapEff:\t0000000000000000"));
    BOOST_TEST(!contains(r.result.out.data, "remounted"));
    BOOST_TEST(!contains(r.result.out.data, "nested"));
}

BOOST_FIXTURE_TEST_CASE(deny_all_leaves_only_loopback_and_masks_run, bwrap_fixture)
{
    sandbox::exec_options o;
    o.net.mode = sandbox::net_mode::deny_all;
    auto r = sh("grep -c ':' /proc/net/dev; grep -o 'lo:' /proc/net/dev; ls -A /run | wc -l", o);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "1\nlo:\n0\n"); // one interface, loopback; /run empty
}

BOOST_FIXTURE_TEST_CASE(the_environment_never_reaches_the_command_line, bwrap_fixture)
{
    std::string inside, bwrap_cmdline;
    sbx_test::run_coro(
        ioc,
        [&]() -> asio::awaitable<void> {
            sandbox::session_spec spec;
            spec.command = "/bin/sh";
            spec.args = {"-c", "echo \"$SBX_SECRET\"; tr '\\0' ' ' < /proc/1/cmdline; echo; "
                               "echo done-reading; read x"};
            spec.options.env.allow = std::vector<std::string>{"PATH"};
            spec.options.env.inject["SBX_SECRET"] = "s3cr3t-value";
            auto s = co_await runner.sessions()->start(spec);
            std::uint64_t at = 0;
            inside = co_await sbx_test::read_until(*s, at, "done-reading\n");
            // bwrap's command line, seen from the host (any local user can read it); read
            // once the command ran, as right after the spawn it may not be set up yet.
            std::ifstream f("/proc/" + std::to_string(s->pid()) + "/cmdline");
            bwrap_cmdline.assign(std::istreambuf_iterator<char>(f), {});
            co_await s->close();
        },
        30s);
    BOOST_TEST(inside.rfind("s3cr3t-value\n/proc/self/fd/4 --init 3 -- /bin/sh", 0) == 0, inside);
    BOOST_TEST(inside.find("s3cr3t-value", 1) == std::string::npos);
    const std::string argv0 = bwrap_cmdline.substr(0, bwrap_cmdline.find('\0'));
    BOOST_TEST(argv0.ends_with("bwrap"), bwrap_cmdline);
    BOOST_TEST(contains(bwrap_cmdline, "--unshare-pid"));
    BOOST_TEST(!contains(bwrap_cmdline, "s3cr3t-value"));
}

BOOST_AUTO_TEST_CASE(an_exec_is_in_a_cgroup_whenever_enforcement_says_the_cgroup_holds_it)
{
    // The context's first execution decides where its helper keeps its trees: a probe of
    // bwrap run first without the runner's cgroup setting once left every bwrap exec outside
    // a cgroup while enforcement() said the cgroup killed the tree (a probe runs first when
    // check() or a session asks for it).
    bwrap_fixture f;
    const auto e = f.runner.enforcement();
    auto [ec, r] = f.sh("true");
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(r.in_cgroup == (e.tree_kill_by == "cgroup"),
               "in_cgroup " << r.in_cgroup << ", tree_kill_by " << e.tree_kill_by);
}

BOOST_AUTO_TEST_CASE(read_deny_paths_are_masked)
{
    host_dir secrets; // readable by the sandbox unless masked
    std::filesystem::create_directories(secrets.path() / "keys");
    std::ofstream(secrets.path() / "keys" / "id") << "private";
    std::ofstream(secrets.path() / "token") << "t0ken";
    sandbox::bwrap_runner_options o;
    o.read_deny = {(secrets.path() / "keys").string(), (secrets.path() / "token").string(),
                   (secrets.path() / "absent").string()};
    bwrap_fixture f(o);
    std::ofstream(secrets.path() / "visible") << "shown";
    auto r = f.sh("cat " + (secrets.path() / "keys" / "id").string() + " 2>/dev/null; "
                  "ls -A " + (secrets.path() / "keys").string() + "; cat " +
                  (secrets.path() / "token").string() + "; cat " +
                  (secrets.path() / "visible").string() + "; echo end");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "shownend\n"); // the unmasked neighbour is readable
}

// The credential masks follow the password database's home, not only HOME: with HOME unset
// or pointing elsewhere, a key under the real home stays hidden (and the other HOME's too).
BOOST_AUTO_TEST_CASE(credentials_are_masked_whatever_home_says)
{
    namespace fs = std::filesystem;
    const struct passwd* pw = ::getpwuid(::geteuid());
    BOOST_REQUIRE(pw && pw->pw_dir);
    const fs::path home = fs::canonical(pw->pw_dir);
    planted_file key(home / ".ssh" / ("sbx-test-key-" + std::to_string(::getpid())), "key");
    planted_file npmrc(home / ".npmrc", "token");
    host_dir other;
    std::ofstream(other.path() / ".npmrc") << "other";
    std::string cat = "cat " + key.path().string();
    if (npmrc.planted())
        cat += " " + npmrc.path().string();
    else
        BOOST_TEST_MESSAGE("the real home has a .npmrc of its own: left alone, not read");
    for (const char* env : {static_cast<const char*>(nullptr), other.path().c_str()})
        BOOST_TEST_CONTEXT("HOME=" << (env ? env : "(unset)"))
        {
            if (env)
                cat += " " + (other.path() / ".npmrc").string();
            std::optional<bwrap_fixture> f;
            {
                env_guard g("HOME", env); // the runner reads it when built
                f.emplace();
            }
            auto r = f->sh(cat + " 2>/dev/null; echo end");
            BOOST_TEST(!r.ec, r.result.diag);
            BOOST_TEST(r.result.out.data == "end\n");
        }
}

// A caller whose home cannot be known (a uid with no password database entry, HOME unset) is
// refused with not_available, and the report says why instead of claiming filesystem bounds;
// with a HOME the same caller runs.
BOOST_AUTO_TEST_CASE(a_caller_without_a_known_home_is_refused)
{
    namespace fs = std::filesystem;
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0 || ::getpwuid(54321))
    {
        BOOST_TEST_MESSAGE("skipped: needs root, setpriv and uid 54321 free");
        return;
    }
    host_dir programs, root;
    fs::permissions(programs.path(), fs::perms(0755));
    fs::copy_file(SBX_SANDBOX_RUN, programs.path() / "sandbox-run");
    fs::copy_file(SBX_SUPERVISOR, programs.path() / "sandbox-supervisor");
    BOOST_REQUIRE(::chown(root.path().c_str(), 54321, 54321) == 0);
    const fs::path out = programs.path() / "out";
    auto as_stranger = [&](const std::string& home, const std::string& args) {
        return on_host("setpriv --reuid=54321 --regid=54321 --clear-groups env " + home +
                       " SANDBOX_SUPERVISOR=" + (programs.path() / "sandbox-supervisor").string() +
                       " " + (programs.path() / "sandbox-run").string() +
                       " --backend bwrap --root " + root.path().string() + " " + args + " > " +
                       out.string() + " 2>&1");
    };
    auto output = [&] {
        std::ifstream in(out);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    BOOST_TEST(as_stranger("-u HOME", "--enforcement") == 0);
    BOOST_TEST(contains(output(), "\"unavailable\":\"the caller's home directory is unknown"),
               output());
    BOOST_TEST(!contains(output(), "\"filesystem_bounds\":true"));
    BOOST_TEST(as_stranger("-u HOME", "-- /bin/echo ran") == 125);
    BOOST_TEST(contains(output(), "home directory is unknown"), output());
    BOOST_TEST(!contains(output(), "ran"));
    BOOST_TEST(as_stranger("HOME=" + programs.path().string(), "-- /bin/echo ran") == 0,
               output());
    BOOST_TEST(output() == "ran\n");
}

// Each sandbox has its own /dev/shm and IPC namespace: a 64 MiB file there and SysV
// shared-memory segments go with it; the host's /dev/shm and segments are as they were.
BOOST_FIXTURE_TEST_CASE(shared_memory_is_private_and_gone_with_the_sandbox, bwrap_fixture)
{
    const std::string name = "sbx-test-" + std::to_string(::getpid());
    const auto before = sysv_segments();
    auto r = sh("head -c 67108864 /dev/zero > /dev/shm/" + name + " && du -m /dev/shm/" + name +
                " | cut -f1; for i in 1 2 3 4; do ipcmk -M 1048576 >/dev/null; done; "
                "tail -n +2 /proc/sysvipc/shm | wc -l");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "64\n4\n", r.result.err.data);
    BOOST_TEST(!std::filesystem::exists("/dev/shm/" + name));
    BOOST_TEST(sysv_segments() == before, boost::test_tools::per_element());
}

// Files in the private /tmp and /dev/shm are memory the sampler does not see: under a memory
// cap each holds at most the cap, and /dev itself takes no file.
BOOST_FIXTURE_TEST_CASE(private_tmpfs_are_bounded_by_the_memory_cap, bwrap_fixture)
{
    sandbox::exec_options o;
    o.limits.memory_bytes = 32 << 20;
    auto r = sh("head -c 40M /dev/zero > /dev/shm/big || echo shm-full; "
                "head -c 40M /dev/zero > /tmp/big || echo tmp-full; "
                "rm /tmp/big; head -c 1M /dev/zero > /tmp/small && echo tmp-usable; "
                "touch /dev/x 2>/dev/null || echo dev-read-only", o);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "shm-full\ntmp-full\ntmp-usable\ndev-read-only\n");
    BOOST_TEST(contains(r.result.err.data, "No space left on device"), r.result.err.data);
}

BOOST_AUTO_TEST_CASE(unsafe_writable_paths_and_roots_are_refused)
{
    for (auto set : {std::function<void(sandbox::bwrap_runner_options&)>(
                         [](auto& o) { o.writable_paths = {"/"}; }),
                     std::function<void(sandbox::bwrap_runner_options&)>(
                         [](auto& o) { o.writable_paths = {"/no/such/dir"}; })})
    {
        sandbox::bwrap_runner_options o;
        set(o);
        bwrap_fixture f(o);
        auto r = f.sh("true");
        BOOST_TEST((r.ec == errc::validation));
        BOOST_TEST(r.result.diag.limit == "writable_paths");
    }
}

BOOST_AUTO_TEST_CASE(nothing_escapes_the_tree)
{
    bwrap_fixture f;
    // A daemon that leaves the session: killed when the command ends.
    auto r = f.sh("setsid " + target_inside() + " sleep 30000 > /dev/null 2>&1 & "
                  "sleep 0.1; kill -0 $! && echo alive");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "alive\n"); // it really ran
    BOOST_TEST(sbx_test::wait_gone(sbx_test::helper_processes()));
    // A timeout kills everything inside.
    sandbox::exec_options o;
    o.timeout = 500ms;
    auto t = f.sh(target_inside() + " sleep 30000 & " + target_inside() + " sleep 30000", o);
    BOOST_TEST((t.result.status == exec_status::timed_out), t.result.err.data);
    BOOST_TEST(sbx_test::wait_gone(sbx_test::helper_processes()));
    // A double-forked daemon (fork, setsid, fork, stdio closed) under a timeout: gone too.
    auto d = f.sh(target_inside() + " double-fork 30000 --then sleep 30000", o);
    BOOST_TEST((d.result.status == exec_status::timed_out), d.result.err.data);
    BOOST_TEST(sbx_test::wait_gone(sbx_test::helper_processes()));
}

// deny_all: a server listening on the host's loopback is out of reach (the sandbox has a
// loopback of its own); without deny_all the same connect succeeds.
BOOST_FIXTURE_TEST_CASE(deny_all_cannot_reach_the_hosts_loopback, bwrap_fixture)
{
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_REQUIRE(::listen(l, 8) == 0);
    socklen_t len = sizeof a;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    const std::string port = std::to_string(ntohs(a.sin_port));
    const std::string probe = "bash -c 'echo > /dev/tcp/127.0.0.1/" + port +
                              "' 2>/dev/null && echo connected || echo refused";
    sandbox::exec_options deny;
    deny.net.mode = sandbox::net_mode::deny_all;
    auto r = sh(probe, deny);
    auto open = sh(probe);
    ::close(l);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "refused\n");
    BOOST_TEST(open.result.out.data == "connected\n"); // the probe itself works
}

BOOST_FIXTURE_TEST_CASE(caps_follow_the_processes_inside, bwrap_fixture)
{
    sandbox::exec_options o;
    o.timeout = 20s;
    o.limits.max_processes = 8;
    auto r = sh("while :; do sleep 5 & done", o); // a fork bomb inside the pid namespace
    BOOST_TEST((r.result.status == exec_status::budget_exceeded));
    BOOST_TEST((r.result.budget == sandbox::budget_kind::processes));
    // The fork gate counts inside the namespace too, exactly (one task forks at a time):
    // bwrap, the status init, sh and five sleeps are the cap; the sixth sleep is refused.
    BOOST_TEST(r.result.diag.observed == 9, r.result.diag);
    sandbox::exec_options c;
    c.timeout = 20s;
    c.limits.cpu_millicores = 10; // 200 ms of cpu
    auto busy = sh("while :; do :; done", c);
    BOOST_TEST((busy.result.status == exec_status::budget_exceeded));
    BOOST_TEST((busy.result.budget == sandbox::budget_kind::cpu));
}

BOOST_FIXTURE_TEST_CASE(a_terminal_inside_the_sandbox, bwrap_fixture)
{
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", "tty >/dev/null && echo is-a-tty; stty size"};
    req.tty = sandbox::terminal_size{33, 99};
    req.options.timeout = 20s;
    auto r = sbx_test::run(ioc, runner, std::move(req));
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "is-a-tty\r\n33 99\r\n");
}

BOOST_FIXTURE_TEST_CASE(refusals_are_classified, bwrap_fixture)
{
    sandbox::exec_options o;
    o.net.mode = sandbox::net_mode::allow_list;
    o.net.allow_hosts = {"example.com"};
    o.net.mitm = sandbox::mitm_policy{};
    o.net.mitm->enabled = true;
    o.net.mitm->inspect_bodies = true; // bodies for hooks, and the call has none
    auto mitm = sh("true", o);
    BOOST_TEST((mitm.ec == errc::validation));
    BOOST_TEST(mitm.result.diag.limit == "net.mitm.inspect_bodies");
    sandbox::exec_request missing;
    missing.command = "no-such-command-here";
    missing.options.env.inject["PATH"] = "/usr/bin:/bin";
    BOOST_TEST((sbx_test::run(ioc, runner, missing).ec == errc::not_found));
    sandbox::exec_options outside_root;
    outside_root.work_dir = "/etc";
    BOOST_TEST((sh("true", outside_root).ec == errc::forbidden));
}

// Issue 33, item 4: a root caller's sandbox user gets a home it can use, and commands are
// looked up as the shell does: a PATH entry it cannot search (here one of mode 0700, as
// /root's are) is skipped and named, a missing command is not_found (127), a file found but
// not executable is forbidden (126), a command after the unsearchable entry runs.
BOOST_FIXTURE_TEST_CASE(the_sandbox_user_gets_a_home_and_a_shell_s_path_lookup, bwrap_fixture)
{
    if (::geteuid() != 0)
        return; // only a root caller has a sandbox user
    host_dir dirs;
    ::chmod(dirs.path().c_str(), 0755);
    const auto closed = dirs.path() / "closed", open = dirs.path() / "open";
    std::filesystem::create_directories(closed);
    std::filesystem::create_directories(open);
    ::chmod(closed.c_str(), 0700);
    ::chmod(open.c_str(), 0755);
    std::ofstream(open / "plain") << "#!/bin/sh\necho plain\n"; // 0644: not executable
    const std::string path = closed.string() + ":" + open.string() + ":/usr/bin:/bin";

    sandbox::exec_request missing;
    missing.command = "no-such-command-here";
    missing.options.env.inject["PATH"] = path;
    auto m = sbx_test::run(ioc, runner, missing);
    BOOST_TEST((m.ec == errc::not_found), m.result.diag.message);
    BOOST_TEST(contains(m.result.diag.message, "cannot search these PATH entries"),
               m.result.diag.message);
    BOOST_TEST(contains(m.result.diag.message, closed.string()), m.result.diag.message);
    BOOST_TEST(!contains(m.result.diag.message, open.string()), m.result.diag.message);

    sandbox::exec_request plain = missing;
    plain.command = "plain";
    BOOST_TEST((sbx_test::run(ioc, runner, plain).ec == errc::forbidden));

    ::setenv("HOME", "/root", 0); // the caller's home, as a root shell has it
    sandbox::exec_options o;
    o.env.allow = std::vector<std::string>{"HOME"};
    o.env.inject["PATH"] = path;
    auto home = sh("echo \"$HOME\"; touch \"$HOME/.written\" && echo wrote", o);
    BOOST_TEST(!home.ec, home.result.diag.message);
    BOOST_TEST(home.result.out.data == "/tmp\nwrote\n", home.result.err.data);
    o.env.inject["HOME"] = "/somewhere";
    BOOST_TEST(sh("echo \"$HOME\"", o).result.out.data == "/somewhere\n");
}

BOOST_AUTO_TEST_CASE(a_missing_bwrap_is_not_available)
{
    sandbox::bwrap_runner_options o;
    o.bwrap_path = "/no/such/bwrap";
    bwrap_fixture f(o);
    auto r = f.sh("true");
    BOOST_TEST((r.ec == errc::not_available));
    BOOST_TEST(contains(r.result.diag.message, "bubblewrap"));
    BOOST_TEST(!f.runner.enforcement().filesystem_bounds);
}

BOOST_FIXTURE_TEST_CASE(sandbox_run_backend_bwrap, sbx_test::local_fixture)
{
    give_to_sandbox_user(root.path());
    sandbox::exec_request req;
    req.command = SBX_SANDBOX_RUN;
    req.args = {"--backend", "bwrap", "--root", root.str(), "--", "/bin/sh", "-c",
                "touch /etc/sbx-x 2>/dev/null || echo read-only; echo hi > f; exit 4"};
    req.options.timeout = 20s;
    auto r = run(std::move(req));
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.exit_code == 4);
    BOOST_TEST(r.result.out.data == "read-only\n");
    BOOST_TEST(std::filesystem::exists(root.path() / "f"));
}

BOOST_FIXTURE_TEST_CASE(sandbox_run_bwrap_view_flags_and_enforcement, sbx_test::local_fixture)
{
    give_to_sandbox_user(root.path());
    host_dir secret;
    std::ofstream(secret.path() / "key") << "k";
    std::ofstream(root.path() / "Makefile") << "all:\n";
    sandbox::exec_request req;
    req.command = SBX_SANDBOX_RUN;
    req.args = {"--backend", "bwrap", "--root", root.str(), "--net", "deny", "--read-deny",
                secret.path().string(), "--write-deny", "Makefile", "--", "/bin/sh", "-c",
                "cat " + (secret.path() / "key").string() + " 2>/dev/null || echo hidden; "
                "echo x >> Makefile 2>/dev/null || echo kept; grep -c ':' /proc/net/dev"};
    req.options.timeout = 20s;
    auto r = run(req);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.exit_code == 0);
    BOOST_TEST(r.result.out.data == "hidden\nkept\n1\n");
    // The local backend cannot enforce a filesystem view: refused, nothing runs.
    req.args = {"--backend", "local", "--root", root.str(), "--write-deny", "Makefile", "--",
                "/bin/true"};
    auto local = run(req);
    BOOST_TEST(local.result.exit_code == 125);
    BOOST_TEST(contains(local.result.err.data, "--backend bwrap"));
    // The report runs the probe; a bad option shows as the reason.
    req.args = {"--backend", "bwrap", "--enforcement"};
    auto e = run(req);
    BOOST_TEST(contains(e.result.out.data, "\"filesystem_bounds\":true"), e.result.out.data);
    req.args = {"--backend", "bwrap", "--writable", "/", "--enforcement"};
    auto bad = run(req);
    BOOST_TEST(contains(bad.result.out.data, "\"unavailable\":\"writable_paths / cannot be"),
               bad.result.out.data);
}

BOOST_FIXTURE_TEST_CASE(sessions_run_inside_the_sandbox, bwrap_fixture)
{
    sbx_test::run_coro(
        ioc,
        [&]() -> asio::awaitable<void> {
            sandbox::session_spec spec;
            spec.command = "/bin/sh";
            spec.args = {"-c", "read x; echo got-$x; grep -c '^[0-9]' /dev/null; "
                               "touch /etc/sbx-x 2>/dev/null || echo ro"};
            auto s = co_await runner.sessions()->start(spec);
            co_await s->write("hi\n");
            const auto d = co_await sbx_test::read_all(*s);
            const std::string all = d.out + d.err;
            BOOST_TEST(contains(all, "got-hi"));
            BOOST_TEST(contains(all, "ro"));
            co_await s->close();
        },
        20s);
}


BOOST_FIXTURE_TEST_CASE(git_and_rc_files_stay_read_only_inside_the_root, bwrap_fixture)
{
    namespace fs = std::filesystem;
    fs::create_directories(root.path() / ".git" / "hooks");
    std::ofstream(root.path() / ".git" / "config") << "[core]\n";
    std::ofstream(root.path() / ".bashrc") << "# host\n";
    give_to_sandbox_user(root.path());
    auto r = sh("echo evil > .git/hooks/pre-commit || echo no-hook; "
                "echo evil >> .git/config || echo no-config; "
                "echo evil >> .bashrc || echo no-rc; "
                "echo ok > .git/HEAD && echo ok > notes && echo rest-writable");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "no-hook\nno-config\nno-rc\nrest-writable\n");
    BOOST_TEST(!fs::exists(root.path() / ".git" / "hooks" / "pre-commit"));
    std::ifstream cfg(root.path() / ".git" / "config"), rc(root.path() / ".bashrc");
    std::string c((std::istreambuf_iterator<char>(cfg)), {}), b((std::istreambuf_iterator<char>(rc)), {});
    BOOST_TEST(c == "[core]\n");
    BOOST_TEST(b == "# host\n");
}

// Where .git does not exist, a command cannot create it (so it cannot plant a hook that the
// host runs later), even while another command in the same root ends; nothing is left.
BOOST_FIXTURE_TEST_CASE(a_missing_git_cannot_be_created_and_nothing_is_left, bwrap_fixture)
{
    namespace fs = std::filesystem;
    std::string first_out;
    sbx_test::run_coro(
        ioc,
        [&]() -> asio::awaitable<void> {
            sandbox::session_spec spec;
            spec.command = "/bin/sh";
            spec.args = {"-c", "read x; mkdir -p .git/hooks 2>/dev/null || echo blocked; "
                               "git init -q . 2>/dev/null || echo no-init"};
            auto s = co_await runner.sessions()->start(spec);
            // A second command in the same root starts and ends meanwhile.
            sandbox::exec_request other;
            other.command = "/bin/sh";
            other.args = {"-c", "test -d .git && echo stand-in"};
            other.options.timeout = 20s;
            auto o = co_await runner.exec(std::move(other));
            BOOST_TEST(o.out.data == "stand-in\n");
            co_await s->write("go\n");
            auto w = co_await s->wait();
            BOOST_TEST((w.status == exec_status::exited));
            first_out = (co_await sbx_test::read_all(*s)).out;
            co_await s->close();
        },
        30s);
    BOOST_TEST(first_out.rfind("blocked\n", 0) == 0, first_out);
    BOOST_TEST(!fs::exists(root.path() / ".git")); // the stand-in went with the last command
}

// The stand-ins go one per turn of the caller's loop after the command (a removal can take a
// quarter of a millisecond; twenty in one handler held the loop 5 ms), before the result
// comes. A loop stopped halfway through them, and its context then destroyed with the rest
// of those turns queued, still leaves nothing behind.
BOOST_AUTO_TEST_CASE(stand_ins_go_in_turns_before_the_result_and_with_the_context)
{
    namespace fs = std::filesystem;
    const std::vector<std::string> names{".bashrc", ".git",   ".zshrc",   ".vscode",
                                         ".idea",   ".envrc", ".profile", ".claude"};
    for (const bool stop_halfway : {false, true})
    {
        sandbox_dir root;
        auto present = [&] {
            int n = 0;
            for (const auto& p : names)
                n += fs::exists(root.path() / p);
            return n;
        };
        bool done = false, stopped = false;
        {
            asio::io_context ioc;
            sandbox::bwrap_runner_options o;
            o.root = root.str();
            sandbox::bwrap_runner runner(ioc.get_executor(), o);
            sandbox::exec_request req;
            req.command = "/bin/sh";
            req.args = {"-c", "test -d .bashrc && test -d .git && test -d .vscode && echo held"};
            req.options.timeout = 20s;
            sandbox::async_exec(runner, std::move(req),
                                [&](boost::system::error_code ec, sandbox::exec_result r) {
                                    BOOST_TEST(!ec, r.diag);
                                    BOOST_TEST(r.out.data == "held\n");
                                    BOOST_TEST(present() == 0); // gone before the result
                                    done = true;
                                });
            // Each turn: once some stand-ins went and some are left, stop the loop there.
            int most = 0, turns = 0;
            std::function<void()> watch = [&] {
                const int now = present();
                most = std::max(most, now);
                if (stop_halfway && now > 0 && now < most)
                {
                    stopped = true;
                    ioc.stop();
                    return;
                }
                if (!done && ++turns < 5'000'000)
                    asio::post(ioc, watch);
            };
            asio::post(ioc, watch);
            ioc.run_for(30s);
            BOOST_TEST(most == static_cast<int>(names.size()));
        }
        BOOST_TEST(done == !stop_halfway);
        BOOST_TEST(stopped == stop_halfway);
        BOOST_TEST(present() == 0);
        BOOST_TEST(sbx_test::helper_processes().empty());
    }
}

BOOST_AUTO_TEST_CASE(extra_write_deny_paths_and_their_refusals)
{
    namespace fs = std::filesystem;
    sandbox::bwrap_runner_options o;
    o.write_deny = {"Makefile", "ci/deploy.sh"};
    bwrap_fixture f(o);
    std::ofstream(f.root.path() / "Makefile") << "all:\n";
    fs::create_directories(f.root.path() / "ci");
    give_to_sandbox_user(f.root.path());
    auto r = f.sh("echo x >> Makefile || echo no-make; "
                  "echo x > ci/deploy.sh || echo no-deploy; echo x > ci/other && echo other");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "no-make\nno-deploy\nother\n");
    BOOST_TEST(fs::file_size(f.root.path() / "Makefile") == 5u);
    BOOST_TEST(!fs::exists(f.root.path() / "ci" / "deploy.sh"));
    // A missing directory on the way is kept whole: nothing can be made below it.
    auto gone = f.sh("mkdir -p .git/hooks 2>/dev/null || echo no-git; test -d .git && echo "
                     "stand-in; LC_ALL=C ls");
    BOOST_TEST(gone.result.out.data == "no-git\nstand-in\nMakefile\nci\n");
    BOOST_TEST(!fs::exists(f.root.path() / ".git"));
    sandbox::bwrap_runner_options bad;
    bad.write_deny = {"../outside"};
    bwrap_fixture g(bad);
    auto refused = g.sh("true");
    BOOST_TEST((refused.ec == errc::validation));
    BOOST_TEST(refused.result.diag.limit == "write_deny");
}

BOOST_FIXTURE_TEST_CASE(tmpdir_is_the_private_tmp, bwrap_fixture)
{
    sandbox::exec_options o;
    o.env.allow = std::vector<std::string>{"PATH", "TMPDIR"};
    ::setenv("TMPDIR", outside.path().c_str(), 1); // a host directory, read-only inside
    auto r = sh("echo $TMPDIR; touch \"$TMPDIR/x\" && echo writable", o);
    ::unsetenv("TMPDIR");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "/tmp\nwritable\n");
    o.env.inject["TMPDIR"] = root.str(); // an explicit choice stands
    auto chosen = sh("echo $TMPDIR", o);
    BOOST_TEST(chosen.result.out.data == root.str() + "\n");
}

namespace {

// A listening unix socket at `path` (connects succeed while the backlog has room).
struct unix_listener
{
    int fd = -1;
    explicit unix_listener(const std::string& path)
    {
        fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
        BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        BOOST_REQUIRE(::listen(fd, 8) == 0);
    }
    ~unix_listener() { ::close(fd); }
};

} // namespace

BOOST_AUTO_TEST_CASE(host_unix_sockets_only_where_allowed)
{
    sbx_test::temp_dir dir; // under /tmp: hidden by the private /tmp
    const std::string sock = (dir.path() / "agent.sock").string();
    unix_listener l(sock);
    ::chmod(sock.c_str(), 0777); // connecting needs write access to the socket
    sandbox::exec_options deny;
    deny.net.mode = sandbox::net_mode::deny_all;
    {
        bwrap_fixture f;
        auto r = f.sh(target_inside() + " connect-unix " + sock, deny);
        BOOST_TEST(!r.ec, r.result.diag);
        BOOST_TEST(r.result.out.data == "refused ENOENT\n");
    }
    sandbox::bwrap_runner_options o;
    o.unix_sockets = {sock};
    bwrap_fixture f(o);
    auto r = f.sh(target_inside() + " connect-unix " + sock, deny);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "connected\n");
    // An entry must be a socket.
    sandbox::bwrap_runner_options bad;
    bad.unix_sockets = {"/etc/hostname"};
    bwrap_fixture g(bad);
    auto refused = g.sh("true");
    BOOST_TEST((refused.ec == errc::validation));
    BOOST_TEST(refused.result.diag.limit == "unix_sockets");
    // A socket in a writable directory could be swapped for a link to anything: refused.
    sandbox::bwrap_runner_options swappable;
    swappable.writable_paths = {dir.str()};
    swappable.unix_sockets = {sock};
    bwrap_fixture h(swappable);
    auto r2 = h.sh("true");
    BOOST_TEST((r2.ec == errc::validation));
    BOOST_TEST(contains(r2.result.diag.message, "writable directory"));
}

BOOST_AUTO_TEST_CASE(extra_flags_through_the_allow_list)
{
    sandbox::bwrap_runner_options o;
    o.extra_flags = {"--hostname", "box", "--tmpfs", "/srv"};
    bwrap_fixture f(o);
    auto r = f.sh("hostname; touch /srv/x && echo srv-tmpfs");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "box\nsrv-tmpfs\n");
    // A flag that would widen the policy, a flag without its value, a bind that would show a
    // hidden path elsewhere: refused.
    host_dir secrets;
    for (auto flags : {std::vector<std::string>{"--bind", "/", "/"},
                       std::vector<std::string>{"--cap-add", "ALL"},
                       std::vector<std::string>{"--hostname"},
                       std::vector<std::string>{"--ro-bind", secrets.path().string(), "/x"}})
    {
        sandbox::bwrap_runner_options bad;
        bad.extra_flags = flags;
        bad.read_deny = {secrets.path().string()};
        bwrap_fixture g(bad);
        auto refused = g.sh("true");
        BOOST_TEST((refused.ec == errc::validation), flags[0]);
        BOOST_TEST(refused.result.diag.limit == "extra_flags");
        BOOST_TEST(!g.runner.enforcement().unavailable.empty());
    }
}

BOOST_FIXTURE_TEST_CASE(enforcement_after_the_probe, bwrap_fixture)
{
    std::optional<sandbox::failure> why{sandbox::make_failure(errc::internal, "unset")};
    asio::co_spawn(ioc, runner.check(), [&](std::exception_ptr, std::optional<sandbox::failure> f) {
        why = std::move(f);
    });
    ioc.run();
    BOOST_TEST(!why.has_value());
    const auto e = runner.enforcement();
    BOOST_TEST(e.filesystem_bounds);
    BOOST_TEST(e.unavailable.empty());
    // A bwrap that cannot start its sandbox: every call and the report say why.
    sandbox::bwrap_runner_options o;
    o.bwrap_path = "/bin/false";
    bwrap_fixture f(o);
    asio::co_spawn(f.ioc, f.runner.check(), [&](std::exception_ptr, std::optional<sandbox::failure> r) {
        why = std::move(r);
    });
    f.ioc.run();
    BOOST_TEST_REQUIRE(why.has_value());
    BOOST_TEST((why->code == errc::not_available));
    BOOST_TEST(!f.runner.enforcement().filesystem_bounds);
    BOOST_TEST(contains(f.runner.enforcement().unavailable, "namespaces"));
}

// A "bwrap" script in `dir` that logs each run's arguments to dir/runs, then runs `body`.
std::filesystem::path logging_bwrap(const host_dir& dir, const std::string& body)
{
    ::chmod(dir.path().c_str(), 0777); // the sandbox user runs the script and writes its log
    const auto script = dir.path() / "bwrap";
    std::ofstream(script) << "#!/bin/sh\n"
                             "echo \"$*\" >> "
                          << (dir.path() / "runs").string() << "\n"
                          << body;
    ::chmod(script.c_str(), 0755);
    return script;
}

// Runs of a logging_bwrap: all of them, and the availability probes (/bin/true) among them.
std::pair<int, int> bwrap_runs(const host_dir& dir)
{
    std::ifstream in(dir.path() / "runs");
    int all = 0, probes = 0;
    for (std::string line; std::getline(in, line); ++all)
        probes += line.find("/bin/true") != std::string::npos;
    return {all, probes};
}

// No probe before a call: a call's own run is the probe (one bwrap per call, not two: the
// one-shot `sandbox-run` paid a whole sandbox start for it). A command that ran settles it:
// check() then runs nothing either.
BOOST_AUTO_TEST_CASE(the_first_call_runs_no_probe)
{
    host_dir dir;
    sandbox::bwrap_runner_options o;
    o.bwrap_path = logging_bwrap(dir, "exec /usr/bin/bwrap \"$@\"\n").string();
    bwrap_fixture f(o);
    auto r = f.sh("echo ran");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "ran\n");
    BOOST_TEST((bwrap_runs(dir) == std::pair{1, 0}));
    std::optional<sandbox::failure> why{sandbox::make_failure(errc::internal, "unset")};
    asio::co_spawn(
        f.ioc, f.runner.check(),
        [&](std::exception_ptr, std::optional<sandbox::failure> w) { why = std::move(w); });
    f.ioc.restart();
    f.ioc.run();
    BOOST_TEST(!why.has_value());
    BOOST_TEST((bwrap_runs(dir) == std::pair{1, 0})); // settled by the run: no probe
}

// A host where bwrap cannot build its sandbox: the first call's own run fails before the
// command (not_available, nothing ran); that failure asks the probe, whose verdict the call
// returns and every later call gets at once, without starting bwrap again.
BOOST_AUTO_TEST_CASE(a_first_call_bwrap_cannot_set_up_asks_the_probe)
{
    host_dir dir;
    sandbox::bwrap_runner_options o;
    o.bwrap_path = logging_bwrap(dir, "echo 'bwrap: No permissions to create new namespace, "
                                      "likely because the kernel does not allow "
                                      "non-privileged user namespaces.' >&2\nexit 1\n")
                       .string();
    bwrap_fixture f(o);
    auto first = f.sh("echo ran");
    BOOST_TEST((first.ec == errc::not_available));
    BOOST_TEST((first.result.status == sandbox::exec_status::not_started));
    BOOST_TEST(contains(first.result.diag.message, "cannot create its namespaces"),
               first.result.diag);
    BOOST_TEST(contains(first.result.diag.message, "No permissions to create new namespace"));
    BOOST_TEST(first.result.out.data.empty());
    BOOST_TEST((bwrap_runs(dir) == std::pair{2, 1})); // the call's run, then the probe
    BOOST_TEST(contains(f.runner.enforcement().unavailable, "namespaces"));
    f.ioc.restart();
    auto second = f.sh("echo ran");
    BOOST_TEST((second.ec == errc::not_available));
    BOOST_TEST(contains(second.result.diag.message, "cannot create its namespaces"));
    BOOST_TEST((bwrap_runs(dir) == std::pair{2, 1})); // refused without a run
}

// A run that fails for want of resources decides nothing. The "bwrap" here fails its first
// run as bwrap does when the host is out of processes, then runs the real one. Five calls
// start together: the one whose run failed gets not_available (its command never ran) and
// asks the probe, which settles bwrap as usable; the other four run. Later calls run without
// a probe. (Before runs were their own probes, a probe that failed so marked bwrap unusable
// for the runner's life.)
BOOST_AUTO_TEST_CASE(a_run_short_of_resources_decides_nothing)
{
    host_dir dir;
    const std::string once = (dir.path() / "once").string();
    sandbox::bwrap_runner_options o;
    o.bwrap_path = logging_bwrap(dir, "if mkdir " + once +
                                          " 2>/dev/null; then\n"
                                          "  echo 'bwrap: Creating new namespace failed: Resource "
                                          "temporarily unavailable' >&2; exit 1\n"
                                          "fi\n"
                                          "exec /usr/bin/bwrap \"$@\"\n")
                       .string();
    bwrap_fixture f(o);
    std::vector<std::optional<sbx_test::run_outcome>> got(5);
    for (auto& g : got)
    {
        sandbox::exec_request req;
        req.command = "/bin/echo";
        req.args = {"ran"};
        req.options.timeout = 20s;
        sandbox::async_exec(f.runner, std::move(req),
                            [&g](boost::system::error_code ec, sandbox::exec_result r) {
                                g = sbx_test::run_outcome{ec, std::move(r)};
                            });
    }
    f.ioc.run_for(60s);
    int ran = 0, refused = 0;
    for (const auto& g : got)
    {
        BOOST_TEST_REQUIRE(g.has_value());
        if (!g->ec)
        {
            ++ran;
            BOOST_TEST(g->result.out.data == "ran\n");
            continue;
        }
        ++refused;
        BOOST_TEST((g->ec == errc::not_available), g->ec.message());
        BOOST_TEST((g->result.status == sandbox::exec_status::not_started));
        BOOST_TEST(contains(g->result.diag.message, "Resource temporarily unavailable"),
                   g->result.diag);
    }
    BOOST_TEST(ran == 4);
    BOOST_TEST(refused == 1);
    // The probe, unless a command that ran had settled it before the failure came back.
    const auto [runs, probes] = bwrap_runs(dir);
    BOOST_TEST(probes <= 1);
    BOOST_TEST(runs == 5 + probes);
    BOOST_TEST(f.runner.enforcement().unavailable.empty());
    f.ioc.restart();
    auto next = f.sh("echo again");
    BOOST_TEST(!next.ec, next.result.diag);
    BOOST_TEST(next.result.out.data == "again\n");
    BOOST_TEST((bwrap_runs(dir) == std::pair{runs + 1, probes})); // settled: no probe
}

// A "bwrap" that takes `seconds` to start when the command line holds `marker` (as a host
// whose processes wait for the CPU does: 200 sandboxes set up at once on 2 cores take
// seconds each), then runs the real one.
std::filesystem::path slow_bwrap(const host_dir& dir, const std::string& marker, int seconds)
{
    ::chmod(dir.path().c_str(), 0755); // the sandbox user runs the script
    const auto script = dir.path() / "bwrap";
    std::ofstream(script) << "#!/bin/sh\n"
                             "case \"$*\" in *"
                          << marker << "*) sleep " << seconds
                          << ";; esac\n"
                             "exec /usr/bin/bwrap \"$@\"\n";
    ::chmod(script.c_str(), 0755);
    return script;
}

// The timeout counts from when the command starts inside the sandbox: a set-up slower than
// the whole timeout does not end the call (before, the timeout counted from bwrap's spawn,
// so calls timed out on a loaded host before their command ran). A command that outlives
// its timeout once it runs is still stopped by it.
BOOST_AUTO_TEST_CASE(a_slow_set_up_does_not_count_in_the_timeout)
{
    host_dir dir;
    sandbox::bwrap_runner_options o;
    o.bwrap_path = slow_bwrap(dir, "slow-set-up", 2).string();
    bwrap_fixture f(o);
    sandbox::exec_options quick;
    quick.timeout = 1s;
    auto ran = f.sh("echo slow-set-up", quick);
    BOOST_TEST(!ran.ec, ran.ec.message() << ": " << ran.result.diag);
    BOOST_TEST(ran.result.out.data == "slow-set-up\n");
    BOOST_TEST(ran.result.wall_time >= 2s); // the set-up did take longer than the timeout
    f.ioc.restart();
    auto held = f.sh("sleep 30 # slow-set-up", quick);
    BOOST_TEST(held.ec == sandbox::errc::timeout, held.ec.message());
    BOOST_TEST(held.result.status == sandbox::exec_status::timed_out);
    BOOST_TEST(held.result.diag.limit == "timeout");
    BOOST_TEST(held.result.wall_time < 20s);
}

// A set-up that never ends is bounded by `setup_timeout`: the call ends `errc::timeout`
// with `diag.limit` "setup_timeout", nothing ran, the tree (the stuck wrapper) is killed.
BOOST_AUTO_TEST_CASE(a_set_up_past_its_bound_ends_the_call)
{
    host_dir dir;
    sandbox::bwrap_runner_options o;
    o.bwrap_path = slow_bwrap(dir, "stuck-set-up", 300).string();
    o.setup_timeout = 1s;
    bwrap_fixture f(o);
    sandbox::exec_options forever; // no timeout of its own: only the set-up bound stops it
    forever.timeout = 0s;
    sandbox::exec_request req;
    req.command = "/bin/echo";
    req.args = {"stuck-set-up"};
    req.options = forever;
    auto stuck = sbx_test::run(f.ioc, f.runner, std::move(req));
    BOOST_TEST(stuck.ec == sandbox::errc::timeout, stuck.ec.message());
    BOOST_TEST(stuck.result.status == sandbox::exec_status::timed_out);
    BOOST_TEST(stuck.result.diag.limit == "setup_timeout", stuck.result.diag);
    BOOST_TEST(stuck.result.out.data.empty());
    BOOST_TEST(stuck.result.wall_time < 60s);
    f.ioc.restart();
    auto fine = f.sh("echo fine");
    BOOST_TEST(!fine.ec, fine.result.diag);
    BOOST_TEST(fine.result.out.data == "fine\n");
}

// What the command itself did, not what bwrap folds it into: a signal death is `signaled`
// with that signal; an exit status of 128+N by choice is `exited`.
BOOST_FIXTURE_TEST_CASE(exit_status_as_the_command_saw_it, bwrap_fixture)
{
    auto killed = sh("kill -USR1 $$");
    BOOST_TEST(!killed.ec, killed.result.diag);
    BOOST_TEST((killed.result.status == exec_status::signaled));
    BOOST_TEST(killed.result.signal == SIGUSR1);
    auto chosen = sh("exit 138");
    BOOST_TEST((chosen.result.status == exec_status::exited));
    BOOST_TEST(chosen.result.exit_code == 138);
    BOOST_TEST(chosen.result.signal == 0);
}

// The command is looked up inside: a program only the host sees is not_found, named as the
// caller named it; one that is not executable is refused as on the local backend.
BOOST_FIXTURE_TEST_CASE(command_lookup_inside_the_sandbox, bwrap_fixture)
{
    sbx_test::temp_dir host_only; // under /tmp: hidden by the private /tmp
    const auto prog = host_only.path() / "tool";
    std::filesystem::copy_file("/bin/true", prog);
    sandbox::exec_request req;
    req.command = prog.string();
    req.options.timeout = 20s;
    auto r = sbx_test::run(ioc, runner, req);
    BOOST_TEST((r.ec == errc::not_found), r.result.diag);
    BOOST_TEST(r.result.diag.limit == "command");
    BOOST_TEST(r.result.diag.path == prog.string());
    BOOST_TEST((r.result.status == exec_status::not_started));
    std::ofstream(root.path() / "script") << "#!/bin/sh\necho hi\n";
    req.command = "./script"; // exists inside, not executable
    auto denied = sbx_test::run(ioc, runner, req);
    BOOST_TEST((denied.ec == errc::forbidden), denied.result.diag);
    BOOST_TEST(denied.result.diag.limit == "command");
    req.command = "sh"; // on the PATH inside
    req.args = {"-c", "echo found"};
    auto found = sbx_test::run(ioc, runner, req);
    BOOST_TEST(found.result.out.data == "found\n");
}

// bwrap failing to build the sandbox is an error with its message, not the command's exit 1.
BOOST_AUTO_TEST_CASE(a_sandbox_that_cannot_be_set_up_is_an_error)
{
    sandbox::bwrap_runner_options o;
    o.extra_flags = {"--remount-ro", "/no/such/dir"};
    bwrap_fixture f(o);
    auto r = f.sh("echo ran");
    BOOST_TEST((r.ec == errc::not_available), r.result.diag);
    BOOST_TEST((r.result.status == exec_status::not_started));
    BOOST_TEST(r.result.diag.limit == "backend");
    BOOST_TEST(contains(r.result.diag.message, "could not set up the sandbox: bwrap:"),
               r.result.diag.message);
    BOOST_TEST(r.result.out.data.empty());
}

// Signals a session sends reach the command inside; bwrap and the init survive them.
BOOST_FIXTURE_TEST_CASE(session_signals_reach_the_command, bwrap_fixture)
{
    sbx_test::run_coro(
        ioc,
        [&]() -> asio::awaitable<void> {
            // Everything a session wrote so far, read on until `want` shows (or the end).
            struct reader
            {
                std::shared_ptr<sandbox::session> s;
                std::uint64_t at = 0;
                std::string seen{};
                asio::awaitable<std::string> until(std::string want)
                {
                    seen += co_await sbx_test::read_until(*s, at, want);
                    co_return seen;
                }
            };
            // Pipes: SIGINT to the group; the shell traps it and goes on.
            sandbox::session_spec spec;
            spec.command = "/bin/sh";
            // The trapped signal interrupts the first read; the second one gets the line.
            spec.args = {"-c", "trap 'echo got-int' INT; echo ready; "
                               "read x || read x; echo line-$x; exit 7"};
            auto s = co_await runner.sessions()->start(spec);
            reader rs{s};
            (void)co_await rs.until("ready\n");
            BOOST_TEST(!s->signal(sandbox::session_signal::interrupt));
            (void)co_await rs.until("got-int\n");
            co_await s->write("a\n");
            auto out = co_await rs.until("line-a\n");
            BOOST_TEST(contains(out, "got-int\nline-a\n"), out);
            BOOST_TEST(!s->close_input());
            auto w = co_await s->wait();
            BOOST_TEST((w.status == exec_status::exited));
            BOOST_TEST(w.exit_code == 7);
            co_await s->close();
            // terminate(): the command dies of SIGTERM, which is `terminated`.
            spec.args = {"-c", "echo ready; exec sleep 30"};
            auto t = co_await runner.sessions()->start(spec);
            reader rt{t};
            (void)co_await rt.until("ready\n");
            auto tr = co_await t->terminate(5s);
            BOOST_TEST((tr.status == exec_status::terminated));
            BOOST_TEST(tr.signal == SIGTERM);
            co_await t->close();
            // A terminal: Ctrl-C (VINTR) interrupts the command only.
            spec.tty = sandbox::terminal_size{24, 80};
            spec.args = {"-c", "trap 'echo got-int' INT; echo ready; "
                               "read x || read x; echo line-$x"};
            auto p = co_await runner.sessions()->start(spec);
            reader rp{p};
            (void)co_await rp.until("ready");
            BOOST_TEST(!p->signal(sandbox::session_signal::interrupt));
            (void)co_await rp.until("got-int");
            co_await p->write("b\n");
            auto pout = co_await rp.until("line-b");
            BOOST_TEST(contains(pout, "line-b"), pout);
            co_await p->close();
        },
        60s);
}

// The command has no controlling terminal (the supervisor's session has none), so it cannot
// push keystrokes into anyone's terminal even without bwrap's --new-session.
BOOST_FIXTURE_TEST_CASE(no_terminal_to_push_keystrokes_into, bwrap_fixture)
{
    auto r = sh("true 2>/dev/null </dev/tty || echo no-tty");
    BOOST_TEST(r.result.out.data == "no-tty\n");
}

// The directories on the way to a protected path are pinned: renaming .git away (with its
// read-only hooks and config) and making a new one fails; an empty .git (left by a crash, or
// fresh) is kept read-only whole; existing commondir and worktree config stay read-only.
BOOST_FIXTURE_TEST_CASE(protected_paths_cannot_be_renamed_away, bwrap_fixture)
{
    namespace fs = std::filesystem;
    fs::create_directories(root.path() / ".git" / "hooks");
    std::ofstream(root.path() / ".git" / "config") << "[core]\n";
    std::ofstream(root.path() / ".git" / "commondir") << ".\n";
    give_to_sandbox_user(root.path());
    auto r = sh("mv .git .git.o 2>/dev/null || echo no-move; rm -rf .git 2>/dev/null; "
                "mkdir -p .git/hooks 2>/dev/null; echo evil > .git/hooks/pre-commit || echo no-hook; "
                "echo ../evil > .git/commondir || echo no-commondir; "
                "echo ok > .git/HEAD && echo git-usable");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "no-move\nno-hook\nno-commondir\ngit-usable\n");
    BOOST_TEST(!fs::exists(root.path() / ".git.o"));
    BOOST_TEST(!fs::exists(root.path() / ".git" / "hooks" / "pre-commit"));
    BOOST_TEST(fs::exists(root.path() / ".git" / "config"));
    // An empty .git: nothing can be put in it.
    sandbox_dir other;
    fs::create_directories(other.path() / ".git");
    sandbox::bwrap_runner_options o;
    o.root = other.str();
    sandbox::bwrap_runner in_other(ioc.get_executor(), o);
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", "mkdir .git/hooks 2>/dev/null || echo no-hooks; "
                      "echo x > .git/HEAD 2>/dev/null || echo no-head"};
    req.options.timeout = 20s;
    auto e = sbx_test::run(ioc, in_other, req);
    BOOST_TEST(!e.ec, e.result.diag);
    BOOST_TEST(e.result.out.data == "no-hooks\nno-head\n");
    BOOST_TEST(fs::is_empty(other.path() / ".git"));
}

// The host never runs what the command planted in the repository: for each path git reads on
// the host later (commondir, config, config.worktree, hooks), missing or not, the command's
// plant fails, and the host's next `git status` and `git commit` run nothing of it.
BOOST_FIXTURE_TEST_CASE(git_on_the_host_runs_nothing_the_command_planted, bwrap_fixture)
{
    namespace fs = std::filesystem;
    host_repo(root.path());
    BOOST_REQUIRE(on_host(host_git(root.path()) + "config extensions.worktreeConfig true") == 0);
    fs::remove_all(root.path() / ".git" / "hooks"); // missing, as in a fresh clone's hookless copy
    const fs::path marker = outside.path() / "pwned";
    const std::vector<std::pair<const char*, std::string>> plants{
        {"commondir", "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/ && "
                      "printf \"$FSM\" > evil/config && echo $PWD/evil > .git/commondir"},
        {"config", "printf \"$FSM\" >> .git/config"},
        {"config.worktree", "printf \"$FSM\" > .git/config.worktree"},
        {"hooks", "mkdir -p .git/hooks && cp hook.sh .git/hooks/pre-commit"},
    };
    for (const auto& [name, script] : plants)
        BOOST_TEST_CONTEXT(name)
        {
            auto r = sh(plant_prelude(marker) + "(" + script + ") 2>/dev/null && echo planted "
                        "|| echo refused");
            BOOST_TEST(!r.ec, r.result.diag);
            BOOST_TEST(r.result.out.data == "refused\n");
            BOOST_TEST(on_host(host_git(root.path()) + "status >/dev/null && " +
                               host_git(root.path()) + "commit -q --allow-empty -m x") == 0);
            BOOST_TEST(!fs::exists(marker));
        }
    // The stand-ins went with the commands: the repository is as it was.
    for (const char* gone : {"commondir", "config.worktree", "hooks"})
        BOOST_TEST(!fs::exists(root.path() / ".git" / gone), gone);
}

// The same for a linked worktree's and a submodule's own git directories (under .git/worktrees
// and .git/modules) and .gitmodules: git on the host in the worktree, the submodule and the
// superproject runs nothing.
BOOST_FIXTURE_TEST_CASE(git_on_the_host_runs_nothing_planted_for_worktrees_or_submodules,
                        bwrap_fixture)
{
    namespace fs = std::filesystem;
    host_repo(outside.path() / "subsrc", false); // cloned by the host's git: stays root's
    host_repo(root.path());
    const std::string git = host_git(root.path());
    BOOST_REQUIRE(on_host(git + "submodule -q add " + (outside.path() / "subsrc").string() +
                          " sub && " + git + "commit -qm sub && " + git + "worktree add -q " +
                          (outside.path() / "wt").string() + " 2>/dev/null") == 0);
    give_to_sandbox_user(root.path()); // what the host's git just made too
    const fs::path marker = outside.path() / "pwned";
    const std::string evil = "mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/ && "
                             "printf \"$FSM\" > evil/config && ";
    const std::vector<std::pair<const char*, std::string>> plants{
        {"modules", "printf \"$FSM\" >> .git/modules/sub/config"},
        {"worktrees", evil + "echo $PWD/evil > .git/worktrees/wt/commondir"},
        {".gitmodules", "printf '[submodule \"sub\"]\\n\\tpath = sub\\n\\turl = ./evil\\n' "
                        ">> .gitmodules"},
    };
    for (const auto& [name, script] : plants)
        BOOST_TEST_CONTEXT(name)
        {
            auto r = sh(plant_prelude(marker) + "(" + script + ") 2>/dev/null && echo planted "
                        "|| echo refused");
            BOOST_TEST(r.result.out.data == "refused\n");
            BOOST_TEST(on_host(git + "status >/dev/null && " + host_git(root.path() / "sub") +
                               "status >/dev/null && " + host_git(outside.path() / "wt") +
                               "status >/dev/null && " + git + "submodule -q update") == 0);
            BOOST_TEST(!fs::exists(marker));
        }
}

// Tool and editor files (and git's, where missing) cannot be created; the stand-ins that keep
// them are gone after the run, and git inside ignores them (empty directories).
BOOST_FIXTURE_TEST_CASE(tool_and_editor_files_cannot_be_planted_and_nothing_is_left,
                        bwrap_fixture)
{
    namespace fs = std::filesystem;
    host_repo(root.path());
    auto listing = [](const fs::path& d) {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(d))
            names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    };
    const auto top = listing(root.path()), git = listing(root.path() / ".git");
    std::string script;
    for (const char* p : {".vscode/tasks.json", ".idea/workspace.xml", ".mcp.json", ".ripgreprc",
                          ".claude/commands/x.md", ".claude/agents/x.md", ".envrc", ".bashrc",
                          ".profile", ".zshrc", ".gitconfig", ".gitmodules",
                          ".git/modules/x/config", ".git/worktrees/x/commondir"})
        script += std::string("mkdir -p $(dirname ") + p + ") 2>/dev/null; echo x > " + p +
                  " 2>/dev/null && echo planted " + p + "; ";
    auto r = sh(script + "git status --porcelain --untracked-files=all; echo end");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "end\n");
    BOOST_TEST(listing(root.path()) == top, boost::test_tools::per_element());
    BOOST_TEST(listing(root.path() / ".git") == git, boost::test_tools::per_element());
}

// Ordinary git use inside the sandbox still works in an existing repository (status, add,
// commit, branch, log), with the stand-ins in place; the host sees the commit.
BOOST_FIXTURE_TEST_CASE(git_inside_the_sandbox_still_works, bwrap_fixture)
{
    host_repo(root.path());
    auto r = sh("G='git -c user.name=t -c user.email=t@t'; echo a > f && $G add f && "
                "$G commit -qm inside && $G branch -q side && $G status --porcelain && "
                "$G log --oneline | wc -l");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "2\n", r.result.err.data);
    BOOST_TEST(on_host(host_git(root.path()) + "log -1 --format=%s | grep -qx inside && " +
                       host_git(root.path()) + "fsck --no-progress >/dev/null") == 0);
}

// A caller killed mid-run leaves its stand-ins (it cannot remove them), but never a broken
// repository: git on the host still works, and the next command keeps them read-only.
BOOST_FIXTURE_TEST_CASE(a_caller_killed_mid_run_leaves_a_working_repository, bwrap_fixture)
{
    namespace fs = std::filesystem;
    host_repo(root.path());
    int out[2];
    BOOST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    const pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0)
    {
        ::dup2(out[1], 1);
        ::execl(SBX_SANDBOX_RUN, "sandbox-run", "--backend", "bwrap", "--root",
                root.str().c_str(), "--", "/bin/sh", "-c", "echo ready; exec sleep 30",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(out[1]);
    char line[16] = {};
    const ssize_t n = ::read(out[0], line, sizeof line - 1); // the sandbox is set up
    ::close(out[0]);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    BOOST_TEST(std::string(line, n > 0 ? static_cast<std::size_t>(n) : 0) == "ready\n");
    BOOST_TEST(sbx_test::wait_gone(sbx_test::helper_processes(), 10s));
    BOOST_TEST(fs::exists(root.path() / ".git" / "commondir")); // left, holding "."
    BOOST_TEST(on_host(host_git(root.path()) + "status >/dev/null && " + host_git(root.path()) +
                       "commit -q --allow-empty -m after && " + host_git(root.path()) +
                       "fsck --no-progress >/dev/null") == 0);
    auto r = sh("echo ../x > .git/commondir 2>/dev/null || echo kept");
    BOOST_TEST(r.result.out.data == "kept\n");
}

// A `.git` gitfile at the top of the root names a git directory elsewhere in a writable
// directory (`git init --separate-git-dir`): its config, hooks and commondir are kept too,
// and git on the host in the root runs nothing the command planted there.
BOOST_AUTO_TEST_CASE(a_gitfile_s_git_directory_is_kept_too)
{
    namespace fs = std::filesystem;
    sandbox_dir store;
    sandbox::bwrap_runner_options o;
    o.writable_paths = {store.str()};
    bwrap_fixture f(o);
    const std::string gitdir = (store.path() / "repo.git").string();
    BOOST_REQUIRE(on_host(host_git(f.root.path()) + "init -q --separate-git-dir=" + gitdir +
                          " . && " + host_git(f.root.path()) + "commit -q --allow-empty -m i") ==
                  0);
    give_to_sandbox_user(f.root.path());
    give_to_sandbox_user(store.path());
    const fs::path marker = f.outside.path() / "pwned";
    for (const std::string& script :
         {"printf \"$FSM\" >> " + gitdir + "/config", "cp hook.sh " + gitdir + "/hooks/pre-commit",
          "mkdir -p evil && cp -r " + gitdir + "/objects " + gitdir + "/refs " + gitdir +
              "/HEAD evil/ && printf \"$FSM\" > evil/config && echo $PWD/evil > " + gitdir +
              "/commondir"})
        BOOST_TEST_CONTEXT(script)
        {
            auto r = f.sh(plant_prelude(marker) + "(" + script + ") 2>/dev/null && echo planted "
                          "|| echo refused");
            BOOST_TEST(r.result.out.data == "refused\n");
            BOOST_TEST(on_host(host_git(f.root.path()) + "status >/dev/null && " +
                               host_git(f.root.path()) + "commit -q --allow-empty -m x") == 0);
            BOOST_TEST(!fs::exists(marker));
        }
    // The host's commits above (as root) made object directories only root may write to:
    // give them to the sandbox user too, or the commit inside fails whenever its object
    // falls in one of them (about one run in a hundred).
    give_to_sandbox_user(store.path());
    auto commit = f.sh("git -c user.name=t -c user.email=t@t commit -q --allow-empty -m in && "
                       "echo committed");
    BOOST_TEST(commit.result.out.data == "committed\n", commit.result.err.data);
    BOOST_TEST(!fs::exists(gitdir + "/commondir")); // the stand-in went with the command
}

// The same plants by an unprivileged caller (sandbox-run, its supervisor and bwrap all run
// as nobody, in a repository nobody owns): refused, and git on the host runs nothing.
BOOST_FIXTURE_TEST_CASE(an_unprivileged_caller_plants_nothing_either, bwrap_fixture)
{
    namespace fs = std::filesystem;
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0)
    {
        BOOST_TEST_MESSAGE("skipped: needs root and setpriv to become nobody");
        return;
    }
    host_repo(root.path());
    BOOST_REQUIRE(on_host(host_git(root.path()) + "config extensions.worktreeConfig true && "
                          "chown -R 65534:65534 " + root.str()) == 0);
    host_dir programs; // copies nobody can run, whatever the checkout's permissions
    fs::permissions(programs.path(), fs::perms(0755));
    fs::copy_file(SBX_SANDBOX_RUN, programs.path() / "sandbox-run");
    fs::copy_file(SBX_SUPERVISOR, programs.path() / "sandbox-supervisor");
    const fs::path marker = outside.path() / "pwned", out = outside.path() / "out";
    for (const std::string& script :
         {std::string("mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/ && "
                      "printf \"$FSM\" > evil/config && echo $PWD/evil > .git/commondir"),
          std::string("printf \"$FSM\" > .git/config.worktree")})
        BOOST_TEST_CONTEXT(script)
        {
            const fs::path plant = programs.path() / "plant.sh";
            std::ofstream(plant) << plant_prelude(marker) + "(" + script +
                                        ") 2>/dev/null && echo planted || echo refused\n";
            fs::permissions(plant, fs::perms(0644));
            BOOST_TEST(on_host("setpriv --reuid=65534 --regid=65534 --clear-groups env "
                               "SANDBOX_SUPERVISOR=" +
                               (programs.path() / "sandbox-supervisor").string() + " " +
                               (programs.path() / "sandbox-run").string() + " --backend bwrap "
                               "--root " + root.str() + " -- /bin/sh " + plant.string() + " > " +
                               out.string()) == 0);
            std::ifstream in(out);
            BOOST_TEST(std::string(std::istreambuf_iterator<char>(in), {}) == "refused\n");
            BOOST_TEST(on_host(host_git(root.path()) + "status >/dev/null && " +
                               host_git(root.path()) + "commit -q --allow-empty -m x") == 0);
            BOOST_TEST(!fs::exists(marker));
        }
    BOOST_TEST(!fs::exists(root.path() / ".git" / "commondir"));
}

// A .git that is a symbolic link at the top of a writable directory cannot be kept
// read-only (the command could replace the link): refused, nothing runs.
BOOST_FIXTURE_TEST_CASE(a_symlinked_git_is_refused, bwrap_fixture)
{
    std::filesystem::create_directories(outside.path() / "repo.git");
    std::filesystem::create_directory_symlink(outside.path() / "repo.git", root.path() / ".git");
    auto r = sh("echo ran");
    BOOST_TEST((r.ec == errc::validation), r.result.diag);
    BOOST_TEST(r.result.diag.limit == "write_deny");
    BOOST_TEST(r.result.out.data.empty());
}

// A session's signal reaches a command that left the init's process group (setsid): the
// init passes it on to the command's group.
BOOST_FIXTURE_TEST_CASE(signals_follow_a_command_that_left_the_group, bwrap_fixture)
{
    std::string out;
    sbx_test::run_coro(
        ioc,
        [&]() -> asio::awaitable<void> {
            sandbox::session_spec spec;
            spec.command = "setsid";
            spec.args = {"sh", "-c", "trap 'echo got-int; exit 5' INT; echo ready; read x"};
            auto s = co_await runner.sessions()->start(spec);
            std::uint64_t at = 0;
            out = co_await sbx_test::read_until(*s, at, "ready\n");
            BOOST_TEST(!s->signal(sandbox::session_signal::interrupt));
            auto w = co_await s->wait();
            out += (co_await sbx_test::read_all(*s, at)).out;
            BOOST_TEST((w.status == exec_status::exited));
            BOOST_TEST(w.exit_code == 5);
            co_await s->close();
        },
        30s);
    BOOST_TEST(out == "ready\ngot-int\n");
}

// --- hostile commands inside the sandbox -------------------------------------------------

// A command that ignores SIGTERM and leaves a double-forked daemon: terminate() kills it all
// after the grace.
BOOST_AUTO_TEST_CASE(an_ignored_sigterm_and_a_daemon_do_not_survive_terminate)
{
    bwrap_fixture f;
    sbx_test::run_coro(f.ioc, [&]() -> asio::awaitable<void> {
        sandbox::session_spec spec;
        spec.command = target_inside();
        spec.args = {"ignore-term", "--then", "double-fork", "30000", "--then", "println",
                     "ready", "--then", "sleep", "30000"};
        auto s = co_await f.runner.sessions()->start(spec);
        std::uint64_t at = 0;
        (void)co_await sbx_test::read_until(*s, at, "ready\n");
        BOOST_TEST(sbx_test::helper_processes().size() >= 2u); // the command and its daemon
        auto r = co_await s->terminate(300ms);
        BOOST_TEST((r.status == exec_status::terminated), to_string(r.status));
        BOOST_TEST(r.signal == SIGKILL); // SIGTERM was ignored
        co_await s->close();
    });
    BOOST_TEST(sbx_test::wait_gone(sbx_test::helper_processes()));
}

// The supervisor's worker killed under a running sandbox: bwrap dies with its parent, the
// namespace with bwrap, and the session reports the lost supervisor.
BOOST_AUTO_TEST_CASE(the_worker_killed_takes_the_sandbox_with_it)
{
    bwrap_fixture f;
    sbx_test::run_coro(f.ioc, [&]() -> asio::awaitable<void> {
        sandbox::session_spec spec;
        spec.command = "/bin/sh";
        spec.args = {"-c", target_inside() + " setsid-child 30000 detach & " + target_inside() +
                               " println ready --then sleep 30000"};
        auto s = co_await f.runner.sessions()->start(spec);
        std::uint64_t at = 0;
        (void)co_await sbx_test::read_until(*s, at, "ready\n");
        // bwrap's parent is the worker we started for this session.
        std::ifstream stat("/proc/" + std::to_string(s->pid()) + "/stat");
        std::string line((std::istreambuf_iterator<char>(stat)), {});
        const pid_t worker = std::stoi(line.substr(line.rfind(')') + 4));
        BOOST_TEST_REQUIRE(worker > 1);
        BOOST_TEST_REQUIRE(::kill(worker, SIGKILL) == 0);
        auto r = co_await s->wait();
        BOOST_TEST((r.status == exec_status::unenforceable), to_string(r.status));
        BOOST_TEST(r.diag.limit == "supervisor");
        co_await s->close();
    });
    BOOST_TEST(sbx_test::wait_gone(sbx_test::helper_processes()));
}

// The caller out of descriptors: every exec either runs correctly or fails cleanly before
// anything starts; nothing is left behind, and the limit comes back.
BOOST_FIXTURE_TEST_CASE(no_spare_descriptors_for_the_status_pipe, bwrap_fixture)
{
    BOOST_TEST_REQUIRE(sh("true").result.status == exec_status::exited); // probe done
    for (int headroom : {0, 1, 2, 3, 4, 6, 8, 16})
    {
        // No assertion while descriptors are short (see fd_exhaustion): record, then check.
        sbx_test::unchecked_outcome r;
        bool lowered = false;
        {
            sbx_test::fd_exhaustion guard(headroom);
            lowered = guard.ok();
            if (lowered)
                r = sbx_test::run_unchecked(ioc, runner, sh_request("echo ran; kill -USR1 $$"));
        }
        BOOST_TEST_REQUIRE(lowered, "could not lower RLIMIT_NOFILE");
        BOOST_TEST_REQUIRE(r.done, "the exec did not complete within 30 s");
        BOOST_TEST(r.idle, "io_context still had work after completion");
        BOOST_TEST_MESSAGE("free descriptors " << headroom << ": " << r.result.diag.message);
        if (r.result.status == exec_status::not_started)
        {
            BOOST_TEST(r.ec.failed());
            BOOST_TEST(!r.result.diag.message.empty());
            BOOST_TEST(r.result.out.data.empty());
        }
        else
        {
            BOOST_TEST((r.result.status == exec_status::signaled), r.result.diag.message);
            BOOST_TEST(r.result.signal == SIGUSR1);
            BOOST_TEST(r.result.out.data == "ran\n");
        }
        BOOST_TEST(sbx_test::wait_gone(sbx_test::helper_processes()));
    }
    BOOST_TEST(sh("echo after").result.out.data == "after\n");
}

// --- whom the command runs as --------------------------------------------------------------

namespace {

bool skip_unless_root()
{
    if (::geteuid() == 0)
        return false;
    BOOST_TEST_MESSAGE("skipped: needs a root caller");
    return true;
}

struct host_owner
{
    uid_t uid = 0;
    gid_t gid = 0;
    mode_t mode = 0;
};

host_owner owner_of(const std::filesystem::path& p)
{
    struct stat st{};
    BOOST_TEST_REQUIRE(::stat(p.c_str(), &st) == 0, p);
    return {st.st_uid, st.st_gid, st.st_mode & 07777};
}

} // namespace

// A root caller's command runs as the sandbox user (nobody), switched to before bwrap: it
// cannot plant a set-user-ID root program (the copy is the sandbox user's, and the seccomp
// filter refuses set-id bits anyway), nor read what root alone may read.
BOOST_FIXTURE_TEST_CASE(a_root_callers_command_cannot_plant_a_setuid_root_program,
                        bwrap_fixture)
{
    if (skip_unless_root())
        return;
    const auto [uid, gid] = sandbox_ids();
    auto r = sh("id -u; id -g; id -G; cp /usr/bin/id id-suid; "
                "chmod 4755 id-suid 2>/dev/null || echo no-setuid; "
                "chmod g+s id-suid 2>/dev/null || echo no-setgid; "
                "chmod 0755 id-suid && echo plain-chmod; mkdir d; "
                "cat /etc/shadow > /dev/null 2>&1 && echo read-shadow || echo no-shadow");
    BOOST_TEST(!r.ec, r.result.diag);
    const std::string u = std::to_string(uid), g = std::to_string(gid);
    BOOST_TEST(r.result.out.data ==
               u + "\n" + g + "\n" + g + "\nno-setuid\nno-setgid\nplain-chmod\nno-shadow\n");
    // On the host, what it made is the sandbox user's, with no set-id bit.
    for (const char* made : {"id-suid", "d"})
    {
        const auto o = owner_of(root.path() / made);
        BOOST_TEST(o.uid == uid, made);
        BOOST_TEST(o.gid == gid, made);
        BOOST_TEST((o.mode & (S_ISUID | S_ISGID)) == 0u, made);
    }
    const auto e = runner.enforcement();
    BOOST_TEST(e.command_uid.value_or(0) == uid);
    BOOST_TEST(e.command_gid.value_or(0) == gid);
}

// The sandbox user is configurable (names or numbers), never root.
BOOST_AUTO_TEST_CASE(the_sandbox_user_is_configurable_and_never_root)
{
    if (skip_unless_root())
        return;
    sbx_test::temp_dir root;
    BOOST_TEST_REQUIRE(::chown(root.path().c_str(), 12345, 12346) == 0);
    sandbox::bwrap_runner_options o;
    o.root = root.str();
    o.sandbox_user = "12345:12346"; // in no database: numbers are taken as they are
    asio::io_context ioc;
    sandbox::bwrap_runner runner(ioc.get_executor(), o);
    auto r = bwrap_fixture::run_sh(ioc, runner, "id -u; id -g; touch made");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "12345\n12346\n");
    const auto made = owner_of(root.path() / "made");
    BOOST_TEST(made.uid == 12345u);
    BOOST_TEST(made.gid == 12346u);
    BOOST_TEST(runner.enforcement().command_uid.value_or(0) == 12345u);
    for (const char* bad : {"root", "0", "0:12346", "12345:0", "no-such-user-here", "12345"})
    {
        sandbox::bwrap_runner_options b;
        b.sandbox_user = bad;
        bwrap_fixture g(b);
        auto refused = g.sh("touch ran");
        BOOST_TEST((refused.ec == errc::validation), bad);
        BOOST_TEST(refused.result.diag.limit == "sandbox_user", bad);
        BOOST_TEST(!std::filesystem::exists(g.root.path() / "ran"), bad);
        BOOST_TEST(!g.runner.enforcement().unavailable.empty(), bad);
    }
}

// A root the sandbox user cannot write is refused before anything runs (validation, naming
// the path and the user), and so is such a writable path; a path the sandbox user cannot
// even reach needs no mask (bwrap, as that user, could not mount one there) and stays out of
// the command's reach.
BOOST_AUTO_TEST_CASE(paths_the_sandbox_user_cannot_use)
{
    if (skip_unless_root())
        return;
    namespace fs = std::filesystem;
    // A root the sandbox user can reach but not write: the command runs, reads it and cannot
    // change it (the kernel refuses, as for that user), and the report lists it.
    sbx_test::temp_dir roots_own; // root's, mode 0755
    std::ofstream(roots_own.path() / "readme") << "hello\n";
    fs::permissions(roots_own.path() / "readme", fs::perms::owner_read | fs::perms::owner_write |
                                                     fs::perms::others_read);
    sandbox::bwrap_runner_options o;
    o.root = roots_own.str();
    asio::io_context ioc;
    sandbox::bwrap_runner runner(ioc.get_executor(), o);
    auto r = bwrap_fixture::run_sh(ioc, runner, "cat readme; touch ran 2>/dev/null || echo refused");
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "hello\nrefused\n");
    BOOST_TEST(!fs::exists(roots_own.path() / "ran"));
    BOOST_TEST(runner.enforcement().unwritable_paths == std::vector<std::string>{roots_own.str()},
               sandbox::to_json(runner.enforcement()));

    sandbox::bwrap_runner_options w;
    w.writable_paths = {roots_own.str()};
    bwrap_fixture f(w);
    auto wr = f.sh("touch " + roots_own.str() + "/ran 2>/dev/null || echo refused; touch ok");
    BOOST_TEST(!wr.ec, wr.result.diag);
    BOOST_TEST(wr.result.out.data == "refused\n");
    BOOST_TEST(!fs::exists(roots_own.path() / "ran"));
    BOOST_TEST(fs::exists(f.root.path() / "ok")); // its own root is writable
    BOOST_TEST(f.runner.enforcement().unwritable_paths ==
               std::vector<std::string>{roots_own.str()});

    // One it cannot even reach (under a directory only root may search): refused before
    // anything runs, naming the path and the user.
    host_dir hidden;
    fs::permissions(hidden.path(), fs::perms::owner_all);
    fs::create_directories(hidden.path() / "root");
    sandbox::bwrap_runner_options h;
    h.root = (hidden.path() / "root").string();
    sandbox::bwrap_runner unreachable(ioc.get_executor(), h);
    auto hr = bwrap_fixture::run_sh(ioc, unreachable, "touch ran");
    BOOST_TEST((hr.ec == errc::validation), hr.result.diag);
    BOOST_TEST((hr.result.status == exec_status::not_started));
    BOOST_TEST(hr.result.diag.limit == "root");
    BOOST_TEST(hr.result.diag.path == h.root);
    BOOST_TEST(contains(hr.result.diag.message, "cannot be reached by the sandbox user nobody"),
               hr.result.diag.message);
    BOOST_TEST(contains(unreachable.enforcement().unavailable, h.root));

    host_dir locked; // root's only: the sandbox user cannot look inside
    std::ofstream(locked.path() / "key") << "secret";
    fs::permissions(locked.path(), fs::perms::owner_all);
    sandbox::bwrap_runner_options m;
    m.read_deny = {(locked.path() / "key").string()};
    bwrap_fixture g(m);
    auto mr = g.sh("cat " + (locked.path() / "key").string() + " 2>/dev/null || echo unreadable");
    BOOST_TEST(!mr.ec, mr.result.diag);
    BOOST_TEST(mr.result.out.data == "unreadable\n");
}

// A caller that is not root runs commands as itself (its uid mapped in, as ever), set-id bits
// are refused for it too, and it cannot pick another user. sandbox-run, its supervisor and
// the command all run as nobody (copies of the programs in a directory nobody can reach).
BOOST_FIXTURE_TEST_CASE(an_unprivileged_caller_runs_as_itself_without_set_id_bits,
                        sbx_test::local_fixture)
{
    if (skip_unless_root() || ::access("/usr/bin/setpriv", X_OK) != 0)
        return;
    namespace fs = std::filesystem;
    BOOST_TEST_REQUIRE(::chown(root.path().c_str(), 65534, 65534) == 0);
    const auto run_copy = root.path() / "sandbox-run";
    const auto sup_copy = root.path() / "sandbox-supervisor";
    fs::copy_file(SBX_SANDBOX_RUN, run_copy);
    fs::copy_file(SBX_SUPERVISOR, sup_copy);
    auto as_nobody = [&](std::vector<std::string> args) {
        sandbox::exec_request req;
        req.command = "/usr/bin/setpriv";
        req.args = {"--reuid=65534", "--regid=65534", "--clear-groups", run_copy.string(),
                    "--backend", "bwrap", "--root", root.str()};
        req.args.insert(req.args.end(), args.begin(), args.end());
        req.options.timeout = 25s;
        req.options.env.inject = {{"SANDBOX_SUPERVISOR", sup_copy.string()}};
        return run(std::move(req));
    };
    auto r = as_nobody({"--", "/bin/sh", "-c",
                        "id -u; touch f; chmod 4755 f 2>/dev/null || echo no-setuid; "
                        "chmod 2755 f 2>/dev/null || echo no-setgid; chmod 0750 f && echo plain"});
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.exit_code == 0, r.result.err.data);
    BOOST_TEST(r.result.out.data == "65534\nno-setuid\nno-setgid\nplain\n");
    const auto f = owner_of(root.path() / "f");
    BOOST_TEST(f.uid == 65534u);
    BOOST_TEST(f.mode == 0750u);
    auto e = as_nobody({"--enforcement"});
    BOOST_TEST(contains(e.result.out.data, "\"command_uid\":65534,\"command_gid\":65534"),
               e.result.out.data);
    auto other = as_nobody({"--json", "--sandbox-user", "12345:12345", "--", "touch", "g"});
    BOOST_TEST(other.result.exit_code == 125);
    BOOST_TEST(contains(other.result.out.data, "\"code\":\"not_available\""),
               other.result.out.data);
    BOOST_TEST(contains(other.result.out.data, "only a root caller"), other.result.out.data);
    BOOST_TEST(!fs::exists(root.path() / "g"));
}

// The helper's --as mode, on its own: it drops every root id, group and capability before
// it executes the program, and refuses uid or gid 0.
BOOST_FIXTURE_TEST_CASE(the_helpers_switch_leaves_nothing_of_root, sbx_test::local_fixture)
{
    if (skip_unless_root())
        return;
    sandbox::exec_request req;
    req.command = SBX_SUPERVISOR;
    req.args = {"--as", "65534", "65533", "--", "/bin/sh", "-c",
                "id -u; id -g; id -G; grep -E '^Cap(Prm|Eff|Amb)' /proc/self/status; "
                "grep -E '^(Uid|Gid)' /proc/self/status"};
    req.options.timeout = 20s;
    auto r = run(req);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data ==
               "65534\n65533\n65533\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
               "CapAmb:\t0000000000000000\nUid:\t65534\t65534\t65534\t65534\n"
               "Gid:\t65533\t65533\t65533\t65533\n",
               r.result.err.data);
    for (auto ids : {std::pair{"0", "65534"}, std::pair{"65534", "0"}})
    {
        req.args = {"--as", ids.first, ids.second, "--", "/usr/bin/touch",
                    (root.path() / "ran").string()};
        auto refused = run(req);
        BOOST_TEST(refused.result.exit_code == 125);
        BOOST_TEST(contains(refused.result.err.data, "must not run as root"),
                   refused.result.err.data);
    }
    BOOST_TEST(!std::filesystem::exists(root.path() / "ran"));
}

BOOST_AUTO_TEST_SUITE_END()
