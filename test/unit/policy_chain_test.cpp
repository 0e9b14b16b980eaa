// test/unit/policy_chain_test.cpp: the pure parts of the policy chain: glob patterns, base
// names, the defaults merge (every field), predicates on snapshots, audit records as JSON.
#include <sandbox/policy.hpp>

#include "policy/glob.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

using namespace std::chrono_literals;
using sandbox::errc;
using sandbox::detail::glob_pattern;

namespace {

bool glob(const char* pattern, const char* text)
{
    return glob_pattern::parse(pattern).value().match(text);
}

sandbox::call_snapshot call_of(std::string command)
{
    sandbox::call_snapshot c;
    c.command = std::move(command);
    return c;
}

} // namespace

BOOST_AUTO_TEST_SUITE(policy_glob)

BOOST_AUTO_TEST_CASE(matches_whole_names)
{
    struct row
    {
        const char* pattern;
        const char* text;
        bool match;
    };
    const row rows[] = {
        {"rm", "rm", true},          {"rm", "rmdir", false},      {"rm", "xrm", false},
        {"mkfs*", "mkfs", true},     {"mkfs*", "mkfs.ext4", true}, {"mkfs*", "mkf", false},
        {"*", "", true},             {"*", "anything", true},     {"?", "", false},
        {"?", "a", true},            {"?", "ab", false},          {"a*b*c", "aXbYc", true},
        {"a*b*c", "aXbY", false},    {"*sh", "bash", true},       {"*sh", "shell", false},
        {"[rs]m", "rm", true},       {"[rs]m", "sm", true},       {"[rs]m", "tm", false},
        {"[a-c]x", "bx", true},      {"[a-c]x", "dx", false},     {"[!a-c]x", "dx", true},
        {"[!a-c]x", "ax", false},    {"[^a-c]x", "ax", false},    {"[]]", "]", true},
        {"[!]]", "a", true},         {"[!]]", "]", false},        {"\\*", "*", true},
        {"\\*", "a", false},         {"[\\]]", "]", true},        {"RM", "rm", false},
        {"py*3*", "python3.11", true}, {"*.*", "a.b", true},      {"**x", "yyx", true},
    };
    for (const auto& r : rows)
    {
        BOOST_TEST_INFO("pattern " << r.pattern << " text " << r.text);
        BOOST_TEST(glob(r.pattern, r.text) == r.match);
    }
}

BOOST_AUTO_TEST_CASE(malformed_patterns_are_refused_when_built)
{
    for (const char* bad : {"", "[abc", "[", "[!", "ab\\", "[z-a]", "a/b", "/bin/rm", "[a\\",
                            "[[:upper:]]*", "x[[=a=]]", "[[.a.]]"})
    {
        auto p = glob_pattern::parse(bad);
        BOOST_TEST_INFO("pattern \"" << bad << "\"");
        BOOST_TEST_REQUIRE(p.has_error());
        BOOST_TEST(p.error().code == errc::validation);
        BOOST_TEST(p.error().diag.rule == bad);
    }
    // The public builder throws: a predicate with a bad pattern never exists.
    try
    {
        (void)sandbox::command_patterns({"rm", "mkfs[.ext"});
        BOOST_FAIL("a malformed pattern was accepted");
    }
    catch (const sandbox::error& e)
    {
        BOOST_TEST(e.code() == errc::validation);
        BOOST_TEST(e.diag().rule == "mkfs[.ext");
    }
}

BOOST_AUTO_TEST_CASE(many_stars_against_a_long_name)
{
    // One backtrack point: the answer comes (no exponential blow-up) and is right.
    std::string text(10000, 'a');
    BOOST_TEST(!glob("*a*a*a*a*a*a*a*a*b", text.c_str()));
    BOOST_TEST(glob("*a*a*a*a*a*a*a*a*", text.c_str()));
}

