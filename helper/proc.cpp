// helper/proc.cpp: /proc readers. Every read is one open + read + close of a small file.
#include "helper/proc.hpp"

#include <sandbox/unique_fd.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

template <class T>
bool to_num(std::string_view s, T& v) noexcept
{
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc{} && r.ptr == s.data() + s.size();
}


} // namespace

std::optional<proc_stat> parse_proc_stat(std::string_view text) noexcept
{
    proc_stat st;
    auto open = text.find('(');
    auto close = text.rfind(')');
    if (open == text.npos || close == text.npos || close < open)
        return std::nullopt;
    if (!to_num(text.substr(0, text.find(' ')), st.pid))
        return std::nullopt;
    // Fields after the command: index 0 is field 3 (state).
    std::string_view rest = text.substr(close + 1);
    // Up to field 33 (sigignore); fields 3-24 are required.
    std::string_view f[31];
    int n = 0;
    std::size_t i = 0;
    while (n < 31 && i < rest.size())
    {
        while (i < rest.size() && rest[i] == ' ')
            ++i;
        std::size_t j = i;
        while (j < rest.size() && rest[j] != ' ' && rest[j] != '\n')
            ++j;
        if (j > i)
            f[n++] = rest.substr(i, j - i);
        i = j + 1;
    }
    if (n < 22 || f[0].size() != 1)
        return std::nullopt;
    st.state = f[0][0];
    std::int64_t cut = 0, cst = 0, rss = 0;
    bool ok = to_num(f[1], st.ppid) && to_num(f[2], st.pgrp) && to_num(f[3], st.session) &&
              to_num(f[6], st.flags) &&
              to_num(f[11], st.utime) && to_num(f[12], st.stime) && to_num(f[13], cut) &&
              to_num(f[14], cst) && to_num(f[17], st.num_threads) &&
              to_num(f[19], st.starttime) && to_num(f[21], rss);
    if (!ok || st.pid <= 0 || st.ppid < 0 || st.pgrp < 0 || st.session < 0)
        return std::nullopt;
    st.cutime = cut > 0 ? static_cast<std::uint64_t>(cut) : 0;
    st.cstime = cst > 0 ? static_cast<std::uint64_t>(cst) : 0;
    st.rss_pages = rss > 0 ? static_cast<std::uint64_t>(rss) : 0;
    if (n == 31 && !to_num(f[30], st.sigignore))
        return std::nullopt;
    return st;
}

void parse_pid_list(std::string_view text, std::vector<pid_t>& out)
{
    std::size_t i = 0;
    while (i < text.size())
    {
        while (i < text.size() && (text[i] == ' ' || text[i] == '\n'))
            ++i;
        std::size_t j = i;
        while (j < text.size() && text[j] != ' ' && text[j] != '\n')
            ++j;
        pid_t p = 0;
        if (j > i && to_num(text.substr(i, j - i), p) && p > 0)
            out.push_back(p);
        i = j;
    }
}

int open_proc_stat(pid_t pid) noexcept
{
    char path[48];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    return ::open(path, O_RDONLY | O_CLOEXEC);
}

std::optional<std::uint64_t> parse_pss_bytes(std::string_view text) noexcept
{
    // One "Pss:   <n> kB" line, at the start of a line.
    for (std::size_t at = 0; at < text.size();)
    {
        std::size_t end = text.find('\n', at);
        std::string_view line = text.substr(at, end == text.npos ? text.npos : end - at);
        if (line.substr(0, 4) == "Pss:")
        {
            line.remove_prefix(4);
            while (!line.empty() && line.front() == ' ')
                line.remove_prefix(1);
            std::size_t digits = 0;
            while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9')
                ++digits;
            std::uint64_t kib = 0;
            if (digits == 0 || !to_num(line.substr(0, digits), kib) ||
                line.substr(digits) != " kB" || kib > (UINT64_MAX >> 10))
                return std::nullopt;
            return kib << 10;
        }
        if (end == text.npos)
            break;
        at = end + 1;
    }
    return std::nullopt;
}

ssize_t read_small(const char* path, char* buf, std::size_t size, int& err) noexcept
{
    unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
    if (!fd)
    {
        err = errno;
        return -1;
    }
    ssize_t n;
    do
        n = ::read(fd.get(), buf, size);
    while (n < 0 && errno == EINTR);
    err = n < 0 ? errno : n == 0 ? ENOENT : 0;
    return n > 0 ? n : -1;
}

namespace {

// One number from a small /proc/<pid>/<file>, by `parse`; EPROTO when it does not parse.
template <std::size_t Size, class Parse>
std::optional<std::uint64_t> read_number(pid_t pid, const char* file, Parse parse,
                                         int& err) noexcept
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/%s", static_cast<int>(pid), file);
    char buf[Size];
    const ssize_t n = read_small(path, buf, sizeof buf, err);
    if (n < 0)
        return std::nullopt;
    auto v = parse(std::string_view(buf, static_cast<std::size_t>(n)));
    if (!v)
        err = EPROTO;
    return v;
}

} // namespace

