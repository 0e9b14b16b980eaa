// test/integration/cgroup_test.cpp: the cgroup path through the public API: each execution
// and session in a cgroup of its own, the tree killed in one write (a fork bomb, a helper that
// is stopped and loses its worker), cpu.stat's cpu time (children the kernel reaped), the
// helper's tree removed at its exit and a stale one swept at the next start, what
// `enforcement()` says, and an explicit directory that cannot be used.
//
// A test that needs the cgroup path (or its memory or pids controller) is skipped with the
// reason `enforcement()` gives where it is not used: never passed without running.
#include <boost/test/unit_test.hpp>

#include "session_support.hpp"
#include "support.hpp"

#include <sandbox/enforcement.hpp>
#include <sandbox/local_runner.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

using sbx_test::mib;

using sbx_test::contains;

std::string read_text(const fs::path& p)
{
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

/// The mount point of the cgroup2 filesystem (field 5 of its /proc/self/mountinfo line, whose
/// type follows the " - " separator); empty when none is mounted.
std::string cgroup2_mount()
{
    std::ifstream f("/proc/self/mountinfo");
    for (std::string line; std::getline(f, line);)
    {
        const auto sep = line.find(" - ");
        if (sep == std::string::npos || line.compare(sep + 3, 8, "cgroup2 ") != 0)
            continue;
        std::istringstream fields(line.substr(0, sep));
        std::string field;
        for (int i = 0; i < 5 && fields >> field; ++i) {}
        return field;
    }
    return {};
}

/// Our own cgroup v2 path ("0::" of /proc/self/cgroup), as print-cgroup prints it.
std::string own_cgroup()
{
    const std::string text = "\n" + read_text("/proc/self/cgroup");
    const auto at = text.find("\n0::");
    if (at == std::string::npos)
        return "none";
    return text.substr(at + 4, text.find('\n', at + 4) - at - 4);
}

/// `p` without "." and ".." parts and without a trailing separator, for comparisons.
fs::path norm(const fs::path& p)
{
    fs::path n = p.lexically_normal();
    return n.has_filename() || n == n.root_path() ? n : n.parent_path();
}

/// The cgroup directory print-cgroup printed (its first line: a later mode may print more).
fs::path cgroup_dir(std::string printed)
{
    printed = printed.substr(0, printed.find('\n'));
    return norm(cgroup2_mount() + printed);
}

std::string joined(const std::vector<std::string>& notes)
{
    std::string s;
    for (const auto& n : notes)
        s += (s.empty() ? "" : "; ") + n;
    return s;
}

/// An io_context and a local runner with the given cgroup setting (no check of its own at
/// the end, unlike sbx_test::local_fixture: a test may destroy it, then look at what is left).
struct context
{
    asio::io_context ioc;
    sbx_test::temp_dir root;
    sandbox::local_runner runner;

    explicit context(std::string cgroup) : runner(ioc.get_executor(), options(root, std::move(cgroup)))
    {
    }
    static sandbox::local_runner_options options(const sbx_test::temp_dir& root, std::string cgroup)
    {
        sandbox::local_runner_options o;
        o.root = root.str();
        o.cgroup = std::move(cgroup);
        return o;
    }
    sbx_test::run_outcome run(sandbox::exec_request req, std::chrono::seconds limit = 30s)
    {
        return sbx_test::run(ioc, runner, std::move(req), limit);
    }
    /// The directory of the cgroup a command of this runner runs in (a print-cgroup exec).
    fs::path exec_cgroup()
    {
        auto [ec, r] = run(sbx_test::helper({"print-cgroup"}));
        BOOST_REQUIRE_MESSAGE(!ec && r.exit_code == 0, "print-cgroup failed: " << ec.message()
                                                           << " " << sandbox::to_string(r.diag));
        return cgroup_dir(r.out.data);
    }
};

const sandbox::enforcement_report& auto_enforcement()
{
    static const sandbox::enforcement_report e = [] {
        context c("auto");
        return c.runner.enforcement();
    }();
    return e;
}

boost::test_tools::assertion_result cgroup_path_used(boost::unit_test::test_unit_id)
{
    const auto& e = auto_enforcement();
    if (e.tree_kill_by == "cgroup")
        return true;
    boost::test_tools::assertion_result r(false);
    r.message() << "the cgroup path is not used here (tree kill by '" << e.tree_kill_by
                << "'): " << joined(e.cgroup_notes);
    return r;
}

/// The cgroup path is used and holds `cap` (its controller is delegated).
boost::test_tools::assertion_result cap_held_by_cgroup(std::string sandbox::enforcement_report::*cap,
                                                       const char* controller)
{
    if (auto r = cgroup_path_used({}); !r)
        return r;
    const auto& e = auto_enforcement();
    if (e.*cap == "cgroup")
        return true;
    boost::test_tools::assertion_result r(false);
    r.message() << "the " << controller << " controller does not hold the cap here (held by '"
                << e.*cap << "'): " << joined(e.cgroup_notes);
    return r;
}

boost::test_tools::assertion_result memory_controller_used(boost::unit_test::test_unit_id)
{
    return cap_held_by_cgroup(&sandbox::enforcement_report::memory_cap_by, "memory");
}

boost::test_tools::assertion_result pids_controller_used(boost::unit_test::test_unit_id)
{
    return cap_held_by_cgroup(&sandbox::enforcement_report::task_cap_by, "pids");
}

/// A marker no other process carries: the env var SBX_MARK=<it> of a command and all it starts.
std::string new_mark()
{
    std::random_device rd;
    return "cg-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

sandbox::exec_options marked(const std::string& mark)
{
    sandbox::exec_options o;
    o.env.inject["SBX_MARK"] = mark;
    return o;
}

/// Live processes whose environment holds SBX_MARK=<mark>.
std::vector<pid_t> marked_processes(const std::string& mark)
{
    const std::string entry = "SBX_MARK=" + mark + std::string(1, '\0');
    std::vector<pid_t> found;
    for (pid_t pid : sbx_test::proc_pids())
        if (pid != ::getpid() &&
            contains(read_text("/proc/" + std::to_string(pid) + "/environ"), entry) &&
            sbx_test::alive(pid))
            found.push_back(pid);
    return found;
}

/// Polls until no process carries `mark` or `limit` passed; those left.
std::vector<pid_t> marked_after(const std::string& mark, std::chrono::milliseconds limit)
{
    const auto end = clock_type::now() + limit;
    auto left = marked_processes(mark);
    while (!left.empty() && clock_type::now() < end)
    {
        std::this_thread::sleep_for(20ms);
        left = marked_processes(mark);
    }
    return left;
}

std::string fmt(const std::vector<pid_t>& pids)
{
    std::string s;
    for (pid_t p : pids)
        s += (s.empty() ? "" : " ") + std::to_string(p);
    return s.empty() ? "none" : s;
}

/// Kills every process carrying `mark` at scope exit, until none is left (a failed test must
/// not leave a fork bomb behind).
struct kill_marked_at_exit
{
    std::string mark;
    ~kill_marked_at_exit()
    {
        for (int quiet = 0, round = 0; quiet < 3 && round < 500; ++round)
        {
            const auto left = marked_processes(mark);
            quiet = left.empty() ? quiet + 1 : 0;
            for (pid_t p : left)
                ::kill(p, SIGKILL);
            std::this_thread::sleep_for(10ms);
        }
    }
};

/// The pids of the processes in a cgroup and every cgroup below it.
std::vector<pid_t> procs_below(const fs::path& dir)
{
    std::vector<pid_t> pids = sbx_test::read_pids(dir / "cgroup.procs");
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
        if (e.is_directory(ec))
            for (pid_t p : sbx_test::read_pids(e.path() / "cgroup.procs"))
                pids.push_back(p);
    return pids;
}

/// Removes a cgroup and the cgroups below it, deepest first (their processes must be gone).
void remove_cgroup(const fs::path& dir)
{
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        return;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::recursive_directory_iterator(dir, ec))
        if (e.is_directory(ec))
            dirs.push_back(e.path());
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it)
        ::rmdir(it->c_str());
    ::rmdir(dir.c_str());
}

