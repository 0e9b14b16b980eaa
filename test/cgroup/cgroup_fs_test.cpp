// test/cgroup/cgroup_fs_test.cpp: kernel/cgroup_site and helper/cgroup against a directory
// tree standing in for cgroupfs (file formats, limits, error paths), and against the real
// cgroup2 mount (a tree's whole life, with real processes in it).
#include "helper/cgroup.hpp"
#include "helper/proc.hpp"
#include "kernel/cgroup_site.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sd = sandbox::detail;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sandbox::unique_fd;

namespace {

// ---- files ------------------------------------------------------------------------------

void put(const std::string& path, const std::string& text)
{
    unique_fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    BOOST_TEST_REQUIRE(fd.get() >= 0, path << ": " << std::strerror(errno));
    BOOST_TEST_REQUIRE(::write(fd.get(), text.data(), text.size()) ==
                       static_cast<ssize_t>(text.size()));
}

std::string get(const std::string& path)
{
    std::string text;
    int err = sd::read_cgroup_file(AT_FDCWD, path.c_str(), text);
    return err ? "(" + std::string(::strerrorname_np(err)) + ")" : text;
}

bool exists(const std::string& path)
{
    return ::access(path.c_str(), F_OK) == 0;
}

unique_fd open_dir(const std::string& path)
{
    return unique_fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
}

// A temporary directory (readable by all: the EACCES test drops to nobody), removed with
// everything in it.
class temp_dir
{
public:
    temp_dir()
    {
        char tmpl[] = "/tmp/sbx-cgroup-test-XXXXXX";
        BOOST_TEST_REQUIRE(::mkdtemp(tmpl) != nullptr);
        path_ = tmpl;
        ::chmod(path_.c_str(), 0755);
    }
    ~temp_dir()
    {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// The control files of a cgroup directory in the stand-in (regular files, as a test sets
// them; a cgroup has them all, a test removes the ones it wants missing).
void stand_in_cgroup(const std::string& dir)
{
    ::mkdir(dir.c_str(), 0755);
    for (const char* f : {"cgroup.procs", "cgroup.controllers", "cgroup.subtree_control",
                          "cgroup.kill", "cgroup.freeze", "memory.max", "memory.swap.max",
                          "memory.oom.group", "memory.current", "memory.peak", "pids.max"})
        put(dir + "/" + f, "");
    put(dir + "/cgroup.events", "populated 0\nfrozen 0\n");
    put(dir + "/cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
    put(dir + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
    put(dir + "/pids.events", "max 0\n");
}

// ---- processes --------------------------------------------------------------------------

// The start time (/proc/PID/stat field 22) of a live or zombie process.
std::uint64_t starttime_of(pid_t pid)
{
    std::string text;
    if (sd::read_cgroup_file(AT_FDCWD, ("/proc/" + std::to_string(pid) + "/stat").c_str(), text))
        return 0;
    auto st = sd::parse_proc_stat(text);
    return st ? st->starttime : 0;
}

// A forked process that first runs `setup` (e.g. joins a cgroup), reports it is ready, then
// waits until its pipe closes (or burns cpu): killed or released by the test, reaped by
// `reap`.
class member
{
public:
    template <class Setup> member(Setup setup, bool burn = false)
    {
        int ready[2], hold[2];
        BOOST_TEST_REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
        BOOST_TEST_REQUIRE(::pipe2(hold, O_CLOEXEC) == 0);
        pid_ = ::fork();
        BOOST_TEST_REQUIRE(pid_ >= 0);
        if (pid_ == 0)
        {
            ::close(ready[0]);
            ::close(hold[1]);
            char ok = setup() ? 'y' : 'n';
            (void)!::write(ready[1], &ok, 1);
            ::close(ready[1]);
            volatile unsigned long spins = 0;
            while (burn)
                spins = spins + 1;
            char c;
            while (::read(hold[0], &c, 1) < 0 && errno == EINTR)
            {}
            ::_exit(0);
        }
        ::close(ready[1]);
        ::close(hold[0]);
        hold_.reset(hold[1]);
        char ok = 0;
        while (::read(ready[0], &ok, 1) < 0 && errno == EINTR)
        {}
        ::close(ready[0]);
        ready_ = ok == 'y';
    }
    ~member()
    {
        if (pid_ > 0)
        {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
    }
    member(const member&) = delete;
    member& operator=(const member&) = delete;

    pid_t pid() const { return pid_; }
    bool ready() const { return ready_; }
    /// Lets it end by itself (its pipe closes).
    void release() { hold_.reset(); }
    /// Reaps it; the wait status.
    int reap()
    {
        int status = 0;
        ::waitpid(std::exchange(pid_, 0), &status, 0);
        return status;
    }

private:
    pid_t pid_ = 0;
    bool ready_ = false;
    unique_fd hold_;
};

// A leaf `x-1-1` adopted in a stand-in tree, without limits.
struct stand_in_leaf
{
    stand_in_leaf()
    {
        stand_in_cgroup(tree / "x-1-1");
        BOOST_TEST_REQUIRE(sd::cgroup_leaf::adopt(dir.get(), "x-1-1", {}, 0, leaf, why) == 0);
    }
    temp_dir tree;
    unique_fd dir = open_dir(tree.path());
    sd::cgroup_leaf leaf;
    std::string why;
};

bool killed_by_sigkill(int status)
{
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

// Runs `body` in a forked child and returns what it reported as failed (one line each), or
// why the child did not end normally. For what must not happen in the test process itself:
// joining a cgroup, a mount namespace.
template <class Body> std::string in_child(Body body)
{
    int out[2];
    BOOST_TEST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    pid_t pid = ::fork();
    BOOST_TEST_REQUIRE(pid >= 0);
    if (pid == 0)
    {
        ::close(out[0]);
        std::string failures;
        try
        {
            body(failures);
        }
        catch (...)
        { // a failed BOOST_TEST_REQUIRE: never back into the test runner here
            failures += "child: exception\n";
        }
        (void)!::write(out[1], failures.data(), failures.size());
        ::_exit(0);
    }
    ::close(out[1]);
    std::string text;
    char buf[512];
    for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;)
        if (n > 0)
            text.append(buf, static_cast<std::size_t>(n));
        else if (errno != EINTR)
            break;
    ::close(out[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        text += "child ended with status " + std::to_string(status) + "\n";
    return text;
}

#define CHILD_CHECK(failures, cond)                                                                \
    do                                                                                             \
    {                                                                                              \
        if (!(cond))                                                                               \
            (failures) += std::to_string(__LINE__) + ": " #cond "\n";                              \
    } while (0)

bool readable(int fd)
{
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// ---- the real cgroup2 mount -------------------------------------------------------------

std::string real_mount()
{
    std::string text;
    if (sd::read_cgroup_file(AT_FDCWD, "/proc/self/mountinfo", text))
        return {};
    return sd::cgroup2_mount_of(text).value_or("");
}

boost::test_tools::assertion_result cgroup2_writable(boost::unit_test::test_unit_id)
{
    boost::test_tools::assertion_result r(false);
    const std::string mount = real_mount();
    if (mount.empty())
        r.message() << "no cgroup2 mount on this host";
    else if (::access(mount.c_str(), W_OK) != 0 ||
             ::access((mount + "/cgroup.procs").c_str(), W_OK) != 0)
        r.message() << mount << " is not writable by this test: the tests on the real "
                    << "cgroup2 mount need root or a delegated mount";
    else
        return true;
    return r;
}

// A scratch cgroup below the cgroup2 mount for one test: everything in it is killed and
// removed when the test ends, failed or not. The test process itself never joins it.
class scratch_cgroup
{
public:
    scratch_cgroup()
    {
        static std::atomic<int> n{0};
        path_ = real_mount() + "/sbxtest-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
        BOOST_TEST_REQUIRE(::mkdir(path_.c_str(), 0755) == 0,
                           path_ << ": " << std::strerror(errno));
    }
    ~scratch_cgroup()
    {
        sd::kill_cgroup_path(path_);
        int err = sd::remove_cgroup_path(path_, 5s);
        BOOST_TEST(err == 0, path_ << " not removed: " << std::strerror(err));
    }
    scratch_cgroup(const scratch_cgroup&) = delete;
    scratch_cgroup& operator=(const scratch_cgroup&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// The v2 path of a process.
std::string cgroup_of(pid_t pid)
{
    std::string text;
    sd::read_cgroup_file(AT_FDCWD, ("/proc/" + std::to_string(pid) + "/cgroup").c_str(), text);
    return sd::unified_path_of(text).value_or("(none)");
}

// Joins the cgroup `dir_fd` (the calling process).
bool join(int dir_fd)
{
    return sd::write_cgroup_file(dir_fd, "cgroup.procs", "0") == 0;
}

} // namespace

// ============================================================================================
BOOST_AUTO_TEST_SUITE(cgroup_stand_in)

BOOST_AUTO_TEST_CASE(site_auto_is_the_own_cgroup_below_the_mount)
{
    temp_dir root;
    std::string text;
    BOOST_TEST_REQUIRE(sd::read_cgroup_file(AT_FDCWD, "/proc/self/cgroup", text) == 0);
    auto own = sd::unified_path_of(text);
    BOOST_TEST_REQUIRE(own.has_value());
    const std::string parent = *own == "/" ? root.path() : root.path() + *own;
    fs::create_directories(parent);
    stand_in_cgroup(parent);
    put(parent + "/cgroup.subtree_control", "cpu io memory pids\n");

    auto s = sd::find_cgroup_site("auto", root.path());
    BOOST_TEST(s.why_not == "");
    BOOST_TEST(s.parent == parent);
    BOOST_TEST(s.controllers == (sd::cgc_cpu | sd::cgc_memory | sd::cgc_pids));
    BOOST_TEST(s.has_kill);
}

BOOST_AUTO_TEST_CASE(site_explicit_path_reads_the_parent)
{
    temp_dir root;
    stand_in_cgroup(root.path());
    stand_in_cgroup(root / "a");
    put(root / "a/cgroup.subtree_control", "memory io\n");
    put(root / "a/cgroup.controllers", "cpu memory io pids\n"); // offered is not enabled
    stand_in_cgroup(root / "b");
    ::unlink((root / "b/cgroup.kill").c_str());
    ::unlink((root / "b/cgroup.subtree_control").c_str());

    auto a = sd::find_cgroup_site(root / "a", root.path());
    BOOST_TEST(a.why_not == "");
    BOOST_TEST(a.parent == root / "a");
    BOOST_TEST(a.controllers == sd::cgc_memory);
    BOOST_TEST(a.has_kill);
    // Written differently, the same directory.
    BOOST_TEST(sd::find_cgroup_site(root.path() + "//a/", root.path()).parent == root / "a");
    // A cgroup below the root without cgroup.kill: an older kernel (freeze, kill, thaw).
    auto b = sd::find_cgroup_site(root / "b", root.path());
    BOOST_TEST(b.why_not == "");
    BOOST_TEST(!b.has_kill);
    BOOST_TEST(b.controllers == 0u);
    // The mount's root itself is allowed.
    BOOST_TEST(sd::find_cgroup_site(root.path(), root.path()).why_not == "");
}

BOOST_AUTO_TEST_CASE(site_rejects_what_is_not_a_writable_cgroup)
{
    temp_dir root;
    stand_in_cgroup(root.path());
    stand_in_cgroup(root / "a");
    ::mkdir((root / "plain").c_str(), 0755); // no cgroup.procs
    put(root / "file", "");
    struct row
    {
        std::string request;
        std::string why_part;
    };
    const row rows[] = {
        {"a", "not an absolute, normalised path"},
        {"", "not an absolute, normalised path"},
        {root.path() + "/a/../a", "not an absolute, normalised path"},
        {root.path() + "/./a", "not an absolute, normalised path"},
        {"/", "not inside the cgroup2 mount"},
        {root.path() + "x/a", "not inside the cgroup2 mount"}, // a prefix is not a parent
        {root / "missing", "ENOENT"},
        {root / "file", "ENOTDIR"},
        {root / "plain", "not a cgroup (no cgroup.procs)"},
    };
    for (const auto& r : rows)
    {
        auto s = sd::find_cgroup_site(r.request, root.path());
        BOOST_TEST(s.why_not.find(r.why_part) != std::string::npos,
                   "request \"" << r.request << "\": " << s.why_not);
        BOOST_TEST(s.parent.empty());
    }
    BOOST_TEST(sd::find_cgroup_site("auto", "relative/root").why_not != "");
}

// EROFS and EACCES need a read-only mount and another user: both are made in a forked
// child (its own mount namespace), never in the test process.
BOOST_AUTO_TEST_CASE(site_not_writable_on_a_read_only_mount_or_for_another_user)
{
    temp_dir root;
    stand_in_cgroup(root.path());
    stand_in_cgroup(root / "a");
    stand_in_cgroup(root / "a/t");
    const std::string a = root / "a";
    std::string failures = in_child([&](std::string& f) {
        if (::unshare(CLONE_NEWNS) != 0 ||
            ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount(root.path().c_str(), root.path().c_str(), nullptr, MS_BIND, nullptr) != 0 ||
            ::mount(nullptr, root.path().c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY,
                    nullptr) != 0)
        {
            f += std::string("read-only bind mount: ") + std::strerror(errno) + "\n";
            return;
        }
        auto s = sd::find_cgroup_site(a, root.path());
        CHILD_CHECK(f, s.why_not == a + ": not writable (EROFS)");
        CHILD_CHECK(f, s.parent.empty());
        CHILD_CHECK(f, sd::kill_cgroup_path(a) == EROFS);
        unique_fd dir = open_dir(a);
        sd::cgroup_leaf leaf;
        std::string why;
        CHILD_CHECK(f, sd::cgroup_leaf::make(dir.get(), "x-1-1", {}, 0, leaf, why) == EROFS);
        CHILD_CHECK(f, why == "x-1-1: mkdir: EROFS");
        CHILD_CHECK(f, sd::remove_cgroup_path(a + "/t", 1s) == EROFS);
    });
    BOOST_TEST(failures == "");
    BOOST_TEST(exists(root / "a/t")); // the read-only view kept it

    failures = in_child([&](std::string& f) {
        if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0)
        {
            f += std::string("setresuid: ") + std::strerror(errno) + "\n";
            return;
        }
        auto s = sd::find_cgroup_site(a, root.path());
        CHILD_CHECK(f, s.why_not == a + ": not writable (EACCES)");
        CHILD_CHECK(f, sd::kill_cgroup_path(a) == EACCES);
        CHILD_CHECK(f, sd::remove_cgroup_path(a + "/t", 1s) == EACCES);
    });
    BOOST_TEST(failures == "");
}

BOOST_AUTO_TEST_CASE(leaf_writes_the_limits_of_its_controllers)
{
    temp_dir tree;
    stand_in_cgroup(tree / "x-1-1");
    unique_fd dir = open_dir(tree.path());
    sd::cgroup_leaf leaf;
    std::string why;
    const sd::cgroup_limits limits{64u << 20, 50};
    BOOST_TEST_REQUIRE(sd::cgroup_leaf::adopt(dir.get(), "x-1-1", limits,
                                              sd::cgc_memory | sd::cgc_pids, leaf, why) == 0,
                       why);
    BOOST_TEST(static_cast<bool>(leaf));
    BOOST_TEST(leaf.name() == "x-1-1");
    BOOST_TEST(get(tree / "x-1-1/memory.max") == "67108864");
    BOOST_TEST(get(tree / "x-1-1/memory.swap.max") == "0");
    BOOST_TEST(get(tree / "x-1-1/memory.oom.group") == "1");
    BOOST_TEST(get(tree / "x-1-1/pids.max") == "50");

    // Without the controllers (or without a limit) nothing is written.
    stand_in_cgroup(tree / "x-1-2");
    sd::cgroup_leaf none;
    BOOST_TEST_REQUIRE(sd::cgroup_leaf::adopt(dir.get(), "x-1-2", limits, sd::cgc_cpu, none, why) ==
                       0);
    stand_in_cgroup(tree / "x-1-3");
    sd::cgroup_leaf no_limits;
    BOOST_TEST_REQUIRE(sd::cgroup_leaf::adopt(dir.get(), "x-1-3", {}, sd::cgc_memory | sd::cgc_pids,
                                              no_limits, why) == 0);
    for (const char* leaf_name : {"x-1-2", "x-1-3"})
        for (const char* f : {"memory.max", "memory.swap.max", "memory.oom.group", "pids.max"})
            BOOST_TEST(get(tree / (std::string(leaf_name) + "/" + f)) == "", leaf_name << '/' << f);

    // No swap accounting (memory.swap.max absent) is no failure; only pids, only memory.
    stand_in_cgroup(tree / "x-1-4");
    ::unlink((tree / "x-1-4/memory.swap.max").c_str());
    sd::cgroup_leaf no_swap;
    BOOST_TEST(sd::cgroup_leaf::adopt(dir.get(), "x-1-4", {1000, 7}, sd::cgc_pids | sd::cgc_memory,
                                      no_swap, why) == 0);
    BOOST_TEST(get(tree / "x-1-4/memory.max") == "1000");
    BOOST_TEST(get(tree / "x-1-4/pids.max") == "7");
}

BOOST_AUTO_TEST_CASE(leaf_failures_say_which_file_and_leave_nothing)
{
    temp_dir tree;
    unique_fd dir = open_dir(tree.path());
    std::string why;
    sd::cgroup_leaf leaf;

    // mkdir makes no control files in a plain directory: cgroup.events is missing.
    BOOST_TEST(sd::cgroup_leaf::make(dir.get(), "x-1-1", {}, 0, leaf, why) == ENOENT);
    BOOST_TEST(why == "x-1-1: inotify cgroup.events: ENOENT");
    BOOST_TEST(!exists(tree / "x-1-1")); // removed again
    BOOST_TEST(!static_cast<bool>(leaf));

    // A limit file missing (the controller is not there after all).
    stand_in_cgroup(tree / "x-1-2");
    ::unlink((tree / "x-1-2/pids.max").c_str());
    BOOST_TEST(sd::cgroup_leaf::adopt(dir.get(), "x-1-2", {0, 5}, sd::cgc_pids, leaf, why) ==
               ENOENT);
    BOOST_TEST(why == "x-1-2/pids.max: ENOENT");
    BOOST_TEST(!static_cast<bool>(leaf));
    BOOST_TEST(exists(tree / "x-1-2")); // adopt removes nothing

    // The name is taken; the tree is gone.
    BOOST_TEST(sd::cgroup_leaf::make(dir.get(), "x-1-2", {}, 0, leaf, why) == EEXIST);
    BOOST_TEST(why == "x-1-2: mkdir: EEXIST");
    BOOST_TEST(sd::cgroup_leaf::adopt(dir.get(), "x-9-9", {}, 0, leaf, why) == ENOENT);
    BOOST_TEST(why == "x-9-9: open: ENOENT");
    unique_fd gone = open_dir(tree.path());
    fs::remove_all(tree / "x-1-2");
    ::rmdir(tree.path().c_str());
    BOOST_TEST(sd::cgroup_leaf::make(gone.get(), "x-1-3", {}, 0, leaf, why) == ENOENT);
    ::mkdir(tree.path().c_str(), 0755); // for temp_dir
}

BOOST_FIXTURE_TEST_CASE(leaf_reads_the_event_and_stat_files, stand_in_leaf)
{
    auto r = leaf.read();
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(!r->populated);
    BOOST_TEST(r->cpu.count() == 0);

    put(tree / "x-1-1/cgroup.events", "populated 1\nfrozen 0\n");
    put(tree / "x-1-1/cpu.stat", "usage_usec 1500042\nuser_usec 1000000\nsystem_usec 500042\n");
    put(tree / "x-1-1/memory.peak", "73728\n");
    put(tree / "x-1-1/memory.current", "4096\n");
    put(tree / "x-1-1/memory.events",
        "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\noom_group_kill 1\n");
    put(tree / "x-1-1/pids.events", "max 4\n");
    r = leaf.read();
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(r->populated);
    BOOST_TEST(r->cpu.count() == 1500042);
    BOOST_TEST(r->memory_peak == 73728u);
    BOOST_TEST(r->oom_kills == 3u);
    BOOST_TEST(r->pids_refused == 4u);
    BOOST_TEST(leaf.cpu().value_or(0us).count() == 1500042);

    // Before Linux 5.19 there is no memory.peak: memory.current stands in. Absent files read 0.
    ::unlink((tree / "x-1-1/memory.peak").c_str());
    ::unlink((tree / "x-1-1/pids.events").c_str());
    put(tree / "x-1-1/memory.events", "oom_kill 2\n");
    r = leaf.read();
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(r->memory_peak == 4096u);
    BOOST_TEST(r->oom_kills == 2u);
    BOOST_TEST(r->pids_refused == 0u);

    // Malformed numbers read as 0, not as a prefix.
    put(tree / "x-1-1/memory.current", "12ab\n");
    BOOST_TEST(leaf.read()->memory_peak == 0u);
    put(tree / "x-1-1/cpu.stat", "user_usec 5\n");
    BOOST_TEST(!leaf.cpu().has_value());
    BOOST_TEST(leaf.read()->cpu.count() == 0);

    // cgroup.events and cpu.stat stay open from the leaf's making (read at offset 0 each
    // time: above, each new content was seen); a removed cgroup's open files fail to read,
    // which the real-mount test below checks.
}

// A leaf whose cpu.stat could not be opened when it was made reads it by name each time:
// absent, then present.
BOOST_AUTO_TEST_CASE(leaf_reads_by_name_what_it_could_not_keep_open)
{
    temp_dir tree;
    stand_in_cgroup(tree / "x-1-1");
    ::unlink((tree / "x-1-1/cpu.stat").c_str());
    unique_fd dir = open_dir(tree.path());
    sd::cgroup_leaf leaf;
    std::string why;
    BOOST_TEST_REQUIRE(sd::cgroup_leaf::adopt(dir.get(), "x-1-1", {}, 0, leaf, why) == 0);
    BOOST_TEST(!leaf.cpu().has_value());
    BOOST_TEST(leaf.read()->cpu.count() == 0);
    put(tree / "x-1-1/cpu.stat", "usage_usec 77\n");
    BOOST_TEST(leaf.cpu().value_or(0us).count() == 77);
    put(tree / "x-1-1/cpu.stat", "usage_usec 78\n");
    BOOST_TEST(leaf.read()->cpu.count() == 78);
}

BOOST_FIXTURE_TEST_CASE(leaf_events_fd_wakes_on_each_event_file, stand_in_leaf)
{
    BOOST_TEST_REQUIRE(leaf.events_fd() >= 0);
    BOOST_TEST(!readable(leaf.events_fd()));
    for (const char* f : {"cgroup.events", "memory.events", "pids.events"})
    {
        put(tree / (std::string("x-1-1/") + f), "populated 0\n");
        BOOST_TEST(readable(leaf.events_fd()), f);
        leaf.clear_events();
        BOOST_TEST(!readable(leaf.events_fd()), f);
    }
    // A file outside the three wakes nothing.
    put(tree / "x-1-1/cpu.stat", "usage_usec 1\n");
    BOOST_TEST(!readable(leaf.events_fd()));
}

BOOST_FIXTURE_TEST_CASE(leaf_kill_writes_cgroup_kill_or_freezes_and_signals_each, stand_in_leaf)
{
    BOOST_TEST(leaf.kill() == 0);
    BOOST_TEST(get(tree / "x-1-1/cgroup.kill") == "1");

    // No cgroup.kill: freeze, SIGKILL each pid listed, thaw.
    stand_in_cgroup(tree / "x-1-2");
    ::unlink((tree / "x-1-2/cgroup.kill").c_str());
    member one([] { return true; });
    member two([] { return true; });
    put(tree / "x-1-2/cgroup.procs",
        std::to_string(one.pid()) + "\n" + std::to_string(two.pid()) + "\n");
    sd::cgroup_leaf old;
    BOOST_TEST_REQUIRE(sd::cgroup_leaf::adopt(dir.get(), "x-1-2", {}, 0, old, why) == 0);
    BOOST_TEST(old.kill() == 0);
    BOOST_TEST(get(tree / "x-1-2/cgroup.freeze") == "0"); // thawed again
    BOOST_TEST(killed_by_sigkill(one.reap()));
    BOOST_TEST(killed_by_sigkill(two.reap()));

    // Neither file: the errno of the freeze.
    stand_in_cgroup(tree / "x-1-3");
    ::unlink((tree / "x-1-3/cgroup.kill").c_str());
    ::unlink((tree / "x-1-3/cgroup.freeze").c_str());
    sd::cgroup_leaf neither;
    BOOST_TEST_REQUIRE(sd::cgroup_leaf::adopt(dir.get(), "x-1-3", {}, 0, neither, why) == 0);
    BOOST_TEST(neither.kill() == ENOENT);
    BOOST_TEST(sd::cgroup_leaf{}.kill() == EBADF);
}

BOOST_FIXTURE_TEST_CASE(leaf_remove_is_rmdir, stand_in_leaf)
{
    BOOST_TEST(leaf.remove(dir.get()) == ENOTEMPTY); // the stand-in's files are real files
    BOOST_TEST(static_cast<bool>(leaf));
    for (const auto& e : fs::directory_iterator(tree / "x-1-1"))
        fs::remove(e.path());
    BOOST_TEST(leaf.remove(dir.get()) == 0);
    BOOST_TEST(!exists(tree / "x-1-1"));
    BOOST_TEST(!static_cast<bool>(leaf));
    BOOST_TEST(leaf.events_fd() == -1);
    BOOST_TEST(leaf.remove(dir.get()) == ENOENT);
}

BOOST_AUTO_TEST_CASE(remove_and_kill_by_path)
{
    temp_dir root;
    fs::create_directories(root / "t/a/b/c");
    fs::create_directories(root / "t/d");
    BOOST_TEST(sd::remove_cgroup_path(root / "t", 0ms) == 0);
    BOOST_TEST(!exists(root / "t"));
    BOOST_TEST(sd::remove_cgroup_path(root / "t", 0ms) == 0); // gone counts as done
    BOOST_TEST(sd::remove_cgroup_path(root / "no/such/parent", 0ms) == 0);

    // A directory that will not go: its errno, and what it holds stays.
    fs::create_directories(root / "u/a");
    put(root / "u/a/file", "");
    BOOST_TEST(sd::remove_cgroup_path(root / "u", 0ms) == ENOTEMPTY);
    BOOST_TEST(exists(root / "u/a"));
    put(root / "plain", "");
    BOOST_TEST(sd::remove_cgroup_path(root / "plain", 0ms) == ENOTDIR);

    BOOST_TEST(sd::kill_cgroup_path(root / "missing") == ENOENT);
    stand_in_cgroup(root / "k");
    BOOST_TEST(sd::kill_cgroup_path(root / "k") == 0);
    BOOST_TEST(get(root / "k/cgroup.kill") == "1");

    std::vector<std::string> children;
    BOOST_TEST(sd::list_child_cgroups(open_dir(root.path()).get(), children) == 0);
    std::sort(children.begin(), children.end());
    BOOST_TEST(children == (std::vector<std::string>{"k", "u"}));
    BOOST_TEST(sd::list_child_cgroups(-1, children) == EBADF);
}

BOOST_AUTO_TEST_CASE(tree_open_failure_leaves_nothing)
{
    temp_dir root;
    stand_in_cgroup(root.path());
    auto site = sd::find_cgroup_site(root.path(), root.path());
    BOOST_TEST_REQUIRE(site.why_not == "");
    const std::string before = cgroup_of(::getpid());
    sd::cgroup_tree tree;
    std::string why;
    // The stand-in's new supervisor directory has no cgroup.procs to write.
    BOOST_TEST(sd::cgroup_tree::open(site, tree, why) == ENOENT);
    const std::string name = sd::tree_name(::getpid(), starttime_of(::getpid()));
    BOOST_TEST(why == root.path() + "/" + name + "/supervisor/cgroup.procs: ENOENT");
    BOOST_TEST(!static_cast<bool>(tree));
    BOOST_TEST(!exists(root / name));
    BOOST_TEST(cgroup_of(::getpid()) == before);

    sd::cgroup_site off = sd::find_cgroup_site("off");
    BOOST_TEST(sd::cgroup_tree::open(off, tree, why) == EINVAL);
}

// Which trees are stale is told by the owner's pid and start time; the rest stays.
BOOST_AUTO_TEST_CASE(sweep_removes_only_trees_of_gone_owners)
{
    temp_dir root;
    member live([] { return true; });
    pid_t dead_pid = 0;
    std::uint64_t dead_start = 0;
    {
        member dead([] { return true; });
        dead_pid = dead.pid();
        dead_start = starttime_of(dead_pid);
    }
    const std::uint64_t live_start = starttime_of(live.pid());
    BOOST_TEST_REQUIRE(live_start != 0u);
    const std::string dead_tree = root / sd::tree_name(dead_pid, dead_start);
    const std::string reused = root / sd::tree_name(live.pid(), live_start + 1);
    const std::string alive = root / sd::tree_name(live.pid(), live_start);
    const std::string own = root / sd::tree_name(::getpid(), starttime_of(::getpid()));
    for (const auto& d : {dead_tree + "/x-1-1/deeper", reused + "/supervisor", alive + "/x-2-2",
                          own + "/supervisor", root / "other/x", root / "sbx-bad"})
        fs::create_directories(d);

    BOOST_TEST(sd::cgroup_tree::sweep_stale(root.path(), 0ms) == 2);
    BOOST_TEST(!exists(dead_tree));
    BOOST_TEST(!exists(reused));
    BOOST_TEST(exists(alive + "/x-2-2"));
    BOOST_TEST(exists(own + "/supervisor"));
    BOOST_TEST(exists(root / "other/x"));
    BOOST_TEST(exists(root / "sbx-bad"));
    BOOST_TEST(sd::cgroup_tree::sweep_stale(root / "missing", 0ms) == 0);
}

BOOST_AUTO_TEST_CASE(process_start_time_reads_past_any_name)
{
    // A tree's name carries its helper's start time, which the library and the helper read
    // each for itself: the field is found past a name holding spaces and parentheses, and
    // agrees with the helper's /proc parser. A process that is gone is ENOENT.
    int gate[2], ready[2];
    BOOST_REQUIRE(::pipe(gate) == 0);
    BOOST_REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0)
    {
        ::prctl(PR_SET_NAME, ") 1 2 (x");
        char c = 'r';
        ::close(gate[1]);
        (void)::write(ready[1], &c, 1);
        (void)::read(gate[0], &c, 1); // until the parent closes its end
        ::_exit(0);
    }
    ::close(gate[0]);
    ::close(ready[1]);
    char c;
    BOOST_REQUIRE(::read(ready[0], &c, 1) == 1); // named by now
    ::close(ready[0]);
    std::uint64_t start = 0;
    BOOST_TEST(sd::process_start_time(child, start) == 0);
    std::string text;
    BOOST_REQUIRE(sd::read_cgroup_file(AT_FDCWD, ("/proc/" + std::to_string(child) + "/stat").c_str(),
                                       text) == 0);
    BOOST_TEST(text.find(") 1 2 (x") != std::string::npos, text);
    const auto st = sd::parse_proc_stat(text);
    BOOST_REQUIRE(st.has_value());
    BOOST_TEST(start == st->starttime);
    ::close(gate[1]);
    int status = 0;
    BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
    BOOST_TEST(sd::process_start_time(child, start) == ENOENT);
}

BOOST_AUTO_TEST_SUITE_END()

// ============================================================================================
BOOST_AUTO_TEST_SUITE(cgroup_real, *boost::unit_test::precondition(cgroup2_writable))

BOOST_AUTO_TEST_CASE(site_auto_on_this_host)
{
    std::string text;
    BOOST_TEST_REQUIRE(sd::read_cgroup_file(AT_FDCWD, "/proc/self/cgroup", text) == 0);
    const std::string own = sd::unified_path_of(text).value_or("?");
    const std::string mount = real_mount();
    auto s = sd::find_cgroup_site("auto");
    BOOST_TEST(s.why_not == "");
    BOOST_TEST(s.parent == (own == "/" ? mount : mount + own));
    BOOST_TEST(s.has_kill);
    // What the site offers is what its parent enables for children, and no more.
    std::string enabled;
    BOOST_TEST(sd::read_cgroup_file(AT_FDCWD, (s.parent + "/cgroup.subtree_control").c_str(),
                                    enabled) == 0);
    BOOST_TEST(s.controllers ==
               (sd::parse_controllers(enabled) & (sd::cgc_cpu | sd::cgc_memory | sd::cgc_pids)));
}

// The whole life of a tree, in a child (open moves the calling process into the tree).
BOOST_AUTO_TEST_CASE(tree_lifecycle_kill_emptiness_cpu_and_cleanup)
{
    scratch_cgroup parent;
    const std::string p = parent.path();
    std::string failures = in_child([&](std::string& f) {
        auto site = sd::find_cgroup_site(p);
        CHILD_CHECK(f, site.why_not == "");
        CHILD_CHECK(f, site.has_kill);
        sd::cgroup_tree tree;
        std::string why;
        int err = sd::cgroup_tree::open(site, tree, why);
        CHILD_CHECK(f, err == 0);
        if (err)
        {
            f += "open: " + why + "\n";
            return;
        }
        const std::string name = sd::tree_name(::getpid(), starttime_of(::getpid()));
        CHILD_CHECK(f, tree.path() == p + "/" + name);
        CHILD_CHECK(f, cgroup_of(::getpid()).ends_with("/" + name + "/supervisor"));
        // A second open from the same process finds its name taken.
        sd::cgroup_tree again;
        CHILD_CHECK(f, sd::cgroup_tree::open(site, again, why) == EEXIST);
        CHILD_CHECK(f, cgroup_of(::getpid()).ends_with("/" + name + "/supervisor"));

        sd::cgroup_leaf leaf;
        err = sd::cgroup_leaf::make(tree.fd(), "x-1-1", {}, tree.controllers(), leaf, why);
        CHILD_CHECK(f, err == 0);
        if (err)
        {
            f += "make: " + why + "\n";
            tree.tear_down(1s);
            return;
        }
        CHILD_CHECK(f, leaf.read().has_value() && !leaf.read()->populated);

        const int leaf_fd = leaf.fd();
        member sleeper1([&] { return join(leaf_fd); });
        member sleeper2([&] { return join(leaf_fd); });
        member burner([&] { return join(leaf_fd); }, true);
        CHILD_CHECK(f, sleeper1.ready() && sleeper2.ready() && burner.ready());
        auto r = leaf.read();
        CHILD_CHECK(f, r && r->populated);
        // cpu.stat counts the burner.
        auto c0 = leaf.cpu().value_or(0us);
        for (int i = 0; i < 10000 && leaf.cpu().value_or(0us) <= c0; ++i)
            ::usleep(1000);
        CHILD_CHECK(f, leaf.cpu().value_or(0us) > c0);

        leaf.clear_events();
        CHILD_CHECK(f, leaf.kill() == 0);
        // Killed at once: each member ends by SIGKILL, none survives; "populated 0" wakes
        // the inotify descriptor.
        CHILD_CHECK(f, killed_by_sigkill(sleeper1.reap()));
        CHILD_CHECK(f, killed_by_sigkill(sleeper2.reap()));
        CHILD_CHECK(f, killed_by_sigkill(burner.reap()));
        bool populated = true;
        for (int i = 0; i < 100 && populated; ++i)
        {
            pollfd pfd{leaf.events_fd(), POLLIN, 0};
            if (::poll(&pfd, 1, 10000) != 1)
                break;
            leaf.clear_events();
            populated = leaf.read().value_or(sd::cgroup_reading{true}).populated;
        }
        CHILD_CHECK(f, !populated);
        std::string procs = "?";
        sd::read_cgroup_file(leaf.fd(), "cgroup.procs", procs);
        CHILD_CHECK(f, procs == "");
        CHILD_CHECK(f, leaf.remove(tree.fd()) == 0);
        CHILD_CHECK(f, !exists(tree.path() + "/x-1-1"));

        // rmdir of a leaf with a member: EBUSY; remove_cgroup_path retries until it is gone.
        sd::cgroup_leaf busy;
        CHILD_CHECK(f, sd::cgroup_leaf::make(tree.fd(), "x-1-2", {}, 0, busy, why) == 0);
        const int busy_fd = busy.fd();
        member inside([&] { return join(busy_fd); });
        CHILD_CHECK(f, inside.ready());
        CHILD_CHECK(f, busy.remove(tree.fd()) == EBUSY);
        CHILD_CHECK(f, sd::remove_cgroup_path(tree.path() + "/x-1-2", 0ms) == EBUSY);
        inside.release(); // it ends by itself while remove_cgroup_path retries
        CHILD_CHECK(f, sd::remove_cgroup_path(tree.path() + "/x-1-2", 10s) == 0);
        CHILD_CHECK(f, !exists(tree.path() + "/x-1-2"));
        CHILD_CHECK(f, WIFEXITED(inside.reap()));

        // The caller's own tree is never swept.
        CHILD_CHECK(f, sd::cgroup_tree::sweep_stale(p, 1s) == 0);
        CHILD_CHECK(f, exists(tree.path()));

        // tear_down kills what is left in the executions' cgroups and removes the tree.
        sd::cgroup_leaf last;
        CHILD_CHECK(f, sd::cgroup_leaf::make(tree.fd(), "x-1-3", {}, 0, last, why) == 0);
        const int last_fd = last.fd();
        member left([&] { return join(last_fd); });
        CHILD_CHECK(f, left.ready());
        const std::string path = tree.path();
        tree.tear_down(10s);
        CHILD_CHECK(f, !static_cast<bool>(tree));
        CHILD_CHECK(f, !exists(path));
        CHILD_CHECK(f, killed_by_sigkill(left.reap()));
        // Its kept cgroup.events and cpu.stat now fail to read (ENODEV): no stale figures.
        CHILD_CHECK(f, !last.read().has_value());
        CHILD_CHECK(f, !last.populated().has_value());
        CHILD_CHECK(f, !last.cpu().has_value());
        CHILD_CHECK(f, cgroup_of(::getpid()) == p.substr(real_mount().size()));
    });
    BOOST_TEST(failures == "");
    std::vector<std::string> left;
    BOOST_TEST(sd::list_child_cgroups(open_dir(p).get(), left) == 0);
    BOOST_TEST(left.empty());
}

// sweep_stale on the real mount: a dead owner's tree is killed (its members too) and
// removed; a live owner's stays.
BOOST_AUTO_TEST_CASE(sweep_kills_and_removes_a_dead_owners_tree)
{
    scratch_cgroup parent;
    const std::string p = parent.path();
    pid_t dead_pid = 0;
    std::uint64_t dead_start = 0;
    {
        member dead([] { return true; });
        dead_pid = dead.pid();
        dead_start = starttime_of(dead_pid);
    }
    BOOST_TEST_REQUIRE(dead_start != 0u);
    member owner([] { return true; });
    const std::string stale = p + "/" + sd::tree_name(dead_pid, dead_start);
    const std::string alive = p + "/" + sd::tree_name(owner.pid(), starttime_of(owner.pid()));
    for (const auto& d : {stale, stale + "/supervisor", stale + "/x-1-1", alive, alive + "/x-2-2"})
        BOOST_TEST_REQUIRE(::mkdir(d.c_str(), 0755) == 0, d);
    unique_fd stale_leaf = open_dir(stale + "/x-1-1");
    unique_fd alive_leaf = open_dir(alive + "/x-2-2");
    member orphan([&] { return join(stale_leaf.get()); });
    member kept([&] { return join(alive_leaf.get()); });
    BOOST_TEST_REQUIRE(orphan.ready());
    BOOST_TEST_REQUIRE(kept.ready());

    BOOST_TEST(sd::cgroup_tree::sweep_stale(p, 10s) == 1);
    BOOST_TEST(!exists(stale));
    BOOST_TEST(killed_by_sigkill(orphan.reap()));
    BOOST_TEST(exists(alive + "/x-2-2"));
    BOOST_TEST(cgroup_of(kept.pid()).ends_with("/x-2-2")); // untouched, still running
    kept.release();
    BOOST_TEST(WIFEXITED(kept.reap()));
}

BOOST_AUTO_TEST_SUITE_END()
