// test/unit/bwrap_args_test.cpp: the bubblewrap command line and the writable-path checks.
#include <boost/test/unit_test.hpp>

#include "bwrap_args.hpp"
#include "write_deny.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace bw = sandbox::bwrap;
using sandbox::errc;

namespace {

std::string joined(const std::vector<std::string>& v)
{
    std::string s;
    for (const auto& a : v)
        s += (s.empty() ? "" : " ") + a;
    return s;
}

} // namespace

BOOST_AUTO_TEST_SUITE(bwrap_args)

BOOST_AUTO_TEST_CASE(the_whole_command_line)
{
    bw::sandbox_view v;
    v.root = "/srv/p";
    v.writable = {"/srv/cache", "/srv/p"}; // the root again is not bound twice
    v.read_deny = {{"/root/.ssh", true}, {"/root/.netrc", false}};
    v.work_dir = "/srv/p/src";
    BOOST_TEST(joined(bw::build_args(v, "make", {"-j2", "SECRET=in-args-only-if-asked"})) ==
               "bwrap --unshare-user --disable-userns --cap-drop ALL --unshare-pid "
               "--unshare-ipc --unshare-uts --unshare-cgroup-try --die-with-parent "
               "--ro-bind / / --tmpfs /tmp --bind /srv/p /srv/p "
               "--bind /srv/cache /srv/cache --proc /proc --dev /dev --remount-ro /dev "
               "--tmpfs /dev/shm --perms 0000 --tmpfs /root/.ssh --remount-ro /root/.ssh "
               "--ro-bind /dev/null /root/.netrc "
               "--chdir /srv/p/src -- make -j2 SECRET=in-args-only-if-asked");
}

// Files in the private /tmp and /dev/shm are memory no sampler sees: each tmpfs gets the
// memory cap as its size; /dev, bwrap's own tmpfs, is read-only.
BOOST_AUTO_TEST_CASE(private_tmpfs_sized_by_the_memory_cap)
{
    bw::sandbox_view v;
    v.root = "/srv/p";
    v.work_dir = "/srv/p";
    v.tmpfs_bytes = 67108864;
    const std::string s = joined(bw::build_args(v, "true", {}));
    BOOST_TEST(s.find("--ro-bind / / --size 67108864 --tmpfs /tmp ") != std::string::npos, s);
    BOOST_TEST(s.find("--dev /dev --remount-ro /dev --size 67108864 --tmpfs /dev/shm ") !=
                   std::string::npos,
               s);
}

BOOST_AUTO_TEST_CASE(no_network_masks_run_and_the_init_precedes_the_command)
{
    bw::sandbox_view v;
    v.root = "/tmp/r";
    v.work_dir = "/tmp/r";
    v.isolate_network = true;
    v.init = {"/proc/self/fd/4", "--init", "3", "--"};
    const auto a = bw::build_args(v, "sh", {});
    const std::string s = joined(a);
    BOOST_TEST(s.find("--unshare-net") != std::string::npos);
    BOOST_TEST(s.find("--tmpfs /run") != std::string::npos);
    BOOST_TEST(s.find("--new-session") == std::string::npos); // the group must get signals
    // /tmp is private first, then the root under it is bound again.
    BOOST_TEST(s.find("--tmpfs /tmp") < s.find("--bind /tmp/r /tmp/r"));
    BOOST_TEST(a.back() == "sh");
    BOOST_TEST(s.find("-- /proc/self/fd/4 --init 3 -- sh") != std::string::npos);
    BOOST_TEST(s.find("--as-pid-1") != std::string::npos); // the init is the namespace's pid 1
}

BOOST_AUTO_TEST_CASE(no_environment_on_the_command_line)
{
    bw::sandbox_view v;
    v.root = "/srv/p";
    v.work_dir = "/srv/p";
    const auto a = bw::build_args(v, "env", {});
    BOOST_TEST(std::none_of(a.begin(), a.end(), [](const std::string& x) {
        return x == "--setenv" || x == "--clearenv" || x == "--unsetenv";
    }));
}

BOOST_AUTO_TEST_CASE(writable_paths_that_would_open_the_sandbox_are_refused)
{
    const std::vector<bw::masked_path> masked{{"/home/u/.ssh", true}};
    BOOST_TEST(bw::check_writable("/srv/p", "/home/u", masked, "root").has_value());
    BOOST_TEST(bw::check_writable("/home/u/project", "/home/u", masked, "root").has_value());
    for (const char* bad : {"/", "/home/u", "/home", "/home/u/.ssh", "relative", ""})
    {
        auto r = bw::check_writable(bad, "/home/u", masked, "writable_paths");
        BOOST_TEST_CONTEXT(bad)
        {
            BOOST_TEST_REQUIRE(!r.has_value());
            BOOST_TEST(r.error().code == errc::validation);
            BOOST_TEST(r.error().diag.limit == "writable_paths");
        }
    }
    // A sibling that shares a prefix is not an ancestor.
    BOOST_TEST(bw::check_writable("/home/u/.ss", "/home/u", masked, "root").has_value());
}

