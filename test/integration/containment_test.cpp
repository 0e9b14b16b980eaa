// test/integration/containment_test.cpp: adversarial containment. Whatever a command's tree
// does (leave its process group, setsid chains, daemons, kill its own supervisor, fork bombs,
// children the kernel reaps) and whatever happens to the host (sandbox-run killed by a signal,
// the io_context destroyed under a pending exec, no spare file descriptors), no process of the
// tree may be alive when exec completes. Real processes, through the public API
// (local_runner + async_exec) and the real sandbox-run binary.
//
// Tree members are known from pid files ($SBX_PIDFILE, see test/helper/sbx_test_target.cpp).
// "Dead when exec completes" is checked right at completion, with a grace of reap_grace (see
// there). Every test reports what it left behind, then cleans up: its fixture SIGKILLs the
// live helper processes the pid files name, kills and reaps the sandbox-run processes it
// started, and drives a pending exec to completion; once the runner and its io_context are
// destroyed, no process started by the test may be alive and no child of the test process
// may be left unreaped (those are reported, then killed and reaped).
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include "supervisor/client.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using sandbox::errc;
using sandbox::exec_status;

using sbx_test::mib;
using sbx_test::sandbox_run;

// The tree must be dead when exec completes, so that is checked at once; the only slack is
// this grace. SIGKILL is delivered asynchronously: kill() returns before the target has run
// its exit path, and a process that was reparented is reaped by its new parent (init, a
// subreaper) on that parent's schedule, so on a loaded 2-core machine a killed process can
// still show as running (or as a zombie not yet reaped by another parent) for a few
// milliseconds. 200 ms covers that; a process that escaped sleeps for 60 s and stays alive.
constexpr auto reap_grace = 200ms;

using sbx_test::ms_since;

std::string fmt(const std::vector<pid_t>& pids) // the first 20, then the count
{
    std::string s = "[";
    for (std::size_t i = 0; i < pids.size() && i < 20; ++i)
        s += (i ? " " : "") + std::to_string(pids[i]);
    if (pids.size() > 20)
        s += " ... " + std::to_string(pids.size()) + " in all";
    return s + "]";
}

/// "[pid(note) ...]", the note read from /proc/<pid>/`file` by `pick`.
std::string fmt_with(const std::vector<pid_t>& pids, const char* file,
                     std::string (*pick)(const std::string& line))
{
    std::string s = "[";
    for (std::size_t i = 0; i < pids.size(); ++i)
    {
        std::ifstream f("/proc/" + std::to_string(pids[i]) + "/" + file);
        std::string line;
        std::getline(f, line);
        s += (i ? " " : "") + std::to_string(pids[i]) + "(" + pick(line) + ")";
    }
    return s + "]";
}

/// "pid(comm)" for each pid, for messages about processes that are not ours by name.
std::string fmt_named(const std::vector<pid_t>& pids)
{
    return fmt_with(pids, "comm", [](const std::string& comm) { return comm; });
}

/// "pid(ppid N)" for each pid: where a survivor ended up.
std::string fmt_parents(const std::vector<pid_t>& pids)
{
    return fmt_with(pids, "stat", [](const std::string& stat) {
        auto close = stat.rfind(')');
        std::string ppid = "?";
        if (close != std::string::npos && close + 4 < stat.size())
            ppid = stat.substr(close + 4, stat.find(' ', close + 4) - (close + 4));
        return "ppid " + ppid;
    });
}

std::vector<pid_t> still_alive(const std::vector<pid_t>& pids)
{
    std::vector<pid_t> v;
    for (pid_t p : pids)
        if (sbx_test::alive(p))
            v.push_back(p);
    return v;
}

bool gone_at_completion(const std::vector<pid_t>& pids)
{
    return sbx_test::wait_gone(pids, reap_grace);
}

struct proc_entry
{
    pid_t pid;
    pid_t ppid;
    char state;
};

std::vector<proc_entry> scan_processes()
{
    std::vector<proc_entry> v;
    for (pid_t pid : sbx_test::proc_pids())
    {
        std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
        std::string s;
        if (!std::getline(f, s))
            continue;
        auto close = s.rfind(')');
        if (close == std::string::npos || close + 4 > s.size())
            continue;
        std::istringstream rest(s.substr(close + 2));
        char state = 0;
        long ppid = 0;
        rest >> state >> ppid;
        v.push_back({pid, static_cast<pid_t>(ppid), state});
    }
    return v;
}

/// Zombies whose parent is this test process (nobody but us would ever reap them).
std::set<pid_t> zombie_children_of_self()
{
    std::set<pid_t> z;
    for (const auto& p : scan_processes())
        if (p.ppid == ::getpid() && p.state == 'Z')
            z.insert(p.pid);
    return z;
}

/// Live (non-zombie) processes descending from this test process.
std::vector<pid_t> live_descendants_of_self()
{
    auto all = scan_processes();
    std::multimap<pid_t, const proc_entry*> children;
    for (const auto& p : all)
        children.emplace(p.ppid, &p);
    std::vector<pid_t> found, todo{::getpid()};
    while (!todo.empty())
    {
        pid_t p = todo.back();
        todo.pop_back();
        auto [b, e] = children.equal_range(p);
        for (auto it = b; it != e; ++it)
        {
            todo.push_back(it->second->pid);
            if (it->second->state != 'Z')
                found.push_back(it->second->pid);
        }
    }
    return found;
}

bool is_helper(pid_t pid)
{
    static const auto want = fs::canonical(sbx_test::target).string();
    return sbx_test::exe_of(pid) == want;
}

