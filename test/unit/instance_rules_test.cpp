// test/unit/instance_rules_test.cpp: the pure rules of instances: how a command is narrowed
// to its instance (backend::narrow_to_instance), and how a worker inside looks a command up
// on its PATH (helper/inside_paths.hpp), with the file system replaced by a table.
#include <boost/test/unit_test.hpp>

#include <sandbox/backend/instance.hpp>
#include <sandbox/error.hpp>

#include "helper/inside_paths.hpp"

#include <cerrno>
#include <map>
#include <string>

namespace {

using sandbox::errc;

// A probe over a table: path → errno (0: executable); anything else ENOENT.
struct table_probe
{
    explicit table_probe(std::map<std::string, int> f) : files(std::move(f)) {}
    std::map<std::string, int> files;
    std::vector<std::string> asked;
    int operator()(const std::string& p)
    {
        asked.push_back(p);
        auto it = files.find(p);
        return it == files.end() ? ENOENT : it->second;
    }
};

std::string find(table_probe& t, const std::string& file, const std::string& path, int& err,
                 const std::string& cwd = "/w")
{
    return sandbox::detail::find_on_path(file, path, cwd, std::ref(t), err);
}

} // namespace

BOOST_AUTO_TEST_SUITE(instance_rules)

BOOST_AUTO_TEST_CASE(the_path_is_searched_in_order_as_the_shell_does)
{
    table_probe t({{"/usr/bin/ls", 0}, {"/bin/ls", 0}});
    int err = -1;
    BOOST_TEST(find(t, "ls", "/nope:/usr/bin:/bin", err) == "/usr/bin/ls");
    BOOST_TEST(err == 0);
    BOOST_TEST((t.asked == std::vector<std::string>{"/nope/ls", "/usr/bin/ls"}));
    // An empty entry is the work directory; a relative one is taken from it.
    table_probe here({{"/w/tool", 0}, {"/w/bin/tool", 0}});
    BOOST_TEST(find(here, "tool", "/a::/b", err) == "/w/tool");
    BOOST_TEST(find(here, "tool", "bin", err) == "/w/bin/tool");
}

BOOST_AUTO_TEST_CASE(a_file_not_executable_is_eacces_and_nothing_is_enoent)
{
    table_probe t({{"/a/x", EACCES}, {"/c/x", ELOOP}});
    int err = 0;
    BOOST_TEST(find(t, "x", "/a:/b", err).empty());
    BOOST_TEST(err == EACCES);
    BOOST_TEST(find(t, "x", "/b", err).empty());
    BOOST_TEST(err == ENOENT);
    // A denied entry does not stop the search: a later one that can run wins.
    table_probe later({{"/a/x", EACCES}, {"/b/x", 0}});
    BOOST_TEST(find(later, "x", "/a:/b", err) == "/b/x");
    // An error that says the file is there but cannot run stops it.
    table_probe busy({{"/a/x", ETXTBSY}, {"/b/x", 0}});
    BOOST_TEST(find(busy, "x", "/a:/b", err).empty());
    BOOST_TEST(err == ETXTBSY);
}

BOOST_AUTO_TEST_CASE(the_path_comes_from_the_command_s_environment)
{
    BOOST_TEST(sandbox::detail::path_of({"HOME=/h", "PATH=/x:/y"}) == "/x:/y");
    BOOST_TEST(sandbox::detail::path_of({"PATHX=/no"}) == "/bin:/usr/bin");
}

// A command (`Call`: exec_request) or a session (session_spec) of an instance takes what it
// leaves unset from the instance, and keeps what it sets.
template <class Call> void takes_what_it_leaves_unset()
{
    sandbox::instance_spec inst;
    inst.options.net.mode = sandbox::net_mode::deny_all;
    inst.options.work_dir = "proj";
    inst.options.env.inject["A"] = "1";
    Call req;
    req.command = "ls";
    BOOST_TEST(sandbox::backend::narrow_to_instance(inst, req).has_value());
    BOOST_TEST((req.options.net.mode == sandbox::net_mode::deny_all));
    BOOST_TEST(req.options.work_dir == "proj");
    BOOST_TEST(req.options.env.inject.at("A") == "1");
    // Its own work dir and environment stay its own; the same net policy is accepted.
    Call own;
    own.options.work_dir = "other";
    own.options.env.inject["B"] = "2";
    own.options.net.mode = sandbox::net_mode::deny_all;
    BOOST_TEST(sandbox::backend::narrow_to_instance(inst, own).has_value());
    BOOST_TEST(own.options.work_dir == "other");
    BOOST_TEST(own.options.env.inject.count("A") == 0u);
}

BOOST_AUTO_TEST_CASE(a_command_takes_what_it_leaves_unset_from_the_instance)
{
    takes_what_it_leaves_unset<sandbox::exec_request>();
}

BOOST_AUTO_TEST_CASE(a_command_cannot_widen_the_instance)
{
    sandbox::instance_spec inst;
    inst.options.net.mode = sandbox::net_mode::allow_list;
    inst.options.net.allow_hosts = {"example.com"};
    sandbox::exec_request wider;
    wider.options.net = inst.options.net;
    wider.options.net.allow_hosts.push_back("evil.example");
    auto w = sandbox::backend::narrow_to_instance(inst, wider);
    BOOST_TEST((!w && w.error().code == errc::validation && w.error().diag.limit == "net"));
    sandbox::exec_request other_mode; // another network altogether, however narrow
    other_mode.options.net.mode = sandbox::net_mode::deny_all;
    BOOST_TEST(!sandbox::backend::narrow_to_instance(inst, other_mode).has_value());
    sandbox::exec_request tty; // a terminal is the command's own
    tty.tty = sandbox::terminal_size{};
    BOOST_TEST(sandbox::backend::narrow_to_instance(inst, tty).has_value());
    sandbox::exec_request hooked;
    hooked.on_net_record = [](const sandbox::net_record&) {};
    auto h = sandbox::backend::narrow_to_instance(inst, hooked);
    BOOST_TEST((!h && h.error().code == errc::validation));
    sandbox::instance_spec with_input;
    with_input.options.input = "";
    BOOST_TEST(!sandbox::backend::check_instance_spec(with_input).has_value());
}

// A session started in an instance follows the same rules as its commands.
BOOST_AUTO_TEST_CASE(a_session_is_narrowed_as_a_command_is)
{
    takes_what_it_leaves_unset<sandbox::session_spec>();
    sandbox::instance_spec inst;
    inst.options.net.mode = sandbox::net_mode::deny_all;
    sandbox::session_spec on_terminal;
    on_terminal.command = "sh";
    on_terminal.tty = sandbox::terminal_size{};
    BOOST_TEST(sandbox::backend::narrow_to_instance(inst, on_terminal).has_value());
    sandbox::session_spec wider;
    wider.options.net.mode = sandbox::net_mode::inherit;
    wider.options.net.allow_hosts = {"example.com"};
    auto w = sandbox::backend::narrow_to_instance(inst, wider);
    BOOST_TEST((!w && w.error().code == errc::validation && w.error().diag.limit == "net"));
    sandbox::session_spec hooked;
    hooked.on_net_record = [](const sandbox::net_record&) {};
    auto h = sandbox::backend::narrow_to_instance(inst, hooked);
    BOOST_TEST((!h && h.error().code == errc::validation && h.error().diag.limit == "net"));
}

BOOST_AUTO_TEST_SUITE_END()
