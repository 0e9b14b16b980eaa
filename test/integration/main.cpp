// test/integration/main.cpp: the integration test module: shared helpers, and a global
// check that no helper process survives the suite.
#define BOOST_TEST_MODULE sandbox_integration_tests
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <system_error>
#include <thread>

#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sbx_test {

namespace {

// The copy and its directory; the directory goes at exit (a process still running the
// copy keeps its inode, so removing it never disturbs a test's cleanup).
// The copies of test processes that ended without their destructor (an abort, a kill): the
// directory of a pid no process has any more.
void remove_stale_copies(const std::filesystem::path& parent)
{
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(parent, ec))
    {
        const std::string name = entry.path().filename().string();
        if (name.rfind("run.", 0) != 0)
            continue;
        char* end = nullptr;
        const long pid = std::strtol(name.c_str() + 4, &end, 10);
        if (pid > 0 && *end == '\0' && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            std::filesystem::remove_all(entry.path(), ec);
    }
}

struct target_copy
{
    std::filesystem::path dir;
    std::string path;
    target_copy()
    {
        const std::filesystem::path built = SBX_TEST_TARGET;
        remove_stale_copies(built.parent_path());
        dir = built.parent_path() / ("run." + std::to_string(::getpid()));
        std::filesystem::remove_all(dir);
        std::filesystem::create_directory(dir);
        path = (dir / built.filename()).string();
        std::filesystem::copy_file(built, path);
    }
    ~target_copy()
    {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

} // namespace

const std::string& private_target()
{
    static const target_copy copy;
    return copy.path;
}

sandbox::exec_request helper(std::vector<std::string> args, sandbox::exec_options o)
{
    sandbox::exec_request r;
    r.command = target;
    r.args = std::move(args);
    r.options = std::move(o);
    return r;
}

unchecked_outcome run_unchecked(boost::asio::io_context& ioc, sandbox::runner& r,
                                sandbox::exec_request req, std::chrono::seconds limit)
{
    unchecked_outcome out;
    sandbox::async_exec(r, std::move(req),
                        [&](boost::system::error_code ec, sandbox::exec_result res) {
                            out.ec = ec;
                            out.result = std::move(res);
                            out.done = true;
                        });
    ioc.restart();
    ioc.run_for(limit);
    out.idle = ioc.stopped();
    return out;
}

run_outcome run(boost::asio::io_context& ioc, sandbox::runner& r, sandbox::exec_request req,
                std::chrono::seconds limit)
{
    auto out = run_unchecked(ioc, r, std::move(req), limit);
    BOOST_REQUIRE_MESSAGE(out.done, "operation did not complete within the time limit");
    BOOST_CHECK_MESSAGE(out.idle, "io_context still had work after completion");
    return out;
}

temp_dir::temp_dir()
{
    std::random_device rd;
    auto base = std::filesystem::temp_directory_path() /
                ("sbx-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(base);
    path_ = std::filesystem::canonical(base);
}

temp_dir::~temp_dir()
{
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

host_dir::host_dir()
{
    char t[] = "/var/tmp/sbx-host-XXXXXX";
    if (::mkdtemp(t) == nullptr)
        throw std::system_error(errno, std::generic_category(), "mkdtemp under /var/tmp");
    ::chmod(t, 0755);
    path_ = t;
}

host_dir::~host_dir()
{
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

bool alive(pid_t pid)
{
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    if (!std::getline(f, s))
        return false;
    auto close = s.rfind(')');
    if (close == std::string::npos || close + 2 >= s.size())
        return false;
    if (s[close + 2] != 'Z')
        return true;
    // Field 20, num_threads (the 18th after the name): the zombie is the main thread alone
    // when others still run.
    std::istringstream rest(s.substr(close + 2));
    std::string field;
    for (int i = 0; i < 18 && rest >> field; ++i) {}
    return !rest.fail() && std::stol(field) > 1;
}

std::vector<pid_t> proc_pids()
{
    std::vector<pid_t> pids;
    DIR* d = ::opendir("/proc");
    while (dirent* e = d ? ::readdir(d) : nullptr)
    {
        char* end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (*end == 0 && pid > 0)
            pids.push_back(static_cast<pid_t>(pid));
    }
    if (d)
        ::closedir(d);
    return pids;
}

std::string exe_of(pid_t pid)
{
    const std::string dir = "/proc/" + std::to_string(pid);
    std::error_code ec;
    auto exe = std::filesystem::read_symlink(dir + "/exe", ec);
    if (!ec)
        return exe.string();
    for (const auto& t : std::filesystem::directory_iterator(dir + "/task", ec))
    {
        std::error_code tec;
        exe = std::filesystem::read_symlink(t.path() / "exe", tec);
        if (!tec)
            return exe.string();
    }
    return {};
}

std::vector<pid_t> read_pids(const std::filesystem::path& file)
{
    std::vector<pid_t> v;
    std::ifstream f(file);
    pid_t p;
    while (f >> p)
        v.push_back(p);
    return v;
}

bool wait_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds limit)
{
    auto end = std::chrono::steady_clock::now() + limit;
    for (;;)
    {
        bool any = false;
        for (pid_t p : pids)
            any = any || alive(p);
        if (!any)
            return true;
        if (std::chrono::steady_clock::now() > end)
            return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

sandbox::output_handler streamed::handler(std::filesystem::path marker, std::string first)
{
    return [this, marker = std::move(marker), first = std::move(first)](sandbox::output_stream s,
                                                                        std::string_view data) {
        (s == sandbox::output_stream::err ? err : out) += data;
        if (out == first && !std::filesystem::exists(marker))
            std::ofstream(marker.string()).put('x');
        return true;
    };
}

namespace {
std::vector<std::string>& helper_copies()
{
    static std::vector<std::string> paths;
    return paths;
}
} // namespace

void count_as_helper(const std::string& path)
{
    helper_copies().push_back(std::filesystem::canonical(path).string());
}

std::vector<pid_t> helper_processes()
{
    std::vector<pid_t> found;
    auto want = helper_copies();
    want.push_back(std::filesystem::canonical(target).string());
    for (pid_t pid : proc_pids())
        if (std::find(want.begin(), want.end(), exe_of(pid)) != want.end() && alive(pid))
            found.push_back(pid);
    return found;
}

std::string cgroup_setting()
{
    const char* e = std::getenv("SANDBOX_TEST_CGROUP");
    return e && *e ? std::string(e) : sandbox::local_runner_options{}.cgroup;
}

local_fixture::local_fixture() : local_fixture(sandbox::local_runner_options{}) {}

local_fixture::local_fixture(sandbox::local_runner_options o)
    : runner(ioc.get_executor(), [&] {
          o.root = root.str();
          if (o.cgroup == sandbox::local_runner_options{}.cgroup)
              o.cgroup = cgroup_setting();
          return o;
      }())
{
}

local_fixture::~local_fixture()
{
    // Every test must leave no helper process behind (setsid'd and double-forked ones too,
    // unless the test kills them itself).
    auto left = helper_processes();
    BOOST_CHECK_MESSAGE(left.empty(), "helper processes survived the test");
    for (pid_t p : left)
        ::kill(p, SIGKILL);
}

} // namespace sbx_test

namespace {

// After the whole suite: no helper process may be alive (tests that do not use
// local_fixture, such as the sandbox-run ones, are covered here).
struct no_survivors
{
    void setup() {}
    void teardown()
    {
        auto left = sbx_test::helper_processes();
        BOOST_TEST(left.empty(), "helper processes survived the suite");
        for (pid_t p : left)
            ::kill(p, SIGKILL);
    }
};

} // namespace

BOOST_TEST_GLOBAL_FIXTURE(no_survivors);
