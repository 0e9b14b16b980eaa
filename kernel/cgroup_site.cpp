// kernel/cgroup_site.cpp: see cgroup_site.hpp.
#include "kernel/cgroup_site.hpp"

#include <sandbox/unique_fd.hpp>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

constexpr unsigned all_controllers = cgc_cpu | cgc_memory | cgc_pids;

struct controller_name
{
    cgroup_controller bit;
    std::string_view name;
};
constexpr controller_name controller_table[] = {
    {cgc_cpu, "cpu"}, {cgc_memory, "memory"}, {cgc_pids, "pids"}};

bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Splits `text` at the first of `seps` (none: all of it), advancing `text` past it.
std::string_view next_token(std::string_view& text, auto is_sep)
{
    std::size_t b = 0;
    while (b < text.size() && is_sep(text[b]))
        ++b;
    std::size_t e = b;
    while (e < text.size() && !is_sep(text[e]))
        ++e;
    std::string_view tok = text.substr(b, e - b);
    text.remove_prefix(e);
    return tok;
}

std::string_view next_line(std::string_view& text)
{
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    return line;
}

// A whole token of decimal digits (no sign, no space) that fits T.
template <class T> std::optional<T> parse_decimal(std::string_view tok)
{
    if (tok.empty() || tok.front() < '0' || tok.front() > '9')
        return std::nullopt;
    T v{};
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc{} || end != tok.data() + tok.size())
        return std::nullopt;
    return v;
}

// As parse_decimal, but without leading zeros: the form tree_name writes, so that one owner
// has one name.
template <class T> std::optional<T> parse_canonical(std::string_view tok)
{
    if (tok.size() > 1 && tok.front() == '0')
        return std::nullopt;
    return parse_decimal<T>(tok);
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string decode_octal_escapes(std::string_view s)
{
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i)
    {
        auto d = [&](std::size_t k) { return s[i + k] >= '0' && s[i + k] <= '7'; };
        if (s[i] == '\\' && i + 3 < s.size() && d(1) && d(2) && d(3))
        {
            out +=
                static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
            continue;
        }
        out += s[i];
    }
    return out;
}

// The mount point of one mountinfo line when its filesystem type is cgroup2.
std::optional<std::string> cgroup2_mount_of_line(std::string_view line)
{
    auto sep = [](char c) { return c == ' '; };
    std::string_view mount_point;
    for (int field = 0; field < 5; ++field)
        mount_point = next_token(line, sep);
    if (mount_point.empty())
        return std::nullopt;
    // Optional fields follow until a lone "-"; then the filesystem type.
    for (std::string_view tok = next_token(line, sep); !tok.empty(); tok = next_token(line, sep))
        if (tok == "-")
            return next_token(line, sep) == "cgroup2"
                       ? std::optional<std::string>(decode_octal_escapes(mount_point))
                       : std::nullopt;
    return std::nullopt;
}

std::string errno_name(int err)
{
    const char* n = ::strerrorname_np(err);
    return n ? n : "errno " + std::to_string(err);
}

int read_path(const char* path, std::string& out)
{
    return read_cgroup_file(AT_FDCWD, path, out);
}

// Reads `path`, or says in `why_not` why it could not.
bool read_or_say(const char* path, std::string& out, std::string& why_not)
{
    if (int err = read_path(path, out))
    {
        why_not = std::string(path) + ": " + errno_name(err);
        return false;
    }
    return true;
}

// Collapses repeated and trailing slashes; nullopt for a relative path or one with a "." or
// ".." component.
std::optional<std::string> normalised_absolute(std::string_view p)
{
    if (p.empty() || p.front() != '/')
        return std::nullopt;
    std::string out;
    auto sep = [](char c) { return c == '/'; };
    for (std::string_view c = next_token(p, sep); !c.empty(); c = next_token(p, sep))
    {
        if (c == "." || c == "..")
            return std::nullopt;
        out += '/';
        out += c;
    }
    return out.empty() ? std::string("/") : out;
}

bool inside(const std::string& path, const std::string& mount)
{
    if (mount == "/")
        return true;
    return path == mount ||
           (path.size() > mount.size() && path.compare(0, mount.size(), mount) == 0 &&
            path[mount.size()] == '/');
}

// The kernel release as major * 1000 + minor (5.14 -> 5014); 0 when unreadable.
unsigned kernel_version()
{
    utsname u{};
    if (::uname(&u) != 0)
        return 0;
    std::string_view r = u.release;
    auto dot = [](char c) { return c == '.' || c == '-'; };
    auto major = parse_decimal<unsigned>(next_token(r, dot));
    auto minor = parse_decimal<unsigned>(next_token(r, dot));
    return major && minor ? *major * 1000 + *minor : 0;
}