/// The helper pid of a tree directory "sbx-PID-START"; empty for any other name.
std::string helper_of(const fs::path& tree)
{
    const std::string name = tree.filename().string();
    const auto dash = name.find('-', 4);
    const auto digits = [&](std::size_t from, std::size_t to) {
        return to > from && name.find_first_not_of("0123456789", from) >= to;
    };
    if (name.rfind("sbx-", 0) != 0 || dash == std::string::npos || !digits(4, dash) ||
        !digits(dash + 1, name.size()))
        return {};
    return name.substr(4, dash - 4);
}

/// A helper's tree: "sbx-PID-START" in the cgroup2 mount. The tests write to and remove no
/// other cgroup than these and the exec cgroups in them.
bool is_helper_tree(const fs::path& dir)
{
    const std::string mount = cgroup2_mount();
    return !mount.empty() && !helper_of(dir).empty() &&
           norm(dir).string().rfind(mount + "/", 0) == 0;
}

/// Kills what is left in a helper's tree the test caused (`cgroup.kill`) and removes it at
/// scope exit.
struct remove_cgroup_at_exit
{
    fs::path dir;
    ~remove_cgroup_at_exit()
    {
        if (!is_helper_tree(dir) || !fs::exists(dir))
            return;
        if (const int fd = ::open((dir / "cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC); fd >= 0)
        {
            [[maybe_unused]] auto n = ::write(fd, "1", 1);
            ::close(fd);
        }
        for (int i = 0; i < 100 && !procs_below(dir).empty(); ++i)
            std::this_thread::sleep_for(10ms);
        remove_cgroup(dir);
    }
};

/// True once `dir` does not exist, polled for up to `limit` (the worker removes an exec's
/// cgroup right after it reports the end).
bool gone_within(const fs::path& dir, std::chrono::milliseconds limit)
{
    const auto end = clock_type::now() + limit;
    while (fs::exists(dir))
    {
        if (clock_type::now() >= end)
            return false;
        std::this_thread::sleep_for(5ms);
    }
    return true;
}

/// The names under `site` that start with "sbx-<pid>-" (trees of that helper).
std::vector<std::string> trees_of(const fs::path& site, const std::string& helper_pid)
{
    std::vector<std::string> v;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(site, ec))
        if (e.path().filename().string().rfind("sbx-" + helper_pid + "-", 0) == 0)
            v.push_back(e.path().filename().string());
    return v;
}

/// The helper processes (sandbox-supervisor) that are children of this process.
std::vector<pid_t> helper_children()
{
    const std::string helper = fs::canonical(SBX_SUPERVISOR).string();
    std::vector<pid_t> v;
    for (pid_t pid : sbx_test::proc_pids())
    {
        const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
        const auto close = stat.rfind(')');
        pid_t ppid = 0;
        if (close != std::string::npos &&
            std::sscanf(stat.c_str() + close + 1, " %*c %d", &ppid) == 1 && ppid == ::getpid() &&
            sbx_test::exe_of(pid) == helper)
            v.push_back(pid);
    }
    return v;
}

/// Field 22 (start time) of /proc/PID/stat.
std::string start_time_of(pid_t pid)
{
    const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos)
        return {};
    std::istringstream rest(stat.substr(close + 2)); // field 3 on
    std::string field;
    for (int i = 3; i <= 22 && rest >> field; ++i) {}
    return rest ? field : std::string();
}

double seconds(std::chrono::nanoseconds d)
{
    return std::chrono::duration<double>(d).count();
}

} // namespace

