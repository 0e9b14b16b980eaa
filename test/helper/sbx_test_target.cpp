// test/helper/sbx_test_target.cpp: deterministic helper process that the integration tests
// spawn instead of shell tricks. Only the C++ standard library and POSIX/Linux headers.
//
// Usage: sbx_test_target MODE [ARGS...] [--then MODE [ARGS...]]...
// Modes run left to right, then the program exits 0. The whole command line is checked first:
// an unknown mode, a wrong argument count or a bad number (std::from_chars, whole string)
// prints "sbx_test_target: <reason>" to stderr and exits 99 before any mode runs; runtime
// failures (fork, getcwd, ...) are reported the same way. Output is raw write(2), never
// buffered, and no mode writes anything but what is listed here.
//
//   exit N                    exit with status N (0-255) at once
//   print TEXT...             the TEXTs joined by single spaces to stdout, no newline
//   println TEXT...           the same plus a newline;  eprint TEXT...: like print, to stderr
//   sleep MS                  sleep MS milliseconds
//   spam N [out|err|both]     exactly N bytes of "0123456789abcdef"... in 64 KiB writes to
//                             stdout (default), stderr or both (N each); EPIPE: exit 0 quietly
//   print-env NAME...         "NAME=<value>" or "NAME=<unset>", one line per NAME
//   print-env-all             each environment entry on its own line, then "count=N"
//   print-cwd                 the current directory and a newline
//   print-args ARGS...        each ARG on its own line
//   print-fds                 own open descriptors, space-separated, then a newline
//   print-proc                "pid pgid sigblk sigign\n" (masks in hex, from /proc/self/status)
//   cat                       copy stdin to stdout until EOF
//   alloc MB [STEP_MS]        "allocating\n"; MB MiB in 1 MiB blocks, a byte written every 4096,
//                             STEP_MS (default 2) ms apart, never freed; "allocated MB\n"
//   spin MS                   burn CPU for MS ms of wall time (0 = forever)
//   spin-cpu MS               burn CPU until the process has used MS ms of it
//   children N MS             fork N children that sleep MS ms; do not wait for them
//   fork-procs N MS           the same, then wait for all of them
//   fork-stream N SPIN_MS     fork N children one at a time, each spinning SPIN_MS ms; wait
//                             for each; then "forked N\n"
//   setsid-child MS [hold|detach|close|write]  a child calls setsid() and sleeps MS ms; with
//                             "hold" (default) it keeps fds 0-2, "detach" points them at
//                             /dev/null, "close" closes them, "write" keeps them, ignores SIGPIPE
//                             and writes "tick\n" to stdout every 10 ms (errors ignored) for MS ms
//   setpgid-child MS          a child calls setpgid(0, 0) and sleeps MS ms (keeps its fds)
//   closed-child MS           a child closes fds 0-2 and sleeps MS ms (stays in the group)
//   double-fork MS            fork, setsid, fork; the grandchild points fds 0-2 at /dev/null and
//                             sleeps MS ms; the middle child exits at once and is reaped
//   leave-group MS            move this process into another process group: setpgid(0, 0) if it
//                             does not lead its group; a group leader (as the spawned leader is)
//                             first forks a child that makes its own group and sleeps MS ms
//                             (recorded like setpgid-child), then joins that group
//   setsid-chain DEPTH STEP_MS  fork a chain of DEPTH members; each one calls setsid(), points
//                             fds 0-2 at /dev/null, appends its own pid to $SBX_PIDFILE, sleeps
//                             STEP_MS ms, forks the next member and then sleeps forever (the
//                             last one sleeps forever at once); this process goes on at once
//   fork-tree DEPTH MS        a fork bomb bounded at 2^(DEPTH+1)-2 processes: fork 2 children,
//                             each of which does fork-tree DEPTH-1 MS and then sleeps MS ms;
//                             does not wait for them
//   kill-parents STOP_PID MS  a child calls setsid(), points fds 0-2 at /dev/null, appends its
//                             own pid to $SBX_PIDFILE, then for MS ms SIGKILLs its parent every
//                             millisecond, as long as that parent descends from STOP_PID (never
//                             STOP_PID itself nor anything outside its tree); this process goes on
//   cpu-stream N CPU_MS       fork N children one at a time, each burning CPU_MS ms of its own cpu
//                             time; wait for each (already reaped by the kernel is fine); then
//                             "forked N\n"
//   share-children N MB MS    allocate MB MiB (like alloc, quietly), fork N children that
//                             share those pages and sleep MS ms; wait for them; "shared N\n"
//   map-stall MB GIB          allocate MB MiB (like alloc, quietly), fork a child that shares
//                             them and sleeps 60 s (recorded); then one thread populates a
//                             read-only GIB GiB mapping (MAP_POPULATE: the memory-map lock held
//                             for reading for seconds) while another maps and unmaps a page in
//                             a loop (asking for it for writing); "stalling\n"; sleep 60 s
//   alloc-threads N MB        "allocating\n"; N threads each allocate MB MiB at once, like
//                             alloc with no delay; join them; "allocated <N*MB>\n"
//   parent-stream N CPU_MS ignore|wait  fork N children one at a time and wait for each;
//                             each forks a child that burns CPU_MS ms of cpu, waits until that
//                             child's end closes a pipe and exits at once: with "ignore" it
//                             ignores SIGCHLD (the kernel reaps the child), with "wait" it
//                             waits for it; then "forked N\n"
//   orphan-stream N CPU_MS    make itself a subreaper; then N times: fork a child that
//                             ignores SIGCHLD and forks a grandchild (parent-death signal
//                             SIGKILL) which burns CPU_MS ms of cpu, says so on a pipe and
//                             burns on; the child exits at that, the grandchild dies with it
//                             and falls to this process, which waits for both; "forked N\n"
//   spin-threads N CPU_MS     start N threads that each burn CPU_MS ms of their own thread cpu
//                             time; join them; then "spun N\n"
//   tty-info                  "tty 0 1 2: Y Y Y\n" (isatty per fd), "size R C\n" (TIOCGWINSZ on
//                             fd 1, or "size none"), "ctty Y\n" when fd 0 is the controlling
//                             terminal of our session and we lead it, else "ctty N"
//   sleep-threads N MS        start N threads that each sleep MS ms; join them; "slept N\n"
//   main-exit                 the segments after this one run on a second thread, and the
//                             main thread calls pthread_exit once that thread has started: /proc
//                             then shows the process as a zombie ('Z', no memory in its own
//                             stat) while it runs on; it exits 0 when those segments are done
//   clone3                    a child made with the raw clone3 call (no glibc fallback) exits
//                             at once; "clone3 ok\n" once it is reaped, or "clone3 <errno name>\n"
//   nnp                       "nnp N\n": the no_new_privs flag (prctl)
//   seccomp-listener-exec PROGRAM [ARG...]  set no_new_privs, install an allow-all seccomp
//                             filter with a user-notification listener kept open across the
//                             exec (as a container runtime that intercepts calls holds one),
//                             then exec PROGRAM with ARGs: no filter below can have a listener
//   steal-fds UP              copy every descriptor (0-1023) of the process UP generations above
//                             this one (1: the parent) with pidfd_getfd and keep the copies
//                             open: "stole N\n", or "steal <errno name>\n" when none could be
//                             taken
//   ptrace-up UP              PTRACE_ATTACH to the process UP generations above: "ptrace ok\n"
//                             (then detached) or "ptrace <errno name>\n"
//   seccomp-denied-exec PROGRAM [ARG...]  set no_new_privs, install a seccomp filter under
//                             which seccomp() itself fails with EPERM (as in a container whose
//                             runtime forbids it), then exec PROGRAM with ARGs
//   seccomp-no-namespaces-exec PROGRAM [ARG...]  set no_new_privs, install a seccomp filter
//                             under which unshare() and a clone() that asks for a new
//                             namespace fail with EPERM (as Docker's default profile does for
//                             a process without CAP_SYS_ADMIN: bubblewrap cannot start), then
//                             exec PROGRAM with ARGs
//   fork-burst N              fork N children that each wait on one pipe; once all exist the
//                             pipe is closed and each forks a child of its own at that moment
//                             (which exits at once) and waits for it; then "burst N\n"
//   seccomp-listener          sets no_new_privs and installs a seccomp filter (allow all)
//                             with a user-notification listener: "listener ok\n" or
//                             "listener <errno name>\n" (sets no_new_privs: run it last)
//   alloc-children N MB HOLD_MS  fork N children that each allocate MB MiB (like alloc, quietly,
//                             no delay), sleep HOLD_MS ms and exit; wait for all of them
//   ignore-term               ignore SIGTERM;  default-term: SIGTERM back to its default action
//   ignore-chld               set SIGCHLD to SIG_IGN (the kernel reaps exited children at once)
//   trap-term CODE            on SIGTERM write "got TERM\n" to stdout and exit CODE
//   trap-term-late MS FILE    on SIGTERM sleep MS ms, append "<own pid>\n" to FILE, exit 0
//                             (children forked later inherit the handler)
//   touch FILE                create FILE (or truncate it)
//   connect-unix PATH         connect to the unix stream socket PATH: "connected\n", or
//                             "refused <errno name>\n" (for example ENOENT, ECONNREFUSED)
//   wait-file FILE            wait until FILE exists (polled every ms); exit 3 after 20 s
//   pidfile                   append own pid to $SBX_PIDFILE (which must be set)
//   kill-self SIG             reset signal SIG to SIG_DFL, unblock it and raise it
//   close-out                 close fds 1 and 2
//   print-cgroup              the cgroup v2 path of this process ("0::" of /proc/self/cgroup)
//                             and a newline, or "none\n" without one
//   fork-bomb MAX             "bombing\n", then fork as fast as possible, every child too (each
//                             one loops forking), until MAX processes exist in all (a counter
//                             shared by all of them); then each one spins forever. Never ends
//   orphan-helper N MS        SIGSTOP the helper (the parent of this process's parent, which
//                             must run sandbox-supervisor), start N children that call setsid(),
//                             point fds 0-2 at /dev/null and sleep MS ms (recorded), SIGKILL
//                             this process's parent (its worker), then sleep MS ms
//   nocldwait-burn N CPU_MS   set SA_NOCLDWAIT on SIGCHLD, fork N children that each burn CPU_MS
//                             ms of their own cpu time at once (together), wait until all are
//                             gone (wait fails with ECHILD); then "burnt N\n"
//   hold KIND MB MS           "holding KIND\n"; hold MB MiB outside this process's own pages:
//                             memfd (written into a memfd), shm (an unlinked /dev/shm file),
//                             pipes (pipe buffers, 1 MiB pipes where allowed, as many as the
//                             descriptor limit lets), sysv (a SysV segment, attached, touched,
//                             marked for removal); "held M\n" (M: the MiB held), sleep MS ms
//
// With $SBX_PIDFILE set, the parent appends each child pid of children, fork-procs,
// setsid-child, setpgid-child, closed-child, leave-group, fork-tree, alloc-children and the
// double-fork grandchild pid to it, one per line (one O_APPEND open each). It goes on only once
// that child has done its setsid/setpgid/redirection. setsid-chain and kill-parents members
// record themselves.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sys/ipc.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <charconv>
#include <climits>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace {
using args_t = std::vector<std::string_view>;
using action_t = std::function<void()>;

