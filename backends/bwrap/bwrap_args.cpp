// backends/bwrap/bwrap_args.cpp: the bubblewrap command line (see bwrap_args.hpp).
#include "bwrap_args.hpp"

#include <algorithm>

namespace sandbox::bwrap {

bool within(const std::string& path, const std::string& dir)
{
    if (dir == "/")
        return true;
    return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                           path[dir.size()] == '/');
}

namespace {

void add(std::vector<std::string>& a, std::initializer_list<const char*> flags)
{
    for (const char* f : flags)
        a.emplace_back(f);
}

} // namespace

std::vector<std::string> build_args(const sandbox_view& v, const std::string& command,
                                    const std::vector<std::string>& args)
{
    std::vector<std::string> a{"bwrap"};
    add(a, {"--unshare-user", "--disable-userns", "--cap-drop", "ALL", "--unshare-pid",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"});
    if (!v.init.empty())
        a.emplace_back("--as-pid-1"); // the init is ours
    if (v.isolate_network)
        a.emplace_back("--unshare-net");
    const std::string size = std::to_string(v.tmpfs_bytes);
    auto private_tmpfs = [&](const char* path) {
        if (v.tmpfs_bytes > 0)
            a.insert(a.end(), {"--size", size});
        a.insert(a.end(), {"--tmpfs", path});
    };
    // The /tmp tmpfs comes before the binds, so a root or writable path under /tmp shows.
    add(a, {"--ro-bind", "/", "/"});
    private_tmpfs("/tmp");
    if (v.isolate_network)
        add(a, {"--tmpfs", "/run"}); // host unix sockets: a network namespace does not hide them
    a.insert(a.end(), {"--bind", v.root, v.root});
    for (const auto& w : v.writable)
        if (w != v.root)
            a.insert(a.end(), {"--bind", w, w});
    for (const auto& s : v.sockets) // read-only: connect() needs no write access to the mount
        a.insert(a.end(), {"--ro-bind", s, s});
    for (const auto& [fd, path] : v.data_files)
        a.insert(a.end(), {"--perms", "0444", "--ro-bind-data", std::to_string(fd), path});
    // /dev is a tmpfs of bwrap's: read-only, so that only /dev/shm (bounded) takes files.
    add(a, {"--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"});
    private_tmpfs("/dev/shm");
    a.insert(a.end(), v.extra_flags.begin(), v.extra_flags.end());
    // Then what stays read-only inside the writable directories, and the masks last: they
    // hide what the binds above exposed.
    for (const auto& p : v.protect)
        a.insert(a.end(), {p.read_only ? "--ro-bind" : "--bind", p.path, p.path});
    for (const auto& m : v.read_deny)
    {
        if (m.directory)
            a.insert(a.end(), {"--perms", "0000", "--tmpfs", m.path, "--remount-ro", m.path});
        else
            a.insert(a.end(), {"--ro-bind", "/dev/null", m.path});
    }
    a.insert(a.end(), {"--chdir", v.work_dir, "--"});
    a.insert(a.end(), v.init.begin(), v.init.end());
    a.push_back(command);
    a.insert(a.end(), args.begin(), args.end());
    return a;
}

outcome<void> check_writable(const std::string& path, const std::string& home,
                             const std::vector<masked_path>& masked, const char* field)
{
    auto refuse = [&](const std::string& why) -> outcome<void> {
        failure f = make_failure(errc::validation,
                                 std::string(field) + " " + path + " cannot be writable: " + why,
                                 field);
        f.diag.path = path;
        return f;
    };
    if (path.empty() || path[0] != '/')
        return refuse("not an absolute path");
    if (path == "/")
        return refuse("it is the host's root");
    if (!home.empty() && path == home)
        return refuse("it is the home directory");
    for (const auto& m : masked)
        if (within(m.path, path))
            return refuse("it contains the masked path " + m.path);
    return {};
}

namespace {

enum class operand
{
    plain,  // any value
    source, // a host path shown inside: absolute, outside the writable directories, masks
    target, // a path made inside: absolute, outside the writable directories (where it
            // would create an entry on the host)
    octal,  // 1-4 octal digits
    number, // decimal digits
};

struct flag_rule
{
    const char* name;
    std::vector<operand> operands;
};

const std::vector<flag_rule>& allowed_flags()
{
    using o = operand;
    static const std::vector<flag_rule> rules{
        {"--ro-bind", {o::source, o::target}}, {"--ro-bind-try", {o::source, o::target}},
        {"--symlink", {o::plain, o::target}},  {"--dir", {o::target}},
        {"--tmpfs", {o::target}},              {"--remount-ro", {o::plain}},
        {"--perms", {o::octal}},               {"--size", {o::number}},
        {"--hostname", {o::plain}},            {"--unshare-net", {}},
    };
    return rules;
}

bool well_formed(operand kind, const std::string& v)
{
    auto all = [&](const char* set) {
        return !v.empty() && v.find_first_not_of(set) == std::string::npos;
    };
    switch (kind)
    {
    case operand::octal: return v.size() <= 4 && all("01234567");
    case operand::number: return v.size() <= 19 && all("0123456789");
    case operand::source:
    case operand::target: return !v.empty() && v[0] == '/';
    default: return true;
    }
}

} // namespace

bool inside_any(const std::string& path, const std::vector<std::string>& dirs)
{
    return std::any_of(dirs.begin(), dirs.end(), [&](const auto& d) { return within(path, d); });
}

outcome<void> check_extra_flags(const std::vector<std::string>& flags,
                                const std::vector<masked_path>& masked,
                                const std::vector<std::string>& writable,
                                const path_probe& probe)
{
    auto refuse = [](const std::string& why) -> outcome<void> {
        return make_failure(errc::validation, "extra bwrap flags: " + why, "extra_flags");
    };
    for (std::size_t i = 0; i < flags.size();)
    {
        const std::string& f = flags[i];
        const auto& rules = allowed_flags();
        auto rule = std::find_if(rules.begin(), rules.end(),
                                 [&](const flag_rule& r) { return f == r.name; });
        if (rule == rules.end())
            return refuse(f + " is not allowed (only flags that cannot weaken the policy are)");
        if (flags.size() - i - 1 < rule->operands.size())
            return refuse(f + " needs " + std::to_string(rule->operands.size()) + " value(s)");
        for (std::size_t k = 0; k < rule->operands.size(); ++k)
        {
            const operand kind = rule->operands[k];
            const std::string& v = flags[i + 1 + k];
            if (!well_formed(kind, v))
                return refuse("bad value \"" + v + "\" for " + f +
                              (v.empty() || v[0] != '/' ? " (an absolute path)" : ""));
            if (kind != operand::source && kind != operand::target)
                continue;
            // Resolved as far as it exists; the command can change nothing outside the
            // writable directories, so the answer holds for every later run.
            const std::string p = probe.resolve(v);
            if (inside_any(p, writable))
                return refuse(f + " " + v + " lies in a writable directory (the command " +
                              (kind == operand::source ? "could swap it" : "would see a host entry made") +
                              ")");
            if (f == "--ro-bind" && kind == operand::source && !probe.exists(p))
                return refuse(f + " " + v + ": no such path");
            for (const auto& m : masked)
                if (kind == operand::source && (within(p, m.path) || within(m.path, p)))
                    return refuse(f + " " + v + " would show the hidden path " + m.path);
        }
        i += 1 + rule->operands.size();
        // --perms and --size modify the next flag, which must be one they apply to.
        if (f == "--perms" || f == "--size")
        {
            const std::string next = i < flags.size() ? flags[i] : std::string();
            if (next != "--tmpfs" && !(f == "--perms" && next == "--dir"))
                return refuse(f + " must be followed by --tmpfs" +
                              (f == "--perms" ? " or --dir" : ""));
        }
    }
    return {};
}

const std::vector<write_deny_entry>& default_write_deny()
{
    // Everything through which a host tool later runs what lies there: git runs hooks and
    // reads config (core.hooksPath, core.fsmonitor), also through commondir, a worktree's
    // config, the linked worktrees' and submodules' own git directories and .gitmodules;
    // shells and direnv run rc files; editors and agents run tasks, settings and servers.
    // Kept even where missing, so a command can neither `git init` and plant a hook nor
    // point commondir at a config of its own.
    using k = stand_in;
    static const std::vector<write_deny_entry> entries{
        {".git/hooks"},        {".git/config", k::empty_file},
        {".git/commondir", k::git_self}, {".git/config.worktree", k::empty_file},
        {".git/modules"},      {".git/worktrees"},     {".gitmodules"},
        {".bashrc"},   {".bash_profile"}, {".bash_login"}, {".bash_logout"}, {".profile"},
        {".zshrc"},    {".zshenv"},       {".zprofile"},   {".zlogin"},      {".zlogout"},
        {".envrc"},    {".gitconfig"},    {".ripgreprc"},  {".mcp.json"},
        {".vscode"},   {".idea"},         {".claude/commands"}, {".claude/agents"},
    };
    return entries;
}

outcome<std::vector<std::string>> home_dirs(const std::string& passwd_home,
                                            const std::string& env_home)
{
    std::vector<std::string> out;
    for (const auto& h : {passwd_home, env_home})
        if (!h.empty() && h[0] == '/' && std::find(out.begin(), out.end(), h) == out.end())
            out.push_back(h);
    if (out.empty())
        return make_failure(errc::not_available,
                            "the caller's home directory is unknown (no /etc/passwd entry for "
                            "its uid and no absolute HOME): its credentials could not be "
                            "masked",
                            "read_deny");
    return out;
}

std::vector<std::string> default_read_deny(const std::string& home)
{
    std::vector<std::string> out;
    if (home.empty() || home[0] != '/')
        return out;
    for (const char* rel : {".ssh", ".aws", ".gnupg", ".config/gcloud", ".azure", ".kube",
                            ".docker/config.json", ".netrc", ".git-credentials",
                            ".config/gh/hosts.yml", ".npmrc", ".pypirc"})
        out.push_back((home == "/" ? "" : home) + "/" + rel);
    return out;
}

} // namespace sandbox::bwrap