BOOST_AUTO_TEST_SUITE(cgroup)

// --- (a) each execution in a cgroup of its own ------------------------------------------------

BOOST_AUTO_TEST_CASE(an_exec_runs_in_a_cgroup_of_its_own_removed_after_it,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    fs::path leaf;
    {
        context c("auto");
        const auto e = c.runner.enforcement();
        auto [ec, r] = c.run(sbx_test::helper({"print-cgroup"}));
        BOOST_TEST(!ec, ec.message());
        BOOST_TEST(r.exit_code == 0);
        leaf = cgroup_dir(r.out.data);
        BOOST_TEST_INFO("cgroup of the command: " << leaf << " (printed: " << r.out.data << ")");
        BOOST_TEST(leaf.parent_path().parent_path() == norm(e.cgroup));
        BOOST_TEST(leaf.filename().string().rfind("x-", 0) == 0u);
        BOOST_TEST(leaf.parent_path().filename().string().rfind("sbx-", 0) == 0u);
        BOOST_TEST(r.in_cgroup);
        // Empty once the exec completed (its worker may keep it for the next exec).
        BOOST_TEST(procs_below(leaf).empty(), "processes left in " << leaf);
        BOOST_TEST(fs::is_directory(leaf.parent_path()), "the helper's tree is gone while it runs");
    }
    BOOST_TEST(gone_within(leaf, 1000ms), "the exec's cgroup " << leaf << " is still there");
}