bool wait_for_file(const fs::path& p, std::chrono::milliseconds limit)
{
    const auto end = clock_type::now() + limit;
    while (!fs::exists(p))
    {
        if (clock_type::now() > end)
            return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

/// One exec started by a test, and how it ended.
struct exec_op
{
    bool done = false;
    boost::system::error_code ec;
    sandbox::exec_result result;
    clock_type::time_point started{}, finished{};
    asio::cancellation_signal cancel;
    std::function<void()> on_done; // runs inside the completion handler
};

std::string describe(const exec_op& op)
{
    std::ostringstream s;
    s << "ec=" << sandbox::error_name(op.ec) << " (" << op.ec.message()
      << ") status=" << op.result.status << " budget=" << op.result.budget
      << " signal=" << op.result.signal << " exit=" << op.result.exit_code << " wall="
      << std::chrono::duration_cast<std::chrono::milliseconds>(op.result.wall_time).count()
      << "ms cpu="
      << std::chrono::duration_cast<std::chrono::milliseconds>(op.result.cpu_time).count()
      << "ms diag: " << sandbox::to_string(op.result.diag);
    return s.str();
}

/// A sandbox-run process started directly (posix_spawn) in its own process group, stdin
/// /dev/null, stdout and stderr to files. Killed (SIGKILL) and reaped on destruction if the
/// test did not reap it; the pid cannot be reused before that, so the kill is always ours.
class cli_process
{
public:
    cli_process(const std::vector<std::string>& args, const fs::path& dir, const std::string& tag)
        : out_(dir / (tag + ".out")), err_(dir / (tag + ".err"))
    {
        // The fixtures' cgroup setting (integration_sampled runs these with it off); the
        // local backend's containment.
        std::vector<std::string> all{sandbox_run, "--backend", "local", "--cgroup",
                                     sbx_test::cgroup_setting()};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& a : all)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        ::posix_spawn_file_actions_init(&fa);
        ::posix_spawnattr_init(&at);
        ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        ::posix_spawn_file_actions_addopen(&fa, 1, out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                           0644);
        ::posix_spawn_file_actions_addopen(&fa, 2, err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                           0644);
        ::posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
        sigset_t all_signals, none;
        sigfillset(&all_signals);
        sigemptyset(&none);
        ::posix_spawnattr_setsigdefault(&at, &all_signals);
        ::posix_spawnattr_setsigmask(&at, &none);
        ::posix_spawnattr_setpgroup(&at, 0);
        ::posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETPGROUP);
        int rc = ::posix_spawn(&pid_, sandbox_run.c_str(), &fa, &at, argv.data(), environ);
        ::posix_spawn_file_actions_destroy(&fa);
        ::posix_spawnattr_destroy(&at);
        if (rc != 0)
            pid_ = -1;
        else
        {
            // SIGQUIT must not leave a core file behind.
            const rlimit no_core{0, 0};
            ::prlimit(pid_, RLIMIT_CORE, &no_core, nullptr);
        }
    }
    ~cli_process() { kill_and_reap(); }
    cli_process(const cli_process&) = delete;
    cli_process& operator=(const cli_process&) = delete;

    pid_t pid() const { return pid_; }
    bool running() const { return pid_ > 0 && !status_; }

    /// The wait status once it ended within `limit`.
    std::optional<int> wait_for(std::chrono::milliseconds limit)
    {
        const auto end = clock_type::now() + limit;
        while (running())
        {
            int st = 0;
            pid_t r = ::waitpid(pid_, &st, WNOHANG);
            if (r == pid_)
                status_ = st;
            else if (r < 0 && errno != EINTR)
                status_ = -1;
            else if (clock_type::now() > end)
                break;
            else
                std::this_thread::sleep_for(2ms);
        }
        return status_;
    }

    void kill_and_reap()
    {
        if (!running())
            return;
        ::kill(pid_, SIGKILL);
        int st = 0;
        while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR)
        {}
        status_ = st;
    }

    std::string err() const { return slurp(err_); }
    std::string out() const { return slurp(out_); }

    /// True once the output starts with `prefix` (within `limit`): sandbox-run passes the
    /// command's output on asynchronously, so it may come after the command's other signs.
    bool wait_for_out(std::string_view prefix, std::chrono::milliseconds limit) const
    {
        const auto end = clock_type::now() + limit;
        while (out().rfind(prefix, 0) != 0 && clock_type::now() < end)
            std::this_thread::sleep_for(5ms);
        return out().rfind(prefix, 0) == 0;
    }

private:
    static std::string slurp(const fs::path& p)
    {
        std::ifstream f(p, std::ios::binary);
        std::ostringstream s;
        s << f.rdbuf();
        return s.str();
    }

    fs::path out_, err_;
    pid_t pid_ = -1;
    std::optional<int> status_;
};

std::string describe_status(const std::optional<int>& st)
{
    if (!st)
        return "still running";
    if (WIFEXITED(*st))
        return "exit " + std::to_string(WEXITSTATUS(*st));
    if (WIFSIGNALED(*st))
        return "signal " + std::to_string(WTERMSIG(*st));
    return "status " + std::to_string(*st);
}

using sbx_test::fd_exhaustion;

/// Watches an exec's leader (the first pid in `pidfile`) through a pidfd of our own and, once
/// it has exited, posts a terminal cancellation of `op` unless `op` completed meanwhile.
struct leader_watch : std::enable_shared_from_this<leader_watch>
{
    asio::io_context& ctx;
    exec_op& op;
    fs::path pidfile;
    asio::steady_timer poll;
    asio::posix::stream_descriptor leader;
    bool emitted = false;
    bool stopped = false;

    leader_watch(asio::io_context& c, exec_op& o, fs::path f)
        : ctx(c), op(o), pidfile(std::move(f)), poll(c), leader(c)
    {}

    void arm()
    {
        poll.expires_after(5ms);
        poll.async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec)
                self->on_poll();
        });
    }

    void on_poll()
    {
        if (stopped || op.done)
            return;
        const auto pids = sbx_test::read_pids(pidfile);
        if (pids.size() < 2) // the leader, then the holder once it is set up
            return arm();
        int fd = static_cast<int>(::syscall(SYS_pidfd_open, pids[0], 0));
        if (fd < 0)
            return; // already reaped: the exec is completing
        leader.assign(fd);
        leader.async_wait(asio::posix::stream_descriptor::wait_read,
                          [self = shared_from_this()](boost::system::error_code ec) {
                              if (ec || self->stopped)
                                  return;
                              asio::post(self->ctx, [self] {
                                  if (self->stopped || self->op.done)
                                      return;
                                  self->emitted = true;
                                  self->op.cancel.emit(asio::cancellation_type::terminal);
                              });
                          });
    }

    void stop()
    {
        stopped = true;
        poll.cancel();
        boost::system::error_code ignored;
        leader.close(ignored);
    }
};

/// Checks made once the runner and its io_context are gone (the fixture below derives from
/// this first, so it is destroyed last): the library may keep helper processes per execution
/// context, but after that nothing it started may be alive, nor left unreaped.
struct after_teardown_checks
{
    const std::set<pid_t> zombies_before = zombie_children_of_self();

    std::vector<pid_t> new_zombies() const
    {
        std::vector<pid_t> v;
        for (pid_t z : zombie_children_of_self())
            if (!zombies_before.count(z))
                v.push_back(z);
        return v;
    }