BOOST_AUTO_TEST_CASE(the_built_in_read_deny_list)
{
    const auto d = bw::default_read_deny("/home/u");
    BOOST_TEST((std::find(d.begin(), d.end(), "/home/u/.ssh") != d.end()));
    BOOST_TEST((std::find(d.begin(), d.end(), "/home/u/.aws") != d.end()));
    BOOST_TEST((std::find(d.begin(), d.end(), "/home/u/.docker/config.json") != d.end()));
    BOOST_TEST(bw::default_read_deny("").empty());
    BOOST_TEST(bw::default_read_deny("/")[0] == "/.ssh");
}

// The masks follow the password database's home, and $HOME's too when it differs; with
// neither, nothing could be masked: refused.
BOOST_AUTO_TEST_CASE(the_homes_whose_credentials_are_masked)
{
    using v = std::vector<std::string>;
    BOOST_TEST((*bw::home_dirs("/root", "") == v{"/root"}));
    BOOST_TEST((*bw::home_dirs("/root", "/root") == v{"/root"}));
    BOOST_TEST((*bw::home_dirs("/root", "/srv/other") == v{"/root", "/srv/other"}));
    BOOST_TEST((*bw::home_dirs("", "/srv/other") == v{"/srv/other"}));
    BOOST_TEST((*bw::home_dirs("/root", "relative") == v{"/root"}));
    for (const auto& [pw, env] : {std::pair{"", ""}, std::pair{"", "relative"}})
    {
        auto r = bw::home_dirs(pw, env);
        BOOST_TEST_REQUIRE(!r.has_value());
        BOOST_TEST(r.error().code == errc::not_available);
        BOOST_TEST(r.error().diag.limit == "read_deny");
    }
}

BOOST_AUTO_TEST_CASE(read_only_paths_sockets_and_extra_flags_in_their_places)
{
    bw::sandbox_view v;
    v.root = "/srv/p";
    v.work_dir = "/srv/p";
    v.sockets = {"/run/user/0/agent.sock"};
    v.data_files = {{6, "/run/sandbox/ca-certificates.crt"}};
    v.isolate_network = true;
    v.extra_flags = {"--hostname", "box"};
    v.protect = {{"/srv/p/.git", false}, {"/srv/p/.git/hooks", true}};
    v.read_deny = {{"/root/.ssh", true}};
    const std::string s = joined(bw::build_args(v, "true", {}));
    // Sockets after the /tmp and /run tmpfs; extra flags after every bind; read-only paths
    // after the extra flags (which cannot undo them); masks last.
    BOOST_TEST(s.find("--tmpfs /tmp") < s.find("--ro-bind /run/user/0/agent.sock"));
    // Data files (the trust bundle) read-only in /run's tmpfs, before the extra flags.
    BOOST_TEST(s.find("--tmpfs /run") <
               s.find("--perms 0444 --ro-bind-data 6 /run/sandbox/ca-certificates.crt"));
    BOOST_TEST(s.find("--ro-bind-data 6") < s.find("--hostname box"));
    BOOST_TEST(s.find("--bind /srv/p /srv/p") < s.find("--hostname box"));
    BOOST_TEST(s.find("--hostname box") < s.find("--bind /srv/p/.git /srv/p/.git"));
    BOOST_TEST(s.find("--bind /srv/p/.git /srv/p/.git") < // pinned first
               s.find("--ro-bind /srv/p/.git/hooks /srv/p/.git/hooks"));
    BOOST_TEST(s.find("--ro-bind /srv/p/.git/hooks") < s.find("--tmpfs /root/.ssh"));
}

namespace {

// Paths resolve to themselves, but /host/link, which resolves to the masked /host/home/.ssh;
// only paths under /host exist.
sandbox::outcome<void> check(std::vector<std::string> flags)
{
    const std::vector<bw::masked_path> masked{{"/host/home/.ssh", true}};
    const bw::path_probe probe{
        [](const std::string& p) { return p == "/host/link" ? "/host/home/.ssh" : p; },
        [](const std::string& p) { return p.rfind("/host", 0) == 0; }};
    return bw::check_extra_flags(flags, masked, {"/host/work", "/srv/p"}, probe);
}

} // namespace

BOOST_AUTO_TEST_CASE(extra_flags_allowed)
{
    for (const auto& ok : std::vector<std::vector<std::string>>{
             {},
             {"--hostname", "box"},
             {"--ro-bind", "/host/data", "/data", "--ro-bind-try", "/nowhere", "/opt/x"},
             {"--remount-ro", "/srv/p/docs"}, // only makes less writable
             {"--symlink", "/usr/bin", "/bin2", "--dir", "/work"},
             {"--perms", "0700", "--tmpfs", "/scratch", "--size", "1048576", "--tmpfs", "/s2"},
             {"--perms", "755", "--dir", "/d", "--remount-ro", "/d"},
             {"--unshare-net"},
             {"--hostname", "--bind"}, // a value, by position: it cannot become a flag
         })
        BOOST_TEST(check(ok).has_value(), joined(ok));
}