BOOST_AUTO_TEST_CASE(a_worker_hands_an_empty_cgroup_on_but_never_a_killed_one,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    // A tree that left nothing behind leaves its cgroup empty and unkilled: the next exec of
    // the same worker starts in it, and the cpu time it reports is its own only. A tree whose
    // leftovers were killed gets a new cgroup next time: on Linux 6.18 a child started into a
    // cgroup that was once killed (CLONE_INTO_CGROUP) is killed at once.
    context c("auto");
    auto o = sandbox::exec_options{};
    o.timeout = 20s;
    auto [ec1, burn] = c.run(sbx_test::helper({"print-cgroup", "--then", "nocldwait-burn", "1", "300"}, o));
    BOOST_TEST_REQUIRE(!ec1, ec1.message());
    auto [ec2, quiet] = c.run(sbx_test::helper({"print-cgroup"}, o));
    BOOST_TEST_REQUIRE(!ec2, ec2.message());
    BOOST_TEST(cgroup_dir(quiet.out.data) == cgroup_dir(burn.out.data),
               burn.out.data << "then " << quiet.out.data);
    BOOST_TEST(burn.cpu_time >= std::chrono::nanoseconds(290ms)); // a child burning 300 ms
    BOOST_TEST(quiet.cpu_time < std::chrono::nanoseconds(100ms),
               "the reused cgroup's earlier cpu counted: " << seconds(quiet.cpu_time) << " s");
    // Leftovers killed after the command's exit: the next exec runs, in another cgroup.
    auto [ec3, left] = c.run(sbx_test::helper({"print-cgroup", "--then", "double-fork", "60000"}, o));
    BOOST_TEST(!ec3, ec3.message());
    BOOST_TEST(cgroup_dir(left.out.data) == cgroup_dir(burn.out.data));
    for (int round = 0; round < 2; ++round)
    {
        auto [ec4, after] = c.run(sbx_test::helper({"print-cgroup"}, o));
        BOOST_TEST(!ec4, ec4.message() << " " << sandbox::to_string(after.diag));
        BOOST_TEST(after.status == sandbox::exec_status::exited);
        BOOST_TEST(cgroup_dir(after.out.data) != cgroup_dir(left.out.data));
    }
}

BOOST_AUTO_TEST_CASE(with_cgroup_off_an_exec_stays_in_our_cgroup)
{
    context c("off");
    auto [ec, r] = c.run(sbx_test::helper({"print-cgroup"}));
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(r.out.data == own_cgroup() + "\n");
    BOOST_TEST(!r.in_cgroup);
}