constexpr std::uint64_t max_ms = 1'000'000'000'000; // ~31 years; keeps clock arithmetic safe
constexpr std::uint64_t max_procs = 100'000;

bool write_all(int fd, const void* data, std::size_t len)
{
    for (auto* p = static_cast<const char*>(data); len > 0;) {
        ssize_t n = ::write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        p += n;
        len -= static_cast<std::size_t>(n);
    }
    return true;
}

void out(std::string_view s) { write_all(1, s.data(), s.size()); }

std::string join(const args_t& a)
{
    std::string s;
    for (std::size_t i = 0; i < a.size(); ++i) s.append(i > 0 ? " " : "").append(a[i]);
    return s;
}

[[noreturn]] void die(const std::string& reason)
{
    const std::string msg = "sbx_test_target: " + reason + "\n";
    write_all(2, msg.data(), msg.size());
    ::_exit(99);
}

[[noreturn]] void die_errno(const std::string& what) { die(what + ": " + std::strerror(errno)); }

std::uint64_t number(std::string_view s, const std::string& what, std::uint64_t max)
{
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc{} || end != s.data() + s.size() || v > max)
        die("bad " + what + " '" + std::string(s) + "' (expected 0.." + std::to_string(max) + ")");
    return v;
}

// The process `up` generations above this one (1: the parent), from /proc/PID/stat.
pid_t ancestor(std::uint64_t up)
{
    pid_t p = ::getpid();
    for (std::uint64_t i = 0; i < up; ++i) {
        const int fd = ::open(("/proc/" + std::to_string(p) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
        char buf[512];
        const ssize_t n = fd < 0 ? -1 : ::read(fd, buf, sizeof buf - 1);
        if (fd >= 0) ::close(fd);
        if (n <= 0) die_errno("read stat of " + std::to_string(p));
        buf[n] = '\0';
        const char* close_paren = std::strrchr(buf, ')');
        if (!close_paren || std::sscanf(close_paren + 2, "%*c %d", &p) != 1)
            die("bad stat line");
    }
    return p;
}

// Executes a[0] with the arguments a (no PATH lookup).
[[noreturn]] void exec_args(const args_t& a)
{
    std::vector<std::string> args(a.begin(), a.end());
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    die_errno("exec " + args[0]);
}

// Sets no_new_privs, installs the seccomp filter `prog` (N instructions) and executes a[0].
template <std::size_t N>
[[noreturn]] void exec_under_filter(sock_filter (&prog)[N], const args_t& a)
{
    sock_fprog fprog{static_cast<unsigned short>(N), prog};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0)
        die_errno("seccomp");
    exec_args(a);
}

void sleep_ms(std::uint64_t ms)
{
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1'000'000L};
    while (::nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

void spin_ms(std::uint64_t ms) // 0 = forever
{
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    volatile std::uint64_t sink = 0;
    while (ms == 0 || std::chrono::steady_clock::now() < end)
        for (int i = 0; i < 10'000; ++i) sink = sink + 1;
}

struct sigaction set_handler(int sig, void (*handler)(int)) // returns the previous action
{
    struct sigaction sa = {}, old = {};
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, &old);
    return old;
}

volatile sig_atomic_t term_code = 0;

void on_term(int)
{
    static const char msg[] = "got TERM\n";
    [[maybe_unused]] ssize_t n = ::write(1, msg, sizeof msg - 1); // async-signal-safe
    ::_exit(term_code);
}

pid_t fork_or_die()
{
    pid_t pid = ::fork();
    if (pid < 0) die_errno("fork");
    return pid;
}

void wait_child(pid_t pid)
{
    while (::waitpid(pid, nullptr, 0) < 0)
        if (errno != EINTR) die_errno("waitpid");
}

void record_pid(pid_t pid)
{
    const char* path = std::getenv("SBX_PIDFILE");
    if (path == nullptr || *path == '\0') return;
    int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) die_errno(std::string("open ") + path);
    const std::string line = std::to_string(pid) + "\n";
    const bool ok = write_all(fd, line.data(), line.size());
    ::close(fd);
    if (!ok) die_errno(std::string("write ") + path);
}

void detach_stdio() // child side: fds 0-2 to /dev/null
{
    int fd = ::open("/dev/null", O_RDWR);
    if (fd < 0) ::_exit(99);
    for (int target = 0; target <= 2; ++target) ::dup2(fd, target);
    if (fd > 2) ::close(fd);
}

void close_stdio() // child side: fds 0-2 closed
{
    for (int target = 0; target <= 2; ++target) ::close(target);
}

// Writes "tick\n" to stdout every 10 ms for `ms` ms, whatever happens to the pipe.
void tick_writer(std::uint64_t ms)
{
    set_handler(SIGPIPE, SIG_IGN);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
        [[maybe_unused]] ssize_t n = ::write(1, "tick\n", 5);
        sleep_ms(10);
    }
}

