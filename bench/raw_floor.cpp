// bench/raw_floor.cpp: bare-primitives spawn/capture/reap loops and the fork-`ps` watcher.
#include "raw_floor.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace raw_floor {

namespace {

[[noreturn]] void die(const char* what, int err = errno)
{
    std::fprintf(stderr, "exec_bench: raw floor: %s: %s\n", what, std::strerror(err));
    std::exit(2);
}

constexpr std::size_t read_buf_size = 64 * 1024;
char g_buf[read_buf_size];

int devnull(int flags)
{
    int fd = ::open("/dev/null", flags | O_CLOEXEC);
    if (fd < 0)
        die("open /dev/null");
    return fd;
}

// One epoll set reused by the sequential helpers (a real loop would keep one too).
int shared_epoll()
{
    static int ep = [] {
        int fd = ::epoll_create1(EPOLL_CLOEXEC);
        if (fd < 0)
            die("epoll_create1");
        return fd;
    }();
    return ep;
}

void ep_add(int ep, int fd, std::uint64_t tag)
{
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        die("epoll_ctl(ADD)");
}

// Closing our only descriptor of a pipe end / pidfd also drops it from the epoll set.
void close_fd(int& fd)
{
    ::close(fd);
    fd = -1;
}

// Reads once from a readable pipe. Returns false at end of file (and closes it).
bool read_once(int& fd, std::uint64_t& count, std::string* keep)
{
    for (;;)
    {
        ssize_t k = ::read(fd, g_buf, sizeof g_buf);
        if (k > 0)
        {
            count += static_cast<std::uint64_t>(k);
            if (keep)
                keep->append(g_buf, static_cast<std::size_t>(k));
            return true;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            return true;
        if (k < 0)
            die("read");
        close_fd(fd);
        return false;
    }
}

// Drains both pipes of `c` and waits for its pidfd on `ep`; then reaps it.
int drain_and_reap(int ep, child& c, drained* bytes, std::string* keep_out,
                   std::string* keep_err = nullptr)
{
    drained local;
    drained& b = bytes ? *bytes : local;
    int open = 0;
    if (c.out >= 0)
    {
        ep_add(ep, c.out, 0);
        ++open;
    }
    if (c.err >= 0)
    {
        ep_add(ep, c.err, 1);
        ++open;
    }
    ep_add(ep, c.pidfd, 2);
    bool exited = false;
    epoll_event evs[4];
    while (open > 0 || !exited)
    {
        int n = ::epoll_wait(ep, evs, 4, -1);
        if (n < 0)
        {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; ++i)
        {
            switch (evs[i].data.u64)
            {
            case 0:
                if (c.out >= 0 && !read_once(c.out, b.out, keep_out))
                    --open;
                break;
            case 1:
                if (c.err >= 0 && !read_once(c.err, b.err, keep_err))
                    --open;
                break;
            default:
                if (!exited)
                {
                    exited = true;
                    // Level-triggered: stop watching the pidfd until the reap below.
                    ::epoll_ctl(ep, EPOLL_CTL_DEL, c.pidfd, nullptr);
                }
                break;
            }
        }
    }
    return reap(c);
}

} // namespace

command::command(std::vector<std::string> args) : args_(std::move(args))
{
    for (auto& s : args_)
        argv_.push_back(s.data());
    argv_.push_back(nullptr);
}

const std::vector<std::string>& env_allow_names()
{
    static const std::vector<std::string> names{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER"};
    return names;
}

char* const* allow_envp()
{
    static std::vector<std::string> strings = [] {
        std::vector<std::string> v;
        for (const auto& k : env_allow_names())
            if (const char* val = std::getenv(k.c_str()))
                v.push_back(k + "=" + val);
        return v;
    }();
    static std::vector<char*> ptrs = [] {
        std::vector<char*> p;
        for (auto& s : strings)
            p.push_back(s.data());
        p.push_back(nullptr);
        return p;
    }();
    return ptrs.data();
}

child spawn(const command& cmd, bool capture)
{
    static const int null_r = devnull(O_RDONLY);
    static const int null_w = devnull(O_WRONLY);
    child c;
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    if (capture && (::pipe2(po, O_CLOEXEC) != 0 || ::pipe2(pe, O_CLOEXEC) != 0))
        die("pipe2");
    const int out_w = capture ? po[1] : null_w;
    const int err_w = capture ? pe[1] : null_w;

    // The tightest posix_spawn use: attributes built once; file actions rebuilt only when
    // the descriptors differ from the previous spawn (glibc checks each descriptor with a
    // getrlimit syscall when an action is added). The library does the same.
    struct actions
    {
        posix_spawn_file_actions_t fa;
        int out = -2, err = -2;
        bool built = false;
    };
    static actions acts;
    if (!acts.built || acts.out != out_w || acts.err != err_w)
    {
        if (acts.built)
            ::posix_spawn_file_actions_destroy(&acts.fa);
        ::posix_spawn_file_actions_init(&acts.fa);
        ::posix_spawn_file_actions_adddup2(&acts.fa, null_r, 0);
        ::posix_spawn_file_actions_adddup2(&acts.fa, out_w, 1);
        ::posix_spawn_file_actions_adddup2(&acts.fa, err_w, 2);
        ::posix_spawn_file_actions_addclosefrom_np(&acts.fa, 3);
        acts.out = out_w;
        acts.err = err_w;
        acts.built = true;
    }
    static posix_spawnattr_t at = [] {
        posix_spawnattr_t a;
        ::posix_spawnattr_init(&a);
        sigset_t none, dflt;
        sigemptyset(&none);
        sigemptyset(&dflt);
        sigaddset(&dflt, SIGPIPE);
        ::posix_spawnattr_setflags(&a, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                           POSIX_SPAWN_SETSIGDEF);
        ::posix_spawnattr_setpgroup(&a, 0);
        ::posix_spawnattr_setsigmask(&a, &none);
        ::posix_spawnattr_setsigdefault(&a, &dflt);
        return a;
    }();
    int rc = ::posix_spawn(&c.pid, cmd.path(), &acts.fa, &at, cmd.argv(), allow_envp());
    if (rc != 0)
        die(cmd.path(), rc);
    c.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
    if (c.pidfd < 0)
        die("pidfd_open");
    if (capture)
    {
        ::close(po[1]);
        ::close(pe[1]);
        c.out = po[0];
        c.err = pe[0];
    }
    return c;
}

int reap(child& c)
{
    siginfo_t info{};
    while (::waitid(P_PIDFD, static_cast<id_t>(c.pidfd), &info, WEXITED) != 0)
        if (errno != EINTR)
            die("waitid(P_PIDFD)");
    close_fd(c.pidfd);
    c.pid = -1;
    switch (info.si_code)
    {
    case CLD_EXITED:
        return W_EXITCODE(info.si_status, 0);
    case CLD_DUMPED:
        return info.si_status | 0x80;
    default:
        return info.si_status; // killed: the signal number
    }
}

bool exited_ok(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

double run_captured(const command& cmd, drained* bytes)
{
    auto t0 = clock::now();
    child c = spawn(cmd, true);
    int st = drain_and_reap(shared_epoll(), c, bytes, nullptr);
    double s = std::chrono::duration<double>(clock::now() - t0).count();
    if (!exited_ok(st))
    {
        std::fprintf(stderr, "exec_bench: raw floor: %s did not exit with 0 (status %d)\n",
                     cmd.path(), st);
        std::exit(2);
    }
    return s;
}

std::vector<double> run_sequential(const command& cmd, int n)
{
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
        us.push_back(run_captured(cmd) * 1e6);
    return us;
}

double run_concurrent(const command& cmd, int n, int inflight)
{
    int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    struct slot
    {
        child c;
        int open = 0;
        bool exited = false;
        bool busy = false;
    };
    std::vector<slot> slots(static_cast<std::size_t>(inflight));
    int launched = 0, done = 0;
    auto launch = [&](std::size_t s) {
        slot& sl = slots[s];
        sl.c = spawn(cmd, true);
        sl.open = 2;
        sl.exited = false;
        sl.busy = true;
        ep_add(ep, sl.c.out, s * 4 + 0);
        ep_add(ep, sl.c.err, s * 4 + 1);
        ep_add(ep, sl.c.pidfd, s * 4 + 2);
        ++launched;
    };
    auto t0 = clock::now();
    for (std::size_t s = 0; s < slots.size() && launched < n; ++s)
        launch(s);
    std::vector<epoll_event> evs(256);
    std::uint64_t ignored = 0;
    while (done < n)
    {
        int k = ::epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), -1);
        if (k < 0)
        {
            if (errno == EINTR)
                continue;
            die("epoll_wait");
        }
        for (int i = 0; i < k; ++i)
        {
            std::size_t s = evs[i].data.u64 / 4;
            unsigned kind = evs[i].data.u64 % 4;
            slot& sl = slots[s];
            if (!sl.busy)
                continue;
            if (kind < 2)
            {
                int& fd = kind == 0 ? sl.c.out : sl.c.err;
                if (fd >= 0 && !read_once(fd, ignored, nullptr))
                    --sl.open;
            }
            else if (sl.c.pidfd >= 0)
            {
                if (!exited_ok(reap(sl.c)))
                    die("child did not exit with 0", 0);
                sl.exited = true;
            }
            if (sl.open == 0 && sl.exited)
            {
                sl.busy = false;
                ++done;
                if (launched < n)
                    launch(s);
            }
        }
    }
    double wall = std::chrono::duration<double>(clock::now() - t0).count();
    ::close(ep);
    return wall;
}

std::string run_and_read(const command& cmd, int& status, std::string* err_text)
{
    std::string out;
    child c = spawn(cmd, true);
    status = drain_and_reap(shared_epoll(), c, nullptr, &out, err_text);
    return out;
}

std::vector<child> spawn_idle(const command& cmd, int n)
{
    std::vector<child> kids;
    kids.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
        kids.push_back(spawn(cmd, false));
    return kids;
}

void kill_and_reap(std::vector<child>& kids)
{
    for (auto& k : kids)
        if (k.pid > 0)
            ::kill(k.pid, SIGKILL);
    for (auto& k : kids)
        if (k.pidfd >= 0)
            reap(k);
    kids.clear();
}

double cpu_ms(int who)
{
    rusage ru{};
    ::getrusage(who, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

namespace {

// Sums the RSS of the lines of `ps -o pgid=,rss=,time=` output whose pgid is `pgid`.
// Returns the number of matching lines.
std::uint64_t parse_ps(const std::string& text, pid_t pgid, std::uint64_t& rss_kb)
{
    std::uint64_t matched = 0;
    const char* p = text.c_str();
    while (*p)
    {
        char* end = nullptr;
        long g = std::strtol(p, &end, 10);
        if (end != p && g == pgid)
        {
            p = end;
            long rss = std::strtol(p, &end, 10);
            if (end != p)
                rss_kb += static_cast<std::uint64_t>(std::max(0L, rss));
            p = end;
            // time=: [DD-]HH:MM:SS, parsed as the reference would, result unused here
            int d = 0, h = 0, m = 0, s = 0;
            if (std::sscanf(p, " %d-%d:%d:%d", &d, &h, &m, &s) != 4)
                (void)std::sscanf(p, " %d:%d:%d", &h, &m, &s);
            ++matched;
        }
        while (*p && *p != '\n')
            ++p;
        while (*p == '\n')
            ++p;
    }
    return matched;
}

void sleep_until(clock::time_point t)
{
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    // steady_clock is CLOCK_MONOTONIC with libstdc++ on Linux.
    while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR)
    {
    }
}

} // namespace

ps_watch_result ps_watch(const std::vector<pid_t>& pgids, std::chrono::nanoseconds interval,
                         std::chrono::nanoseconds window)
{
    const command ps({"/usr/bin/ps", "-o", "pgid=,rss=,time=", "-ax"});
    ps_watch_result r;
    const double self0 = cpu_ms(RUSAGE_SELF), ch0 = cpu_ms(RUSAGE_CHILDREN);
    const auto t0 = clock::now();
    const auto end = t0 + window;
    auto next = t0 + interval;
    bool over = false;
    while (!over && next < end)
    {
        if (clock::now() < next)
            sleep_until(next);
        auto start = clock::now();
        ++r.ticks;
        if (start - next > interval)
            ++r.late_ticks;
        for (pid_t g : pgids)
        {
            if (clock::now() >= end)
            {
                over = true;
                break;
            }
            int st = 0;
            std::string text = run_and_read(ps, st);
            if (!exited_ok(st))
                die("ps failed", 0);
            std::uint64_t rss = 0;
            r.matched_lines += parse_ps(text, g, rss);
            r.max_rss_kb = std::max(r.max_rss_kb, rss);
            ++r.samples;
        }
        next += interval;
        if (auto now = clock::now(); next < now)
            next = now; // behind schedule: the next tick starts at once
    }
    r.wall_s = std::chrono::duration<double>(clock::now() - t0).count();
    r.self_ms = cpu_ms(RUSAGE_SELF) - self0;
    r.children_ms = cpu_ms(RUSAGE_CHILDREN) - ch0;
    return r;
}

} // namespace raw_floor