BOOST_AUTO_TEST_CASE(a_session_runs_in_a_cgroup_of_its_own_and_close_leaves_none,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    context c("auto");
    const auto site = norm(c.runner.enforcement().cgroup);
    fs::path leaf;
    sbx_test::run_coro(c.ioc, [&]() -> asio::awaitable<void> {
        sandbox::session_spec spec;
        spec.command = sbx_test::target;
        spec.args = {"print-cgroup", "--then", "sleep", "60000"};
        auto s = co_await c.runner.sessions()->start(spec);
        std::uint64_t from = 0;
        const std::string printed = co_await sbx_test::read_until(*s, from, "\n");
        leaf = cgroup_dir(printed);
        BOOST_TEST_INFO("cgroup of the session: " << leaf);
        BOOST_TEST(leaf.parent_path().parent_path() == site);
        BOOST_TEST(leaf.filename().string().rfind("x-", 0) == 0u);
        const auto members = sbx_test::read_pids(leaf / "cgroup.procs");
        BOOST_TEST((members == std::vector<pid_t>{s->pid()}), "members: " << fmt(members));
        co_await s->close();
        const auto r = co_await s->wait();
        BOOST_TEST(r.in_cgroup);
    });
    // The session was killed (close): its cgroup is never reused, it goes at once.
    BOOST_TEST(gone_within(leaf, 1000ms), "the session's cgroup " << leaf << " is still there");
}

// --- (b) a fork bomb at full speed: zero survivors ----------------------------------------------

BOOST_AUTO_TEST_CASE(a_fork_bomb_at_full_speed_leaves_no_survivor,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    const std::string mark = new_mark();
    kill_marked_at_exit guard{mark};
    context c("auto");
    auto o = marked(mark);
    o.timeout = 300ms;
    auto [ec, r] = c.run(sbx_test::helper({"fork-bomb", "2000"}, o));
    const auto left = marked_processes(mark); // at once: no grace after the completion
    BOOST_TEST(r.out.data == "bombing\n");
    BOOST_TEST(ec == sandbox::errc::timeout, ec.message());
    BOOST_TEST(r.status == sandbox::exec_status::timed_out);
    BOOST_TEST(r.in_cgroup);
    BOOST_TEST(left.empty(), "bomb processes alive after the exec completed: " << fmt(left));
}

BOOST_AUTO_TEST_CASE(a_member_that_leaves_its_cgroup_still_dies_with_the_exec,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    // A member writes itself into another cgroup's cgroup.procs (here the site's: root may),
    // so cgroup.kill no longer reaches it, and is orphaned at once. The worker, the subreaper
    // of the whole tree, still holds it: the exec completes only once it is dead. (This is
    // why the worker stays on the cgroup path: a tree spawned from the caller would lose it.)
    context c("auto");
    const fs::path site = c.runner.enforcement().cgroup;
    const fs::path pidfile = c.root.path() / "escaped";
    const std::string script =
        "(sh -c 'echo $$ > \"$1/cgroup.procs\" && cat /proc/self/cgroup > \"$2.cgroup\" && "
        "echo $$ > \"$2\" && exec sleep 60' sh \"$1\" \"$2\" &); "
        "while [ ! -s \"$2\" ]; do sleep 0.01; done";
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", script, "sh", site.string(), pidfile.string()};
    req.options.timeout = 20s;
    auto [ec, r] = c.run(std::move(req));
    const auto escaped = sbx_test::read_pids(pidfile);
    BOOST_REQUIRE_MESSAGE(escaped.size() == 1u, "no escapee: " << ec.message() << " " << r.err.data);
    const bool alive_after = sbx_test::alive(escaped.front()); // at once: no grace
    if (alive_after)
        ::kill(escaped.front(), SIGKILL);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(r.exit_code == 0);
    // It did leave: its cgroup was the site's, not the exec's.
    const std::string its = "\n" + read_text(fs::path(pidfile.string() + ".cgroup"));
    BOOST_TEST(contains(its, "\n0::" + own_cgroup() + "\n"), its);
    BOOST_TEST(!alive_after, "the member that left its cgroup outlived the exec: "
                                 << escaped.front());
}

// --- (c) the helper stopped, its worker killed: the library kills the cgroup --------------------