// setsid-child, setpgid-child, closed-child and double-fork (and leave-group's group child).
// Once set up, the sleeper sends its pid over a pipe; EOF without a pid means it failed.
// Returns the sleeper's pid, already recorded.
pid_t session_child(const std::string& mode, std::uint64_t ms, std::string_view how)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) die_errno("pipe2");
    pid_t pid = fork_or_die();
    if (pid == 0) {
        ::close(fds[0]);
        const bool set_up = mode == "setpgid-child"  ? ::setpgid(0, 0) == 0
                            : mode == "closed-child" ? true // stays in the group
                                                     : ::setsid() >= 0;
        if (!set_up) ::_exit(99);
        if (mode == "double-fork" && (pid = ::fork()) != 0) // the middle child exits at once
            ::_exit(pid < 0 ? 99 : 0);
        if (how == "detach") detach_stdio();
        if (how == "close") close_stdio();
        const pid_t self = ::getpid();
        write_all(fds[1], &self, sizeof self);
        ::close(fds[1]);
        if (how == "write")
            tick_writer(ms);
        else
            sleep_ms(ms);
        ::_exit(0);
    }
    ::close(fds[1]);
    if (mode == "double-fork") wait_child(pid);
    ssize_t n;
    while ((n = ::read(fds[0], &pid, sizeof pid)) < 0 && errno == EINTR) {}
    ::close(fds[0]);
    if (n != static_cast<ssize_t>(sizeof pid)) die(mode + ": child setup failed");
    record_pid(pid);
    return pid;
}

void leave_group(std::uint64_t ms)
{
    const pid_t before = ::getpgrp();
    if (before != ::getpid()) {
        if (::setpgid(0, 0) != 0) die_errno("leave-group: setpgid(0, 0)");
    }
    else {
        // A group leader cannot make a new group of its own: it joins one made by a child.
        const pid_t group = session_child("setpgid-child", ms, "hold");
        if (::setpgid(0, group) != 0) die_errno("leave-group: setpgid(0, child group)");
    }
    if (::getpgrp() == before) die("leave-group: still in process group " + std::to_string(before));
}

void setsid_chain(std::uint64_t depth, std::uint64_t step_ms)
{
    if (depth == 0 || fork_or_die() != 0) return; // the caller goes on at once
    for (std::uint64_t left = depth;; --left) {
        if (::setsid() < 0) ::_exit(99);
        detach_stdio();
        record_pid(::getpid());
        sleep_ms(step_ms);
        if (left == 1 || ::fork() != 0) break; // this member stays (fork failure: it stays too)
    }
    for (;;) ::pause();
}

void fork_tree(std::uint64_t depth, std::uint64_t ms)
{
    if (depth == 0) return;
    for (int i = 0; i < 2; ++i) {
        pid_t pid = fork_or_die();
        if (pid == 0) {
            fork_tree(depth - 1, ms);
            sleep_ms(ms);
            ::_exit(0);
        }
        record_pid(pid);
    }
}

// The parent of `pid` from /proc/<pid>/stat; 0 when unknown.
pid_t parent_of(pid_t pid)
{
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return 0;
    std::string_view s(buf, static_cast<std::size_t>(n));
    auto close = s.rfind(')');
    if (close == std::string_view::npos || close + 4 > s.size()) return 0;
    s.remove_prefix(close + 4); // ") S "
    pid_t ppid = 0;
    std::from_chars(s.data(), s.data() + s.size(), ppid);
    return ppid;
}

bool descends_from(pid_t pid, pid_t root)
{
    for (int depth = 0; depth < 256 && pid > 1; ++depth, pid = parent_of(pid))
        if (pid == root) return true;
    return false;
}

void kill_parents(pid_t stop, std::uint64_t ms)
{
    if (fork_or_die() != 0) return; // the caller goes on (and is killed soon)
    if (::setsid() < 0) ::_exit(99);
    detach_stdio();
    record_pid(::getpid());
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < end) {
        const pid_t parent = ::getppid();
        if (parent > 1 && parent != stop && descends_from(parent, stop)) ::kill(parent, SIGKILL);
        sleep_ms(1);
    }
    ::_exit(0);
}

