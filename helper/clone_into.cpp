// helper/clone_into.cpp: clone3 into a cgroup and the child's set-up (see clone_into.hpp).
#include "helper/clone_into.hpp"
#include "protocol/init_status.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

// Blocks every signal of the calling thread, the C library's own too (which
// pthread_sigmask leaves alone), until destroyed.
class all_signals_blocked
{
public:
    all_signals_blocked()
    {
        sigset_t all;
        sigfillset(&all);
        ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old_, kernel_sigset_size);
    }
    all_signals_blocked(const all_signals_blocked&) = delete;
    all_signals_blocked& operator=(const all_signals_blocked&) = delete;
    ~all_signals_blocked()
    {
        ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old_, nullptr, kernel_sigset_size);
    }

private:
    static constexpr std::size_t kernel_sigset_size = (NSIG - 1) / 8; // 64 signals: 8 bytes
    sigset_t old_;
};

// Into the cgroup `cgroup_fd`, or (-1) the caller's.
clone_args into_cgroup(int cgroup_fd, std::uint64_t flags)
{
    clone_args ca{};
    ca.flags = flags | CLONE_VFORK | (cgroup_fd >= 0 ? CLONE_INTO_CGROUP : 0);
    ca.exit_signal = SIGCHLD;
    ca.cgroup = cgroup_fd >= 0 ? static_cast<std::uint64_t>(cgroup_fd) : 0;
    return ca;
}

#if SBX_CHILD_SHARES_MEMORY

