// backends/bwrap/write_deny.cpp: read-only paths inside writable directories (see
// write_deny.hpp).
#include "write_deny.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::bwrap {

namespace {

// Makes a file stand-in: written under a temporary name and linked into place, so the path
// never holds a partial one (an empty commondir makes git die), even if this process dies.
bool make_file(const std::string& path, stand_in kind, struct stat& st)
{
    const std::string tmp = path.substr(0, path.rfind('/') + 1) + ".sandbox-stand-in." +
                            std::to_string(::getpid());
    ::unlink(tmp.c_str()); // one a dead process of the same pid left
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return false;
    const std::string text = kind == stand_in::git_self ? ".\n" : "";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
              ::fstat(fd, &st) == 0;
    ::close(fd);
    ok = ok && ::link(tmp.c_str(), path.c_str()) == 0;
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    return ok;
}

// True when `path` is still the file stand-in made as `st` (same file, never written since).
bool unchanged_file(const std::string& path, const struct stat& st)
{
    struct stat now{};
    return ::lstat(path.c_str(), &now) == 0 && S_ISREG(now.st_mode) && now.st_ino == st.st_ino &&
           now.st_dev == st.st_dev && now.st_size == st.st_size &&
           now.st_mtim.tv_sec == st.st_mtim.tv_sec && now.st_mtim.tv_nsec == st.st_mtim.tv_nsec;
}

// The stand-ins of this process, counted by the commands that hold them, so two commands in
// the same root share one and the last one out removes it.
class stand_ins
{
public:
    static stand_ins& instance()
    {
        static stand_ins& s = *new stand_ins; // never destroyed: a lease may outlive statics
        return s;
    }

    // True when `path` is now a stand-in held once more (made here, or already ours).
    bool acquire(const std::string& path, stand_in kind)
    {
        std::lock_guard l(mu_);
        if (auto it = held_.find(path); it != held_.end())
            return ++it->second.count, true;
        held h{1, kind, {}};
        if (kind == stand_in::directory ? ::mkdir(path.c_str(), 0755) != 0
                                        : !make_file(path, kind, h.made))
            return false;
        held_[path] = h;
        return true;
    }

    // True when `path` is a stand-in of another command, now held once more.
    bool share(const std::string& path)
    {
        std::lock_guard l(mu_);
        auto it = held_.find(path);
        return it != held_.end() && ++it->second.count > 0;
    }

