// helper/cgroup.cpp: see cgroup.hpp.
#include "helper/cgroup.hpp"
#include "helper/proc.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

std::string errno_text(int err)
{
    const char* n = ::strerrorname_np(err);
    return n ? n : "errno " + std::to_string(err);
}

// Records `step` failing with `err` in `why` and returns `err`.
int fail(std::string& why, std::string_view step, int err)
{
    why = std::string(step) + ": " + errno_text(err);
    return err;
}

// A control file holding one number ("123\n"); nullopt when absent or not a number.
std::optional<std::uint64_t> read_number(int dir_fd, const char* name)
{
    std::string text;
    if (read_cgroup_file(dir_fd, name, text) != 0)
        return std::nullopt;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
        return std::nullopt;
    return v;
}

// The value of `key` in the flat-keyed file `name`; 0 when either is absent.
std::uint64_t read_keyed(int dir_fd, const char* name, std::string_view key)
{
    std::string text;
    if (read_cgroup_file(dir_fd, name, text) != 0)
        return 0;
    return flat_keyed_value(text, key).value_or(0);
}

int own_starttime(std::uint64_t& out)
{
    return process_start_time(::getpid(), out);
}

// The helper that made a tree is still there: its pid runs with the same start time. Only a
// missing /proc entry says it is gone; any other doubt keeps the tree.
bool owner_alive(const tree_owner& owner)
{
    std::uint64_t start = 0;
    if (int err = process_start_time(owner.pid, start))
        return err != ENOENT && err != ESRCH;
    return start == owner.starttime;
}

// The limits of `limits` whose controller is in `controllers`, written in order.
int write_limits(int dir_fd, const cgroup_limits& limits, unsigned controllers, std::string& why)
{
    struct setting
    {
        const char* file;
        std::string value;
        bool optional; // absent without swap accounting
    };
    std::vector<setting> settings;
    if (limits.memory_bytes && (controllers & cgc_memory))
    {
        settings.push_back({"memory.max", std::to_string(limits.memory_bytes), false});
        settings.push_back({"memory.swap.max", "0", true});
        settings.push_back({"memory.oom.group", "1", false});
    }
    if (limits.max_tasks && (controllers & cgc_pids))
        settings.push_back({"pids.max", std::to_string(limits.max_tasks), false});
    for (const auto& s : settings)
    {
        int err = write_cgroup_file(dir_fd, s.file, s.value);
        if (err && !(s.optional && err == ENOENT))
            return fail(why, s.file, err);
    }
    return 0;
}