BOOST_AUTO_TEST_CASE(a_stopped_helper_that_lost_its_worker_leaves_no_survivor,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    const std::string mark = new_mark();
    kill_marked_at_exit guard{mark};
    sbx_test::temp_dir scratch; // outlives the context
    remove_cgroup_at_exit tree_cleanup;
    std::optional<context> c(std::in_place, "auto");
    const fs::path site = c->runner.enforcement().cgroup;

    auto o = marked(mark);
    o.env.inject["SBX_PIDFILE"] = (scratch.path() / "pids").string();
    o.timeout = 20s;
    auto [ec, r] = c->run(sbx_test::helper({"orphan-helper", "2", "60000"}, o));
    BOOST_TEST(ec == sandbox::errc::internal, ec.message() << " " << r.status << " signal "
                                                             << r.signal << " "
                                                             << sandbox::to_string(r.diag)
                                                             << " stderr: " << r.err.data);
    const auto sleepers = sbx_test::read_pids(scratch.path() / "pids");
    BOOST_TEST(sleepers.size() == 2u, "the command did not start its sleepers");
    // The helper (stopped, our child) and its tree.
    const auto helpers = helper_children();
    BOOST_REQUIRE_MESSAGE(helpers.size() == 1u, "helpers: " << fmt(helpers));
    const std::string helper = std::to_string(helpers.front());
    const auto trees = trees_of(site, helper);
    BOOST_REQUIRE_MESSAGE(trees.size() == 1u, "trees of helper " << helper << ": " << trees.size());
    const fs::path tree = site / trees.front();
    BOOST_REQUIRE_MESSAGE(is_helper_tree(tree), "not a helper's tree: " << tree);
    tree_cleanup.dir = tree;

    c.reset(); // gives up on the helper: SIGKILL after the shutdown's wait, then cgroup.kill
    const auto left = marked_after(mark, 3000ms);
    BOOST_TEST(left.empty(), "processes of the command alive after the io_context's "
                             "destruction: " << fmt(left));
    BOOST_TEST(!sbx_test::alive(std::stoi(helper)), "the helper " << helper << " is alive");
    const auto inside = fs::exists(tree) ? procs_below(tree) : std::vector<pid_t>{};
    BOOST_TEST(inside.empty(), "processes left in " << tree << ": " << fmt(inside));
}

// --- (d) cpu of children reaped by the kernel -----------------------------------------------------

BOOST_AUTO_TEST_CASE(cpu_of_children_the_kernel_reaped_is_counted,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    context c("auto");
    sandbox::exec_options o;
    o.timeout = 60s;
    auto [ec, r] = c.run(sbx_test::helper({"nocldwait-burn", "6", "300"}, o), 90s);
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(r.out.data == "burnt 6\n");
    BOOST_TEST(r.in_cgroup);
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    BOOST_TEST_INFO("cpu " << seconds(r.cpu_time) << " s, wall " << seconds(r.wall_time)
                           << " s, " << cpus << " cpus");
    // 6 x 300 ms of their own cpu each; a tick's rounding below, and no more than the cpus
    // could have given in the wall time above.
    BOOST_TEST(seconds(r.cpu_time) >= 0.95 * 1.8);
    BOOST_TEST(seconds(r.cpu_time) <= seconds(r.wall_time) * cpus + 0.1);
}

BOOST_AUTO_TEST_CASE(a_cpu_budget_counts_children_the_kernel_reaped,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    context c("auto");
    sandbox::exec_options o;
    o.timeout = 20s;
    o.limits.cpu_millicores = 50; // 1 s of cpu in 20 s; the children burn 1.8 s
    auto [ec, r] = c.run(sbx_test::helper({"nocldwait-burn", "6", "300"}, o));
    BOOST_TEST_INFO("cpu " << seconds(r.cpu_time) << " s, wall " << seconds(r.wall_time) << " s");
    BOOST_TEST(ec == sandbox::errc::budget_exceeded, ec.message());
    BOOST_TEST(r.status == sandbox::exec_status::budget_exceeded);
    BOOST_TEST(r.budget == sandbox::budget_kind::cpu);
    BOOST_TEST(r.diag.limit == "cpu");
    BOOST_TEST(r.out.data.empty());
    BOOST_TEST(r.in_cgroup);
}

// --- (e) (f) the helper's tree: removed at its exit, a stale one swept --------------------------

