// test/cgroup/spawn_into_test.cpp: spawn_command and spawn_filtered with a cgroup
// (helper/spawn.hpp `cgroup_fd`): the command starts inside it, set up as posix_spawn's child
// is, and a failure comes back as posix_spawn's does. Real processes in a cgroup each test
// makes under the cgroup2 mount and removes; skipped where that mount is not writable.
#include "helper/fork_gate.hpp"
#include "helper/spawn.hpp"
#include "kernel/cgroup_site.hpp"
#include "protocol/init_status.hpp"

#include <sandbox/unique_fd.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using sandbox::unique_fd;
using sandbox::detail::spawn_args;

std::string read_text(const std::string& path)
{
    std::string text;
    sandbox::detail::read_cgroup_file(AT_FDCWD, path.c_str(), text);
    return text;
}

// Our own cgroup v2 path ("/" at the root), or "" when there is none.
std::string own_cgroup()
{
    return sandbox::detail::unified_path_of(read_text("/proc/self/cgroup")).value_or("");
}

// Where the tests make their cgroups: our own cgroup's directory under the cgroup2 mount.
std::string test_site()
{
    const auto mount = sandbox::detail::cgroup2_mount_of(read_text("/proc/self/mountinfo"));
    const std::string own = own_cgroup();
    return mount && !own.empty() ? *mount + (own == "/" ? "" : own) : std::string{};
}

boost::test_tools::assertion_result cgroup_writable(boost::unit_test::test_unit_id)
{
    boost::test_tools::assertion_result r(false);
    const std::string site = test_site();
    if (site.empty())
        r.message() << "no cgroup2 mount (or no v2 cgroup of ours)";
    else if (::access(site.c_str(), W_OK) != 0)
        r.message() << site << " is not writable (" << std::strerror(errno) << ")";
    else
        return true;
    return r;
}

// A cgroup made for one test below our own, removed at the end whatever happened: its
// processes killed, the directory removed once they are gone.
class temp_cgroup
{
public:
    temp_cgroup()
    {
        static int n = 0;
        const std::string name = "sbx-spawn-test-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(++n);
        const std::string own = own_cgroup();
        path_ = test_site() + "/" + name;
        relative_ = (own == "/" ? "" : own) + "/" + name;
        BOOST_TEST_REQUIRE(::mkdir(path_.c_str(), 0755) == 0, path_ << ": " << std::strerror(errno));
        fd_.reset(::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        BOOST_TEST_REQUIRE(fd_.get() >= 0);
    }
    temp_cgroup(const temp_cgroup&) = delete;
    temp_cgroup& operator=(const temp_cgroup&) = delete;
    ~temp_cgroup()
    {
        fd_.reset();
        sandbox::detail::kill_cgroup_path(path_);
        if (int rc = sandbox::detail::remove_cgroup_path(path_, std::chrono::seconds(5)); rc != 0)
            BOOST_ERROR("could not remove " << path_ << ": " << std::strerror(rc));
    }

    int fd() const { return fd_.get(); }
    /// The line /proc/PID/cgroup has for a member ("0::/.../name").
    std::string proc_line() const { return "0::" + relative_; }
    std::vector<pid_t> procs() const
    {
        std::vector<pid_t> out;
        std::istringstream in(read_text(path_ + "/cgroup.procs"));
        for (pid_t p; in >> p;)
            out.push_back(p);
        return out;
    }

private:
    std::string path_, relative_;
    unique_fd fd_;
};

struct pipe_pair
{
    unique_fd r, w;
    pipe_pair()
    {
        int p[2];
        BOOST_TEST_REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
        r.reset(p[0]);
        w.reset(p[1]);
    }
};

std::string read_all(int fd)
{
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;)
        if (n > 0)
            out.append(buf, static_cast<std::size_t>(n));
        else if (errno != EINTR)
            break;
    return out;
}

// The wait status of `pid` (which must be our child).
int reap(pid_t pid)
{
    int status = -1;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR)
    {
    }
    return status;
}