// An inotify descriptor on the leaf's event files (cgroup.events must be there).
int watch_events(int dir_fd, unique_fd& out, std::string& why)
{
    unique_fd in(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
    if (!in)
        return fail(why, "inotify_init1", errno);
    const std::string base = "/proc/self/fd/" + std::to_string(dir_fd) + "/";
    struct watched
    {
        const char* file;
        bool required;
    };
    const watched files[] = {
        {"cgroup.events", true}, {"memory.events", false}, {"pids.events", false}};
    for (const auto& f : files)
    {
        if (!f.required && ::faccessat(dir_fd, f.file, F_OK, 0) != 0)
            continue;
        if (::inotify_add_watch(in.get(), (base + f.file).c_str(), IN_MODIFY) < 0)
            return fail(why, std::string("inotify ") + f.file, errno);
    }
    out = std::move(in);
    return 0;
}

// The pre-5.14 kill: freeze, SIGKILL each member (again for any that showed up late), thaw.
int freeze_and_kill(int dir_fd)
{
    if (int err = write_cgroup_file(dir_fd, "cgroup.freeze", "1"))
        return err;
    std::vector<pid_t> killed;
    int first = 0;
    for (int pass = 0; pass < 100; ++pass)
    {
        std::string text;
        if (int err = read_cgroup_file(dir_fd, "cgroup.procs", text))
        {
            first = err;
            break;
        }
        std::vector<pid_t> pids;
        parse_pid_list(text, pids);
        bool fresh = false;
        for (pid_t p : pids)
            if (std::find(killed.begin(), killed.end(), p) == killed.end())
            {
                ::kill(p, SIGKILL);
                killed.push_back(p);
                fresh = true;
            }
        if (!fresh)
            break;
    }
    int thaw = write_cgroup_file(dir_fd, "cgroup.freeze", "0");
    return first ? first : thaw;
}

// Writes "+name" for each controller of `wanted` the tree offers (one write each: one
// refused is left out). The bits enabled.
unsigned enable_controllers(int tree_fd, unsigned wanted, std::string& why)
{
    std::string text;
    if (read_cgroup_file(tree_fd, "cgroup.controllers", text) != 0)
        return 0;
    unsigned offered = parse_controllers(text) & wanted;
    unsigned enabled = 0;
    for (unsigned bit : {cgc_cpu, cgc_memory, cgc_pids})
    {
        if (!(offered & bit))
            continue;
        // Appended, not "+" + name: GCC 12 reports a false -Wrestrict on that in Release.
        std::string enable = "+";
        enable += controller_names(bit);
        int err = write_cgroup_file(tree_fd, "cgroup.subtree_control", enable);
        if (err == 0)
            enabled |= bit;
        else
            why += (why.empty() ? "" : "; ") + controller_names(bit) +
                   " not enabled: " + errno_text(err);
    }
    return enabled;
}

// How far make_tree got, for undo_tree.
enum class tree_stage
{
    none,  // nothing made (the name may be another's: leave it)
    made,  // the directories (some of them)
    moved, // and the caller moved into supervisor
};

// Undoes a partly made tree: the caller back in the parent, the directories removed.
void undo_tree(int parent_fd, const std::string& name, tree_stage stage)
{
    if (stage == tree_stage::none)
        return;
    if (stage == tree_stage::moved)
        write_cgroup_file(parent_fd, "cgroup.procs", "0");
    unique_fd tree(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (tree)
        ::unlinkat(tree.get(), "supervisor", AT_REMOVEDIR);
    ::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR);
}

// Makes `<parent>/name/supervisor` and moves the caller there.
int make_tree(int parent_fd, const std::string& name, unique_fd& tree, tree_stage& stage,
              std::string& why)
{
    if (::mkdirat(parent_fd, name.c_str(), 0755) != 0)
        return fail(why, name + ": mkdir", errno);
    stage = tree_stage::made;
    tree.reset(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!tree)
        return fail(why, name + ": open", errno);
    if (::mkdirat(tree.get(), "supervisor", 0755) != 0)
        return fail(why, name + "/supervisor: mkdir", errno);
    if (int err = write_cgroup_file(tree.get(), "supervisor/cgroup.procs", "0"))
        return fail(why, name + "/supervisor/cgroup.procs", err);
    stage = tree_stage::moved;
    return 0;
}

} // namespace

int cgroup_leaf::make(int tree_fd, std::string_view name, const cgroup_limits& limits,
                      unsigned controllers, cgroup_leaf& out, std::string& why)
{
    const std::string n(name);
    if (::mkdirat(tree_fd, n.c_str(), 0755) != 0)
        return fail(why, n + ": mkdir", errno);
    int err = adopt(tree_fd, name, limits, controllers, out, why);
    if (err)
        ::unlinkat(tree_fd, n.c_str(), AT_REMOVEDIR);
    return err;
}