    ~after_teardown_checks()
    {
        const auto end = clock_type::now() + 1s;
        while ((!live_descendants_of_self().empty() || !new_zombies().empty()) &&
               clock_type::now() < end)
            std::this_thread::sleep_for(10ms);
        const auto live = live_descendants_of_self();
        BOOST_CHECK_MESSAGE(live.empty(), "processes started by this test are still alive 1 s "
                                          "after its runner and io_context were destroyed: "
                                              << fmt_named(live));
        const auto zombies = new_zombies();
        BOOST_CHECK_MESSAGE(zombies.empty(), "unreaped children of the test process 1 s after "
                                             "its runner and io_context were destroyed: "
                                                 << fmt(zombies));
        // Ours (descendants of this process): kill them, then reap what is ours to reap.
        for (pid_t p : live)
            ::kill(p, SIGKILL);
        sbx_test::wait_gone(live, 2000ms);
        for (pid_t z : new_zombies())
            ::waitpid(z, nullptr, WNOHANG);
    }
};

struct containment_fixture : after_teardown_checks, sbx_test::local_fixture
{
    std::list<exec_op> ops;
    std::list<cli_process> clis;
    std::vector<fs::path> pidfiles;

    /// A pid file in the root, registered for cleanup.
    fs::path pidfile(const std::string& name = "pids")
    {
        auto p = root.path() / name;
        pidfiles.push_back(p);
        return p;
    }

    static sandbox::exec_options with_pidfile(const fs::path& file)
    {
        sandbox::exec_options o;
        o.env.inject["SBX_PIDFILE"] = file.string();
        return o;
    }

    static std::vector<pid_t> recorded(const fs::path& file) { return sbx_test::read_pids(file); }

    /// A marker file the command touches once its tree is set up (a precondition of tests
    /// whose timeout must find the whole tree in place).
    fs::path ready_file(const std::string& name = "ready") const { return root.path() / name; }

    exec_op& start(sandbox::exec_request req)
    {
        auto& op = ops.emplace_back();
        op.started = clock_type::now();
        sandbox::async_exec(
            runner, std::move(req),
            asio::bind_cancellation_slot(
                op.cancel.slot(), [&op](boost::system::error_code ec, sandbox::exec_result r) {
                    op.done = true;
                    op.finished = clock_type::now();
                    op.ec = ec;
                    op.result = std::move(r);
                    if (op.on_done)
                        op.on_done();
                }));
        return op;
    }

    /// How `drive` ended: the exec completed, and the io_context ran out of work within 1 s
    /// after it.
    struct run_end
    {
        bool done = false;
        bool idle = false;
    };

    /// Runs the io_context until `op` completes or `limit` passes, then up to 1 s more until
    /// it runs out of work. It asserts nothing (so it may run under fd_exhaustion).
    run_end drive(exec_op& op, std::chrono::milliseconds limit)
    {
        ioc.restart();
        const auto deadline = clock_type::now() + limit;
        while (!op.done)
        {
            const auto now = clock_type::now();
            if (now >= deadline)
                return {};
            if (ioc.run_one_for(deadline - now) == 0 && ioc.stopped())
                break;
        }
        if (!op.done)
            return {};
        ioc.run_for(1s);
        return {true, ioc.stopped()};
    }

    /// Runs the io_context until `op` completes or `limit` passes; false on the latter (the
    /// fixture then kills the tree and finishes the exec). After completion the io_context
    /// must run out of work.
    bool run_until_done(exec_op& op, std::chrono::milliseconds limit)
    {
        const run_end end = drive(op, limit);
        if (end.done)
            BOOST_CHECK_MESSAGE(end.idle, "io_context still had work 1 s after exec completed");
        return end.done;
    }

    cli_process& spawn_cli(const std::vector<std::string>& args)
    {
        auto& p = clis.emplace_back(args, root.path(), "cli" + std::to_string(clis.size()));
        BOOST_REQUIRE_MESSAGE(p.pid() > 0, "posix_spawn of sandbox-run failed");
        return p;
    }

    /// SIGKILLs every live helper process the pid files name, until none is left (chains and
    /// bombs may still be recording new members meanwhile).
    void kill_recorded()
    {
        for (int round = 0, quiet = 0; round < 250 && quiet < 3; ++round)
        {
            bool any = false;
            for (const auto& f : pidfiles)
                for (pid_t p : recorded(f))
                    if (p > 1 && sbx_test::alive(p) && is_helper(p))
                    {
                        ::kill(p, SIGKILL);
                        any = true;
                    }
            quiet = any ? 0 : quiet + 1;
            std::this_thread::sleep_for(10ms);
        }
    }

