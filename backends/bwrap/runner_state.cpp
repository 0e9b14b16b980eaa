// backends/bwrap/runner_state.cpp: a bwrap runner's options, checked and resolved once at
// construction (runner_state.hpp): the program, the masks, the writable paths, write-deny
// targets, unix sockets, extra flags, and a root caller's sandbox user.
#include "runner_state.hpp"

#include <sandbox/backend/environment.hpp>

#include <sandbox/backend/launch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox {

namespace fs = std::filesystem;

std::string canonical_or_empty(const std::string& p)
{
    std::error_code ec;
    auto c = fs::canonical(p, ec);
    return ec ? std::string() : c.string();
}

namespace {

// The configured program, else `bwrap` on our PATH, else /usr/bin/bwrap; empty: none.
std::string find_bwrap(const std::string& configured)
{
    if (!configured.empty())
        return ::access(configured.c_str(), X_OK) == 0 ? configured : std::string();
    if (auto found = backend::find_command("bwrap", backend::host_environment(), AT_FDCWD))
        return *found;
    return ::access("/usr/bin/bwrap", X_OK) == 0 ? "/usr/bin/bwrap" : std::string();
}

// Existing read-deny paths, resolved, as masks (directories and files).
std::vector<bwrap::masked_path> resolve_masks(const std::vector<std::string>& paths)
{
    std::vector<bwrap::masked_path> out;
    for (const auto& p : paths)
    {
        const std::string c = canonical_or_empty(p);
        struct stat st
        {
        };
        if (c.empty() || ::stat(c.c_str(), &st) != 0)
            continue;
        out.push_back({c, S_ISDIR(st.st_mode)});
    }
    return out;
}

// Unix-socket entries: each an existing socket outside the writable directories (there, a
// command could swap it for a link to anything before the next run binds it).
void prepare_sockets(bwrap_runner::state& s, const std::vector<std::string>& paths,
                     const std::vector<std::string>& dirs)
{
    for (const auto& p : paths)
    {
        const std::string c = canonical_or_empty(p);
        struct stat st
        {
        };
        const char* why = nullptr;
        if (c.empty() || ::stat(c.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode))
            why = " is not an existing socket";
        else if (bwrap::inside_any(c, dirs))
            why = " lies in a writable directory (the command could replace it)";
        if (why)
        {
            failure f = make_failure(errc::validation, "unix socket " + p + why, "unix_sockets");
            f.diag.path = p;
            s.setup_error = f;
            continue;
        }
        s.sockets.push_back(c);
    }
}

// `p` resolved, or as it is when it cannot be (a home that does not exist).
std::string resolved(const std::string& p)
{
    const std::string c = canonical_or_empty(p);
    return c.empty() ? p : c;
}

// The home directory of the effective uid in the password database's file, /etc/passwd; empty
// when it has no entry. Read directly, not through NSS (getpwuid_r): sandbox-run is linked
// statically, and there an NSS module that must be loaded (systemd, ldap) crashes it.
std::string passwd_home()
{
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen("/etc/passwd", "re"), &std::fclose);
    std::vector<char> buf(16384);
    struct passwd pw
    {
    };
    struct passwd* entry = nullptr;
    while (f && ::fgetpwent_r(f.get(), &pw, buf.data(), buf.size(), &entry) == 0 && entry)
        if (entry->pw_uid == ::geteuid() && entry->pw_dir)
            return resolved(entry->pw_dir);
    return {};
}

// The masks follow the real home, not only $HOME (which the caller's environment sets).
void prepare_masks(bwrap_runner::state& s, const bwrap_runner_options& o)
{
    const char* env = std::getenv("HOME");
    auto homes = bwrap::home_dirs(passwd_home(), env && *env == '/' ? resolved(env) : "");
    if (!homes)
        s.setup_error = homes.error();
    else
        s.homes = std::move(*homes);
    std::vector<std::string> deny;
    for (const auto& h : s.homes)
    {
        auto d = bwrap::default_read_deny(h);
        deny.insert(deny.end(), d.begin(), d.end());
    }
    deny.insert(deny.end(), o.read_deny.begin(), o.read_deny.end());
    s.masked = resolve_masks(deny);
}

outcome<void> check_writable(const bwrap_runner::state& s, const std::string& path,
                             const char* field)
{
    for (const auto& h : s.homes)
        if (auto r = bwrap::check_writable(path, h, s.masked, field); !r)
            return r;
    return bwrap::check_writable(path, {}, s.masked, field);
}