    // Lets go of `path` once; the last holder removes it.
    void release(const std::string& path)
    {
        std::lock_guard l(mu_);
        if (auto it = held_.find(path); it != held_.end() && --it->second.count == 0)
        {
            // Only as made: whatever the host put there, or wrote, stays.
            if (it->second.kind == stand_in::directory)
                ::rmdir(path.c_str());
            else if (unchanged_file(path, it->second.made))
                ::unlink(path.c_str());
            held_.erase(it);
        }
    }

private:
    struct held
    {
        int count;
        stand_in kind;
        struct stat made; // a file's identity when made
    };
    std::mutex mu_;
    std::map<std::string, held> held_;
};

struct lease
{
    std::vector<std::string> paths; // outermost first: released deepest first
    ~lease()
    {
        for (auto p = paths.rbegin(); p != paths.rend(); ++p)
            stand_ins::instance().release(*p);
    }
};

// Lets go of `left` (the last first) one path per turn of the loop of `ex`, then calls
// `done`. Whatever is left when the handler is destroyed without running (its execution
// context shut down) goes at once, and `done` is not called.
class releaser
{
public:
    releaser(std::vector<std::string> left, boost::asio::any_io_executor ex,
             std::function<void()> done)
        : left_(std::move(left)), ex_(std::move(ex)), done_(std::move(done))
    {}
    releaser(releaser&& o) noexcept
        : left_(std::move(o.left_)), ex_(std::move(o.ex_)), done_(std::move(o.done_))
    {
        o.left_.clear();
    }
    releaser& operator=(releaser&&) = delete;
    ~releaser()
    {
        for (; !left_.empty(); left_.pop_back())
            stand_ins::instance().release(left_.back());
    }
    void operator()()
    {
        if (!left_.empty())
        {
            stand_ins::instance().release(left_.back());
            left_.pop_back();
        }
        if (!left_.empty())
            return boost::asio::post(ex_, std::move(*this));
        auto done = std::move(done_);
        done();
    }

private:
    std::vector<std::string> left_;
    boost::asio::any_io_executor ex_;
    std::function<void()> done_;
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

// True when the directory `path` holds nothing (or cannot be listed).
bool empty_dir(const std::string& path)
{
    DIR* d = ::opendir(path.c_str());
    if (!d)
        return true;
    bool empty = true;
    while (dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        {
            empty = false;
            break;
        }
    ::closedir(d);
    return empty;
}

// The git directory a gitfile names (`gitdir: PATH`, relative to `dir`), resolved; empty
// when it names none that exists.
std::string read_gitdir(const std::string& dir, const std::string& file)
{
    std::ifstream in(file);
    std::string line;
    if (!std::getline(in, line) || line.rfind("gitdir: ", 0) != 0)
        return {};
    std::string p = line.substr(8);
    while (!p.empty() && (p.back() == '\r' || p.back() == ' '))
        p.pop_back();
    if (p.empty())
        return {};
    std::error_code ec;
    const auto c = std::filesystem::canonical(p[0] == '/' ? p : dir + "/" + p, ec);
    return ec ? std::string() : c.string();
}

// One target's walk: what it binds, and the stand-ins it made.
struct walker
{
    const write_deny_target& t;
    const std::vector<std::string>& dirs;
    std::map<std::string, bool>& bind; // path → read-only (false: pinned as a mount point)
    std::vector<std::string>& made;
    std::vector<std::string> on_the_way{}; // directories between t.dir and `cur`
    bool followed = false; // walking below a gitfile's git directory

    // `path` read-only, and the directories leading to it pinned: a directory that is a
    // mount point can be neither renamed nor removed, so what lies below stays put.
    void keep(const std::string& path)
    {
        bind[path] = true;
        for (const auto& d : on_the_way)
            if (d != path)
                bind.emplace(d, false);
    }

    // Fails closed: the last directory reached goes read-only whole; at the writable
    // directory itself nothing smaller can be kept, and the command is refused.
    outcome<void> give_up(const std::string& cur, const std::string& next, int err)
    {
        if (cur != t.dir)
        {
            on_the_way.pop_back();
            keep(cur);
            return {};
        }
        failure f = make_failure(errc::internal,
                                 "cannot keep " + next + " read-only: " + std::strerror(err),
                                 "write_deny");
        f.diag.path = next;
        return f;
    }

    outcome<void> missing(const std::string& cur, const std::string& next, bool leaf)
    {
        // An empty .git on the way (a stand-in a crashed process left, or made by hand):
        // kept read-only whole, so no repository can be put together in it.
        if (cur != t.dir && cur.size() >= 5 && cur.compare(cur.size() - 5, 5, "/.git") == 0 &&
            empty_dir(cur))
            return give_up(cur, next, ENOENT);
        if (stand_ins::instance().acquire(next, leaf ? t.entry.missing : stand_in::directory))
        {
            made.push_back(next);
            keep(next);
            return {};
        }
        const int err = errno;
        struct stat st{};
        if (::lstat(next.c_str(), &st) == 0 && !S_ISLNK(st.st_mode))
        {
            keep(next); // it appeared meanwhile
            return {};
        }
        return give_up(cur, next, err);
    }

    outcome<void> link(const std::string& cur, const std::string& next)
    {
        // bwrap cannot bind over a link (it follows it); the link itself can be replaced
        // unless its directory is read-only.
        if (cur == t.dir)
        {
            failure f = make_failure(errc::validation,
                                     next + " is a symbolic link: it cannot be kept read-only "
                                            "(the command could replace it)",
                                     "write_deny");
            f.diag.path = next;
            return f;
        }
        std::error_code ec;
        const std::string target = std::filesystem::canonical(next, ec).string();
        if (!ec && inside_any(target, dirs))
            bind[target] = true;
        if (cur != t.dir)
        {
            on_the_way.pop_back();
            keep(cur);
        }
        return {};
    }

    // A `.git` gitfile on the way (a linked worktree's, a submodule's, a separate git
    // directory's): where the git directory it names lies in a writable directory, the rest
    // of the entry is kept there too (once: not through a second gitfile).
    outcome<void> gitfile(const std::string& cur, const std::string& next,
                          const std::vector<std::string>& parts, std::size_t i)
    {
        const std::string gitdir = followed ? std::string() : read_gitdir(cur, next);
        std::string holder; // the deepest writable directory holding it
        for (const auto& d : dirs)
            if (!gitdir.empty() && within(gitdir, d) && d.size() > holder.size())
                holder = d;
        if (holder.empty())
            return {}; // none, or read-only anyway
        std::string rel = gitdir.substr(holder == "/" ? 0 : holder.size());
        for (std::size_t k = i + 1; k < parts.size(); ++k)
            rel += "/" + parts[k];
        const write_deny_target there{holder, {rel, t.entry.missing}};
        return walker{there, dirs, bind, made, {}, true}.run();
    }

    outcome<void> run()
    {
        const auto parts = components(t.entry.relative);
        std::string cur = t.dir;
        for (std::size_t i = 0; i < parts.size(); ++i)
        {
            const std::string next = (cur == "/" ? "" : cur) + "/" + parts[i];
            if (std::find(made.begin(), made.end(), next) != made.end())
                return {}; // a stand-in of this command: read-only as a whole
            if (stand_ins::instance().share(next))
            {
                made.push_back(next); // another command's: it stays until both are done
                keep(next);
                return {};
            }
            struct stat st{};
            if (::lstat(next.c_str(), &st) != 0)
                return errno == ENOENT ? missing(cur, next, i + 1 == parts.size())
                                       : give_up(cur, next, errno);
            if (S_ISLNK(st.st_mode))
                return link(cur, next);
            if (i + 1 == parts.size() || !S_ISDIR(st.st_mode))
            {
                keep(next); // the path, or a file on its way (a worktree's .git gitfile)
                return parts[i] == ".git" && i + 1 < parts.size() ? gitfile(cur, next, parts, i)
                                                                  : outcome<void>{};
            }
            on_the_way.push_back(next);
            cur = next;
        }
        return {};
    }
};

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
        bool placed = false;
        for (const auto& d : dirs)
        {
            if (x[0] != '/')
                out.push_back({d, {clean}}), placed = true;
            else if (within("/" + clean, d) && "/" + clean != d)
                out.push_back({d, {clean.substr(d == "/" ? 0 : d.size())}}), placed = true;
        }
        if (!placed)
        {
            failure f = make_failure(errc::validation,
                                     "write-deny path " + x + " is in no writable directory "
                                     "(it is read-only anyway, or misspelt)",
                                     "write_deny");
            f.diag.path = x;
            return f;
        }
    }
    return out;
}

outcome<write_deny_view> resolve_write_deny(const std::vector<write_deny_target>& targets,
                                            const std::vector<std::string>& writable_dirs)
{
    auto l = std::make_shared<lease>(); // releases what it holds on every path out
    std::map<std::string, bool> bind;
    for (const auto& t : targets)
        if (auto r = walker{t, writable_dirs, bind, l->paths}.run(); !r)
            return r.error();
    write_deny_view v;
    for (auto& [path, read_only] : bind) // sorted: a directory before what lies below it
        v.paths.push_back({path, read_only});
    if (!l->paths.empty())
        v.lease = std::move(l);
    return v;
}

void release_in_turns(const std::shared_ptr<void>& held, const boost::asio::any_io_executor& ex,
                      std::function<void()> done)
{
    auto* l = static_cast<lease*>(held.get());
    if (!l || l->paths.empty())
        return done();
    releaser(std::exchange(l->paths, {}), ex, std::move(done))(); // the first one now
}

} // namespace sandbox::bwrap