// waitpid that accepts a child the kernel already reaped (SIGCHLD ignored).
void wait_child_or_reaped(pid_t pid)
{
    while (::waitpid(pid, nullptr, 0) < 0)
        if (errno == ECHILD)
            return;
        else if (errno != EINTR)
            die_errno("waitpid");
}

void spin_clock_ms(clockid_t clock, std::uint64_t ms)
{
    auto cpu_now = [clock] {
        timespec ts{};
        ::clock_gettime(clock, &ts);
        return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
    };
    const auto end = cpu_now() + std::chrono::milliseconds(ms);
    volatile std::uint64_t sink = 0;
    while (cpu_now() < end)
        for (int i = 0; i < 10'000; ++i) sink = sink + 1;
}

void spin_cpu_ms(std::uint64_t ms) // own cpu time, not wall time
{
    spin_clock_ms(CLOCK_PROCESS_CPUTIME_ID, ms);
}

char late_path[PATH_MAX];
std::uint64_t late_ms = 0;

void on_term_late(int) // async-signal-safe: nanosleep, open, write, close, _exit
{
    sleep_ms(late_ms);
    char line[24];
    char* end = line + sizeof line;
    char* p = end;
    *--p = '\n';
    for (auto v = static_cast<unsigned long>(::getpid()); p == end - 1 || v > 0; v /= 10)
        *--p = static_cast<char>('0' + v % 10);
    int fd = ::open(late_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        [[maybe_unused]] ssize_t n = ::write(fd, p, static_cast<std::size_t>(end - p));
        ::close(fd);
    }
    ::_exit(0);
}

void spam(std::uint64_t n, bool to_out, bool to_err)
{
    static constexpr std::string_view pattern = "0123456789abcdef";
    constexpr std::size_t chunk = 64 * 1024;
    std::vector<char> buf(chunk + pattern.size()); // a full chunk fits from any offset mod 16
    for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = pattern[i % pattern.size()];
    const struct sigaction old = set_handler(SIGPIPE, SIG_IGN); // EPIPE instead of death
    std::uint64_t sent[2] = {to_out ? 0 : n, to_err ? 0 : n};   // stdout, stderr
    while (sent[0] < n || sent[1] < n)
        for (int s = 0; s < 2; ++s) { // alternate, so a reader draining both pipes never stalls
            if (sent[s] >= n) continue;
            auto len = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, n - sent[s]));
            ssize_t w = ::write(s + 1, buf.data() + sent[s] % pattern.size(), len);
            if (w < 0 && errno == EPIPE) ::_exit(0);
            if (w < 0 && errno != EINTR) die_errno("spam: write");
            sent[s] += w > 0 ? static_cast<std::uint64_t>(w) : 0;
        }
    ::sigaction(SIGPIPE, &old, nullptr);
}

void* alloc_head = nullptr; // allocated blocks are chained through their first bytes

void allocate(std::uint64_t mb, std::uint64_t step_ms)
{
    constexpr std::size_t block = 1 << 20;
    for (std::uint64_t i = 0; i < mb; ++i) {
        if (i > 0 && step_ms > 0) sleep_ms(step_ms);
        auto* p = static_cast<volatile char*>(std::malloc(block));
        if (p == nullptr) die("alloc: out of memory after " + std::to_string(i) + " MiB");
        for (std::size_t off = 0; off < block; off += 4096) p[off] = 1;
        void* start = const_cast<char*>(p);
        std::memcpy(start, &alloc_head, sizeof alloc_head);
        alloc_head = start;
    }
}

// Forks `n` children that sleep `ms` ms (each recorded); waits for them when `wait`.
void fork_sleepers(std::uint64_t n, std::uint64_t ms, bool wait)
{
    std::vector<pid_t> pids;
    for (std::uint64_t i = 0; i < n; ++i) {
        pid_t pid = fork_or_die();
        if (pid == 0) {
            sleep_ms(ms);
            ::_exit(0);
        }
        record_pid(pid);
        pids.push_back(pid);
    }
    for (pid_t pid : pids)
        if (wait) wait_child(pid);
}

void alloc(std::uint64_t mb, std::uint64_t step_ms)
{
    out("allocating\n");
    allocate(mb, step_ms);
    out("allocated " + std::to_string(mb) + "\n");
}

// --- modes of the cgroup tests (test/integration/cgroup_test.cpp) ----------------------------

std::string read_small_file(const char* path)
{
    std::string text;
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) die_errno(std::string("open ") + path);
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;)
        if (n > 0) text.append(buf, static_cast<std::size_t>(n));
        else if (errno != EINTR) die_errno(std::string("read ") + path);
    ::close(fd);
    return text;
}

void print_cgroup()
{
    const std::string text = "\n" + read_small_file("/proc/self/cgroup");
    const auto at = text.find("\n0::");
    if (at == std::string::npos) return out("none\n");
    const auto end = text.find('\n', at + 4);
    out(text.substr(at + 4, end == std::string::npos ? std::string::npos : end - at - 4) + "\n");
}

[[noreturn]] void fork_bomb(std::uint64_t max)
{
    void* shared = ::mmap(nullptr, sizeof(std::atomic<std::uint64_t>), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) die_errno("fork-bomb: mmap");
    auto* made = new (shared) std::atomic<std::uint64_t>(1); // this process
    out("bombing\n");
    for (;;) { // every child goes on in this loop too
        if (made->fetch_add(1) >= max) {
            made->fetch_sub(1);
            spin_ms(0);
        }
        if (::fork() < 0) made->fetch_sub(1); // EAGAIN and the like: try again
    }
}

void orphan_helper(std::uint64_t n, std::uint64_t ms)
{
    const pid_t worker = ::getppid();
    const pid_t helper = parent_of(worker);
    const std::string comm = helper > 1 ? read_small_file(("/proc/" + std::to_string(helper) + "/comm").c_str()) : "";
    if (comm.rfind("sandbox-super", 0) != 0) die("orphan-helper: the grandparent is not the helper");
    if (::kill(helper, SIGSTOP) != 0) die_errno("orphan-helper: SIGSTOP the helper");
    for (std::uint64_t i = 0; i < n; ++i) session_child("setsid-child", ms, "detach");
    if (::kill(worker, SIGKILL) != 0) die_errno("orphan-helper: SIGKILL the worker");
    sleep_ms(ms);
}

void nocldwait_burn(std::uint64_t n, std::uint64_t cpu_ms)
{
    struct sigaction sa = {};
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = SA_NOCLDWAIT; // the kernel reaps the children: nobody waits for their cpu
    sigemptyset(&sa.sa_mask);
    if (::sigaction(SIGCHLD, &sa, nullptr) != 0) die_errno("sigaction");
    for (std::uint64_t i = 0; i < n; ++i)
        if (fork_or_die() == 0) {
            spin_cpu_ms(cpu_ms);
            ::_exit(0);
        }
    while (::waitpid(-1, nullptr, 0) >= 0 || errno == EINTR) {} // ECHILD once all are gone
    if (errno != ECHILD) die_errno("waitpid");
    out("burnt " + std::to_string(n) + "\n");
}

