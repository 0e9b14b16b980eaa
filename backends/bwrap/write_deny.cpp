// backends/bwrap/write_deny.cpp: read-only paths inside writable directories (see
// write_deny.hpp).
#include "write_deny.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::bwrap {

namespace {

// The stand-in directories of this process, counted by the commands that hold them, so
// two commands in the same root share one and the last one out removes it.
class stand_ins
{
public:
    static stand_ins& instance()
    {
        static stand_ins s;
        return s;
    }

    // True when `path` is now a stand-in held once more (made here, or already ours).
    bool acquire(const std::string& path)
    {
        std::lock_guard l(mu_);
        if (auto it = held_.find(path); it != held_.end())
            return ++it->second, true;
        if (::mkdir(path.c_str(), 0755) != 0)
            return false;
        held_[path] = 1;
        return true;
    }

    // True when `path` is a stand-in of another command, now held once more.
    bool share(const std::string& path)
    {
        std::lock_guard l(mu_);
        auto it = held_.find(path);
        return it != held_.end() && ++it->second > 0;
    }

    void release(const std::vector<std::string>& paths)
    {
        std::lock_guard l(mu_);
        for (auto p = paths.rbegin(); p != paths.rend(); ++p) // deepest first
            if (auto it = held_.find(*p); it != held_.end() && --it->second == 0)
            {
                held_.erase(it);
                ::rmdir(p->c_str()); // only while empty: whatever the host put there stays
            }
    }

private:
    std::mutex mu_;
    std::map<std::string, int> held_;
};

struct lease
{
    std::vector<std::string> paths;
    ~lease() { stand_ins::instance().release(paths); }
};

std::vector<std::string> components(const std::string& rel)
{
    std::vector<std::string> out;
    for (std::size_t start = 0; start < rel.size();)
    {
        std::size_t end = rel.find('/', start);
        if (end == std::string::npos)
            end = rel.size();
        if (end > start && rel.compare(start, end - start, ".") != 0)
            out.push_back(rel.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

bool inside_any(const std::string& p, const std::vector<std::string>& dirs)
{
    return std::any_of(dirs.begin(), dirs.end(), [&](const auto& d) { return within(p, d); });
}

// Walks one target; adds what to bind read-only and the stand-ins made for it.
void walk(const write_deny_target& t, const std::vector<std::string>& dirs,
          std::vector<std::string>& ro, std::vector<std::string>& made)
{
    const auto parts = components(t.entry.relative);
    std::string cur = t.dir;
    for (std::size_t i = 0; i < parts.size(); ++i)
    {
        const std::string next = (cur == "/" ? "" : cur) + "/" + parts[i];
        if (std::find(made.begin(), made.end(), next) != made.end())
            return; // a stand-in of this command: read-only as a whole
        if (stand_ins::instance().share(next))
        {
            made.push_back(next); // another command's, shared: it stays until both are done
            ro.push_back(next);
            return;
        }
        struct stat st{};
        if (::lstat(next.c_str(), &st) != 0)
        {
            if (errno == ENOENT && t.entry.always && stand_ins::instance().acquire(next))
                made.push_back(next), ro.push_back(next);
            else if (::lstat(next.c_str(), &st) == 0)
                ro.push_back(next); // it appeared meanwhile
            return;
        }
        if (S_ISLNK(st.st_mode))
        {
            std::error_code ec;
            const std::string target = std::filesystem::canonical(next, ec).string();
            if (!ec && inside_any(target, dirs))
                ro.push_back(target);
            if (cur != t.dir)
                ro.push_back(cur); // so the link itself cannot be replaced
            return;
        }
        if (i + 1 == parts.size() || !S_ISDIR(st.st_mode))
        {
            ro.push_back(next);
            return;
        }
        cur = next;
    }
}

} // namespace

outcome<std::vector<write_deny_target>> write_deny_targets(const std::vector<std::string>& dirs,
                                                           const std::vector<std::string>& extra)
{
    std::vector<write_deny_target> out;
    for (const auto& d : dirs)
        for (const auto& e : default_write_deny())
            out.push_back({d, e});
    for (const auto& x : extra)
    {
        const auto parts = components(x);
        if (parts.empty() || std::find(parts.begin(), parts.end(), "..") != parts.end())
        {
            failure f = make_failure(errc::validation,
                                     "write-deny path \"" + x + "\" is empty or climbs with ..",
                                     "write_deny");
            f.diag.path = x;
            return f;
        }
        std::string clean;
        for (const auto& p : parts)
            clean += (clean.empty() ? "" : "/") + p;
        for (const auto& d : dirs)
        {
            if (x[0] != '/')
                out.push_back({d, {clean, true}});
            else if (within("/" + clean, d) && "/" + clean != d)
                out.push_back({d, {clean.substr(d == "/" ? 0 : d.size()), true}});
        }
    }
    return out;
}

write_deny_view resolve_write_deny(const std::vector<write_deny_target>& targets,
                                   const std::vector<std::string>& writable_dirs)
{
    write_deny_view v;
    std::vector<std::string> made;
    for (const auto& t : targets)
        walk(t, writable_dirs, v.read_only, made);
    std::sort(v.read_only.begin(), v.read_only.end());
    v.read_only.erase(std::unique(v.read_only.begin(), v.read_only.end()), v.read_only.end());
    if (!made.empty())
    {
        auto l = std::make_shared<lease>(); // built in place: a copy's destructor would release
        l->paths = std::move(made);
        v.lease = std::move(l);
    }
    return v;
}

} // namespace sandbox::bwrap
