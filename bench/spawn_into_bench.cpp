// bench/spawn_into_bench.cpp: what starting a command straight inside a cgroup costs the
// helper's worker (helper/spawn.hpp `cgroup_fd`: clone3 with CLONE_INTO_CGROUP on a stack of
// its own) against posix_spawn, and what a leaf cgroup costs to make and remove.
//
// Cases (one JSON line each; ratio = value / baseline; medians over rounds, in us):
//   spawn_command_true      spawn_command of /bin/true + waitpid (the worker's posix_spawn:
//                           own process group, signal defaults, file actions) against a bare
//                           posix_spawn of /bin/true + waitpid
//   spawn_into_cgroup_true  spawn_command with a cgroup (clone3 into it) against the same
//                           bare posix_spawn
//   spawn_into_vs_command   the same figure against spawn_command without a cgroup
//   spawn_into_own_cgroup   spawn_command into the cgroup we are in ourselves (the same
//                           clone3, no move to another cgroup) against spawn_command
//   gated_into_cgroup_true  spawn_filtered (the fork gate) with a cgroup against it without one
//   gated_into_own_cgroup   the same into our own cgroup against it without one
//   cgroup_mkdir_rmdir      mkdir + rmdir of a leaf cgroup against the bare posix_spawn
//
// All of them are measured in every round, in an order that turns each round, so that each
// sees the same moment of the host. Needs a writable cgroup2 mount (our own cgroup's
// directory there): otherwise it says why and exits 0 without figures.
//
// Usage: spawn_into_bench [--rounds N] [--quick]. Exit status: 0, or 1 when a start failed,
// a command did not end with 0, or a child was left behind; 64 on a usage error.
#include "common.hpp"

#include "helper/fork_gate.hpp"
#include "helper/spawn.hpp"
#include "kernel/cgroup_site.hpp"

#include <sandbox/unique_fd.hpp>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

using clock_type = std::chrono::steady_clock;
using sandbox::detail::spawn_args;

std::string read_text(const char* path)
{
    std::string text;
    sandbox::detail::read_cgroup_file(AT_FDCWD, path, text);
    return text;
}

// Our own cgroup's directory under the cgroup2 mount ("" when there is none).
std::string own_cgroup_dir()
{
    const auto mount = sandbox::detail::cgroup2_mount_of(read_text("/proc/self/mountinfo"));
    const auto own = sandbox::detail::unified_path_of(read_text("/proc/self/cgroup"));
    if (!mount || !own)
        return {};
    return *own == "/" ? *mount : *mount + *own;
}

// The leaf the commands start in, removed at the end.
struct leaf_cgroup
{
    std::string path;
    sandbox::unique_fd fd;
    explicit leaf_cgroup(std::string p) : path(std::move(p))
    {
        if (::mkdir(path.c_str(), 0755) == 0)
            fd.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
    leaf_cgroup(const leaf_cgroup&) = delete;
    leaf_cgroup& operator=(const leaf_cgroup&) = delete;
    ~leaf_cgroup()
    {
        fd.reset();
        if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
            std::fprintf(stderr, "could not remove %s: %s\n", path.c_str(), std::strerror(errno));
    }
};

bool failed = false;

void check(bool ok, const char* what)
{
    if (!ok && !failed)
        std::fprintf(stderr, "failed: %s (%s)\n", what, std::strerror(errno));
    failed = failed || !ok;
}

// Reaps `pid`; true when it ended with 0.
bool reaped_clean(pid_t pid)
{
    int status = -1;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR)
    {
    }
    return status == 0;
}

double micros(clock_type::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

template <class F>
double timed(F f)
{
    const auto t0 = clock_type::now();
    f();
    return micros(clock_type::now() - t0);
}

// The bare floor: posix_spawn of /bin/true, no attributes, no file actions.
void bare_true()
{
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ);
    check(rc == 0 && reaped_clean(pid), "posix_spawn /bin/true");
}

void command_true(const spawn_args& a)
{
    pid_t pid = -1;
    const int rc = sandbox::detail::spawn_command(a, pid);
    check(rc == 0 && reaped_clean(pid), "spawn_command /bin/true");
}