// Writes `mb` MiB into `fd` (a memfd or a /dev/shm file); the MiB written.
std::uint64_t fill_file(int fd, std::uint64_t mb)
{
    std::vector<char> block(1 << 20, 'm');
    std::uint64_t i = 0;
    for (; i < mb; ++i)
        if (!write_all(fd, block.data(), block.size())) break;
    return i;
}

std::uint64_t hold_in_pipes(std::uint64_t mb)
{
    rlimit nofile{};
    if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
        nofile.rlim_cur = nofile.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &nofile);
    }
    const std::vector<char> chunk(64 * 1024, 'p');
    std::uint64_t held = 0; // bytes
    while (held < (mb << 20)) {
        int p[2];
        if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) break; // EMFILE and the like: keep what we have
        ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);                // where allowed (else 64 KiB)
        for (ssize_t w; held < (mb << 20) && (w = ::write(p[1], chunk.data(), chunk.size())) > 0;)
            held += static_cast<std::uint64_t>(w);
        // both ends stay open: the buffer lives as long as they do
    }
    return held >> 20;
}

std::uint64_t hold_in_sysv(std::uint64_t mb)
{
    const int id = ::shmget(IPC_PRIVATE, static_cast<std::size_t>(mb) << 20, IPC_CREAT | 0600);
    if (id < 0) die_errno("shmget");
    void* at = ::shmat(id, nullptr, 0);
    ::shmctl(id, IPC_RMID, nullptr); // gone once detached: at this process's end at the latest
    if (at == reinterpret_cast<void*>(-1)) die_errno("shmat");
    auto* bytes = static_cast<volatile char*>(at);
    for (std::uint64_t off = 0; off < (mb << 20); off += 4096) bytes[off] = 's';
    return mb;
}

void hold(const std::string& kind, std::uint64_t mb, std::uint64_t ms)
{
    out("holding " + kind + "\n");
    std::uint64_t held = 0;
    if (kind == "memfd" || kind == "shm") {
        const std::string shm = "/dev/shm/sbx-hold-" + std::to_string(::getpid());
        const int fd = kind == "memfd" ? ::memfd_create("sbx-hold", MFD_CLOEXEC)
                                       : ::open(shm.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) die_errno("hold: " + kind);
        if (kind == "shm") ::unlink(shm.c_str()); // held by the descriptor alone: nothing leaks
        held = fill_file(fd, mb);
    }
    else if (kind == "pipes") held = hold_in_pipes(mb);
    else held = hold_in_sysv(mb);
    out("held " + std::to_string(held) + "\n");
    sleep_ms(ms);
}

// The modes above, or an empty action for any other mode.
action_t prepare_cgroup_mode(const std::string& mode, const args_t& a)
{
    auto count = [&](std::size_t i, std::uint64_t max) { return number(a[i], mode + " count", max); };
    auto ms = [&](std::size_t i) { return number(a[i], mode + " milliseconds", max_ms); };
    if (mode == "print-cgroup") return [] { print_cgroup(); };
    if (mode == "fork-bomb") return [max = count(0, max_procs)] { fork_bomb(max); };
    if (mode == "orphan-helper") return [n = count(0, 64), t = ms(1)] { orphan_helper(n, t); };
    if (mode == "nocldwait-burn") return [n = count(0, 256), t = ms(1)] { nocldwait_burn(n, t); };
    if (mode == "hold") {
        const std::string kind(a[0]);
        if (kind != "memfd" && kind != "shm" && kind != "pipes" && kind != "sysv")
            die("hold: memfd, shm, pipes or sysv, not " + kind);
        return [kind, mb = number(a[1], "hold MiB", 1 << 20), t = ms(2)] { hold(kind, mb, t); };
    }
    return {};
}

struct mode_spec {
    std::string_view name;
    std::size_t min_args, max_args;
};

constexpr std::size_t any = SIZE_MAX;
constexpr mode_spec modes[] = {
    {"exit", 1, 1},         {"print", 0, any},       {"println", 0, any},   {"eprint", 0, any},
    {"sleep", 1, 1},        {"spam", 1, 2},          {"print-env", 0, any}, {"print-env-all", 0, 0},
    {"print-cwd", 0, 0},    {"print-args", 0, any},  {"cat", 0, 0},         {"alloc", 1, 2},
    {"spin", 1, 1},         {"children", 2, 2},      {"fork-procs", 2, 2},  {"fork-stream", 2, 2},
    {"setsid-child", 1, 2}, {"setpgid-child", 1, 1}, {"double-fork", 1, 1}, {"ignore-term", 0, 0},
    {"trap-term", 1, 1},    {"pidfile", 0, 0},       {"kill-self", 1, 1},   {"close-out", 0, 0},
    {"print-fds", 0, 0},    {"print-proc", 0, 0},    {"closed-child", 1, 1}, {"leave-group", 1, 1},
    {"setsid-chain", 2, 2}, {"fork-tree", 2, 2},     {"kill-parents", 2, 2}, {"cpu-stream", 2, 2},
    {"default-term", 0, 0}, {"ignore-chld", 0, 0},   {"touch", 1, 1},       {"wait-file", 1, 1},
    {"connect-unix", 1, 1},
    {"alloc-children", 3, 3}, {"spin-threads", 2, 2}, {"trap-term-late", 2, 2},
    {"sleep-threads", 2, 2},  {"tty-info", 0, 0},    {"clone3", 0, 0},      {"nnp", 0, 0},
    {"seccomp-listener", 0, 0}, {"fork-burst", 1, 1}, {"seccomp-denied-exec", 1, any},
    {"seccomp-no-namespaces-exec", 1, any},
    {"steal-fds", 1, 1},      {"seccomp-listener-exec", 1, any},      {"ptrace-up", 1, 1},
    {"main-exit", 0, 0},      {"alloc-threads", 2, 2}, {"map-stall", 2, 2}, {"share-children", 3, 3}, {"parent-stream", 3, 3}, {"orphan-stream", 2, 2},
    {"print-cgroup", 0, 0},   {"fork-bomb", 1, 1},   {"orphan-helper", 2, 2}, {"nocldwait-burn", 2, 2},
    {"hold", 3, 3},           {"spin-cpu", 1, 1},
};

