// helper/subtree.cpp: listing, signalling and killing the caller's subtree.
#include "helper/subtree.hpp"

#include <sandbox/unique_fd.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <set>
#include <unordered_set>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

bool gone(int err) noexcept { return err == ENOENT || err == ESRCH; }

// Children of one task, appended to `out`; 0 or errno.
int read_task_children(const char* path, std::vector<pid_t>& out)
{
    unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
    if (!fd)
        return errno;
    return read_children_at(fd.get(), out) ? 0 : errno;
}

// Children of every thread of `pid`; 0 or errno.
int read_all_children(pid_t pid, long threads, std::vector<pid_t>& out)
{
    char path[96];
    if (threads <= 1)
    {
        std::snprintf(path, sizeof path, "/proc/%d/task/%d/children", static_cast<int>(pid),
                      static_cast<int>(pid));
        return read_task_children(path, out);
    }
    std::snprintf(path, sizeof path, "/proc/%d/task", static_cast<int>(pid));
    DIR* d = ::opendir(path);
    if (!d)
        return errno;
    std::vector<long> tids;
    while (dirent* e = ::readdir(d))
        if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
            tids.push_back(std::strtol(e->d_name, nullptr, 10));
    ::closedir(d);
    int first_err = 0;
    for (long t : tids)
    {
        std::snprintf(path, sizeof path, "/proc/%d/task/%ld/children", static_cast<int>(pid), t);
        int e = read_task_children(path, out);
        if (e != 0 && !gone(e) && first_err == 0)
            first_err = e;
    }
    return first_err;
}

// Our own children file, opened by prepare_subtree_access() (so that a descriptor-starved
// process can still list them); the caller is single-threaded.
int own_children_fd = -1;
// Our pid, read by prepare_subtree_access() (each listing asks for it; glibc does not cache it).
pid_t own_pid = 0;

pid_t self_pid() noexcept { return own_pid != 0 ? own_pid : ::getpid(); }

int read_own_children(std::vector<pid_t>& out)
{
    if (own_children_fd >= 0)
        return read_children_at(own_children_fd, out) ? 0 : errno;
    return read_task_children("/proc/thread-self/children", out);
}

// Signals `pid`, which the walk found under `parent`. A grandchild is opened as a pidfd and
// its parent checked again through that handle, so a recycled pid is never signalled.
bool send_checked(pid_t pid, pid_t parent, int sig)
{
    if (parent == self_pid())
        return ::kill(pid, sig) == 0; // our unreaped child: its pid cannot be recycled
    unique_fd pfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pfd)
    {
        if (errno == ESRCH)
            return false;
        // No descriptor to spare: the stat check of the walk just now has to do.
        return ::kill(pid, sig) == 0;
    }
    int err = 0;
    auto st = read_proc_stat(pid, err);
    // Its parent may have died since the listing, handing it to us: still a member.
    bool ok = st && (st->ppid == parent || st->ppid == self_pid()) &&
              ::syscall(SYS_pidfd_send_signal, pfd.get(), sig, nullptr, 0) == 0;
    return ok;
}

} // namespace

void prepare_subtree_access()
{
    own_children_fd = ::open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
    own_pid = ::getpid();
}

int own_children(std::vector<pid_t>& out) { return read_own_children(out); }

namespace {

// A member whose main thread has ended shows no memory in its own record: a running thread's
// record does. 0, or the errno of a read that failed for another reason than the threads
// having ended meanwhile.
int adopt_thread_memory(subtree_member& m)
{
    int err = 0;
    auto t = read_running_thread_stat(m.stat.pid, err);
    if (!t)
        return gone(err) ? 0 : err;
    m.stat.rss_pages = t->rss_pages;
    m.memory_thread = t->pid;
    return 0;
}

// Breadth-first walk from `level` (each pid with the parent it was listed under), appending
// members to `out` unless `taken` holds them already; returns the first unexpected /proc
// error.
int walk(std::vector<pid_t> level, std::vector<pid_t> parents, std::vector<subtree_member>& out,
         std::unordered_set<pid_t>& taken)
{
    const pid_t self = self_pid();
    int first_err = 0;
    std::vector<pid_t> next, next_parents, kids;
    while (!level.empty())
    {
        next.clear();
        next_parents.clear();
        for (std::size_t i = 0; i < level.size(); ++i)
        {
            int err = 0;
            auto st = read_proc_stat(level[i], err);
            if (!st)
            {
                if (!gone(err) && first_err == 0)
                    first_err = err;
                continue;
            }
            // A pid whose parent is no longer the one it was listed under was recycled,
            // unless the parent died and it fell to us: then it is a member all the same.
            if ((st->ppid != parents[i] && st->ppid != self) || !taken.insert(st->pid).second)
                continue;
            out.push_back({*st});
            if (st->zombie())
                continue;
            if (st->main_thread_ended())
                if (int e = adopt_thread_memory(out.back()); e != 0 && first_err == 0)
                    first_err = e;
            kids.clear();
            int e = read_all_children(st->pid, st->num_threads, kids);
            if (e != 0 && !gone(e) && first_err == 0)
                first_err = e;
            for (pid_t k : kids)
            {
                next.push_back(k);
                next_parents.push_back(st->pid);
            }
        }
        level.swap(next);
        parents.swap(next_parents);
    }
    return first_err;
}

// `top` (already read) and everything below it.
void list_below(const proc_stat& top, std::vector<subtree_member>& out)
{
    out.clear();
    std::unordered_set<pid_t> taken;
    walk({top.pid}, {top.ppid}, out, taken);
}

} // namespace