    ~containment_fixture()
    {
        // What the test left behind, reported before anything is cleaned up.
        auto helpers = sbx_test::helper_processes();
        BOOST_CHECK_MESSAGE(helpers.empty(),
                            "helper processes alive at the end of the test: " << fmt(helpers));

        // Cleanup: sandbox-run processes, recorded tree members, pending execs.
        for (auto& op : ops)
            op.on_done = nullptr; // it may refer to the finished test body
        for (auto& c : clis)
            c.kill_and_reap();
        kill_recorded();
        for (auto& op : ops)
        {
            if (op.done)
                continue;
            ioc.restart();
            const auto deadline = clock_type::now() + 5s;
            while (!op.done && clock_type::now() < deadline)
                if (ioc.run_one_for(50ms) == 0 && ioc.stopped())
                    break;
            BOOST_CHECK_MESSAGE(op.done, "exec still pending after its recorded tree was killed");
        }
        ioc.restart();
        ioc.poll();
        std::vector<pid_t> all;
        for (const auto& f : pidfiles)
            for (pid_t p : recorded(f))
                all.push_back(p);
        sbx_test::wait_gone(all, 2000ms);
    }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(containment, containment_fixture)

// --- row 1: the leader leaves its process group -------------------------------------------

BOOST_AUTO_TEST_CASE(leader_that_left_its_group_dies_on_timeout)
{
    const auto pf = pidfile();
    auto o = with_pidfile(pf);
    o.timeout = 300ms;
    const auto ready = ready_file();
    auto& op = start(sbx_test::helper({"pidfile", "--then", "leave-group", "60000", "--then",
                                       "touch", ready.string(), "--then", "sleep", "60000"},
                                      o));
    const bool in_time = run_until_done(op, 1000ms);

    BOOST_TEST(in_time, "exec did not complete within 1 s of start (timeout 300 ms)");
    BOOST_TEST(fs::exists(ready), "the command was not set up when the timeout fired");
    const auto pids = recorded(pf);
    BOOST_TEST(pids.size() == 2u, "pids " << fmt(pids)); // the leader and its group's child
    if (!in_time)
        return;
    BOOST_TEST(op.ec == errc::timeout, describe(op));
    BOOST_TEST(op.result.status == exec_status::timed_out);
    BOOST_TEST(gone_at_completion(pids), "alive after exec completed: " << fmt(still_alive(pids)));
}

// --- a process whose main thread exited while its other threads run ---------------------
// /proc shows such a process as a zombie ('Z'); it is not one: its threads run and fork, its
// children hang below one of them, and waiting for it blocks until all of them end.

BOOST_AUTO_TEST_CASE(process_whose_main_thread_exited_dies_with_its_child_on_timeout)
{
    // As the leader, and as a member below a shell (once the shell is killed, the process
    // falls to the worker as a 'Z'); without a process cap and under one (the fork gate).
    const std::string job = sbx_test::target +
                            " pidfile --then main-exit --then children 1 60000 --then sleep 60000";
    for (const bool leader : {true, false})
        for (const std::uint64_t cap : {std::uint64_t{0}, std::uint64_t{50}})
        {
            BOOST_TEST_CONTEXT((leader ? "leader" : "member") << ", max_processes " << cap)
            {
                const auto pf = pidfile("pids-" + std::to_string(leader) + std::to_string(cap));
                sandbox::exec_request req;
                req.command = "/bin/sh";
                req.args = {"-c", leader ? "exec " + job
                                         : job + " & exec " + sbx_test::target + " sleep 60000"};
                req.options = with_pidfile(pf);
                req.options.timeout = 300ms;
                req.options.limits.max_processes = cap;
                auto& op = start(std::move(req));
                const bool in_time = run_until_done(op, 1500ms);

                BOOST_TEST(in_time, "exec did not complete within 1.5 s of start (timeout 300 ms)");
                const auto pids = recorded(pf);
                BOOST_TEST(pids.size() == 2u, "pids " << fmt(pids)); // the process, its child
                if (!in_time)
                    continue;
                BOOST_TEST(op.ec == errc::timeout, describe(op));
                BOOST_TEST(gone_at_completion(pids),
                           "alive after exec completed: " << fmt(still_alive(pids)));
            }
        }
}

BOOST_AUTO_TEST_CASE(sandbox_run_timeout_ends_a_leader_that_left_its_group)
{
    // The default policy (which caps processes, so the sampler watches the tree), and no cap.
    for (const std::string policy : {"default", "no-caps"})
    {
        BOOST_TEST_CONTEXT("policy: " << policy)
        {
            const auto pf = pidfile("pids-" + policy);
            std::vector<std::string> args{"--root", root.str(), "--timeout",
                                          "1s",     "--env",    "SBX_PIDFILE=" + pf.string()};
            if (policy == "no-caps")
                args.insert(args.end(), {"--max-processes", "0"});
            args.insert(args.end(), {"--", sbx_test::target, "pidfile", "--then", "leave-group",
                                     "60000", "--then", "sleep", "60000"});
            auto& cli = spawn_cli(args);
            const auto st = cli.wait_for(2500ms);

            BOOST_TEST(st.has_value(), "sandbox-run --timeout 1s still running after 2.5 s");
            BOOST_TEST(describe_status(st) == "exit 124", "stderr: " << cli.err());
            const auto pids = recorded(pf);
            BOOST_TEST(pids.size() == 2u, "pids " << fmt(pids));
            if (st)
                BOOST_TEST(gone_at_completion(pids),
                           "alive after sandbox-run exited: " << fmt(still_alive(pids)));
            cli.kill_and_reap();
            kill_recorded(); // the next round starts clean even if this one failed
        }
    }
}

BOOST_AUTO_TEST_CASE(sigint_and_sigterm_to_sandbox_run_end_a_leader_that_left_its_group)
{
    for (int sig : {SIGINT, SIGTERM})
    {
        BOOST_TEST_CONTEXT("signal " << sig)
        {
            const auto pf = pidfile("pids-" + std::to_string(sig));
            const auto ready = root.path() / ("ready-" + std::to_string(sig));
            auto& cli = spawn_cli({"--root", root.str(), "--timeout", "30s", "--env",
                                   "SBX_PIDFILE=" + pf.string(), "--", sbx_test::target, "pidfile",
                                   "--then", "leave-group", "60000", "--then", "touch",
                                   ready.string(), "--then", "sleep", "60000"});
            BOOST_TEST_REQUIRE(wait_for_file(ready, 3000ms), "the command never got ready");
            ::kill(cli.pid(), sig);
            const auto st = cli.wait_for(1000ms);

            BOOST_TEST(st.has_value(), "sandbox-run still running 1 s after signal " << sig);
            BOOST_TEST(describe_status(st) == "exit 130", "stderr: " << cli.err());
            const auto pids = recorded(pf);
            BOOST_TEST(pids.size() == 2u, "pids " << fmt(pids));
            if (st)
                BOOST_TEST(gone_at_completion(pids),
                           "alive after sandbox-run exited: " << fmt(still_alive(pids)));
            cli.kill_and_reap();
            kill_recorded(); // the next round starts clean even if this one failed
        }
    }
}

// --- row 2: a chain of setsid members that keeps forking ---------------------------------

namespace {

void setsid_chain_case(containment_fixture& f, std::int64_t max_processes)
{
    const auto pf = f.pidfile();
    auto o = containment_fixture::with_pidfile(pf);
    o.timeout = 300ms;
    o.limits.max_processes = max_processes;
    // Each member: setsid, record itself, 1 ms, fork the next, sleep forever (up to 2000).
    auto& op = f.start(sbx_test::helper(
        {"pidfile", "--then", "setsid-chain", "2000", "1", "--then", "sleep", "60000"}, o));
    const bool done = f.run_until_done(op, 3000ms);

    BOOST_TEST_REQUIRE(done, "exec did not complete within 3 s (timeout 300 ms)");
    BOOST_TEST(op.ec == errc::timeout, describe(op));
    const auto pids = containment_fixture::recorded(pf);
    BOOST_TEST(pids.size() >= 10u, "the chain hardly grew: " << fmt(pids));
    BOOST_TEST(gone_at_completion(pids),
               pids.size() << " recorded, alive after exec completed: " << fmt(still_alive(pids)));
    // Nothing of the chain may be left to fork on after completion.
    std::this_thread::sleep_for(300ms);
    const auto later = containment_fixture::recorded(pf);
    BOOST_TEST(later.size() == pids.size(),
               "members recorded after exec completed: " << later.size() - pids.size());
    BOOST_TEST(still_alive(later).empty(), "alive 300 ms later: " << fmt(still_alive(later)));
}

} // namespace

BOOST_AUTO_TEST_CASE(setsid_fork_chain_is_dead_when_the_timeout_completes)
{
    setsid_chain_case(*this, 0);
}

BOOST_AUTO_TEST_CASE(setsid_fork_chain_is_dead_when_the_timeout_completes_under_a_process_cap)
{
    setsid_chain_case(*this, 1000); // sampler active; the chain stays well under the cap
}

// --- row 3: background jobs outliving a normal exit ---------------------------------------

BOOST_AUTO_TEST_CASE(setsid_background_job_with_detached_stdio_dies_on_normal_exit)
{
    const auto pf = pidfile();
    auto& op = start(sbx_test::helper({"setsid-child", "60000", "detach", "--then", "exit", "0"},
                                      with_pidfile(pf)));
    BOOST_TEST_REQUIRE(run_until_done(op, 3000ms), "exec did not complete within 3 s");

    BOOST_TEST(!op.ec, describe(op));
    BOOST_TEST(op.result.status == exec_status::exited);
    BOOST_TEST(op.result.exit_code == 0);
    const auto pids = recorded(pf);
    BOOST_TEST(pids.size() == 1u);
    BOOST_TEST(gone_at_completion(pids), "the background job survived: " << fmt(still_alive(pids)));
}

BOOST_AUTO_TEST_CASE(child_that_closed_its_stdio_dies_when_the_leader_exits)
{
    // In the leader's group, and in a session of its own.
    for (const auto& args :
         {std::vector<std::string>{"closed-child", "60000", "--then", "exit", "0"},
          std::vector<std::string>{"setsid-child", "60000", "close", "--then", "exit", "0"}})
    {
        BOOST_TEST_CONTEXT(args[0])
        {
            const auto pf = pidfile("pids-" + args[0]);
            auto& op = start(sbx_test::helper(args, with_pidfile(pf)));
            BOOST_TEST_REQUIRE(run_until_done(op, 3000ms), "exec did not complete within 3 s");

            BOOST_TEST(!op.ec, describe(op));
            BOOST_TEST(op.result.status == exec_status::exited);
            const auto pids = recorded(pf);
            BOOST_TEST(pids.size() == 1u);
            BOOST_TEST(gone_at_completion(pids), "survived: " << fmt(still_alive(pids)));
        }
    }
}

// --- row 4: sandbox-run itself dies -------------------------------------------------------

namespace {

void cli_killed_case(containment_fixture& f, int sig)
{
    const auto pf = f.pidfile();
    const auto ready = f.root.path() / "ready";
    auto& cli = f.spawn_cli({"--root", f.root.str(), "--env", "SBX_PIDFILE=" + pf.string(), "--",
                             sbx_test::target, "pidfile", "--then", "children", "2", "60000",
                             "--then", "touch", ready.string(), "--then", "sleep", "60000"});
    BOOST_TEST_REQUIRE(wait_for_file(ready, 3000ms), "the command never got ready");
    const auto pids = containment_fixture::recorded(pf);
    BOOST_TEST(pids.size() == 3u, "pids " << fmt(pids));

    ::kill(cli.pid(), sig);
    const auto st = cli.wait_for(2000ms);
    BOOST_TEST_REQUIRE(st.has_value(), "sandbox-run still running 2 s after signal " << sig);
    BOOST_TEST_MESSAGE("sandbox-run ended with " << describe_status(st));
    BOOST_TEST(sbx_test::wait_gone(pids, 1000ms),
               "alive 1 s after sandbox-run died: " << fmt(still_alive(pids)));
}

} // namespace

BOOST_AUTO_TEST_CASE(sandbox_run_killed_by_sighup_takes_its_tree_along)
{
    cli_killed_case(*this, SIGHUP);
}

BOOST_AUTO_TEST_CASE(sandbox_run_killed_by_sigquit_takes_its_tree_along)
{
    cli_killed_case(*this, SIGQUIT);
}

BOOST_AUTO_TEST_CASE(sandbox_run_killed_by_sigkill_takes_its_tree_along)
{
    cli_killed_case(*this, SIGKILL);
}

// --- row 5: the io_context goes away under a pending exec ---------------------------------

BOOST_AUTO_TEST_CASE(destroying_the_io_context_under_a_pending_exec_kills_the_tree)
{
    const auto pf = pidfile();
    {
        std::optional<asio::io_context> ctx(std::in_place);
        std::optional<sandbox::local_runner> r(std::in_place, ctx->get_executor(),
                                               sandbox::local_runner_options{.root = root.str()});
        auto o = with_pidfile(pf);
        o.timeout = 60s;
        sandbox::async_exec(
            *r,
            sbx_test::helper(
                {"pidfile", "--then", "children", "2", "60000", "--then", "sleep", "60000"}, o),
            [](boost::system::error_code, sandbox::exec_result) {});
        ctx->run_for(200ms);
        for (int i = 0; i < 40 && recorded(pf).size() < 3; ++i)
            ctx->run_for(50ms);
        BOOST_TEST_REQUIRE(recorded(pf).size() == 3u, "the tree never started");
        // The runner must outlive the operation: the io_context goes first.
        ctx.reset();
        r.reset();
    }
    const auto pids = recorded(pf);
    // Within 1 s: every member gone, and none left as a zombie of this process, which nobody
    // would ever reap (a helper process the library started must not be one either).
    const auto end = clock_type::now() + 1s;
    while ((!still_alive(pids).empty() || !new_zombies().empty()) && clock_type::now() < end)
        std::this_thread::sleep_for(10ms);
    BOOST_TEST(still_alive(pids).empty(),
               "alive 1 s after the io_context was destroyed: " << fmt(still_alive(pids)));
    BOOST_TEST(new_zombies().empty(), "zombie children of the test process: "
                                          << fmt(new_zombies()) << " (tree " << fmt(pids) << ")");
}

// --- row 6: the host has no spare file descriptors ----------------------------------------

BOOST_AUTO_TEST_CASE(no_spare_file_descriptors_never_let_a_capped_exec_pass_unenforced)
{
    sandbox::exec_options capped;
    capped.limits.memory_bytes = 48 * mib;
    capped.timeout = 20s;
    // Warm up: the reactor and the sampler exist before descriptors run out.
    auto& warm = start(sbx_test::helper({"exit", "0"}, capped));
    BOOST_TEST_REQUIRE(run_until_done(warm, 5000ms));
    BOOST_TEST_REQUIRE(!warm.ec, describe(warm));

    rlimit before{};
    ::getrlimit(RLIMIT_NOFILE, &before);
    // Six children of 16 MiB each hold 96 MiB (plus their own) for 600 ms under a 48 MiB cap.
    for (int headroom : {0, 1, 2, 3, 4, 5, 6, 8, 12, 16, 32})
    {
        BOOST_TEST_CONTEXT("free descriptors: " << headroom)
        {
            const auto pf = pidfile("pids-" + std::to_string(headroom));
            auto o = with_pidfile(pf);
            o.limits = capped.limits;
            o.timeout = capped.timeout;
            // No assertion while descriptors are short (see fd_exhaustion): record, then check.
            exec_op* op = nullptr;
            bool lowered = false;
            run_end end;
            {
                fd_exhaustion guard(headroom);
                lowered = guard.ok();
                if (lowered)
                {
                    op = &start(sbx_test::helper({"alloc-children", "6", "16", "600"}, o));
                    end = drive(*op, 5000ms);
                }
            }
            BOOST_TEST_REQUIRE(lowered, "could not lower RLIMIT_NOFILE");
            BOOST_TEST_REQUIRE(end.done, "exec did not complete within 5 s");
            BOOST_TEST(end.idle, "io_context still had work 1 s after exec completed");
            const auto& r = op->result;
            BOOST_TEST_MESSAGE("free descriptors " << headroom << ": " << describe(*op));
            if (r.status == exec_status::not_started)
            {
                // Refused to start: a clear error, and nothing ran.
                BOOST_TEST(op->ec.failed());
                BOOST_TEST((!r.diag.message.empty() || r.diag.cause.failed()), describe(*op));
                BOOST_TEST(recorded(pf).empty(), "children of an exec that did not start");
            }
            else
            {
                // Ran: the cap was enforced, or the run was stopped as unenforceable.
                BOOST_TEST((r.status == exec_status::budget_exceeded ||
                            r.status == exec_status::unenforceable),
                           describe(*op));
                if (r.status == exec_status::budget_exceeded)
                    BOOST_TEST(r.budget == sandbox::budget_kind::memory);
            }
            BOOST_TEST(gone_at_completion(recorded(pf)), fmt(still_alive(recorded(pf))));
            BOOST_TEST(sbx_test::helper_processes().empty());
            kill_recorded(); // the next round starts clean even if this one failed
        }
    }
    rlimit after{};
    ::getrlimit(RLIMIT_NOFILE, &after);
    BOOST_TEST(after.rlim_cur == before.rlim_cur);
}

// --- row 7: kill grace --------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(sigterm_ignoring_setsid_child_is_dead_after_timeout_and_grace)
{
    // The setsid child ignores SIGTERM; the leader either dies of SIGTERM at once (so the
    // grace runs on with the leader already gone) or ignores it too.
    for (const char* leader : {"default-term", "ignore-term"})
    {
        BOOST_TEST_CONTEXT("leader: " << leader)
        {
            const auto pf = pidfile(std::string("pids-") + leader);
            auto o = with_pidfile(pf);
            const auto ready = ready_file(std::string("ready-") + leader);
            o.timeout = 300ms;
            o.kill_grace = 300ms;
            auto& op = start(sbx_test::helper({"ignore-term", "--then", "setsid-child", "60000",
                                               "detach", "--then", leader, "--then", "touch",
                                               ready.string(), "--then", "sleep", "60000"},
                                              o));
            BOOST_TEST_REQUIRE(run_until_done(op, 3000ms), "exec did not complete within 3 s");

            BOOST_TEST(fs::exists(ready), "the command was not set up when the timeout fired");
            BOOST_TEST(op.ec == errc::timeout, describe(op));
            BOOST_TEST(op.result.status == exec_status::timed_out);
            const auto pids = recorded(pf);
            BOOST_TEST(pids.size() == 1u);
            BOOST_TEST(gone_at_completion(pids), "survived: " << fmt(still_alive(pids)));
        }
    }
}

BOOST_AUTO_TEST_CASE(group_members_trapping_sigterm_get_their_grace_after_the_leader_dies)
{
    const auto pf = pidfile();
    const auto marker = root.path() / "marker";
    const auto ready = ready_file();
    auto o = with_pidfile(pf);
    o.timeout = 1s; // time enough to set the tree up, even on a loaded machine
    o.kill_grace = 3s;
    // Both children take 300 ms to handle SIGTERM, then record themselves in the marker; the
    // leader dies of SIGTERM at once.
    auto& op = start(sbx_test::helper({"trap-term-late", "300", marker.string(), "--then",
                                       "children", "2", "60000", "--then", "default-term", "--then",
                                       "touch", ready.string(), "--then", "sleep", "60000"},
                                      o));
    BOOST_TEST_REQUIRE(run_until_done(op, 5000ms), "exec did not complete within 5 s");

    BOOST_TEST_REQUIRE(fs::exists(ready), "the command was not set up when the timeout fired");

    BOOST_TEST(op.ec == errc::timeout, describe(op));
    BOOST_TEST(op.result.status == exec_status::timed_out);
    auto pids = recorded(pf);
    auto handled = recorded(marker);
    std::sort(pids.begin(), pids.end());
    std::sort(handled.begin(), handled.end());
    BOOST_TEST(pids.size() == 2u);
    BOOST_TEST(handled == pids, "members that finished their SIGTERM handler: "
                                    << fmt(handled) << " of " << fmt(pids));
    BOOST_TEST(gone_at_completion(pids), "survived: " << fmt(still_alive(pids)));
}

// --- rows 8 and 9: cancellation -----------------------------------------------------------

BOOST_AUTO_TEST_CASE(terminal_cancel_while_output_drains_kills_the_holder_and_is_not_success)
{
    const auto pf = pidfile();
    // The leader records itself, starts a setsid child that keeps writing to stdout (SIGPIPE
    // ignored), and exits 300 ms later.
    auto& op = start(sbx_test::helper({"pidfile", "--then", "setsid-child", "60000", "write",
                                       "--then", "sleep", "300", "--then", "exit", "0"},
                                      with_pidfile(pf)));
    // Watch the leader here: once it has exited, cancel. The cancel is posted, so the
    // library's own handling of the same exit (same reactor round) runs before it.
    auto w = std::make_shared<leader_watch>(ioc, op, pf);
    w->arm();
    op.on_done = [w] { w->stop(); };
    const bool done = run_until_done(op, 5000ms);
    w->stop();

    BOOST_TEST_REQUIRE(done, "exec did not complete within 5 s");
    const auto pids = recorded(pf);
    BOOST_TEST_REQUIRE(pids.size() == 2u, "pids " << fmt(pids));
    BOOST_TEST(gone_at_completion(pids), "alive after exec completed (the holder is "
                                             << pids[1] << "): " << fmt(still_alive(pids)));
    if (w->emitted)
    {
        BOOST_TEST(op.ec == asio::error::operation_aborted, describe(op));
        BOOST_TEST(op.result.status == exec_status::cancelled, describe(op));
    }
    else
        BOOST_TEST_MESSAGE("exec completed before the leader's exit was seen here, so there was "
                           "no drain left to cancel: "
                           << describe(op));
}

BOOST_AUTO_TEST_CASE(terminal_cancel_during_the_kill_grace_completes_promptly)
{
    const auto pf = pidfile();
    auto o = with_pidfile(pf);
    o.timeout = 200ms;
    o.kill_grace = 5s;
    const auto ready = ready_file();
    auto& op = start(
        sbx_test::helper({"ignore-term", "--then", "pidfile", "--then", "children", "1", "60000",
                          "--then", "touch", ready.string(), "--then", "sleep", "60000"},
                         o));
    // 100 ms into the grace (SIGTERM is ignored by the whole tree), cancel for good.
    auto timer = std::make_shared<asio::steady_timer>(ioc, 300ms);
    auto cancelled_at = std::make_shared<std::optional<clock_type::time_point>>();
    timer->async_wait([timer, cancelled_at, opp = &op](boost::system::error_code ec) {
        if (ec || opp->done)
            return;
        *cancelled_at = clock_type::now();
        opp->cancel.emit(asio::cancellation_type::terminal);
    });
    op.on_done = [timer] { timer->cancel(); };
    const bool done = run_until_done(op, 1300ms);

    BOOST_TEST_REQUIRE(fs::exists(ready), "the command was not set up when the timeout fired");
    BOOST_TEST_REQUIRE(cancelled_at->has_value(),
                       "exec completed before the cancel, inside the 5 s grace: " << describe(op));
    BOOST_TEST(done, "exec still pending " << ms_since(**cancelled_at)
                                           << " ms after the terminal cancel");
    if (!done)
        return;
    BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(op.finished - **cancelled_at)
                   .count() < 1000);
    BOOST_TEST((op.ec == errc::timeout || op.ec == asio::error::operation_aborted), describe(op));
    const auto pids = recorded(pf);
    BOOST_TEST(pids.size() == 2u);
    BOOST_TEST(gone_at_completion(pids), "survived: " << fmt(still_alive(pids)));
}