BOOST_AUTO_TEST_CASE(extra_flags_refused)
{
    for (const auto& bad : std::vector<std::vector<std::string>>{
             {"--bind", "/host/data", "/data"},        // writable
             {"--bind-try", "/host/data", "/data"},
             {"--dev-bind", "/dev", "/dev"},           // devices
             {"--cap-add", "ALL"},                     // capabilities
             {"--share-net"},                          // namespaces back
             {"--new-session"},                        // signals would miss the command
             {"--setenv", "TOKEN", "x"},               // environment on the command line
             {"--unsetenv", "PATH"},
             {"--chdir", "/"},                         // the work directory is ours
             {"--seccomp", "5"},                       // descriptors we do not pass
             {"--args", "3"},
             {"--uid", "0"},
             {"--hostname"},                           // missing value: would swallow ours
             {"--ro-bind", "/host/data"},
             {"--ro-bind", "/nowhere", "/x"},          // a source that does not exist
             {"--ro-bind", "/host/home/.ssh", "/x"},   // shows a hidden path elsewhere
             {"--ro-bind", "/host/home/.ssh/id", "/x"},
             {"--ro-bind", "/host/home", "/x"},        // contains one
             {"--ro-bind-try", "/host/link", "/x"},    // resolves into one
             {"--ro-bind", "host/data", "/x"},         // relative: bwrap reads it from /
             {"--ro-bind", "/host/work/data", "/x"},   // the command could swap it
             {"--ro-bind", "/host/data", "/srv/p/x"},  // would make a host entry
             {"--symlink", "/usr", "/srv/p/usr"},
             {"--dir", "/srv/p/new"},
             {"--tmpfs", "relative"},
             {"--perms", "0999", "--tmpfs", "/x"},     // not octal
             {"--perms", "0700", "--ro-bind", "/host/data", "/x"}, // --perms before a bind
             {"--perms", "0700"},
             {"--size", "1k", "--tmpfs", "/x"},
             {"--size", "100", "--dir", "/x"},
             {"tmpfs", "/x"},
         })
    {
        auto r = check(bad);
        BOOST_TEST(!r.has_value(), joined(bad));
        if (!r)
        {
            BOOST_TEST(r.error().code == errc::validation);
            BOOST_TEST(r.error().diag.limit == "extra_flags");
        }
    }
}

// Every path through which git or a tool on the host later runs something, each kept even
// where missing, with a stand-in git can live with inside .git.
BOOST_AUTO_TEST_CASE(the_built_in_write_deny_list)
{
    const auto& d = bw::default_write_deny();
    auto kind = [&](const char* rel) {
        auto it = std::find_if(d.begin(), d.end(), [&](auto& e) { return e.relative == rel; });
        BOOST_TEST_REQUIRE((it != d.end()), rel);
        return it->missing;
    };
    using k = bw::stand_in;
    for (const char* dir : {".git/hooks", ".git/modules", ".git/worktrees", ".gitmodules",
                            ".vscode", ".idea", ".claude/commands", ".claude/agents", ".bashrc",
                            ".profile", ".zshrc", ".envrc", ".gitconfig", ".ripgreprc",
                            ".mcp.json"})
        BOOST_TEST((kind(dir) == k::directory), dir);
    BOOST_TEST((kind(".git/config") == k::empty_file));
    BOOST_TEST((kind(".git/config.worktree") == k::empty_file));
    BOOST_TEST((kind(".git/commondir") == k::git_self));
}

BOOST_AUTO_TEST_CASE(write_deny_targets_per_writable_directory)
{
    auto t = bw::write_deny_targets({"/srv/p", "/srv/cache"},
                                    {"Makefile", "/srv/p/ci/./deploy.sh"});
    BOOST_TEST_REQUIRE(t.has_value());
    auto has = [&](const std::string& dir, const std::string& rel) {
        return std::any_of(t->begin(), t->end(), [&](const bw::write_deny_target& x) {
            return x.dir == dir && x.entry.relative == rel &&
                   (x.entry.missing == bw::stand_in::directory) == (rel != ".git/config");
        });
    };
    BOOST_TEST(has("/srv/p", ".git/hooks"));
    BOOST_TEST(has("/srv/cache", ".git/hooks"));
    BOOST_TEST(has("/srv/p", ".git/config"));
    BOOST_TEST(has("/srv/p", "Makefile")); // relative: in every directory
    BOOST_TEST(has("/srv/cache", "Makefile"));
    BOOST_TEST(has("/srv/p", "ci/deploy.sh")); // absolute: where it lies
    BOOST_TEST(!has("/srv/cache", "ci/deploy.sh"));
    const std::size_t builtin = bw::default_write_deny().size();
    BOOST_TEST(t->size() == 2 * builtin + 3);
    // Outside every writable directory (read-only anyway, or misspelt), empty, climbing: refused.
    for (const char* bad : {"", "..", "a/../../b", "/srv/p/../etc", "/elsewhere/x", "/srv/p"})
    {
        auto r = bw::write_deny_targets({"/srv/p"}, {bad});
        BOOST_TEST(!r.has_value(), bad);
        if (!r)
            BOOST_TEST(r.error().diag.limit == "write_deny");
    }
}

BOOST_AUTO_TEST_SUITE_END()
