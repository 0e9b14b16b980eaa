// backends/bwrap/bwrap_args.cpp: the bubblewrap command line (see bwrap_args.hpp).
#include "bwrap_args.hpp"

namespace sandbox::bwrap {

namespace {

// True when `path` is `dir` or below it (both absolute and clean).
bool within(const std::string& path, const std::string& dir)
{
    if (dir == "/")
        return true;
    return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                           path[dir.size()] == '/');
}

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
    if (v.new_session)
        a.emplace_back("--new-session");
    if (v.isolate_network)
        a.emplace_back("--unshare-net");
    // The /tmp tmpfs comes before the binds, so a root or writable path under /tmp shows.
    add(a, {"--ro-bind", "/", "/", "--tmpfs", "/tmp"});
    if (v.isolate_network)
        add(a, {"--tmpfs", "/run"}); // host unix sockets: a network namespace does not hide them
    a.insert(a.end(), {"--bind", v.root, v.root});
    for (const auto& w : v.writable)
        if (w != v.root)
            a.insert(a.end(), {"--bind", w, w});
    add(a, {"--proc", "/proc", "--dev", "/dev"});
    // Masks last: they hide what the binds above exposed.
    for (const auto& m : v.read_deny)
    {
        if (m.directory)
            a.insert(a.end(), {"--perms", "0000", "--tmpfs", m.path, "--remount-ro", m.path});
        else
            a.insert(a.end(), {"--ro-bind", "/dev/null", m.path});
    }
    a.insert(a.end(), {"--chdir", v.work_dir, "--", command});
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