std::optional<std::uint64_t> read_pss_bytes(pid_t pid, int& err) noexcept
{
    return read_number<1024>(pid, "smaps_rollup", parse_pss_bytes, err);
}

std::optional<std::uint64_t> read_thread_pss_bytes(pid_t pid, pid_t tid, int& err) noexcept
{
    char file[48];
    std::snprintf(file, sizeof file, "task/%d/smaps_rollup", static_cast<int>(tid));
    return read_number<1024>(pid, file, parse_pss_bytes, err);
}

std::optional<std::uint64_t> parse_statm_anon_bytes(std::string_view text,
                                                    std::uint64_t page_bytes) noexcept
{
    // "size resident shared text lib data dt", in pages.
    std::uint64_t fields[3] = {};
    for (auto& f : fields)
    {
        while (!text.empty() && text.front() == ' ')
            text.remove_prefix(1);
        const auto end = text.find_first_of(" \n");
        if (!to_num(text.substr(0, end), f))
            return std::nullopt;
        text.remove_prefix(end == text.npos ? text.size() : end);
    }
    const std::uint64_t resident = fields[1], shared = fields[2];
    if (shared > resident || resident > UINT64_MAX / std::max<std::uint64_t>(page_bytes, 1))
        return std::nullopt;
    return (resident - shared) * page_bytes;
}

std::optional<std::uint64_t> read_anon_bytes(pid_t pid, pid_t tid, int& err) noexcept
{
    char file[48];
    if (tid != 0)
        std::snprintf(file, sizeof file, "task/%d/statm", static_cast<int>(tid));
    else
        std::snprintf(file, sizeof file, "statm");
    const auto page = static_cast<std::uint64_t>(page_size_bytes());
    return read_number<128>(pid, file,
                            [page](std::string_view t) { return parse_statm_anon_bytes(t, page); },
                            err);
}

std::optional<std::uint64_t> parse_schedstat_ns(std::string_view text) noexcept
{
    std::uint64_t ns = 0;
    if (!to_num(text.substr(0, text.find_first_of(" \n")), ns))
        return std::nullopt;
    return ns;
}

std::optional<std::uint64_t> read_runtime_ns(pid_t pid, int& err) noexcept
{
    return read_number<128>(pid, "schedstat", parse_schedstat_ns, err);
}

std::optional<proc_stat> read_proc_stat_at(int fd, int& err) noexcept
{
    char buf[1024];
    ssize_t n;
    do
        n = ::pread(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
    {
        err = n < 0 ? errno : ENODATA;
        return std::nullopt;
    }
    auto st = parse_proc_stat(std::string_view(buf, static_cast<std::size_t>(n)));
    if (!st)
        err = EPROTO;
    return st;
}

std::optional<proc_stat> read_proc_stat(pid_t pid, int& err) noexcept
{
    unique_fd fd(open_proc_stat(pid));
    if (!fd)
    {
        err = errno;
        return std::nullopt;
    }
    return read_proc_stat_at(fd.get(), err);
}

std::optional<proc_stat> read_running_thread_stat(pid_t pid, int& err) noexcept
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/task", static_cast<int>(pid));
    DIR* d = ::opendir(path);
    if (!d)
    {
        err = errno;
        return std::nullopt;
    }
    std::optional<proc_stat> found;
    int first_err = 0;
    while (dirent* e = ::readdir(d))
    {
        pid_t tid = 0;
        if (!to_num(std::string_view(e->d_name), tid) || tid == pid)
            continue;
        std::snprintf(path, sizeof path, "/proc/%d/task/%d/stat", static_cast<int>(pid),
                      static_cast<int>(tid));
        unique_fd fd(::open(path, O_RDONLY | O_CLOEXEC));
        int e2 = fd ? 0 : errno;
        auto st = fd ? read_proc_stat_at(fd.get(), e2) : std::nullopt;
        if (st && st->state != 'Z' && st->state != 'X')
        {
            const bool best = !st->exiting(); // an exiting thread may have let go of the memory
            if (best || !found)
                found = st;
            if (best)
                break;
        }
        if (!st && e2 != ENOENT && e2 != ESRCH && first_err == 0)
            first_err = e2; // (a thread that ended meanwhile is no error)
    }
    ::closedir(d);
    err = found ? 0 : first_err != 0 ? first_err : ESRCH;
    return found;
}

bool read_children_at(int fd, std::vector<pid_t>& out)
{
    // A children file is a seq_file: a read fills the buffer unless the list ends first, so
    // a short read is the end (no second read to learn it). A large buffer keeps a long list
    // in one read, which an exit between two reads would shift.
    char buf[16384];
    std::string text;
    off_t off = 0;
    for (;;)
    {
        ssize_t n = ::pread(fd, buf, sizeof buf, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return false;
        text.append(buf, static_cast<std::size_t>(n));
        off += n;
        if (static_cast<std::size_t>(n) < sizeof buf)
            break;
    }
    parse_pid_list(text, out);
    return true;
}

long clock_ticks_per_second() noexcept
{
    static const long t = ::sysconf(_SC_CLK_TCK);
    return t > 0 ? t : 100;
}

long page_size_bytes() noexcept
{
    static const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? p : 4096;
}

} // namespace sandbox::detail