// A root caller's sandbox user must reach the root and the writable paths (checked as that
// user): bwrap, running as it, binds them. One it can reach but not write is bound all the
// same and listed (`unwritable`): the command reads it, and the kernel refuses its writes
// there, as for that user anywhere; the library never changes owners or modes. The masks it
// cannot reach are dropped: bwrap could not mount over them, and the command cannot read
// them either. Synchronous on purpose, at construction only (a spawned helper, a few
// milliseconds; never in an exec): `enforcement().unwritable_paths` answers right after
// construction (sandbox-run's note comes before its first run), and the masks it drops
// shape every command's arguments.
void check_user_access(bwrap_runner::state& s, const std::string& root)
{
    const auto& u = *s.user;
    std::vector<std::string> dirs{root};
    dirs.insert(dirs.end(), s.writable.begin(), s.writable.end());
    std::vector<backend::access_check> checks;
    for (const auto& d : dirs)
        checks.insert(checks.end(), {{d, X_OK}, {d, W_OK | X_OK}});
    for (const auto& m : s.masked)
        checks.push_back({m.path, F_OK});
    const auto got = backend::access_as(u.uid, u.gid, checks);
    if (got.size() != checks.size())
    {
        s.setup_error = make_failure(errc::not_available,
                                     "cannot check what the sandbox user " + u.name +
                                         " can reach: the helper could not switch to it (is "
                                         "that uid mapped on this host?)",
                                     "sandbox_user");
        return;
    }
    for (std::size_t i = 0; i < dirs.size(); ++i)
        if (got[2 * i] != 0)
        {
            failure f = make_failure(
                errc::validation,
                std::string(i == 0 ? "the root " : "the writable path ") + dirs[i] +
                    " cannot be reached by the sandbox user " + u.name + " (" +
                    std::strerror(got[2 * i]) +
                    "): a root caller's commands run as that user; "
                    "let it search the directories on the way, or choose another sandbox user",
                i == 0 ? "root" : "writable_paths");
            f.diag.path = dirs[i];
            s.setup_error = f;
        }
        else if (got[2 * i + 1] != 0)
            s.unwritable.push_back(dirs[i]);
    std::vector<bwrap::masked_path> kept;
    for (std::size_t i = 0; i < s.masked.size(); ++i)
        if (got[2 * dirs.size() + i] != EACCES)
            kept.push_back(s.masked[i]);
    s.masked = std::move(kept);
}

void choose_user(bwrap_runner::state& s, const bwrap_runner_options& o)
{
    auto u = bwrap::choose_sandbox_user(o.sandbox_user, ::geteuid(), ::getegid(),
                                        bwrap::system_user_db());
    if (!u)
        s.setup_error = u.error();
    else
        s.user = std::move(*u);
}

} // namespace

// The options, checked once: writable paths exist and are safe to bind.
void prepare_state(bwrap_runner::state& s, const bwrap_runner_options& o)
{
    s.bwrap = find_bwrap(o.bwrap_path);
    prepare_masks(s, o);
    if (auto r = check_writable(s, o.root, "root"); !r)
        s.setup_error = r.error();
    for (const auto& w : o.writable_paths)
    {
        const std::string c = canonical_or_empty(w);
        if (c.empty())
        {
            failure f = make_failure(errc::validation, "writable path " + w + " must exist",
                                     "writable_paths");
            f.diag.path = w;
            s.setup_error = f;
            continue;
        }
        if (auto r = check_writable(s, c, "writable_paths"); !r)
            s.setup_error = r.error();
        s.writable.push_back(c);
    }
    s.dirs = {o.root};
    s.dirs.insert(s.dirs.end(), s.writable.begin(), s.writable.end());
    const auto& dirs = s.dirs;
    // Absolute entries resolved like the directories (a symlinked /home would not match).
    std::vector<std::string> deny_write;
    for (const auto& w : o.write_deny)
    {
        std::error_code ec;
        deny_write.push_back(w.empty() || w[0] != '/' ? w : fs::weakly_canonical(w, ec).string());
    }
    if (auto t = bwrap::write_deny_targets(dirs, deny_write); t)
        s.write_deny = std::move(*t);
    else
        s.setup_error = t.error();
    prepare_sockets(s, o.unix_sockets, dirs);
    const bwrap::path_probe probe{[](const std::string& p) {
                                      std::error_code ec;
                                      auto c = fs::weakly_canonical(p, ec);
                                      return ec ? p : c.string();
                                  },
                                  [](const std::string& p) {
                                      std::error_code ec;
                                      return fs::exists(p, ec);
                                  }};
    if (auto r = bwrap::check_extra_flags(o.extra_flags, s.masked, dirs, probe); !r)
        s.setup_error = r.error();
    choose_user(s, o);
    if (s.user && !s.setup_error)
        check_user_access(s, o.root);
}

} // namespace sandbox