// --- row 10: children the kernel reaps ----------------------------------------------------

BOOST_AUTO_TEST_CASE(cpu_of_children_reaped_by_the_kernel_counts_against_the_budget)
{
    sandbox::exec_options o;
    o.timeout = 20s;
    o.limits.cpu_millicores = 50; // a budget of 1 s of cpu time
    // SIGCHLD ignored: the children's cpu never reaches the leader's cutime. Three children,
    // one after the other, burn 0.6 s of cpu each (1.8 s in all; none alone reaches 1 s).
    auto& op = start(sbx_test::helper(
        {"ignore-chld", "--then", "cpu-stream", "3", "600", "--then", "sleep", "1000"}, o));
    BOOST_TEST_REQUIRE(run_until_done(op, 8000ms), "exec did not complete within 8 s");

    BOOST_TEST(op.ec == errc::budget_exceeded, describe(op));
    BOOST_TEST(op.result.status == exec_status::budget_exceeded);
    BOOST_TEST(op.result.budget == sandbox::budget_kind::cpu);
}

// --- row 11: nothing lingers after the last capped tree -----------------------------------

BOOST_AUTO_TEST_CASE(capped_exec_of_true_leaves_no_work_behind)
{
    sandbox::exec_request req;
    req.command = "/bin/true";
    req.options.timeout = 5s;
    req.options.limits.memory_bytes = 256 * mib;
    req.options.limits.max_processes = 64;
    req.options.limits.cpu_millicores = 1000;
    const auto t0 = clock_type::now();
    auto& op = start(std::move(req));
    // run_until_done also requires that the io_context then runs out of work.
    BOOST_TEST_REQUIRE(run_until_done(op, 1000ms), "exec of /bin/true took over 1 s");

    BOOST_TEST(!op.ec, describe(op));
    BOOST_TEST(op.result.exit_code == 0);
    BOOST_TEST(ioc.stopped());
    BOOST_TEST(ms_since(t0) < 1000, "exec plus the io_context running out of work");
}