// True when we have no child left at all (nothing unreaped either).
bool no_children()
{
    return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

spawn_args command(std::vector<std::string> argv, int cgroup_fd)
{
    spawn_args a;
    a.executable = argv.front();
    a.argv = std::move(argv);
    a.envp = {"PATH=/usr/bin:/bin", "SBX_MARK=spawn into"};
    a.cgroup_fd = cgroup_fd;
    return a;
}

// One "Key:\tvalue" field of /proc/PID/status.
std::string status_field(pid_t pid, const std::string& key)
{
    std::istringstream in(read_text("/proc/" + std::to_string(pid) + "/status"));
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + ":", 0) == 0)
            return line.substr(line.find_first_not_of(" \t", key.size() + 1));
    return {};
}

// Field `n` (1-based, as proc(5) numbers them) of /proc/PID/stat.
long stat_field(pid_t pid, int n)
{
    const std::string st = read_text("/proc/" + std::to_string(pid) + "/stat");
    std::istringstream in(st.substr(st.rfind(')') + 2));
    std::string f;
    for (int i = 3; i <= n; ++i)
        in >> f;
    return std::stol(f);
}

std::string link_of(const std::string& path)
{
    char buf[4096];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    return n < 0 ? std::string{} : std::string(buf, static_cast<std::size_t>(n));
}

std::set<int> open_fds(pid_t pid)
{
    std::set<int> fds;
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    if (DIR* d = ::opendir(dir.c_str()))
    {
        while (dirent* e = ::readdir(d))
            if (e->d_name[0] != '.')
                fds.insert(std::atoi(e->d_name));
        ::closedir(d);
    }
    return fds;
}

// A signal mask of /proc/PID/status ("SigIgn" ...) as bits.
unsigned long long mask_of(pid_t pid, const std::string& key)
{
    return std::stoull(status_field(pid, key), nullptr, 16);
}

// Runs `a` to its end, its stdout to a pipe: what it wrote, and its wait status in `status`.
std::string output_of(spawn_args a, int& status)
{
    pipe_pair out;
    a.stdout_fd = out.w.get();
    a.stderr_fd = 2;
    pid_t pid = -1;
    const int rc = sandbox::detail::spawn_command(a, pid);
    BOOST_TEST_REQUIRE(rc == 0, std::strerror(rc));
    out.w.reset();
    const std::string text = read_all(out.r.get());
    status = reap(pid);
    return text;
}

// A file of its own in a directory of its own, removed at the end.
struct scratch_dir
{
    std::string path;
    scratch_dir()
    {
        char tmpl[] = "/tmp/sbx-spawn-into-XXXXXX";
        BOOST_TEST_REQUIRE(::mkdtemp(tmpl) != nullptr);
        path = tmpl;
    }
    ~scratch_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

// A blocked /bin/cat (its stdin and stdout pipes of ours) to look at from outside, once it
// has echoed a byte: its exec complete (spawn returns as soon as the new program's memory is
// in place, before its environment is: /proc/PID/environ may still be empty then).
// What a terminal's master gives within 10 s, read until it ends with `want` (the echo of
// a line and a command's copy of it).
std::string terminal_text(int master, const std::string& want)
{
    std::string text;
    pollfd p{master, POLLIN, 0};
    while (text.size() < want.size() ||
           text.compare(text.size() - want.size(), want.size(), want) != 0)
    {
        if (::poll(&p, 1, 10000) != 1)
            break;
        char buf[256];
        const ssize_t n = ::read(master, buf, sizeof buf);
        if (n <= 0)
            break;
        text.append(buf, static_cast<std::size_t>(n));
    }
    return text;
}

struct blocked_cat
{
    pipe_pair in, out;
    pid_t pid = -1;
    int rc = -1;
    char echo = 0;
    explicit blocked_cat(spawn_args a)
    {
        a.stdin_fd = in.r.get();
        a.stdout_fd = out.w.get();
        rc = sandbox::detail::spawn_command(a, pid);
        out.w.reset();
        if (rc == 0 && ::write(in.w.get(), "x", 1) == 1)
            BOOST_TEST(::read(out.r.get(), &echo, 1) == 1);
    }
    // Lets it read end of file; its wait status.
    int finish()
    {
        in.w.reset();
        return reap(pid);
    }
};

} // namespace