// The cgroup2 mount to use (the stand-in's for tests), or why there is none.
std::optional<std::string> site_mount(std::string_view root_for_tests, std::string& why_not)
{
    if (!root_for_tests.empty())
        return normalised_absolute(root_for_tests);
    std::string text;
    if (!read_or_say("/proc/self/mountinfo", text, why_not))
        return std::nullopt;
    auto mount = cgroup2_mount_of(text);
    if (!mount)
        why_not = "no cgroup2 mount";
    return mount;
}

// The parent directory a request names, or why it is not usable.
std::optional<std::string> site_parent(std::string_view request, const std::string& mount,
                                       std::string& why_not)
{
    if (request != "auto")
    {
        auto p = normalised_absolute(request);
        if (!p)
            why_not = std::string(request) + ": not an absolute, normalised path";
        else if (!inside(*p, mount))
            why_not = *p + ": not inside the cgroup2 mount " + mount;
        return why_not.empty() ? p : std::nullopt;
    }
    std::string text;
    if (!read_or_say("/proc/self/cgroup", text, why_not))
        return std::nullopt;
    auto own = unified_path_of(text);
    if (!own)
    {
        why_not = "no cgroup v2 path in /proc/self/cgroup";
        return std::nullopt;
    }
    return *own == "/" ? mount : (mount == "/" ? *own : mount + *own);
}

// Checks the parent is a writable cgroup directory and reads what it offers.
void inspect_parent(cgroup_site& s, const std::string& mount)
{
    unique_fd dir(::open(s.parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir)
    {
        s.why_not = s.parent + ": " + errno_name(errno);
        return;
    }
    if (::faccessat(dir.get(), "cgroup.procs", F_OK, 0) != 0)
    {
        s.why_not = s.parent + ": not a cgroup (no cgroup.procs)";
        return;
    }
    const std::string procs = s.parent + "/cgroup.procs";
    if (::access(s.parent.c_str(), W_OK) != 0 || ::access(procs.c_str(), W_OK) != 0)
    {
        s.why_not = s.parent + ": not writable (" + errno_name(errno) + ")";
        return;
    }
    s.has_kill = ::faccessat(dir.get(), "cgroup.kill", F_OK, 0) == 0 ||
                 (s.parent == mount && kernel_version() >= 5014);
    std::string text;
    if (read_cgroup_file(dir.get(), "cgroup.subtree_control", text) == 0)
        s.controllers = parse_controllers(text) & all_controllers;
}

// One directory level of remove_cgroup_path: the child cgroups of `name`, then `name`.
int remove_at(int parent_fd, const char* name, std::chrono::steady_clock::time_point deadline,
              bool top)
{
    unique_fd dir(::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir)
        return errno == ENOENT && top ? 0 : errno;
    std::vector<std::string> children;
    if (int err = list_child_cgroups(dir.get(), children))
        return err;
    for (const auto& child : children)
        if (int err = remove_at(dir.get(), child.c_str(), deadline, false); err && err != ENOENT)
            return err;
    for (;;)
    {
        if (::unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || (errno == ENOENT && top))
            return 0;
        if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline)
            return errno;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

} // namespace

unsigned parse_controllers(std::string_view text)
{
    unsigned bits = 0;
    for (auto tok = next_token(text, is_space); !tok.empty(); tok = next_token(text, is_space))
        for (const auto& c : controller_table)
            if (tok == c.name)
                bits |= c.bit;
    return bits;
}

std::string controller_names(unsigned bits)
{
    std::string out;
    for (const auto& c : controller_table)
        if (bits & c.bit)
        {
            if (!out.empty())
                out += ' ';
            out += c.name;
        }
    return out;
}

std::optional<std::string> unified_path_of(std::string_view proc_cgroup)
{
    while (!proc_cgroup.empty())
    {
        std::string_view line = next_line(proc_cgroup);
        if (line.substr(0, 3) == "0::" && line.size() > 3 && line[3] == '/')
            return std::string(line.substr(3));
    }
    return std::nullopt;
}

std::optional<std::string> cgroup2_mount_of(std::string_view mountinfo)
{
    while (!mountinfo.empty())
        if (auto m = cgroup2_mount_of_line(next_line(mountinfo)))
            return m;
    return std::nullopt;
}

std::optional<std::uint64_t> flat_keyed_value(std::string_view text, std::string_view key)
{
    auto sep = [](char c) { return c == ' ' || c == '\t'; };
    while (!text.empty())
    {
        std::string_view line = next_line(text);
        if (next_token(line, sep) != key)
            continue;
        auto value = parse_decimal<std::uint64_t>(next_token(line, sep));
        return value && next_token(line, sep).empty() ? value : std::nullopt;
    }
    return std::nullopt;
}

std::string tree_name(pid_t helper, std::uint64_t starttime)
{
    return "sbx-" + std::to_string(helper) + "-" + std::to_string(starttime);
}

int process_start_time(pid_t pid, std::uint64_t& out)
{
    std::string text;
    const std::string path = "/proc/" + std::to_string(pid) + "/stat";
    if (int err = read_cgroup_file(AT_FDCWD, path.c_str(), text))
        return err;
    // After the parenthesised name (which may hold anything), field 3 on: 22 is the 20th.
    const auto close = text.rfind(')');
    if (close == std::string::npos)
        return EINVAL;
    std::string_view rest = std::string_view(text).substr(close + 1);
    std::string_view field;
    for (int i = 3; i <= 22; ++i)
    {
        const auto from = rest.find_first_not_of(' ');
        if (from == std::string_view::npos)
            return EINVAL;
        rest.remove_prefix(from);
        field = rest.substr(0, rest.find(' '));
        rest.remove_prefix(field.size());
    }
    const auto v = parse_decimal<std::uint64_t>(field);
    if (!v)
        return EINVAL;
    out = *v;
    return 0;
}

std::optional<tree_owner> parse_tree_name(std::string_view name)
{
    constexpr std::string_view prefix = "sbx-";
    if (name.substr(0, prefix.size()) != prefix)
        return std::nullopt;
    name.remove_prefix(prefix.size());
    std::size_t dash = name.find('-');
    if (dash == std::string_view::npos)
        return std::nullopt;
    auto pid = parse_canonical<pid_t>(name.substr(0, dash));
    auto start = parse_canonical<std::uint64_t>(name.substr(dash + 1));
    if (!pid || *pid <= 0 || !start)
        return std::nullopt;
    return tree_owner{*pid, *start};
}

cgroup_site find_cgroup_site(std::string_view request, std::string_view root_for_tests)
{
    cgroup_site s;
    if (request == "off")
    {
        s.why_not = "off";
        return s;
    }
    auto mount = site_mount(root_for_tests, s.why_not);
    if (!mount)
    {
        if (s.why_not.empty())
            s.why_not = std::string(root_for_tests) + ": not an absolute, normalised path";
        return s;
    }
    auto parent = site_parent(request, *mount, s.why_not);
    if (!parent)
        return s;
    s.parent = *parent;
    inspect_parent(s, *mount);
    if (!s.why_not.empty())
    {
        s.parent.clear();
        s.controllers = 0;
        s.has_kill = false;
    }
    return s;
}

int read_cgroup_file(int dir_fd, const char* name, std::string& out)
{
    unique_fd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC));
    if (!fd)
        return errno;
    out.clear();
    char buf[4096];
    for (;;)
    {
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno;
        if (n == 0)
            return 0;
        out.append(buf, static_cast<std::size_t>(n));
    }
}