BOOST_AUTO_TEST_CASE(sandbox_run_of_true_exits_at_once)
{
    auto& cli = spawn_cli({"--root", root.str(), "--", "/bin/true"});
    const auto st = cli.wait_for(1000ms);
    BOOST_TEST(describe_status(st) == "exit 0", "stderr: " << cli.err());
}

// --- more: a member that kills its supervisors, a fork bomb ---------------------------------

BOOST_AUTO_TEST_CASE(member_that_sigkills_its_worker_leaves_nothing_alive)
{
    // Start the supervisor helper (one exec), so that its pid is known.
    auto& warm = start(sbx_test::helper({"exit", "0"}));
    BOOST_TEST_REQUIRE(run_until_done(warm, 5000ms));
    const pid_t helper = asio::use_service<sandbox::detail::supervisor_service>(ioc).helper_pid();
    BOOST_TEST_REQUIRE(helper > 0);

    const auto pf = pidfile();
    auto o = with_pidfile(pf);
    o.timeout = 3s; // backstop only
    // A setsid'd child with /dev/null stdio SIGKILLs its parent every millisecond for 60 s:
    // the leader, then the execution's worker it falls to, stopping at the helper. The
    // helper must kill the orphan. (A member that also kills the helper escapes to init:
    // the local backend's documented limit against a same-uid tree, docs/security.md.)
    auto& op = start(sbx_test::helper(
        {"pidfile", "--then", "kill-parents", std::to_string(helper), "60000", "--then", "sleep",
         "60000"},
        o));
    BOOST_TEST_REQUIRE(run_until_done(op, 5000ms), "exec did not complete within 5 s");

    BOOST_TEST_MESSAGE("ended with " << describe(op)); // an error is acceptable here
    const auto pids = recorded(pf);
    BOOST_TEST(pids.size() == 2u, "pids " << fmt(pids));
    BOOST_TEST(gone_at_completion(pids), "survived: " << fmt_parents(still_alive(pids)));
    BOOST_TEST(asio::use_service<sandbox::detail::supervisor_service>(ioc).helper_pid() == helper,
               "the helper itself must survive the loss of a worker");
}