BOOST_AUTO_TEST_SUITE(spawn_into, *boost::unit_test::precondition(cgroup_writable))

BOOST_AUTO_TEST_CASE(the_command_runs_inside_the_cgroup)
{
    temp_cgroup cg;
    int status = -1;
    const std::string text = output_of(command({"/bin/cat", "/proc/self/cgroup"}, cg.fd()), status);
    BOOST_TEST(status == 0);
    BOOST_TEST(text.find(cg.proc_line() + "\n") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(a_fork_of_the_command_is_inside_too)
{
    temp_cgroup cg;
    int status = -1;
    // The background job is always a fork of the shell.
    const std::string text =
        output_of(command({"/bin/sh", "-c", "cat /proc/self/cgroup & wait"}, cg.fd()), status);
    BOOST_TEST(status == 0);
    BOOST_TEST(text.find(cg.proc_line() + "\n") != std::string::npos, text);
}

// What posix_spawn's attributes and file actions give (spawn.hpp): a process group of its
// own, no signal blocked, none caught or ignored, fds 0-2 and the extra ones only, the work
// directory, exactly the environment given; and it is the cgroup's only member.
BOOST_AUTO_TEST_CASE(the_command_is_set_up_as_posix_spawn_would)
{
    temp_cgroup cg;
    scratch_dir dir;
    unique_fd dir_fd(::open(dir.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    pipe_pair x, y;
    auto a = command({"/bin/cat"}, cg.fd());
    a.stderr_fd = y.w.get();
    a.work_dir_fd = dir_fd.get();
    a.extra_fds = {y.r.get(), x.r.get()};
    // Our state the child must not inherit: a blocked signal, a handler, an ignored signal.
    struct sigaction handler{}, ignore{}, old_usr2{}, old_pipe{};
    handler.sa_handler = [](int) {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGUSR2, &handler, &old_usr2);
    ::sigaction(SIGPIPE, &ignore, &old_pipe);
    sigset_t usr1, old_mask;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    ::pthread_sigmask(SIG_BLOCK, &usr1, &old_mask);
    blocked_cat cat(a);
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    ::sigaction(SIGUSR2, &old_usr2, nullptr);
    ::sigaction(SIGPIPE, &old_pipe, nullptr);
    BOOST_TEST_REQUIRE(cat.rc == 0);
    BOOST_TEST(cat.echo == 'x');

    const pid_t pid = cat.pid;
    const std::string proc = "/proc/" + std::to_string(pid);
    BOOST_TEST((cg.procs() == std::vector<pid_t>{pid}));
    BOOST_TEST((open_fds(pid) == std::set<int>{0, 1, 2, 3, 4}));
    BOOST_TEST(link_of(proc + "/fd/0") == link_of("/proc/self/fd/" + std::to_string(cat.in.r.get())));
    BOOST_TEST(link_of(proc + "/fd/1") == link_of("/proc/self/fd/" + std::to_string(cat.out.r.get())));
    BOOST_TEST(link_of(proc + "/fd/2") == link_of("/proc/self/fd/" + std::to_string(y.w.get())));
    BOOST_TEST(link_of(proc + "/fd/3") == link_of("/proc/self/fd/" + std::to_string(y.r.get())));
    BOOST_TEST(link_of(proc + "/fd/4") == link_of("/proc/self/fd/" + std::to_string(x.r.get())));
    BOOST_TEST(stat_field(pid, 5) == pid);      // process group
    BOOST_TEST(stat_field(pid, 6) != pid);      // not a session leader
    BOOST_TEST(mask_of(pid, "SigBlk") == 0u);
    BOOST_TEST(mask_of(pid, "SigIgn") == 0u);
    BOOST_TEST(mask_of(pid, "SigCgt") == 0u);
    BOOST_TEST(link_of(proc + "/cwd") == dir.path);
    const std::string env = read_text(proc + "/environ");
    BOOST_TEST(env == std::string("PATH=/usr/bin:/bin\0SBX_MARK=spawn into\0", 39));
    BOOST_TEST(cat.finish() == 0);
}

BOOST_AUTO_TEST_CASE(job_signals_start_ignored_when_asked)
{
    temp_cgroup cg;
    auto a = command({"/bin/cat"}, cg.fd());
    a.stderr_fd = 2;
    a.ignore_job_signals = true;
    blocked_cat cat(a);
    BOOST_TEST_REQUIRE(cat.rc == 0);
    BOOST_TEST(cat.echo == 'x');
    unsigned long long want = 0;
    for (int s : sandbox::detail::job_signals)
        want |= 1ull << (s - 1);
    BOOST_TEST(mask_of(cat.pid, "SigIgn") == want);
    BOOST_TEST(mask_of(cat.pid, "SigBlk") == 0u);
    BOOST_TEST(cat.finish() == 0);
}

// On a terminal: a session of its own, the terminal its controlling one and its fds 0-2.
BOOST_AUTO_TEST_CASE(on_a_terminal_it_leads_a_new_session)
{
    temp_cgroup cg;
    unique_fd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    BOOST_TEST_REQUIRE(master.get() >= 0);
    BOOST_TEST_REQUIRE(::grantpt(master.get()) == 0);
    BOOST_TEST_REQUIRE(::unlockpt(master.get()) == 0);
    auto a = command({"/bin/cat"}, cg.fd());
    a.tty_path = ::ptsname(master.get());
    pid_t pid = -1;
    BOOST_TEST_REQUIRE(sandbox::detail::spawn_command(a, pid) == 0);
    // spawn_command returns once the child has let go of our memory, which the kernel does
    // before it closes the close-on-exec descriptors; cat copying a line back proves the
    // command runs, so its descriptors are final.
    BOOST_TEST_REQUIRE(::write(master.get(), "ping\n", 5) == 5);
    BOOST_TEST(terminal_text(master.get(), "ping\r\nping\r\n") == "ping\r\nping\r\n");
    const std::string proc = "/proc/" + std::to_string(pid);
    BOOST_TEST(stat_field(pid, 6) == pid);   // session leader
    BOOST_TEST(stat_field(pid, 7) != 0);     // a controlling terminal
    BOOST_TEST(link_of(proc + "/fd/0") == a.tty_path);
    BOOST_TEST(link_of(proc + "/fd/2") == a.tty_path);
    BOOST_TEST((open_fds(pid) == std::set<int>{0, 1, 2}));
    BOOST_TEST((cg.procs() == std::vector<pid_t>{pid}));
    master.reset(); // hang-up: cat ends
    BOOST_TEST(reap(pid) != -1);
}

// An exec or a set-up step that fails comes back as its errno, with the child reaped (as
// posix_spawn does), and leaves the cgroup empty.
BOOST_AUTO_TEST_CASE(failures_come_back_as_errno_with_the_child_reaped)
{
    temp_cgroup cg;
    scratch_dir dir;
    const std::string plain = dir.path + "/not-executable";
    std::ofstream(plain) << "#!/bin/sh\n";
    ::chmod(plain.c_str(), 0644);
    unique_fd file_fd(::open(plain.c_str(), O_RDONLY | O_CLOEXEC));
    struct
    {
        spawn_args a;
        int want;
    } cases[] = {
        {command({dir.path + "/missing"}, cg.fd()), ENOENT},
        {command({plain}, cg.fd()), EACCES},
        {command({"/bin/true"}, cg.fd()), ENOTDIR}, // fchdir onto a regular file
    };
    cases[2].a.work_dir_fd = file_fd.get();
    for (auto& c : cases)
    {
        c.a.stdout_fd = c.a.stderr_fd = 2;
        pid_t pid = -1;
        BOOST_TEST(sandbox::detail::spawn_command(c.a, pid) == c.want, c.a.executable);
        BOOST_TEST(pid == -1);
        if (pid > 0)
            reap(pid);
        BOOST_TEST(no_children());
        BOOST_TEST(cg.procs().empty());
    }
}

// A descriptor that is no cgroup fails the start (clone3's EBADF), and nothing starts.
BOOST_AUTO_TEST_CASE(a_directory_that_is_no_cgroup_fails_the_start)
{
    unique_fd tmp(::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    auto a = command({"/bin/true"}, tmp.get());
    a.stdout_fd = a.stderr_fd = 2;
    pid_t pid = -1;
    BOOST_TEST(sandbox::detail::spawn_command(a, pid) == EBADF);
    BOOST_TEST(pid == -1);
    if (pid > 0)
        reap(pid);
    BOOST_TEST(no_children());
}

// The gated start goes into the cgroup too; the forks its filter holds are answered here
// and the forked child is a member as well.
BOOST_AUTO_TEST_CASE(a_gated_start_goes_into_the_cgroup)
{
    temp_cgroup cg;
    pipe_pair out;
    auto a = command({"/bin/sh", "-c", "cat /proc/self/cgroup & wait"}, cg.fd());
    a.stdout_fd = out.w.get();
    a.stderr_fd = 2;
    pid_t pid = -1;
    unique_fd listener;
    sandbox::detail::proto::spawn_stage stage{};
    const int rc = sandbox::detail::spawn_filtered(a, {true, false}, pid, listener, stage);
    BOOST_TEST_REQUIRE(rc == 0, std::strerror(rc) << " (stage " << stage << ")");
    out.w.reset();
    BOOST_TEST(status_field(pid, "Seccomp") == "2");
    std::string text;
    int forks = 0;
    for (bool open = true; open;)
    {
        pollfd p[2] = {{listener.get(), POLLIN, 0}, {out.r.get(), POLLIN, 0}};
        BOOST_TEST_REQUIRE(::poll(p, 2, -1) > 0);
        sandbox::detail::fork_request r;
        if ((p[0].revents & POLLIN) && sandbox::detail::receive_fork(listener.get(), r) == 0)
            forks += sandbox::detail::answer_fork(listener.get(), r, true) == 0;
        else if (p[0].revents & POLLHUP)
            listener.reset(); // no member of the tree left to ask (poll skips fd -1)
        if (p[1].revents & (POLLIN | POLLHUP))
        {
            char buf[512];
            const ssize_t n = ::read(out.r.get(), buf, sizeof buf);
            open = n > 0;
            if (n > 0)
                text.append(buf, static_cast<std::size_t>(n));
        }
    }
    BOOST_TEST(reap(pid) == 0);
    BOOST_TEST(forks >= 1);
    BOOST_TEST(text.find(cg.proc_line() + "\n") != std::string::npos, text);
}

// A gated start whose exec fails: the errno, not the gate's, and the child reaped.
BOOST_AUTO_TEST_CASE(a_gated_start_that_fails_comes_back_reaped)
{
    temp_cgroup cg;
    auto a = command({"/nonexistent/sbx-spawn-into"}, cg.fd());
    a.stdout_fd = a.stderr_fd = 2;
    pid_t pid = -1;
    unique_fd listener;
    auto stage = sandbox::detail::proto::stage_fork_gate;
    // Under both filters' rules (one program, one listener), as under the gate's alone.
    BOOST_TEST(sandbox::detail::spawn_filtered(a, {true, true}, pid, listener, stage) == ENOENT);
    BOOST_TEST(stage == sandbox::detail::proto::stage_command);
    BOOST_TEST(listener.get() == -1);
    BOOST_TEST(no_children());
    BOOST_TEST(cg.procs().empty());
}

BOOST_AUTO_TEST_SUITE_END()