int list_subtree(std::vector<subtree_member>& out)
{
    out.clear();
    std::unordered_set<pid_t> taken;
    int first_err = 0;
    // A member whose parent dies during the walk falls to us, maybe after our own children
    // were read and before its parent's were: read ours again after each walk and walk
    // whatever is new (a few rounds: a tree that keeps orphaning is listed as far as it got).
    for (int round = 0; round < 4; ++round)
    {
        std::vector<pid_t> level;
        int err = read_own_children(level);
        std::erase_if(level, [&](pid_t p) { return taken.count(p) != 0; });
        if (level.empty())
            return first_err != 0 ? first_err : err;
        std::vector<pid_t> parents(level.size(), self_pid());
        int walk_err = walk(std::move(level), std::move(parents), out, taken);
        if (first_err == 0)
            first_err = err != 0 ? err : walk_err;
    }
    return first_err;
}

std::size_t signal_subtree(int sig)
{
    std::vector<subtree_member> members;
    list_subtree(members);
    std::size_t n = 0;
    for (const auto& m : members)
    {
        if (m.stat.zombie())
            continue;
        if (send_checked(m.stat.pid, m.stat.ppid, sig))
        {
            ++n;
            if (sig != SIGKILL)
                send_checked(m.stat.pid, m.stat.ppid, SIGCONT);
        }
    }
    return n;
}

int list_tree_of(pid_t root, std::vector<subtree_member>& out)
{
    out.clear();
    int err = 0;
    const auto st = read_proc_stat(root, err);
    if (!st)
        return gone(err) ? 0 : err;
    std::unordered_set<pid_t> taken;
    return walk({root}, {st->ppid}, out, taken);
}

std::size_t signal_tree_of(pid_t root, int root_pidfd, int sig)
{
    std::vector<subtree_member> members;
    list_tree_of(root, members);
    std::size_t n = 0;
    for (const auto& m : members)
    {
        if (m.stat.zombie() || m.stat.pid == root)
            continue;
        n += send_checked(m.stat.pid, m.stat.ppid, sig) ? 1 : 0;
    }
    // The root through its pidfd; then its group, which also holds members that left the
    // tree but not the group. While the root lives its pid, hence the group id, is its own.
    if (::syscall(SYS_pidfd_send_signal, root_pidfd, sig, nullptr, 0) == 0)
    {
        ++n;
        if (::getpgid(root) == root)
            ::kill(-root, sig);
    }
    return n;
}

bool reap_exited(const reap_fn& on_reap)
{
    for (;;)
    {
        int status = 0;
        struct rusage ru{};
        pid_t p = ::wait4(-1, &status, WNOHANG | __WALL, &ru);
        if (p > 0)
        {
            if (on_reap)
                on_reap(p, status, ru);
            continue;
        }
        if (p == 0)
            return true;
        if (errno == EINTR)
            continue;
        return false; // ECHILD
    }
}

namespace {

// While it lives, the calling thread runs at real-time priority when it may (CAP_SYS_NICE or
// RLIMIT_RTPRIO): a fork bomb of a thousand runnable processes would otherwise leave the
// killer a thousandth of a cpu. Children never inherit it (SCHED_RESET_ON_FORK).
class realtime_scope
{
public:
    realtime_scope()
    {
        sched_param p{};
        p.sched_priority = 1;
        raised_ = ::sched_getscheduler(0) == SCHED_OTHER &&
                  ::sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &p) == 0;
    }
    ~realtime_scope()
    {
        if (raised_)
        {
            sched_param p{};
            ::sched_setscheduler(0, SCHED_OTHER, &p);
        }
    }
    realtime_scope(const realtime_scope&) = delete;
    realtime_scope& operator=(const realtime_scope&) = delete;

private:
    bool raised_ = false;
};

} // namespace

std::size_t kill_subtree(const reap_fn& on_reap)
{
    if (!reap_exited(on_reap))
        return 0; // the common case: the command left nothing behind
    realtime_scope fast;
    // Each process is killed once, remembered by pid and start time. Then we block until a
    // child of ours dies: every process of the subtree either is killed already or becomes
    // our child when its last ancestor below us dies; such a newcomer (born during the
    // listing) is killed with everything below it. No spinning while thousands die.
    std::set<std::pair<pid_t, std::uint64_t>> killed;
    std::vector<subtree_member> members;
    std::vector<pid_t> children;
    auto kill_listed = [&] {
        for (const auto& m : members)
            if (!m.stat.zombie() && !killed.count({m.stat.pid, m.stat.starttime}) &&
                send_checked(m.stat.pid, m.stat.ppid, SIGKILL))
                killed.insert({m.stat.pid, m.stat.starttime});
    };
    list_subtree(members);
    kill_listed();
    const pid_t self = self_pid();
    // Our own children cannot be recycled while unreaped: once looked at, they are known by
    // pid alone until we reap them (a stat read each per round would make this quadratic).
    std::unordered_set<pid_t> seen_children;
    const reap_fn forget = [&](pid_t p, int status, const struct rusage& ru) {
        seen_children.erase(p);
        if (on_reap)
            on_reap(p, status, ru);
    };
    for (;;)
    {
        if (!reap_exited(forget))
            return killed.size();
        children.clear();
        own_children(children);
        const std::size_t before = killed.size();
        for (pid_t c : children)
        {
            if (!seen_children.insert(c).second)
                continue;
            int err = 0;
            auto st = read_proc_stat(c, err);
            if (!st || st->zombie() || st->ppid != self ||
                killed.count({st->pid, st->starttime}))
                continue;
            list_below(*st, members);
            kill_listed();
        }
        if (killed.size() != before)
            continue;
        int status = 0;
        struct rusage ru{};
        pid_t p = ::wait4(-1, &status, __WALL, &ru);
        if (p > 0)
            forget(p, status, ru);
        if (p < 0 && errno == ECHILD)
            return killed.size();
    }
}

} // namespace sandbox::detail