BOOST_AUTO_TEST_CASE(fork_bomb_under_a_process_cap_ends_budget_exceeded_with_nothing_alive)
{
    const auto pf = pidfile();
    auto o = with_pidfile(pf);
    o.timeout = 8s; // backstop only: the cap must end it
    o.limits.max_processes = 50;
    // A binary fork tree of depth 10: 2046 processes if nothing stops it.
    auto& op = start(sbx_test::helper(
        {"pidfile", "--then", "fork-tree", "10", "60000", "--then", "sleep", "60000"}, o));
    // Killing up to 2046 processes on 2 cores takes seconds: the bound is generous.
    BOOST_TEST_REQUIRE(run_until_done(op, 10000ms), "exec did not complete within 10 s");

    BOOST_TEST(op.ec == errc::budget_exceeded, describe(op));
    BOOST_TEST(op.result.status == exec_status::budget_exceeded);
    BOOST_TEST(op.result.budget == sandbox::budget_kind::processes);
    const auto pids = recorded(pf);
    BOOST_TEST_MESSAGE(pids.size() << " processes recorded; " << describe(op));
    BOOST_TEST(gone_at_completion(pids), "alive after exec completed: " << fmt(still_alive(pids)));
    std::this_thread::sleep_for(300ms);
    const auto later = recorded(pf);
    BOOST_TEST(later.size() == pids.size(),
               "processes recorded after exec completed: " << later.size() - pids.size());
    BOOST_TEST(still_alive(later).empty(), "alive 300 ms later: " << fmt(still_alive(later)));
}