BOOST_AUTO_TEST_CASE(the_helpers_tree_is_removed_when_the_context_ends,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    std::optional<context> c(std::in_place, "auto");
    const fs::path site = fs::path(c->runner.enforcement().cgroup);
    const fs::path tree = c->exec_cgroup().parent_path();
    BOOST_REQUIRE_MESSAGE(is_helper_tree(tree), "not a helper's tree: " << tree);
    remove_cgroup_at_exit cleanup{tree};
    const std::string helper = helper_of(tree);
    BOOST_TEST(tree.parent_path() == norm(site));
    c.reset();
    BOOST_TEST(!fs::exists(tree));
    const auto left = trees_of(site, helper);
    BOOST_TEST(left.empty(), "trees of helper " << helper << " under " << site << ": "
                                                << left.size());
}

BOOST_AUTO_TEST_CASE(a_stale_tree_is_killed_and_removed_at_the_next_start,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    const fs::path site = auto_enforcement().cgroup;
    // A pid and start time of a process that is gone: a child read alive, then reaped.
    int gate[2];
    BOOST_REQUIRE(::pipe2(gate, O_CLOEXEC) == 0);
    const pid_t dead = ::fork();
    if (dead == 0)
    {
        ::close(gate[1]);
        char ch;
        [[maybe_unused]] auto n = ::read(gate[0], &ch, 1);
        ::_exit(0);
    }
    BOOST_REQUIRE(dead > 0);
    const std::string start = start_time_of(dead);
    ::close(gate[0]);
    ::close(gate[1]);
    ::waitpid(dead, nullptr, 0);
    BOOST_REQUIRE(!start.empty());

    const fs::path stale = site / ("sbx-" + std::to_string(dead) + "-" + start);
    const fs::path leaf = stale / "x-1-1";
    BOOST_REQUIRE_MESSAGE(is_helper_tree(stale), "not a place for a tree: " << stale);
    remove_cgroup_at_exit cleanup{stale};
    pid_t sleeper = -1;
    struct reap_sleeper
    {
        pid_t& pid;
        ~reap_sleeper()
        {
            if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0)
            {
                ::kill(pid, SIGKILL);
                ::waitpid(pid, nullptr, 0);
            }
        }
    } reap{sleeper};
    BOOST_REQUIRE_MESSAGE(fs::create_directory(stale) && fs::create_directory(leaf),
                          "cannot make " << leaf);
    sleeper = ::fork();
    if (sleeper == 0)
    {
        ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    BOOST_REQUIRE(sleeper > 0);
    std::ofstream(leaf / "cgroup.procs") << sleeper << std::flush;
    BOOST_REQUIRE_MESSAGE(sbx_test::read_pids(leaf / "cgroup.procs") == std::vector<pid_t>{sleeper},
                          "the sleeper is not in " << leaf);

    context c("auto");
    auto [ec, r] = c.run(sbx_test::helper({"exit", "0"}));
    BOOST_TEST(!ec, ec.message());
    BOOST_TEST(!fs::exists(stale), "the stale tree " << stale << " is still there");
    int status = 0;
    pid_t reaped = 0;
    for (int i = 0; i < 100 && (reaped = ::waitpid(sleeper, &status, WNOHANG)) == 0; ++i)
        std::this_thread::sleep_for(10ms);
    BOOST_TEST(reaped == sleeper, "the stale tree's sleeper is alive");
    if (reaped == sleeper)
    {
        sleeper = -1;
        BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
    }
}

// --- (g) the memory and pids controllers, where they are delegated ------------------------------

BOOST_AUTO_TEST_CASE(memory_outside_the_process_is_charged_and_stopped,
                     *boost::unit_test::precondition(memory_controller_used))
{
    for (const std::string kind : {"memfd", "shm", "pipes", "sysv"})
    {
        BOOST_TEST_CONTEXT("512 MiB held in " << kind << " under a 64 MiB cap")
        {
            context c("auto");
            sandbox::exec_options o;
            o.limits.memory_bytes = 64 * mib;
            o.timeout = 30s;
            auto [ec, r] = c.run(sbx_test::helper({"hold", kind, "512", "60000"}, o));
            BOOST_TEST(ec == sandbox::errc::budget_exceeded, ec.message());
            BOOST_TEST(r.status == sandbox::exec_status::budget_exceeded);
            BOOST_TEST(r.budget == sandbox::budget_kind::memory);
            BOOST_TEST(r.diag.limit == "memory");
            BOOST_TEST(r.out.data == "holding " + kind + "\n");
            BOOST_TEST(r.in_cgroup);
        }
    }
}