void gated_true(const spawn_args& a)
{
    pid_t pid = -1;
    sandbox::unique_fd listener;
    sandbox::detail::proto::spawn_stage stage{};
    const int rc = sandbox::detail::spawn_filtered(a, {true, false}, pid, listener, stage);
    check(rc == 0 && reaped_clean(pid), "spawn_filtered (the fork gate) /bin/true");
}

void mkdir_rmdir(const std::string& path)
{
    check(::mkdir(path.c_str(), 0755) == 0 && ::rmdir(path.c_str()) == 0, "mkdir+rmdir");
}

struct samples
{
    std::vector<double> bare, command, into, own, gated, gated_into, gated_own, leaf;
};

// The three ways to start /bin/true the worker has (each with or without a cgroup).
struct starts
{
    spawn_args plain, into, own;
};

samples measure(int rounds, const starts& st, const std::string& scratch)
{
    samples s;
    const spawn_args &plain = st.plain, &into = st.into;
    const std::array<std::function<void()>, 8> steps = {
        [&] { s.bare.push_back(timed(bare_true)); },
        [&] { s.command.push_back(timed([&] { command_true(plain); })); },
        [&] { s.into.push_back(timed([&] { command_true(into); })); },
        [&] { s.own.push_back(timed([&] { command_true(st.own); })); },
        [&] { s.gated.push_back(timed([&] { gated_true(plain); })); },
        [&] { s.gated_into.push_back(timed([&] { gated_true(into); })); },
        [&] { s.gated_own.push_back(timed([&] { gated_true(st.own); })); },
        [&] { s.leaf.push_back(timed([&] { mkdir_rmdir(scratch); })); },
    };
    for (int r = 0; r < rounds && !failed; ++r)
        for (std::size_t i = 0; i < steps.size(); ++i)
            steps[(i + static_cast<std::size_t>(r)) % steps.size()]();
    return s;
}

void report(const samples& s)
{
    using bench::median;
    const double bare = median(s.bare), command = median(s.command);
    bench::print_json("spawn_into", "spawn_command_true", command, "us", bare);
    bench::print_json("spawn_into", "spawn_into_cgroup_true", median(s.into), "us", bare);
    bench::print_json("spawn_into", "spawn_into_vs_command", median(s.into), "us", command);
    bench::print_json("spawn_into", "spawn_into_own_cgroup", median(s.own), "us", command);
    bench::print_json("spawn_into", "gated_into_cgroup_true", median(s.gated_into), "us",
                      median(s.gated));
    bench::print_json("spawn_into", "gated_into_own_cgroup", median(s.gated_own), "us",
                      median(s.gated));
    bench::print_json("spawn_into", "cgroup_mkdir_rmdir", median(s.leaf), "us", bare);
}

} // namespace

int main(int argc, char** argv)
{
    int rounds = 300;
    for (int i = 1; i < argc; ++i)
    {
        const std::string arg = argv[i];
        if (arg == "--quick")
            rounds = 10;
        else if (arg == "--rounds" && i + 1 < argc)
            rounds = std::atoi(argv[++i]);
        else
        {
            std::fprintf(stderr, "usage: spawn_into_bench [--rounds N] [--quick]\n");
            return 64;
        }
    }
    bench::print_machine(stdout);
    const std::string site = own_cgroup_dir();
    if (site.empty() || ::access(site.c_str(), W_OK) != 0)
    {
        std::printf("skipped: %s\n", site.empty() ? "no cgroup2 mount"
                                                  : (site + " is not writable").c_str());
        return 0;
    }
    const std::string base = site + "/sbx-spawn-bench-" + std::to_string(::getpid());
    std::optional<leaf_cgroup> leaf(std::in_place, base);
    if (!leaf->fd)
    {
        std::fprintf(stderr, "cannot make %s: %s\n", base.c_str(), std::strerror(errno));
        return 1;
    }
    sandbox::unique_fd own(::open(site.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    starts st;
    st.plain.executable = "/bin/true";
    st.plain.argv = {"/bin/true"};
    st.plain.envp = {"PATH=/usr/bin:/bin"};
    st.plain.stdout_fd = st.plain.stderr_fd = 2;
    st.into = st.own = st.plain;
    st.into.cgroup_fd = leaf->fd.get();
    st.own.cgroup_fd = own.get();
    const samples s = measure(rounds, st, base + "-scratch");
    leaf.reset();
    check(bench::my_children().empty(), "no child left behind");
    if (failed)
        return 1;
    report(s);
    return 0;
}