// --- row 5: a command that holds its caller's descriptors ---------------------------------

BOOST_AUTO_TEST_CASE(a_command_holding_its_callers_descriptors_dies_with_the_caller)
{
    // The command copies every descriptor of sandbox-run (command → worker → helper →
    // sandbox-run) with pidfd_getfd: the control socket, its channel, the pipes. Its child
    // inherits the copies. Neither the helper nor the worker can then see EOF when
    // sandbox-run dies: the helper watches sandbox-run itself.
    const auto pf = pidfile();
    const auto ready = ready_file();
    auto& cli = spawn_cli({"--root", root.str(), "--timeout", "30s", "--env",
                           "SBX_PIDFILE=" + pf.string(), "--", sbx_test::target, "pidfile",
                           "--then", "steal-fds", "3", "--then", "children", "1", "60000",
                           "--then", "touch", ready.string(), "--then", "sleep", "60000"});
    BOOST_TEST_REQUIRE(wait_for_file(ready, 3000ms), "the command never got ready");
    BOOST_TEST(cli.wait_for_out("stole ", 3000ms), "the command took nothing: " << cli.out());
    const auto pids = recorded(pf);
    BOOST_TEST(pids.size() == 2u, "pids " << fmt(pids));

    ::kill(cli.pid(), SIGKILL);
    BOOST_TEST_REQUIRE(cli.wait_for(2000ms).has_value(), "sandbox-run survived SIGKILL");
    BOOST_TEST(sbx_test::wait_gone(pids, 1000ms),
               "alive 1 s after sandbox-run died: " << fmt(still_alive(pids)));
}

BOOST_AUTO_TEST_CASE(a_stopped_caller_cannot_stretch_the_timeout)
{
    // The worker keeps the deadline: while sandbox-run is stopped (its loop cannot run a
    // timer), the 1 s timeout still ends the tree; once continued, sandbox-run reports it.
    const auto pf = pidfile();
    const auto ready = ready_file();
    auto& cli = spawn_cli({"--root", root.str(), "--timeout", "1s", "--env",
                           "SBX_PIDFILE=" + pf.string(), "--", sbx_test::target, "pidfile",
                           "--then", "children", "1", "60000", "--then", "touch",
                           ready.string(), "--then", "sleep", "60000"});
    BOOST_TEST_REQUIRE(wait_for_file(ready, 900ms), "the command never got ready");
    ::kill(cli.pid(), SIGSTOP);
    const auto pids = recorded(pf);
    BOOST_TEST(pids.size() == 2u, "pids " << fmt(pids));
    BOOST_TEST(sbx_test::wait_gone(pids, 2500ms),
               "alive 2.5 s into a 1 s timeout of a stopped caller: " << fmt(still_alive(pids)));
    ::kill(cli.pid(), SIGCONT);
    const auto st = cli.wait_for(2000ms);
    BOOST_TEST(describe_status(st) == "exit 124", "stderr: " << cli.err());
}

BOOST_AUTO_TEST_CASE(an_unprivileged_command_can_neither_trace_nor_rob_the_helper)
{
    // sandbox-run, the helper and the command all run as nobody (copies of the programs in
    // a directory nobody can reach). The command tries both verbs on the helper, its
    // grandparent: ptrace, and pidfd_getfd of its control socket and lifeline.
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0)
    {
        BOOST_TEST_MESSAGE("skipped: needs root and setpriv to become nobody");
        return;
    }
    fs::permissions(root.path(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    const auto run_copy = root.path() / "sandbox-run";
    const auto sup_copy = root.path() / "sandbox-supervisor";
    const auto target_copy = root.path() / "sbx_test_target";
    fs::copy_file(sbx_test::sandbox_run, run_copy);
    fs::copy_file(SBX_SUPERVISOR, sup_copy);
    fs::copy_file(sbx_test::target, target_copy);
    sandbox::exec_request req;
    req.command = "/usr/bin/setpriv";
    req.args = {"--reuid=65534", "--regid=65534", "--clear-groups", run_copy.string(),
                "--backend", "local", "--max-processes", "0", "--", target_copy.string(),
                "ptrace-up", "2",
                "--then", "steal-fds", "2"};
    req.options.timeout = 20s;
    req.options.env.inject = {{"SANDBOX_SUPERVISOR", sup_copy.string()}};
    auto& op = start(std::move(req));
    BOOST_TEST_REQUIRE(run_until_done(op, 25000ms), "exec did not complete");
    BOOST_TEST(!op.ec, describe(op));
    BOOST_TEST(op.result.out.data == "ptrace EPERM\nsteal EPERM\n", op.result.err.data);
}

BOOST_AUTO_TEST_SUITE_END()