// Validates one segment of the command line and returns what it does.
action_t prepare(std::string_view name, const args_t& a)
{
    const std::string mode(name);
    auto spec = std::find_if(std::begin(modes), std::end(modes),
                             [&](const mode_spec& m) { return m.name == name; });
    if (spec == std::end(modes)) die("unknown mode '" + mode + "'");
    if (a.size() < spec->min_args || a.size() > spec->max_args)
        die(mode + ": wrong number of arguments (" + std::to_string(a.size()) + ")");
    auto ms = [&](std::size_t i) { return number(a[i], mode + " milliseconds", max_ms); };
    auto procs = [&](std::size_t i) { return number(a[i], mode + " count", max_procs); };
    auto option = [&](std::string_view dflt, std::string_view other1, std::string_view other2) {
        std::string_view v = a.size() > 1 ? a[1] : dflt;
        if (v != dflt && v != other1 && v != other2)
            die(mode + ": bad option '" + std::string(v) + "'");
        return v;
    };

    if (action_t cg = prepare_cgroup_mode(mode, a)) return cg;
    if (mode == "exit") // nothing to flush: output is never buffered
        return [code = static_cast<int>(number(a[0], "exit status", 255))] { ::_exit(code); };
    if (mode == "print" || mode == "println" || mode == "eprint")
        return [text = join(a) + (mode == "println" ? "\n" : ""), fd = mode == "eprint" ? 2 : 1] {
            write_all(fd, text.data(), text.size());
        };
    if (mode == "sleep") return [t = ms(0)] { sleep_ms(t); };
    if (mode == "spam")
        return [n = number(a[0], "spam byte count", UINT64_MAX),
                where = option("out", "err", "both")] { spam(n, where != "err", where != "out"); };
    if (mode == "print-env")
        return [a] {
            for (std::string_view var : a) {
                const char* v = std::getenv(std::string(var).c_str());
                out(std::string(var) + "=" + (v ? v : "<unset>") + "\n");
            }
        };
    if (mode == "print-env-all")
        return [] {
            std::size_t n = 0;
            for (char** e = environ; e && *e; ++e, ++n) out(std::string(*e) + "\n");
            out("count=" + std::to_string(n) + "\n");
        };
    if (mode == "print-cwd")
        return [] {
            char buf[PATH_MAX];
            if (::getcwd(buf, sizeof buf) == nullptr) die_errno("getcwd");
            out(std::string(buf) + "\n");
        };
    if (mode == "print-fds")
        return [] {
            DIR* d = ::opendir("/proc/self/fd");
            if (!d) die_errno("opendir /proc/self/fd");
            std::vector<int> fds;
            while (dirent* e = ::readdir(d))
                if (e->d_name[0] != '.' && std::atoi(e->d_name) != ::dirfd(d))
                    fds.push_back(std::atoi(e->d_name));
            ::closedir(d);
            std::sort(fds.begin(), fds.end());
            std::string line;
            for (int fd : fds) line += (line.empty() ? "" : " ") + std::to_string(fd);
            out(line + "\n");
        };
    if (mode == "print-proc")
        return [] {
            std::string status, blk, ign;
            int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
            if (fd < 0) die_errno("open /proc/self/status");
            char buf[4096];
            for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) status.append(buf, n);
            ::close(fd);
            auto field = [&](std::string_view key) {
                auto at = status.find(key);
                return at == std::string::npos ? std::string("?")
                                               : status.substr(at + key.size() + 1, 16);
            };
            out(std::to_string(::getpid()) + " " + std::to_string(::getpgrp()) + " " +
                field("SigBlk:") + " " + field("SigIgn:") + "\n");
        };
    if (mode == "print-args")
        return [a] {
            for (std::string_view arg : a) out(std::string(arg) + "\n");
        };
    if (mode == "cat")
        return [] {
            static char buf[64 * 1024];
            for (ssize_t n; (n = ::read(0, buf, sizeof buf)) != 0;)
                if (n < 0 && errno != EINTR)
                    die_errno("cat: read");
                else if (n > 0 && !write_all(1, buf, static_cast<std::size_t>(n)))
                    die_errno("cat: write");
        };
    if (mode == "alloc")
        return [mb = number(a[0], "alloc MiB", 1 << 20), step = a.size() > 1 ? ms(1) : 2] {
            alloc(mb, step);
        };
    if (mode == "spin") return [t = ms(0)] { spin_ms(t); };
    if (mode == "spin-cpu")
        return [t = ms(0)] { spin_cpu_ms(t); };
    if (mode == "children" || mode == "fork-procs")
        return [n = procs(0), t = ms(1), wait = mode == "fork-procs"] { fork_sleepers(n, t, wait); };
    if (mode == "fork-stream")
        return [n = procs(0), t = ms(1)] {
            for (std::uint64_t i = 0; i < n; ++i) {
                pid_t pid = fork_or_die();
                if (pid == 0) {
                    if (t > 0) // spin_ms(0) would never return
                        spin_ms(t);
                    ::_exit(0);
                }
                wait_child(pid);
            }
            out("forked " + std::to_string(n) + "\n");
        };
    if (mode == "setsid-child" || mode == "setpgid-child" || mode == "double-fork" ||
        mode == "closed-child") {
        std::string_view how = mode == "double-fork" ? "detach" : a.size() > 1 ? a[1] : "hold";
        if (how != "hold" && how != "detach" && how != "close" && how != "write")
            die(mode + ": bad option '" + std::string(how) + "'");
        if (mode == "closed-child") how = "close";
        return [mode, t = ms(0), how = std::string(how)] { session_child(mode, t, how); };
    }
    if (mode == "leave-group") return [t = ms(0)] { leave_group(t); };
    if (mode == "setsid-chain")
        return [n = procs(0), step = ms(1)] { setsid_chain(n, step); };
    if (mode == "fork-tree")
        return [depth = number(a[0], "fork-tree depth", 16), t = ms(1)] { fork_tree(depth, t); };
    if (mode == "kill-parents")
        return [stop = static_cast<pid_t>(number(a[0], "kill-parents pid", INT_MAX)), t = ms(1)] {
            kill_parents(stop, t);
        };
    if (mode == "cpu-stream")
        return [n = procs(0), t = ms(1)] {
            for (std::uint64_t i = 0; i < n; ++i) {
                pid_t pid = fork_or_die();
                if (pid == 0) {
                    spin_cpu_ms(t);
                    ::_exit(0);
                }
                wait_child_or_reaped(pid);
            }
            out("forked " + std::to_string(n) + "\n");
        };
    if (mode == "parent-stream") {
        if (a[2] != "ignore" && a[2] != "wait") die("parent-stream: ignore or wait, not " + std::string(a[2]));
        return [n = procs(0), t = ms(1), ignore = a[2] == "ignore"] {
            for (std::uint64_t i = 0; i < n; ++i) {
                pid_t parent = fork_or_die();
                if (parent == 0) {
                    if (ignore) ::signal(SIGCHLD, SIG_IGN);
                    int p[2];
                    if (::pipe(p) != 0) die_errno("pipe");
                    pid_t pid = fork_or_die();
                    if (pid == 0) {
                        ::close(p[0]);
                        spin_cpu_ms(t);
                        ::_exit(0); // (closes p[1])
                    }
                    ::close(p[1]);
                    char c;
                    while (::read(p[0], &c, 1) < 0 && errno == EINTR) {}
                    if (!ignore) wait_child(pid);
                    ::_exit(0); // at once: the kernel has reaped (or is reaping) the child
                }
                wait_child(parent);
            }
            out("forked " + std::to_string(n) + "\n");
        };
    }
    if (mode == "orphan-stream")
        return [n = procs(0), t = ms(1)] {
            // A subreaper, so that orphans below it fall to it and it waits for them.
            if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die_errno("prctl");
            for (std::uint64_t i = 0; i < n; ++i) {
                pid_t parent = fork_or_die();
                if (parent == 0) {
                    ::signal(SIGCHLD, SIG_IGN);
                    int p[2];
                    if (::pipe(p) != 0) die_errno("pipe");
                    const pid_t me = ::getpid();
                    if (fork_or_die() == 0) {
                        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
                        if (::getppid() != me) ::_exit(0);
                        spin_cpu_ms(t);
                        [[maybe_unused]] auto w = ::write(p[1], "x", 1);
                        spin_cpu_ms(1000); // killed when its parent ends, just after
                        ::_exit(0);
                    }
                    char c;
                    while (::read(p[0], &c, 1) < 0 && errno == EINTR) {}
                    ::_exit(0);
                }
                for (int left = 2; left > 0;) // the parent, and its child that fell to us
                    if (::waitpid(-1, nullptr, 0) > 0) --left;
                    else if (errno != EINTR) break;
            }
            out("forked " + std::to_string(n) + "\n");
        };
    if (mode == "clone3")
        return [] {
            clone_args ca{};
            ca.exit_signal = SIGCHLD;
            const long pid = ::syscall(SYS_clone3, &ca, sizeof ca);
            if (pid == 0) ::_exit(0);
            if (pid < 0) {
                out(std::string("clone3 ") + (errno == ENOSYS ? "ENOSYS" : std::to_string(errno)) +
                    "\n");
                return;
            }
            wait_child(static_cast<pid_t>(pid));
            out("clone3 ok\n");
        };
    if (mode == "seccomp-denied-exec")
        return [a] {
            sock_filter prog[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_seccomp, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            exec_under_filter(prog, a);
        };
    if (mode == "fork-burst")
        return [n = procs(0)] {
            int gate[2];
            if (::pipe(gate) != 0) die_errno("pipe");
            std::vector<pid_t> kids;
            for (std::uint64_t i = 0; i < n; ++i) {
                pid_t pid = fork_or_die();
                if (pid == 0) {
                    ::close(gate[1]);
                    char c;
                    while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {}
                    pid_t g = fork_or_die(); // all of them at once
                    if (g == 0) ::_exit(0);
                    wait_child(g);
                    ::_exit(0);
                }
                kids.push_back(pid);
            }
            ::close(gate[1]); // releases all of them
            ::close(gate[0]);
            for (pid_t k : kids) wait_child(k);
            out("burst " + std::to_string(n) + "\n");
        };
    if (mode == "seccomp-no-namespaces-exec")
        return [a] {
            constexpr std::uint32_t new_namespace = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS |
                                                    CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
                                                    CLONE_NEWNET;
            sock_filter prog[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 3, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
                // clone's flags: the low half of its first argument (x86-64, little-endian)
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
                BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, new_namespace, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            exec_under_filter(prog, a);
        };
    if (mode == "seccomp-listener-exec")
        return [a] {
            sock_filter allow_all = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
            sock_fprog prog{1, &allow_all};
            const long fd = ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ? -1
                : ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
            if (fd < 0 || ::fcntl(static_cast<int>(fd), F_SETFD, 0) != 0) die_errno("seccomp listener");
            exec_args(a);
        };
    if (mode == "steal-fds")
        return [up = number(a[0], "generations", 16)] {
            const pid_t target = ancestor(up);
            const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, target, 0));
            int stolen = 0, err = pidfd < 0 ? errno : EBADF;
            for (int fd = 0; pidfd >= 0 && fd < 1024; ++fd) {
                if (::syscall(SYS_pidfd_getfd, pidfd, fd, 0) >= 0) ++stolen; // kept open on purpose
                else if (errno != EBADF) err = errno;
            }
            out(stolen > 0 ? "stole " + std::to_string(stolen) + "\n"
                           : std::string("steal ") + strerrorname_np(err) + "\n");
        };
    if (mode == "ptrace-up")
        return [up = number(a[0], "generations", 16)] {
            const pid_t target = ancestor(up);
            if (::ptrace(PTRACE_ATTACH, target, nullptr, nullptr) != 0) {
                out(std::string("ptrace ") + strerrorname_np(errno) + "\n");
                return;
            }
            ::waitpid(target, nullptr, __WALL);
            ::ptrace(PTRACE_DETACH, target, nullptr, nullptr);
            out("ptrace ok\n");
        };
    if (mode == "seccomp-listener")
        return [] {
            sock_filter allow_all = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
            sock_fprog prog{1, &allow_all};
            ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
            const long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                      SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
            if (fd >= 0) {
                ::close(static_cast<int>(fd));
                out("listener ok\n");
            } else {
                out(std::string("listener ") + (errno == EPERM ? "EPERM" : std::to_string(errno)) +
                    "\n");
            }
        };
    if (mode == "nnp")
        return [] { out("nnp " + std::to_string(::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)) + "\n"); };
    if (mode == "tty-info")
        return [] {
            auto yn = [](bool b) { return b ? "Y" : "N"; };
            std::string s = std::string("tty 0 1 2: ") + yn(::isatty(0)) + " " + yn(::isatty(1)) +
                            " " + yn(::isatty(2)) + "\n";
            winsize ws{};
            s += ::ioctl(1, TIOCGWINSZ, &ws) == 0
                     ? "size " + std::to_string(ws.ws_row) + " " + std::to_string(ws.ws_col) + "\n"
                     : std::string("size none\n");
            const bool leader = ::getsid(0) == ::getpid();
            s += std::string("ctty ") + yn(leader && ::tcgetsid(0) == ::getpid()) + "\n";
            out(s);
        };
    if (mode == "sleep-threads")
        return [n = procs(0), t = ms(1)] {
            std::vector<std::thread> threads;
            for (std::uint64_t i = 0; i < n; ++i)
                threads.emplace_back([t] { sleep_ms(t); });
            for (auto& th : threads) th.join();
            out("slept " + std::to_string(n) + "\n");
        };
    if (mode == "share-children")
        return [n = procs(0), mb = number(a[1], "share-children MiB", 1 << 20), t = ms(2)] {
            allocate(mb, 0); // every child keeps these pages, shared with us
            fork_sleepers(n, t, true);
            out("shared " + std::to_string(n) + "\n");
        };
    if (mode == "map-stall")
        return [mb = number(a[0], "map-stall MiB", 1 << 20), gib = number(a[1], "map-stall GiB", 1 << 12)] {
            allocate(mb, 0); // shared with the child below: the RSS sum counts it twice
            pid_t pid = fork_or_die();
            if (pid == 0) {
                sleep_ms(60000);
                ::_exit(0);
            }
            record_pid(pid);
            // One thread keeps the memory-map lock taken for reading (populating a read-only
            // mapping: the zero page, no RSS), another keeps asking for it for writing, so a
            // reader of smaps_rollup queues behind both.
            std::thread([gib] {
                ::mmap(nullptr, static_cast<std::size_t>(gib) << 30, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE | MAP_NORESERVE, -1, 0);
            }).detach();
            std::thread([] {
                for (;;) {
                    void* p = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                    if (p != MAP_FAILED) ::munmap(p, 4096);
                }
            }).detach();
            out("stalling\n");
            sleep_ms(60000);
        };
    if (mode == "alloc-threads")
        return [n = procs(0), mb = number(a[1], "alloc MiB", 1 << 20)] {
            out("allocating\n");
            std::vector<std::thread> threads;
            for (std::uint64_t i = 0; i < n; ++i)
                threads.emplace_back([mb] {
                    for (std::uint64_t j = 0; j < mb; ++j) { // never freed
                        auto* p = static_cast<volatile char*>(std::malloc(1 << 20));
                        if (p == nullptr) die("alloc-threads: out of memory");
                        for (std::size_t off = 0; off < (1 << 20); off += 4096) p[off] = 1;
                    }
                });
            for (auto& th : threads) th.join();
            out("allocated " + std::to_string(n * mb) + "\n");
        };
    if (mode == "spin-threads")
        return [n = procs(0), t = ms(1)] {
            std::vector<std::thread> threads;
            for (std::uint64_t i = 0; i < n; ++i)
                threads.emplace_back([t] { spin_clock_ms(CLOCK_THREAD_CPUTIME_ID, t); });
            for (auto& th : threads) th.join();
            out("spun " + std::to_string(n) + "\n");
        };
    if (mode == "alloc-children")
        return [n = procs(0), mb = number(a[1], "alloc MiB", 1 << 20), t = ms(2)] {
            std::vector<pid_t> pids;
            for (std::uint64_t i = 0; i < n; ++i) {
                pid_t pid = fork_or_die();
                if (pid == 0) {
                    allocate(mb, 0);
                    sleep_ms(t);
                    ::_exit(0);
                }
                record_pid(pid);
                pids.push_back(pid);
            }
            for (pid_t pid : pids) wait_child_or_reaped(pid);
        };
    if (mode == "ignore-term") return [] { set_handler(SIGTERM, SIG_IGN); };
    if (mode == "default-term") return [] { set_handler(SIGTERM, SIG_DFL); };
    if (mode == "ignore-chld") return [] { set_handler(SIGCHLD, SIG_IGN); };
    if (mode == "trap-term-late") {
        if (a[1].empty() || a[1].size() >= sizeof late_path) die("trap-term-late: bad file name");
        return [t = ms(0), file = std::string(a[1])] {
            late_ms = t;
            std::memcpy(late_path, file.c_str(), file.size() + 1);
            set_handler(SIGTERM, on_term_late);
        };
    }
    if (mode == "touch")
        return [file = std::string(a[0])] {
            int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0) die_errno("touch: open " + file);
            ::close(fd);
        };
    if (mode == "connect-unix") // "connected\n" or "refused <errno name>\n"
        return [path = std::string(a[0])] {
            sockaddr_un addr{};
            addr.sun_family = AF_UNIX;
            if (path.size() >= sizeof addr.sun_path) die("connect-unix: path too long");
            std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
            int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0) die_errno("connect-unix: socket");
            const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
            const std::string line = ok ? "connected\n"
                                        : std::string("refused ") + strerrorname_np(errno) + "\n";
            ::close(fd);
            out(line);
        };
    if (mode == "wait-file") // until FILE exists; exit 3 after 20 s (the test never made it)
        return [file = std::string(a[0])] {
            for (int i = 0; i < 20000; ++i)
            {
                if (::access(file.c_str(), F_OK) == 0)
                    return;
                sleep_ms(1);
            }
            std::fprintf(stderr, "wait-file: %s never appeared\n", file.c_str());
            std::exit(3);
        };
    if (mode == "trap-term")
        return [code = static_cast<int>(number(a[0], "trap-term code", 255))] {
            term_code = code;
            set_handler(SIGTERM, on_term);
        };
    if (mode == "main-exit")
        return [] {}; // run by main(): it needs the segments that follow
    if (mode == "pidfile") {
        if (std::getenv("SBX_PIDFILE") == nullptr) die("pidfile: SBX_PIDFILE is not set");
        return [] { record_pid(::getpid()); };
    }
    if (mode == "kill-self") {
        const auto sig = static_cast<int>(number(a[0], "signal", static_cast<unsigned>(SIGRTMAX)));
        if (sig == 0) die("kill-self: bad signal '0'");
        return [sig] {
            set_handler(sig, SIG_DFL);
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, sig);
            ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
            ::raise(sig);
        };
    }
    return [] { // close-out
        ::close(1);
        ::close(2);
    };
}
} // namespace