BOOST_AUTO_TEST_CASE(a_fork_bomb_under_a_task_cap_is_stopped_by_the_pids_controller,
                     *boost::unit_test::precondition(pids_controller_used))
{
    const std::string mark = new_mark();
    kill_marked_at_exit guard{mark};
    context c("auto");
    auto o = marked(mark);
    o.limits.max_tasks = 50;
    o.timeout = 30s;
    auto [ec, r] = c.run(sbx_test::helper({"fork-bomb", "2000"}, o));
    const auto left = marked_processes(mark);
    BOOST_TEST(ec == sandbox::errc::budget_exceeded, ec.message());
    BOOST_TEST(r.status == sandbox::exec_status::budget_exceeded);
    BOOST_TEST((r.budget == sandbox::budget_kind::tasks || r.budget == sandbox::budget_kind::processes),
               "budget: " << r.budget);
    BOOST_TEST(r.in_cgroup);
    BOOST_TEST(left.empty(), "bomb processes alive after the exec completed: " << fmt(left));
}

// --- (h) what enforcement() says -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(enforcement_names_the_cgroup_mechanisms,
                     *boost::unit_test::precondition(cgroup_path_used))
{
    context c("auto");
    const auto e = c.runner.enforcement();
    const std::string notes = joined(e.cgroup_notes);
    BOOST_TEST_INFO("notes: " << notes);
    BOOST_TEST(e.tree_kill_by == "cgroup");
    BOOST_TEST(e.cpu_cap_by == "cgroup");
    // "auto" is our own cgroup.
    BOOST_TEST(norm(e.cgroup) == cgroup_dir(own_cgroup()));
    const std::string offered = read_text(fs::path(e.cgroup) / "cgroup.controllers");
    if (!contains(offered, "memory"))
    {
        BOOST_TEST(e.memory_cap_by == "sampler");
        BOOST_TEST(contains(notes, "memory"));
    }
    if (!contains(offered, "pids"))
    {
        BOOST_TEST(e.task_cap_by == "sampler");
        BOOST_TEST(contains(notes, "pids"));
    }
}

BOOST_AUTO_TEST_CASE(enforcement_with_cgroup_off_names_the_sampled_mechanisms)
{
    context c("off");
    const auto e = c.runner.enforcement();
    BOOST_TEST(e.tree_kill_by == "subreaper");
    BOOST_TEST(e.cpu_cap_by == "sampler");
    BOOST_TEST(e.memory_cap_by == "sampler");
    BOOST_TEST(e.process_cap_by == (e.process_cap ? "fork_gate" : ""));
    BOOST_TEST(e.cgroup.empty());
    BOOST_TEST(!e.cgroup_notes.empty());
}

// --- (i) an explicit directory that cannot be used -----------------------------------------------

BOOST_AUTO_TEST_CASE(an_explicit_cgroup_that_cannot_be_used_is_refused)
{
    sbx_test::temp_dir plain; // a directory, not in the cgroup2 mount
    const std::string mount = cgroup2_mount().empty() ? "/sys/fs/cgroup" : cgroup2_mount();
    const std::string missing = mount + "/sbx-test-missing-" + std::to_string(::getpid());
    for (const std::string& dir : {missing, plain.str()})
    {
        BOOST_TEST_CONTEXT("cgroup " << dir)
        {
            context c(dir);
            BOOST_TEST(contains(c.runner.enforcement().unavailable, dir),
                       "unavailable: " << c.runner.enforcement().unavailable);
            auto [ec, r] = c.run(sbx_test::helper({"exit", "0"}));
            BOOST_TEST(ec == sandbox::errc::not_available, ec.message());
            BOOST_TEST(r.status == sandbox::exec_status::not_started);
            BOOST_TEST(contains(r.diag.message, dir), "message: " << r.diag.message);
        }
    }
    BOOST_TEST(!fs::exists(missing));
}

BOOST_AUTO_TEST_SUITE_END()
