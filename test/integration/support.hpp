// test/integration/support.hpp: helpers for tests that run real processes.
#ifndef SANDBOX_TEST_INTEGRATION_SUPPORT_HPP
#define SANDBOX_TEST_INTEGRATION_SUPPORT_HPP

#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/io_context.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

namespace sbx_test {

/// This test process's own copy of the helper program (test/helper/sbx_test_target.cpp):
/// made on first use in a directory beside the built one (`run.PID/`, so every sandbox
/// that sees the build tree sees it), removed at exit. The checks that find helpers by
/// executable path then see only this process's, so two suites run at once (`ctest -j`)
/// neither report nor kill each other's.
const std::string& private_target();

/// Path of the helper program the tests run: `private_target()`.
inline const std::string& target = private_target();

/// The sandbox-run binary of this build.
inline const std::string sandbox_run = SBX_SANDBOX_RUN;

/// One mebibyte, for memory caps.
inline constexpr std::int64_t mib = 1024 * 1024;

/// Whether `text` holds `part`.
inline bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

/// Milliseconds since `t` on the steady clock.
inline long long ms_since(std::chrono::steady_clock::time_point t)
{
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 t)
        .count();
}

/// Options that make the helper program record the pids of its children in `file`.
inline sandbox::exec_options pid_options(const std::filesystem::path& file)
{
    sandbox::exec_options o;
    o.env.inject["SBX_PIDFILE"] = file.string();
    return o;
}

/// A request running the helper with `args`.
sandbox::exec_request helper(std::vector<std::string> args, sandbox::exec_options o = {});

/// Outcome of one run: error code and result.
struct run_outcome
{
    boost::system::error_code ec;
    sandbox::exec_result result;
};

/// Runs `req` on `r` through async_exec and the io_context, bounded by `limit`. Fails the
/// test if the io_context has work left afterwards.
run_outcome run(boost::asio::io_context& ioc, sandbox::runner& r, sandbox::exec_request req,
                std::chrono::seconds limit = std::chrono::seconds(30));

/// `run` without its checks, for code that must not assert (see `fd_exhaustion`): says
/// whether the operation completed and whether the io_context then had no work left.
struct unchecked_outcome : run_outcome
{
    bool done = false;
    bool idle = false;
};
unchecked_outcome run_unchecked(boost::asio::io_context& ioc, sandbox::runner& r,
                                sandbox::exec_request req,
                                std::chrono::seconds limit = std::chrono::seconds(30));

/// A temporary directory removed on destruction (canonical path).
class temp_dir
{
public:
    temp_dir();
    ~temp_dir();
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::string str() const { return path_.string(); }

private:
    std::filesystem::path path_;
};

/// A fresh directory under /var/tmp, which any user may search, removed with what it holds:
/// the host as a bwrap sandbox sees it (/tmp is private there).
class host_dir
{
public:
    host_dir();
    ~host_dir();
    host_dir(const host_dir&) = delete;
    host_dir& operator=(const host_dir&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

/// True while a process with this pid exists and is not a zombie. A process whose main thread
/// has exited while other threads run shows as a zombie and is alive.
bool alive(pid_t pid);

/// The executable a process runs: its own `exe` link, or that of one of its threads when the
/// main thread has exited (its link is then unreadable); empty when there is none.
std::string exe_of(pid_t pid);

/// The pids /proc lists at this moment (the one /proc scanner of the tests).
std::vector<pid_t> proc_pids();

/// Pids listed one per line in `file`.
std::vector<pid_t> read_pids(const std::filesystem::path& file);

/// Waits up to `limit` until none of `pids` is alive; true on success.
bool wait_gone(const std::vector<pid_t>& pids,
               std::chrono::milliseconds limit = std::chrono::milliseconds(2000));

/// Streamed output, collected per stream; `marker` is created once stdout is exactly
/// `first` (a command waiting for that file proves the line arrived while it ran).
struct streamed
{
    std::string out, err;
    sandbox::output_handler handler(std::filesystem::path marker, std::string first);
};

/// Live processes running the helper binary, or a copy of it announced with
/// `count_as_helper` (any that survived a test is a leak).
std::vector<pid_t> helper_processes();

/// Makes `helper_processes` count processes running `path` (a copy of the helper) too.
void count_as_helper(const std::string& path);

/// The runner `cgroup` setting of the fixtures: $SANDBOX_TEST_CGROUP when set and not empty
/// (ctest's integration_sampled runs the containment and caps suites with "off"), else the
/// default ("auto").
std::string cgroup_setting();

/// An io_context plus a local runner rooted in a fresh temp dir. A runner left at the default
/// cgroup setting gets `cgroup_setting()`.
struct local_fixture
{
    boost::asio::io_context ioc;
    temp_dir root;
    sandbox::local_runner runner;
    local_fixture();
    explicit local_fixture(sandbox::local_runner_options o);
    ~local_fixture();
    run_outcome run(sandbox::exec_request req,
                    std::chrono::seconds limit = std::chrono::seconds(30))
    {
        return sbx_test::run(ioc, runner, std::move(req), limit);
    }
};

/// RLIMIT_NOFILE lowered so that exactly `headroom` descriptor numbers are free in this
/// process (all others below the limit hold /dev/null); restored and closed on destruction,
/// whatever the test does meanwhile. No test assertion may run while it is in force, passing
/// or not: under UBSan an assertion's message object is checked (-fsanitize=vptr), the
/// check's memory probe needs a pipe, and without a free descriptor it reports a false
/// "invalid vptr" and aborts. Record what happened; assert after the guard is gone.
class fd_exhaustion
{
public:
    explicit fd_exhaustion(int headroom)
    {
        ok_ = ::getrlimit(RLIMIT_NOFILE, &old_) == 0;
        if (!ok_)
            return;
        int highest = 2;
        for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
            highest = std::max(highest, std::atoi(e.path().filename().c_str()));
        rlimit low = old_;
        low.rlim_cur = static_cast<rlim_t>(highest + 1 + headroom + 16);
        if (low.rlim_cur > old_.rlim_cur || ::setrlimit(RLIMIT_NOFILE, &low) != 0)
        {
            ok_ = false;
            return;
        }
        lowered_ = true;
        for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
            fds_.push_back(fd);
        for (int i = 0; i < headroom && !fds_.empty(); ++i)
        {
            ::close(fds_.back());
            fds_.pop_back();
        }
    }
    ~fd_exhaustion()
    {
        for (int fd : fds_)
            ::close(fd);
        if (lowered_)
            ::setrlimit(RLIMIT_NOFILE, &old_);
    }
    fd_exhaustion(const fd_exhaustion&) = delete;
    fd_exhaustion& operator=(const fd_exhaustion&) = delete;
    bool ok() const { return ok_; }

private:
    rlimit old_{};
    bool ok_ = false;
    bool lowered_ = false;
    std::vector<int> fds_;
};

} // namespace sbx_test

#endif // SANDBOX_TEST_INTEGRATION_SUPPORT_HPP