int main(int argc, char** argv)
{
    std::vector<action_t> actions;
    std::vector<std::string> names;
    args_t segment;
    auto finish_segment = [&] {
        if (segment.empty())
            die("missing mode (usage: sbx_test_target MODE [ARGS...] [--then MODE [ARGS...]]...)");
        actions.push_back(prepare(segment.front(), args_t(segment.begin() + 1, segment.end())));
        names.emplace_back(segment.front());
        segment.clear();
    };
    for (int i = 1; i < argc; ++i)
        if (std::string_view(argv[i]) == "--then")
            finish_segment();
        else
            segment.push_back(argv[i]);
    finish_segment();
    for (std::size_t i = 0; i < actions.size(); ++i)
    {
        if (names[i] != "main-exit")
        {
            actions[i]();
            continue;
        }
        // pthread_exit unwinds this stack: what the thread runs must live elsewhere.
        auto* rest = new std::vector<action_t>(actions.begin() + static_cast<long>(i) + 1,
                                               actions.end());
        auto* started = new std::atomic<bool>(false);
        std::thread([rest, started] {
            *started = true;
            for (const action_t& action : *rest) action();
            ::_exit(0);
        }).detach();
        while (!*started)
            sleep_ms(1);
        ::pthread_exit(nullptr);
    }
    return 0;
}