int cgroup_leaf::adopt(int tree_fd, std::string_view name, const cgroup_limits& limits,
                       unsigned controllers, cgroup_leaf& out, std::string& why)
{
    cgroup_leaf leaf;
    leaf.name_ = std::string(name);
    leaf.dir_.reset(::openat(tree_fd, leaf.name_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!leaf.dir_)
        return fail(why, leaf.name_ + ": open", errno);
    if (int err = write_limits(leaf.fd(), limits, controllers, why))
    {
        why = leaf.name_ + "/" + why;
        return err;
    }
    if (int err = watch_events(leaf.fd(), leaf.events_, why))
    {
        why = leaf.name_ + ": " + why;
        return err;
    }
    // (Either may fail to open: read_file then opens it by name each time.)
    leaf.events_file_.reset(::openat(leaf.fd(), "cgroup.events", O_RDONLY | O_CLOEXEC));
    leaf.cpu_file_.reset(::openat(leaf.fd(), "cpu.stat", O_RDONLY | O_CLOEXEC));
    out = std::move(leaf);
    return 0;
}

int cgroup_leaf::kill()
{
    if (!dir_)
        return EBADF;
    if (::faccessat(dir_.get(), "cgroup.kill", F_OK, 0) == 0)
        return write_cgroup_file(dir_.get(), "cgroup.kill", "1");
    return freeze_and_kill(dir_.get());
}

int cgroup_leaf::read_file(const unique_fd& kept, const char* name, std::string& out) const
{
    if (!kept)
        return read_cgroup_file(dir_.get(), name, out);
    out.clear();
    char buf[4096];
    for (;;)
    {
        const ssize_t n = ::pread(kept.get(), buf, sizeof buf, static_cast<off_t>(out.size()));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        out.append(buf, static_cast<std::size_t>(n));
        if (n == 0 || static_cast<std::size_t>(n) < sizeof buf)
            return 0;
    }
}

std::optional<cgroup_reading> cgroup_leaf::read() const
{
    std::string events;
    if (!dir_ || read_file(events_file_, "cgroup.events", events) != 0)
        return std::nullopt;
    cgroup_reading r;
    r.populated = flat_keyed_value(events, "populated").value_or(0) != 0;
    r.cpu = cpu().value_or(std::chrono::microseconds{0});
    auto peak = read_number(dir_.get(), "memory.peak");
    r.memory_peak = peak ? *peak : read_number(dir_.get(), "memory.current").value_or(0);
    r.oom_kills = read_keyed(dir_.get(), "memory.events", "oom_kill") +
                  read_keyed(dir_.get(), "memory.events", "oom_group_kill");
    r.pids_refused = read_keyed(dir_.get(), "pids.events", "max");
    return r;
}

std::optional<bool> cgroup_leaf::populated() const
{
    std::string events;
    if (!dir_ || read_file(events_file_, "cgroup.events", events) != 0)
        return std::nullopt;
    const auto v = flat_keyed_value(events, "populated");
    if (!v)
        return std::nullopt;
    return *v != 0;
}

std::optional<std::chrono::microseconds> cgroup_leaf::cpu() const
{
    std::string text;
    if (!dir_ || read_file(cpu_file_, "cpu.stat", text) != 0)
        return std::nullopt;
    auto usec = flat_keyed_value(text, "usage_usec");
    if (!usec)
        return std::nullopt;
    return std::chrono::microseconds(*usec);
}

void cgroup_leaf::clear_events() const
{
    alignas(inotify_event) char buf[4096];
    while (events_ && ::read(events_.get(), buf, sizeof buf) > 0)
    {}
}

int cgroup_leaf::remove(int tree_fd)
{
    if (::unlinkat(tree_fd, name_.c_str(), AT_REMOVEDIR) != 0)
        return errno;
    events_file_.reset();
    cpu_file_.reset();
    events_.reset();
    dir_.reset();
    return 0;
}

int cgroup_tree::open(const cgroup_site& site, cgroup_tree& out, std::string& why)
{
    if (!site.why_not.empty() || site.parent.empty())
        return fail(why, "no cgroup site", EINVAL);
    unique_fd parent(::open(site.parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent)
        return fail(why, site.parent, errno);
    std::uint64_t start = 0;
    if (int err = own_starttime(start))
        return fail(why, "/proc/self/stat", err);
    const std::string name = tree_name(::getpid(), start);
    unique_fd tree;
    tree_stage stage = tree_stage::none;
    if (int err = make_tree(parent.get(), name, tree, stage, why))
    {
        why = site.parent + "/" + why;
        tree.reset();
        undo_tree(parent.get(), name, stage);
        return err;
    }
    why.clear();
    cgroup_tree t;
    t.controllers_ = enable_controllers(tree.get(), site.controllers, why);
    t.dir_ = std::move(tree);
    t.parent_ = site.parent;
    t.path_ = site.parent + "/" + name;
    out = std::move(t);
    return 0;
}

void cgroup_tree::tear_down(std::chrono::milliseconds wait)
{
    if (!dir_)
        return;
    std::vector<std::string> children;
    list_child_cgroups(dir_.get(), children);
    for (const auto& child : children)
        if (child != "supervisor")
            write_cgroup_file(dir_.get(), (child + "/cgroup.kill").c_str(), "1");
    write_cgroup_file(AT_FDCWD, (parent_ + "/cgroup.procs").c_str(), "0");
    remove_cgroup_path(path_, wait);
    dir_.reset();
}

int cgroup_tree::sweep_stale(const std::string& site_parent, std::chrono::milliseconds wait)
{
    unique_fd parent(::open(site_parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    std::vector<std::string> children;
    if (!parent || list_child_cgroups(parent.get(), children) != 0)
        return 0;
    std::uint64_t own_start = 0;
    bool own_known = own_starttime(own_start) == 0;
    int removed = 0;
    for (const auto& child : children)
    {
        auto owner = parse_tree_name(child);
        if (!owner || (owner->pid == ::getpid() && (!own_known || owner->starttime == own_start)))
            continue;
        if (owner_alive(*owner))
            continue;
        const std::string path = site_parent + "/" + child;
        kill_cgroup_path(path);
        if (remove_cgroup_path(path, wait) == 0)
            ++removed;
    }
    return removed;
}

} // namespace sandbox::detail
