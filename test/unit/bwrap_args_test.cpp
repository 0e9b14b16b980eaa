// test/unit/bwrap_args_test.cpp: the bubblewrap command line and the writable-path checks.
#include <boost/test/unit_test.hpp>

#include "bwrap_args.hpp"

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
               "--new-session --ro-bind / / --tmpfs /tmp --bind /srv/p /srv/p "
               "--bind /srv/cache /srv/cache --proc /proc --dev /dev "
               "--perms 0000 --tmpfs /root/.ssh --remount-ro /root/.ssh "
               "--ro-bind /dev/null /root/.netrc "
               "--chdir /srv/p/src -- make -j2 SECRET=in-args-only-if-asked");
}

BOOST_AUTO_TEST_CASE(no_network_masks_run_and_a_terminal_keeps_its_session)
{
    bw::sandbox_view v;
    v.root = "/tmp/r";
    v.work_dir = "/tmp/r";
    v.isolate_network = true;
    v.new_session = false;
    const auto a = bw::build_args(v, "sh", {});
    const std::string s = joined(a);
    BOOST_TEST(s.find("--unshare-net") != std::string::npos);
    BOOST_TEST(s.find("--tmpfs /run") != std::string::npos);
    BOOST_TEST(s.find("--new-session") == std::string::npos);
    // /tmp is private first, then the root under it is bound again.
    BOOST_TEST(s.find("--tmpfs /tmp") < s.find("--bind /tmp/r /tmp/r"));
    BOOST_TEST(a.back() == "sh");
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

BOOST_AUTO_TEST_SUITE_END()