// A stack for children: a guard page below it.
class child_stack
{
public:
    child_stack()
    {
        void* p = ::mmap(nullptr, guard_ + clone_stack_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (p == MAP_FAILED)
            return;
        base_ = static_cast<char*>(p);
        if (::mprotect(base_, guard_, PROT_NONE) != 0)
        {
            ::munmap(base_, guard_ + clone_stack_size);
            base_ = nullptr;
        }
    }
    child_stack(const child_stack&) = delete;
    child_stack& operator=(const child_stack&) = delete;
    ~child_stack()
    {
        if (base_)
            ::munmap(base_, guard_ + clone_stack_size);
    }
    char* lowest() const { return base_ ? base_ + guard_ : nullptr; }

    // This thread's stack, mapped at its first child and kept: a child runs on it only while
    // this thread waits (CLONE_VFORK), so the next child of the thread may have it again.
    // (Mapping and unmapping one per child cost three calls and, as the child ran on another
    // cpu, a TLB shootdown at each unmap.)
    static char* of_this_thread()
    {
        thread_local child_stack kept;
        return kept.lowest();
    }

private:
    static inline const std::size_t guard_ = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    char* base_ = nullptr;
};

// clone3 itself: the parent gets the child's pid (or -errno); the child, on the stack the
// arguments name (its top 16-byte aligned), clears the frame pointer, calls entry(arg) and
// never comes back to this function: it touches no frame of ours (the C library has no
// clone3 wrapper to do this in Debian 12's glibc 2.36).
long raw_clone3(clone_args* ca, child_entry entry, void* arg)
{
    long ret = SYS_clone3;
    register child_entry fn asm("r8") = entry;
    register void* fn_arg asm("r9") = arg;
    asm volatile("syscall\n\t"
                 "testq %%rax, %%rax\n\t"
                 "jnz 1f\n\t"
                 "xorl %%ebp, %%ebp\n\t"
                 "movq %%r9, %%rdi\n\t"
                 "callq *%%r8\n\t"
                 "movl %[exit_group], %%eax\n\t" // entry never returns; if it did: 127
                 "movl $127, %%edi\n\t"
                 "syscall\n\t"
                 "hlt\n"
                 "1:"
                 : "+a"(ret)
                 : "D"(ca), "S"(sizeof *ca), "r"(fn), "r"(fn_arg), [exit_group] "i"(SYS_exit_group)
                 : "rcx", "r11", "memory");
    return ret;
}

int start(int cgroup_fd, child_entry entry, void* arg, pid_t& pid)
{
    char* const stack = child_stack::of_this_thread();
    if (!stack)
        return ENOMEM;
    if (cgroup_fd < 0) // clone(2): a fork filter over the tree (an instance's) refuses clone3
    {
        struct call
        {
            child_entry entry;
            void* arg;
        } c{entry, arg};
        auto run = [](void* p) -> int {
            auto* c = static_cast<call*>(p);
            c->entry(c->arg);
            return 127; // (never reached)
        };
        const int r = ::clone(run, stack + clone_stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
        if (r < 0)
            return errno;
        pid = r;
        return 0;
    }
    clone_args ca = into_cgroup(cgroup_fd, CLONE_VM);
    ca.stack = reinterpret_cast<std::uintptr_t>(stack);
    ca.stack_size = clone_stack_size;
    const long r = raw_clone3(&ca, entry, arg);
    if (r < 0)
        return static_cast<int>(-r);
    pid = static_cast<pid_t>(r);
    return 0;
}

#else

// A copy of us, as fork() makes, waited for until it executes a program or ends.
int start(int cgroup_fd, child_entry entry, void* arg, pid_t& pid)
{
    if (cgroup_fd < 0) // fork(): a fork filter over the tree (an instance's) refuses clone3
    {
        const pid_t r = ::fork();
        if (r == 0)
        {
            entry(arg);
            ::_exit(127); // (never reached: entry executes a program or ends the child)
        }
        if (r < 0)
            return errno;
        pid = r;
        return 0;
    }
    clone_args ca = into_cgroup(cgroup_fd, 0);
    const long r = ::syscall(SYS_clone3, &ca, sizeof ca);
    if (r == 0)
    {
        entry(arg);
        ::_exit(127); // (never reached: entry executes a program or ends the child)
    }
    if (r < 0)
        return errno;
    pid = static_cast<pid_t>(r);
    return 0;
}

#endif

// Makes `from` descriptor `to`, without close-on-exec (as posix_spawn's dup2 action does
// when both are the same); 0 or errno.
int move_to(int from, int to)
{
    if (from == to)
        return ::fcntl(to, F_SETFD, 0) == 0 ? 0 : errno;
    return ::dup2(from, to) == to ? 0 : errno;
}

// The process group or session, the dispositions and the mask. 0 or errno.
int set_up_signals(const spawn_args& a)
{
    const bool terminal = !a.tty_path.empty() || a.tty_fd >= 0;
    if ((terminal ? ::setsid() : ::setpgid(0, 0)) < 0)
        return errno;
    struct sigaction dfl{};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s)
        if (s != SIGKILL && s != SIGSTOP)
            ::sigaction(s, &dfl, nullptr); // (fails harmlessly for the C library's own)
    if (a.ignore_job_signals)
        for (int s : job_signals)
            ::signal(s, SIG_IGN);
    sigset_t none;
    sigemptyset(&none);
    return ::sigprocmask(SIG_SETMASK, &none, nullptr) == 0 ? 0 : errno;
}

// The work directory and the descriptors. 0 or errno.
int set_up_files(const spawn_args& a, int stdin_fd, std::span<const int> extra, int keep_fd)
{
    if (a.work_dir_fd >= 0 && ::fchdir(a.work_dir_fd) != 0)
        return errno;
    int in = stdin_fd, out = a.stdout_fd, err = a.stderr_fd;
    if (a.tty_fd >= 0) // a session leader by now: the terminal becomes its controlling one
    {
        if (int rc = move_to(a.tty_fd, 0); rc != 0)
            return rc;
        if (::ioctl(0, TIOCSCTTY, 0) != 0)
            return errno;
        in = out = err = 0;
    }
    else if (!a.tty_path.empty())
    {
        ::close(0);
        const int t = ::open(a.tty_path.c_str(), O_RDWR); // becomes the controlling terminal
        if (t != 0)
            return t < 0 ? errno : EBADF;
        in = out = err = 0;
    }
    int rc = move_to(in, 0);
    rc = rc ? rc : move_to(out, 1);
    rc = rc ? rc : move_to(err, 2);
    for (std::size_t i = 0; i < extra.size() && rc == 0; ++i)
        rc = move_to(extra[i], 3 + static_cast<int>(i));
    if (rc != 0)
        return rc;
    // (Before Linux 5.9 close_range fails and the descriptors stay: close-on-exec ones go.)
    const unsigned first = 3 + static_cast<unsigned>(extra.size());
    unsigned rest = first;
    if (keep_fd >= 0 && static_cast<unsigned>(keep_fd) >= first)
    {
        const unsigned keep = static_cast<unsigned>(keep_fd);
        if (first < keep)
            ::syscall(SYS_close_range, first, keep - 1, 0u);
        rest = keep + 1;
    }
    ::syscall(SYS_close_range, rest, ~0u, 0u);
    return 0;
}

} // namespace

int clone_into_cgroup(int cgroup_fd, child_entry entry, void* arg, pid_t& pid)
{
    const all_signals_blocked blocked;
    return start(cgroup_fd, entry, arg, pid);
}

std::vector<char*> c_strings(const std::vector<std::string>& v)
{
    std::vector<char*> out;
    out.reserve(v.size() + 1);
    for (const auto& s : v)
        out.push_back(const_cast<char*>(s.c_str()));
    out.push_back(nullptr);
    return out;
}

int set_up_child(const spawn_args& a, int stdin_fd, std::span<const int> extra, int keep_fd)
{
    const int rc = set_up_signals(a);
    return rc != 0 ? rc : set_up_files(a, stdin_fd, extra, keep_fd);
}

} // namespace sandbox::detail