int write_cgroup_file(int dir_fd, const char* name, std::string_view text)
{
    unique_fd fd(::openat(dir_fd, name, O_WRONLY | O_CLOEXEC));
    if (!fd)
        return errno;
    ssize_t n;
    do
        n = ::write(fd.get(), text.data(), text.size());
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno;
    return static_cast<std::size_t>(n) == text.size() ? 0 : EIO;
}

int list_child_cgroups(int dir_fd, std::vector<std::string>& out)
{
    out.clear();
    int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    DIR* d = ::fdopendir(fd);
    if (!d)
    {
        int err = errno;
        ::close(fd);
        return err;
    }
    errno = 0;
    while (const dirent* e = ::readdir(d))
    {
        std::string_view n = e->d_name;
        if (e->d_type == DT_DIR && n != "." && n != "..")
            out.emplace_back(n);
    }
    int err = errno;
    ::closedir(d);
    return err;
}

int kill_cgroup_path(const std::string& path)
{
    return write_cgroup_file(AT_FDCWD, (path + "/cgroup.kill").c_str(), "1");
}

int remove_cgroup_path(const std::string& path, std::chrono::milliseconds wait)
{
    auto deadline = std::chrono::steady_clock::now() + wait;
    std::size_t slash = path.find_last_of('/');
    if (slash == std::string::npos)
        return remove_at(AT_FDCWD, path.c_str(), deadline, true);
    std::string dir = slash == 0 ? "/" : path.substr(0, slash);
    unique_fd parent(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent)
        return errno == ENOENT ? 0 : errno;
    return remove_at(parent.get(), path.c_str() + slash + 1, deadline, true);
}

} // namespace sandbox::detail