BOOST_AUTO_TEST_CASE(base_names)
{
    BOOST_TEST(sandbox::command_base_name("rm") == "rm");
    BOOST_TEST(sandbox::command_base_name("/bin/rm") == "rm");
    BOOST_TEST(sandbox::command_base_name("./bin/rm//") == "rm");
    BOOST_TEST(sandbox::command_base_name("") == ".");
    BOOST_TEST(sandbox::command_base_name("///") == ".");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(policy_predicates)

BOOST_AUTO_TEST_CASE(command_patterns_match_the_base_name)
{
    auto p = sandbox::command_patterns({"rm", "mkfs*"});
    for (const char* yes : {"rm", "/bin/rm", "mkfs.ext4", "/sbin/mkfs"})
    {
        auto why = p(call_of(yes));
        BOOST_TEST_INFO(yes);
        BOOST_TEST_REQUIRE(why.has_value());
        BOOST_TEST(why->find("sensitive pattern") != std::string::npos);
    }
    for (const char* no : {"cat", "rmdir", "sh", ""})
    {
        BOOST_TEST_INFO(no);
        BOOST_TEST(!p(call_of(no)).has_value());
    }
    // The first matching pattern gives the reason.
    auto both = sandbox::command_patterns({"r*", "rm"});
    BOOST_TEST(both(call_of("rm"))->find("\"r*\"") != std::string::npos);
    // No patterns: never matches.
    BOOST_TEST(!sandbox::command_patterns({})(call_of("rm")).has_value());
}

BOOST_AUTO_TEST_CASE(net_non_default_and_interactive)
{
    auto net = sandbox::net_non_default();
    auto c = call_of("curl");
    BOOST_TEST(!net(c).has_value());
    c.options.net.mode = sandbox::net_mode::deny_all;
    BOOST_TEST_REQUIRE(net(c).has_value());
    BOOST_TEST(net(c)->find("deny_all") != std::string::npos);

    auto tty = sandbox::interactive();
    auto s = call_of("sh");
    s.kind = sandbox::call_kind::session;
    BOOST_TEST(!tty(s).has_value()); // a pipe session
    s.tty = sandbox::terminal_size{};
    BOOST_TEST(tty(s).has_value());
    auto e = call_of("sh");
    e.tty = sandbox::terminal_size{}; // an exec on a terminal takes no input
    BOOST_TEST(!tty(e).has_value());
}

BOOST_AUTO_TEST_CASE(any_callable_is_a_predicate)
{
    auto long_timeout = sandbox::make_predicate(
        [](const sandbox::call_snapshot& c) { return c.options.timeout > 60s; }, "long timeout");
    auto c = call_of("make");
    BOOST_TEST(!long_timeout(c).has_value());
    c.options.timeout = 2min;
    BOOST_TEST((long_timeout(c) == std::optional<std::string>("long timeout")));
    BOOST_TEST(!static_cast<bool>(sandbox::make_predicate({}, "x"))); // empty: denies in use
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(policy_merge)

// Every field of exec_options, each case a row: caller, defaults, expected.
BOOST_AUTO_TEST_CASE(work_dir_and_input)
{
    using sandbox::merge_defaults;
    sandbox::exec_options c, d;
    d.work_dir = "def";
    BOOST_TEST(merge_defaults(c, d).work_dir == "def");
    c.work_dir = "mine";
    BOOST_TEST(merge_defaults(c, d).work_dir == "mine");

    d.input = "default input";
    BOOST_TEST((merge_defaults(c, d).input == std::optional<std::string>("default input")));
    c.input = ""; // present but empty still counts as the caller's
    BOOST_TEST((merge_defaults(c, d).input == std::optional<std::string>("")));
    BOOST_TEST(!merge_defaults({}, {}).input.has_value());
}

BOOST_AUTO_TEST_CASE(durations_never_exceed_the_defaults)
{
    // timeout: the smaller of the two that are set. kill_grace: the same, except that a
    // caller's 0 ("SIGKILL at once", the strictest) stands.
    struct row
    {
        std::chrono::nanoseconds caller, deflt, timeout, grace;
    };
    const row rows[] = {{0s, 0s, 0s, 0s},  {0s, 5s, 5s, 0s},    {3s, 0s, 3s, 3s},
                        {2s, 5s, 2s, 2s},  {10s, 4s, 4s, 4s},   {5s, 5s, 5s, 5s}};
    for (const auto& r : rows)
    {
        sandbox::exec_options c, d;
        c.timeout = c.kill_grace = r.caller;
        d.timeout = d.kill_grace = r.deflt;
        const auto m = sandbox::merge_defaults(c, d);
        BOOST_TEST(m.timeout == r.timeout);
        BOOST_TEST(m.kill_grace == r.grace);
    }
}

BOOST_AUTO_TEST_CASE(env_allow_never_widens)
{
    using list = std::vector<std::string>;
    using opt = std::optional<list>;
    struct row
    {
        opt caller, deflt, merged;
    };
    const row rows[] = {
        {std::nullopt, std::nullopt, std::nullopt},             // nobody says: inherit
        {std::nullopt, list{"PATH", "HOME"}, list{"PATH", "HOME"}}, // defaults narrow
        {list{}, std::nullopt, list{}},           // the caller's empty list stays empty
        {list{"PATH"}, std::nullopt, list{"PATH"}}, // unset defaults keep the caller's
        {list{"PATH", "HOME", "SECRET"}, list{"PATH", "HOME"}, list{"PATH", "HOME"}}, // wider
        {list{"HOME"}, list{"PATH", "HOME"}, list{"HOME"}},    // narrower stays narrow
        {list{}, list{"PATH"}, list{}},                        // empty stays empty
        {list{"X"}, list{}, list{}},                           // defaults allow nothing
    };
    for (const auto& r : rows)
    {
        sandbox::exec_options c, d;
        c.env.allow = r.caller;
        d.env.allow = r.deflt;
        BOOST_TEST((sandbox::merge_defaults(c, d).env.allow == r.merged));
    }
}

BOOST_AUTO_TEST_CASE(env_inject_is_a_union_and_the_caller_wins)
{
    sandbox::exec_options c, d;
    d.env.inject = {{"ID", "default"}, {"REGION", "eu"}};
    c.env.inject = {{"ID", "caller"}, {"RUN_ID", "7"}};
    auto m = sandbox::merge_defaults(c, d);
    const std::map<std::string, std::string> want{{"ID", "caller"}, {"REGION", "eu"}, {"RUN_ID", "7"}};
    BOOST_TEST((m.env.inject == want));
    // Neither side changed, and a second call sees only its own values.
    BOOST_TEST(d.env.inject.size() == 2u);
    BOOST_TEST(d.env.inject.at("ID") == "default");
    sandbox::exec_options c2;
    c2.env.inject = {{"RUN_ID", "8"}};
    auto m2 = sandbox::merge_defaults(c2, d);
    BOOST_TEST(m2.env.inject.at("RUN_ID") == "8");
    BOOST_TEST(m2.env.inject.at("ID") == "default");
    BOOST_TEST(sandbox::merge_defaults({}, {}).env.inject.empty());
}

BOOST_AUTO_TEST_CASE(net_from_the_defaults_unless_they_are_silent_or_the_caller_denies_all)
{
    using sandbox::net_mode;
    struct row
    {
        net_mode caller, deflt, merged;
    };
    const row rows[] = {
        {net_mode::inherit, net_mode::inherit, net_mode::inherit},
        {net_mode::deny_all, net_mode::inherit, net_mode::deny_all},   // not dropped
        {net_mode::allow_list, net_mode::inherit, net_mode::allow_list}, // not dropped
        {net_mode::inherit, net_mode::deny_all, net_mode::deny_all},
        {net_mode::allow_list, net_mode::deny_all, net_mode::deny_all}, // no widening
        {net_mode::deny_all, net_mode::allow_list, net_mode::deny_all}, // stricter stays
        {net_mode::proxy, net_mode::allow_list, net_mode::allow_list},
    };
    for (const auto& r : rows)
    {
        sandbox::exec_options c, d;
        c.net.mode = r.caller;
        d.net.mode = r.deflt;
        c.net.allow_hosts = {"caller.example"};
        d.net.allow_hosts = {"default.example"};
        auto m = sandbox::merge_defaults(c, d);
        BOOST_TEST(m.net.mode == r.merged);
        // The whole policy comes from one side: hosts never mix.
        const bool from_caller = r.caller == net_mode::deny_all || r.deflt == net_mode::inherit;
        BOOST_TEST(m.net.allow_hosts.at(0) == (from_caller ? "caller.example" : "default.example"));
    }
}

// The defaults' network wins, but the server-name check is the stricter of both: a caller's
// deny stands against defaults that only record, and defaults' deny against a caller's off.
BOOST_AUTO_TEST_CASE(the_stricter_server_name_check_wins)
{
    using sandbox::sni_mode;
    struct row
    {
        sni_mode caller, deflt, merged;
    };
    for (const row r : {row{sni_mode::deny, sni_mode::record, sni_mode::deny},
                        row{sni_mode::off, sni_mode::deny, sni_mode::deny},
                        row{sni_mode::off, sni_mode::record, sni_mode::record},
                        row{sni_mode::record, sni_mode::off, sni_mode::record},
                        row{sni_mode::off, sni_mode::off, sni_mode::off}})
    {
        sandbox::exec_options c, d;
        c.net.mode = sandbox::net_mode::allow_list;
        c.net.allow_hosts = {"a.test"};
        c.net.sni_check = r.caller;
        d.net.mode = sandbox::net_mode::allow_list;
        d.net.allow_hosts = {"b.test"};
        d.net.sni_check = r.deflt;
        const auto m = sandbox::merge_defaults(c, d);
        BOOST_TEST((m.net.sni_check == r.merged));
        BOOST_TEST((m.net.allow_hosts == std::vector<std::string>{"b.test"}));
    }
}

BOOST_AUTO_TEST_CASE(a_callers_deny_all_cannot_bring_its_own_sockets)
{
    using sandbox::net_mode;
    using list = std::vector<std::string>;
    struct row
    {
        net_mode deflt;
        list deflt_sockets, caller_sockets, merged;
    };
    const row rows[] = {
        // Defaults say nothing about the network: the caller's policy whole.
        {net_mode::inherit, {}, {"/run/a.sock"}, {"/run/a.sock"}},
        // Defaults grant no socket: a caller's deny_all keeps none.
        {net_mode::deny_all, {}, {"/var/run/docker.sock"}, {}},
        {net_mode::allow_list, {}, {"/var/run/docker.sock"}, {}},
        // Only what both name.
        {net_mode::deny_all, {"/run/a.sock", "/run/b.sock"}, {"/run/b.sock", "/run/c.sock"},
         {"/run/b.sock"}},
    };
    for (const auto& r : rows)
    {
        sandbox::exec_options c, d;
        c.net.mode = net_mode::deny_all;
        c.net.unix_sockets = r.caller_sockets;
        d.net.mode = r.deflt;
        d.net.unix_sockets = r.deflt_sockets;
        auto m = sandbox::merge_defaults(c, d);
        BOOST_TEST(m.net.mode == net_mode::deny_all);
        BOOST_TEST((m.net.unix_sockets == r.merged));
    }
    // Where the defaults' policy wins, so do its sockets.
    sandbox::exec_options c, d;
    c.net.mode = net_mode::allow_list;
    c.net.unix_sockets = {"/var/run/docker.sock"};
    d.net.mode = net_mode::deny_all;
    BOOST_TEST(sandbox::merge_defaults(c, d).net.unix_sockets.empty());
}

BOOST_AUTO_TEST_CASE(each_cap_takes_the_smaller_that_is_set)
{
    // field pointer, so the same rows run over every cap.
    using field = std::int64_t sandbox::resource_limits::*;
    const field fields[] = {&sandbox::resource_limits::memory_bytes,
                            &sandbox::resource_limits::cpu_millicores,
                            &sandbox::resource_limits::disk_bytes,
                            &sandbox::resource_limits::max_output_bytes,
                            &sandbox::resource_limits::max_processes,
                            &sandbox::resource_limits::max_tasks};
    struct row
    {
        std::int64_t caller, deflt, merged;
    };
    const row rows[] = {{0, 0, 0}, {0, 100, 100}, {50, 0, 50}, {200, 100, 100}, {50, 100, 50}};
    for (auto f : fields)
        for (const auto& r : rows)
        {
            sandbox::exec_options c, d;
            c.limits.*f = r.caller;
            d.limits.*f = r.deflt;
            BOOST_TEST((sandbox::merge_defaults(c, d).limits.*f) == r.merged);
        }
}

BOOST_AUTO_TEST_CASE(empty_caller_gets_every_default)
{
    sandbox::exec_options d;
    d.work_dir = "w";
    d.input = "in";
    d.timeout = 3s;
    d.kill_grace = 1s;
    d.env.allow = std::vector<std::string>{"PATH"};
    d.env.inject = {{"A", "1"}};
    d.net.mode = sandbox::net_mode::deny_all;
    d.limits.memory_bytes = 1 << 20;
    d.limits.max_processes = 9;
    auto m = sandbox::merge_defaults({}, d);
    BOOST_TEST(m.work_dir == "w");
    BOOST_TEST((m.input == std::optional<std::string>("in")));
    BOOST_TEST(m.timeout == 3s);
    BOOST_TEST(m.kill_grace == 0s); // the caller's 0 is "SIGKILL at once", the strictest
    BOOST_TEST((m.env.allow == d.env.allow));
    BOOST_TEST((m.env.inject == d.env.inject));
    BOOST_TEST(m.net.mode == sandbox::net_mode::deny_all);
    BOOST_TEST(m.limits.memory_bytes == 1 << 20);
    BOOST_TEST(m.limits.max_processes == 9);
    // And silent defaults change nothing the caller asked for.
    auto same = sandbox::merge_defaults(d, {});
    BOOST_TEST(same.work_dir == "w");
    BOOST_TEST(same.timeout == 3s);
    BOOST_TEST((same.env.allow == d.env.allow));
    BOOST_TEST(same.net.mode == sandbox::net_mode::deny_all);
    BOOST_TEST(same.limits.memory_bytes == 1 << 20);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(policy_audit_json)

BOOST_AUTO_TEST_CASE(records_have_their_fields_and_valid_utf8)
{
    sandbox::audit_record r;
    r.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'764'560'221'123));
    r.call = 7;
    r.event = sandbox::audit_event::finished;
    r.layer = "backend";
    r.command = "sh";
    r.args = {"-c", "exit 3"};
    r.work_dir = "sub";
    r.status = sandbox::exec_status::exited;
    r.exit_code = 3;
    r.wall_time = 1500us;
    r.error = "";
    auto o = sandbox::to_json(r);
    BOOST_TEST(o.at("time").as_string() == "2025-12-01T03:37:01.123Z");
    BOOST_TEST(o.at("call").as_uint64() == 7u);
    BOOST_TEST(o.at("event").as_string() == "finished");
    BOOST_TEST(o.at("kind").as_string() == "exec");
    BOOST_TEST(o.at("args").as_array().size() == 2u);
    BOOST_TEST(o.at("status").as_string() == "exited");
    BOOST_TEST(o.at("exit_code").as_int64() == 3);
    BOOST_TEST(o.at("duration_us").as_int64() == 1500);
    BOOST_TEST(!o.contains("error"));
    BOOST_TEST(!o.contains("reason"));
    BOOST_TEST(o.at("work_dir").as_string() == "sub");
    BOOST_TEST(o.at("tty").as_bool() == false);
    // A denial has no status fields; work_dir and tty are there unset (issue 33, item 11).
    r.event = sandbox::audit_event::denied;
    r.status.reset();
    r.reason = "no";
    r.error = "policy_denied";
    r.args = {"\xff\xfe", "ok"};
    r.work_dir.clear();
    auto d = sandbox::to_json(r);
    BOOST_TEST(d.at("work_dir").as_string() == "");
    BOOST_TEST(d.at("tty").as_bool() == false);
    for (const char* key : {"time", "call", "event", "layer", "kind", "command", "args"})
        BOOST_TEST(d.contains(key), key);
    BOOST_TEST(d.at("args").as_array().at(0).as_string() == "\xEF\xBF\xBD\xEF\xBF\xBD");
    BOOST_TEST(!d.contains("status"));
    BOOST_TEST(!d.contains("exit_code"));
    BOOST_TEST(d.at("error").as_string() == "policy_denied");
}

BOOST_AUTO_TEST_SUITE_END()
