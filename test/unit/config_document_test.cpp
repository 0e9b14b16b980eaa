// Config documents: the syntax, the schema and every rule, without I/O.
#include <sandbox/config/document.hpp>

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace cfg = sandbox::config;
using sandbox::errc;

namespace {

// A document with one local entry "b" whose entry body is `body` (indented by the caller).
std::string entry(const std::string& body)
{
    return "version: v1\nsandboxes:\n  b:\n    backend: local\n    root: /tmp\n" + body;
}

// The problems' text, for messages.
std::string listed(const std::vector<cfg::problem>& ps)
{
    std::string s;
    for (const auto& p : ps)
        s += cfg::to_string(p) + "\n";
    return s;
}

bool has(const std::vector<cfg::problem>& ps, const std::string& path, const std::string& text)
{
    for (const auto& p : ps)
        if (p.path == path && p.message.find(text) != std::string::npos)
            return true;
    return false;
}

struct rule
{
    std::string doc, path, text;
};

} // namespace

BOOST_AUTO_TEST_SUITE(config_document)

BOOST_AUTO_TEST_CASE(an_empty_map_of_sandboxes_is_a_good_document)
{
    auto d = cfg::parse_document("version: v1\nsandboxes: {}\n");
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST(d->sandboxes.empty());
}

BOOST_AUTO_TEST_CASE(every_rule_is_a_problem_at_its_path)
{
    const std::string b = "sandboxes[\"b\"]";
    const std::vector<rule> rules = {
        {"sandboxes: {}\n", "version", "is required"},
        {"version: v2\nsandboxes: {}\n", "version", "not supported"},
        {"version: v1\n", "sandboxes", "is required"},
        {"version: v1\nsandboxes:\n", "sandboxes", "is required"},
        {"version: v1\nsandboxes: [1]\n", "sandboxes", "must be a mapping"},
        {"version: v1\nsandboxes: {}\nextra: 1\n", "extra", "unknown key"},
        {"version: v1\nsandboxes:\n  \"a b\": {backend: local, root: /tmp}\n", "sandboxes[\"a b\"]", "1 to 64"},
        {"version: v1\nsandboxes:\n  b: {root: /tmp}\n", b + ".backend", "is required"},
        {"version: v1\nsandboxes:\n  b: {backend: \"\", root: /tmp}\n", b + ".backend", "must not be empty"},
        {"version: v1\nsandboxes:\n  b: {backend: local}\n", b + ".root", "is required"},
        {"version: v1\nsandboxes:\n  b: {backend: local, root: rel}\n", b + ".root", "absolute"},
        {"version: v1\nsandboxes:\n  b: {backend: local, root: /tmp, workspace: w}\n", b + ".root", "one of the two"},
        {entry("    color: red\n"), b + ".color", "unknown key"},
        {entry("    defaults: {timeout: 30}\n"), b + ".defaults.timeout", "bare number 30"},
        {entry("    defaults: {timeout: 3x}\n"), b + ".defaults.timeout", "unknown unit"},
        {entry("    defaults: {kill_grace: true}\n"), b + ".defaults.kill_grace", "duration"},
        {entry("    defaults: {workdir: /x}\n"), b + ".defaults.workdir", "unknown key"},
        {entry("    defaults: {env: {allow: [\"\"]}}\n"), b + ".defaults.env.allow[0]", "must not be empty"},
        {entry("    defaults: {env: {inject: {\"A=B\": x}}}\n"), b + ".defaults.env.inject[\"A=B\"]", "'='"},
        {entry("    defaults: {env: {inject: {A: 1}}}\n"), b + ".defaults.env.inject[\"A\"]", "must be a string"},
        {entry("    defaults: {env: {clear: true}}\n"), b + ".defaults.env.clear", "unknown key"},
        {entry("    defaults: {net: {mode: deny_all, allow_hosts: [x.com]}}\n"), b + ".defaults.net", "cannot set"},
        {entry("    defaults: {net: {allow_hosts: [x.com]}}\n"), b + ".defaults.net", "cannot set"},
        {entry("    defaults: {net: {mode: allow_list}}\n"), b + ".defaults.net", "needs allow_hosts or rules"},
        {entry("    defaults: {net: {mode: allow_list, allow_hosts: [x.com], proxy: \"http://p:1\"}}\n"), b + ".defaults.net.proxy", "cannot set proxy"},
        {entry("    defaults: {net: {mode: proxy}}\n"), b + ".defaults.net.proxy", "needs proxy"},
        {entry("    defaults: {net: {mode: proxy, proxy: \"http://p:1\", allow_hosts: [x.com]}}\n"), b + ".defaults.net.allow_hosts", "cannot set allow_hosts"},
        {entry("    defaults: {net: {mode: open}}\n"), b + ".defaults.net.mode", "not a mode"},
        {entry("    defaults: {net: {mode: allow_list, rules: [{action: maybe, host: x.com}]}}\n"), b + ".defaults.net.rules[0].action", "allow or deny"},
        {entry("    defaults: {net: {mode: allow_list, rules: [{action: allow, host: \" \"}]}}\n"), b + ".defaults.net.rules[0].host", "blank"},
        {entry("    defaults: {net: {mode: allow_list, rules: [{action: allow, host: x.com, port: 70000}]}}\n"), b + ".defaults.net.rules[0].port", "65535"},
        {entry("    defaults: {net: {mode: allow_list, rules: [{action: allow, host: x.com, via: y}]}}\n"), b + ".defaults.net.rules[0].via", "unknown key"},
        {entry("    defaults: {net: {mode: allow_list, allow_hosts: [x.com], mitm: {on: true}}}\n"), b + ".defaults.net.mitm.on", "unknown key"},
        {entry("    defaults: {net: {mode: proxy, proxy: \"ftp://p:1\"}}\n"), b + ".defaults.net", "proxy"},
        {entry("    defaults: {resources: {memory_bytes: -1}}\n"), b + ".defaults.resources.memory_bytes", "negative"},
        {entry("    defaults: {resources: {memory_bytes: 1MB}}\n"), b + ".defaults.resources.memory_bytes", "ambiguous"},
        {entry("    defaults: {resources: {max_processes: -3}}\n"), b + ".defaults.resources.max_processes", "negative"},
        {entry("    defaults: {resources: {max_processes: 1.5}}\n"), b + ".defaults.resources.max_processes", "integer"},
        {entry("    defaults: {resources: {cpu_millicores: 500}}\n"), b + ".defaults.resources.cpu_millicores", "needs defaults.timeout"},
        {entry("    defaults: {resources: {gpu: 1}}\n"), b + ".defaults.resources.gpu", "unknown key"},
        {entry("    allowed_commands: [make, \"\"]\n"), b + ".allowed_commands[1]", "must not be empty"},
        {entry("    allowed_commands: [make, true]\n"), b + ".allowed_commands[1]", "quote it"},
        {entry("    command_match: base_name\n    allowed_commands: [/bin/rm]\n"), b + ".allowed_commands[0]", "no '/'"},
        {entry("    command_match: fuzzy\n"), b + ".command_match", "exact or base_name"},
        {entry("    approval: {sensitive_commands: [\"[abc\"]}\n"), b + ".approval.sensitive_commands[0]", "["},
        {entry("    approval: {deadline: 0s}\n"), b + ".approval.deadline", "positive"},
        {entry("    approval: {interactive: yes}\n"), b + ".approval.interactive", "true or false"},
        {entry("    approval: {ask: true}\n"), b + ".approval.ask", "unknown key"},
        {"version: v1\ndaemon: {listen: rel.sock}\nsandboxes: {}\n", "daemon.listen", "absolute"},
        {"version: v1\ndaemon: {allow_uids: [-1]}\nsandboxes: {}\n", "daemon.allow_uids[0]", "not a valid id"},
        {"version: v1\ndaemon: {idle_timeout: \"0\"}\nsandboxes: {}\n", "daemon.idle_timeout", "positive"},
        {"version: v1\ndaemon: {port: 80}\nsandboxes: {}\n", "daemon.port", "unknown key"},
    };
    for (const auto& r : rules)
    {
        const auto ps = cfg::check_document(r.doc);
        BOOST_TEST(has(ps, r.path, r.text), "expected " << r.path << ": ..." << r.text
                                                       << "... for\n" << r.doc << "got\n" << listed(ps));
        for (const auto& p : ps)
            BOOST_TEST((p.code == errc::validation));
    }
}

BOOST_AUTO_TEST_CASE(yaml_problems_carry_line_and_column)
{
    const auto ps = cfg::check_document(entry("    defaults:\n      timeout: 30\n"));
    BOOST_TEST_REQUIRE(ps.size() == 1u, listed(ps));
    BOOST_TEST(ps[0].line == 7);
    BOOST_TEST(ps[0].column == 16);
    BOOST_TEST(cfg::to_string(ps[0]) ==
               "sandboxes[\"b\"].defaults.timeout: must be a duration string with a unit, such "
               "as \"30s\" or \"2m\", not the bare number 30 (line 7, column 16)");
}

BOOST_AUTO_TEST_CASE(duplicate_keys_are_refused_in_both_syntaxes)
{
    auto y = cfg::check_document(entry("    root: /var\n"));
    BOOST_TEST(has(y, "sandboxes[\"b\"].root", "duplicate key \"root\" (first at line 5)"), listed(y));
    BOOST_TEST(y.front().line == 6);
    auto deep = cfg::check_document(entry("    defaults:\n      env: {allow: [A], allow: [B]}\n"));
    BOOST_TEST(has(deep, "sandboxes[\"b\"].defaults.env.allow", "duplicate key"), listed(deep));
    auto j = cfg::check_document(R"({"version":"v1","version":"v1","sandboxes":{}})");
    BOOST_TEST(has(j, "version", "duplicate key"), listed(j));
}

BOOST_AUTO_TEST_CASE(a_second_document_aliases_and_tags_are_refused)
{
    auto two = cfg::check_document("version: v1\nsandboxes: {}\n---\nversion: v1\n");
    BOOST_TEST(has(two, "", "multiple YAML documents"), listed(two));
    BOOST_TEST(two.back().line == 3);
    auto alias = cfg::check_document(
        "version: v1\nsandboxes:\n  a: &x {backend: local, root: /tmp}\n  b: *x\n");
    BOOST_TEST(has(alias, "sandboxes[\"b\"]", "aliases are not supported"), listed(alias));
    auto tag = cfg::check_document("version: !!str v1\nsandboxes: {}\n");
    BOOST_TEST(has(tag, "version", "explicit tags"), listed(tag));
    auto json2 = cfg::check_document(R"({"version":"v1","sandboxes":{}} {"x":1})");
    BOOST_TEST(has(json2, "", "multiple JSON documents"), listed(json2));
}

BOOST_AUTO_TEST_CASE(syntax_errors_and_empty_documents)
{
    auto y = cfg::check_document("version: v1\nsandboxes: [unclosed\n");
    BOOST_TEST_REQUIRE(!y.empty());
    BOOST_TEST(y[0].message.find("not valid YAML") != std::string::npos);
    BOOST_TEST(y[0].line >= 2);
    auto j = cfg::check_document("{\"version\": \"v1\",\n \"sandboxes\": {]}");
    BOOST_TEST_REQUIRE(!j.empty());
    BOOST_TEST(j[0].message.find("not valid JSON") != std::string::npos);
    BOOST_TEST(j[0].line == 2);
    BOOST_TEST(has(cfg::check_document(""), "", "empty"));
    BOOST_TEST(has(cfg::check_document(std::string(cfg::max_document_bytes + 1, ' ')), "", "larger"));
}

BOOST_AUTO_TEST_CASE(every_problem_is_reported_at_once_in_document_order)
{
    const auto d = cfg::parse_document(
        "version: v9\nsandboxes:\n  b:\n    backend: local\n    root: rel\n    defaults: {timeout: 5}\n");
    BOOST_TEST_REQUIRE(!d.has_value());
    BOOST_TEST((d.error().code == errc::validation));
    const auto& m = d.error().diag.message;
    BOOST_TEST(m.find("3 problems") != std::string::npos, m);
    const auto v = m.find("version:"), r = m.find(".root:"), t = m.find(".defaults.timeout:");
    BOOST_TEST((v != std::string::npos && r != std::string::npos && t != std::string::npos), m);
    BOOST_TEST((v < r && r < t), m);
    BOOST_TEST(d.error().diag.rule == "version");
}

BOOST_AUTO_TEST_CASE(json_and_yaml_decode_to_the_same_entry)
{
    const std::string yaml = R"(version: v1
sandboxes:
  zeta:
    backend: bwrap
    workspace: main
    settings: {writable_paths: [out]}
    defaults:
      timeout: 1h30m
      kill_grace: 250ms
      env: {allow: [PATH, HOME], inject: {CI: "1"}}
      net:
        mode: allow_list
        allow_hosts: [pypi.org]
        rules: [{action: deny, host: "*.internal", port: 443}]
      resources: {memory_bytes: 64MiB, cpu_millicores: 500, max_output_bytes: 1048576, max_processes: 64, max_tasks: 256}
    allowed_commands: [python3]
    command_match: base_name
    approval: {outside_workdir: true, non_default_network: true, interactive: true, sensitive_commands: ["rm*"], deadline: 2m}
  alpha: {backend: local, root: /tmp, allowed_commands: []}
  mid: {backend: local, root: /tmp, allowed_commands: null}
)";
    const std::string json = R"({"version": "v1", "sandboxes": {
  "zeta": {"backend": "bwrap", "workspace": "main", "settings": {"writable_paths": ["out"]},
    "defaults": {"timeout": "1h30m", "kill_grace": "250ms",
      "env": {"allow": ["PATH", "HOME"], "inject": {"CI": "1"}},
      "net": {"mode": "allow_list", "allow_hosts": ["pypi.org"],
              "rules": [{"action": "deny", "host": "*.internal", "port": 443}]},
      "resources": {"memory_bytes": "64MiB", "cpu_millicores": 500, "max_output_bytes": 1048576,
                    "max_processes": 64, "max_tasks": 256}},
    "allowed_commands": ["python3"], "command_match": "base_name",
    "approval": {"outside_workdir": true, "non_default_network": true, "interactive": true,
                 "sensitive_commands": ["rm*"], "deadline": "2m"}},
  "alpha": {"backend": "local", "root": "/tmp", "allowed_commands": []},
  "mid": {"backend": "local", "root": "/tmp", "allowed_commands": null}}})";
    for (const auto* text : {&yaml, &json})
    {
        auto d = cfg::parse_document(*text);
        BOOST_TEST_REQUIRE(d.has_value(), d.error().diag.message);
        BOOST_TEST_REQUIRE(d->sandboxes.size() == 3u);
        BOOST_TEST(d->sandboxes[0].name == "alpha"); // sorted
        BOOST_TEST(d->sandboxes[1].name == "mid");
        BOOST_TEST((d->find("alpha")->allowed_commands == std::vector<std::string>{}));
        BOOST_TEST(!d->find("mid")->allowed_commands.has_value());
        BOOST_TEST(d->find("nope") == nullptr);
        const auto& z = *d->find("zeta");
        BOOST_TEST(z.backend == "bwrap");
        BOOST_TEST(z.workspace == "main");
        BOOST_TEST(z.root.empty());
        BOOST_TEST(z.settings.at("writable_paths").at(0).as_string() == "out");
        const auto& o = z.defaults;
        BOOST_TEST(o.timeout.count() == 5400'000'000'000);
        BOOST_TEST(o.kill_grace.count() == 250'000'000);
        BOOST_TEST((*o.env.allow == std::vector<std::string>{"PATH", "HOME"}));
        BOOST_TEST(o.env.inject.at("CI") == "1");
        BOOST_TEST((o.net.mode == sandbox::net_mode::allow_list));
        BOOST_TEST_REQUIRE(o.net.rules.size() == 1u);
        BOOST_TEST((o.net.rules[0].action == sandbox::net_action::deny));
        BOOST_TEST(o.net.rules[0].port == 443);
        BOOST_TEST(o.limits.memory_bytes == 64 << 20);
        BOOST_TEST(o.limits.cpu_millicores == 500);
        BOOST_TEST(o.limits.max_processes == 64);
        BOOST_TEST(o.limits.max_tasks == 256);
        BOOST_TEST((z.match == sandbox::command_match::base_name));
        BOOST_TEST(z.approval.any());
        BOOST_TEST(z.approval.interactive);
        BOOST_TEST(z.approval.deadline.count() == 120'000'000'000);
    }
}

BOOST_AUTO_TEST_CASE(yes_and_on_are_strings_not_booleans)
{
    auto ps = cfg::check_document(entry("    approval: {outside_workdir: on}\n"));
    BOOST_TEST(has(ps, "sandboxes[\"b\"].approval.outside_workdir", "not a string \"on\""), listed(ps));
    auto d = cfg::parse_document(entry("    defaults: {env: {inject: {A: yes}}}\n"));
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST(d->sandboxes[0].defaults.env.inject.at("A") == "yes");
}

BOOST_AUTO_TEST_CASE(durations)
{
    using std::chrono::nanoseconds;
    const std::vector<std::pair<std::string, std::int64_t>> good = {
        {"0", 0}, {"30s", 30'000'000'000}, {"1h30m", 5'400'000'000'000}, {"1.5s", 1'500'000'000},
        {"250ms", 250'000'000}, {"10us", 10'000}, {"1ns", 1}, {"0.4ns", 1}};
    for (const auto& [text, ns] : good)
    {
        auto d = cfg::parse_duration(text);
        BOOST_TEST_REQUIRE(d.has_value(), text);
        BOOST_TEST(d->count() == ns, text);
    }
    for (const std::string bad : {"", "5", "-1s", "5q", "1.2.3s", "s", "99999999999h", "1 s"})
        BOOST_TEST(!cfg::parse_duration(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(sizes)
{
    const std::vector<std::pair<std::string, std::int64_t>> good = {
        {"0", 0}, {"64MiB", 64 << 20}, {"1G", 1 << 30}, {"512k", 512 << 10}, {"100B", 100}};
    for (const auto& [text, n] : good)
    {
        auto s = cfg::parse_size(text);
        BOOST_TEST_REQUIRE(s.has_value(), text);
        BOOST_TEST(*s == n, text);
    }
    for (const std::string bad : {"1MB", "-1", "1.5M", "x", "99999999999999999999", "9999999999T"})
        BOOST_TEST(!cfg::parse_size(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(a_call_is_written_like_the_defaults)
{
    auto c = cfg::parse_call(R"({"command": "make", "args": ["-j2"], "work_dir": "src",
        "stdin": "x", "timeout": "5s", "tty": {"rows": 30, "cols": 100},
        "env": {"inject": {"A": "1"}}})");
    BOOST_TEST_REQUIRE(c.has_value(), c.error().diag.message);
    BOOST_TEST(c->command == "make");
    BOOST_TEST(c->options.work_dir == "src");
    BOOST_TEST(*c->options.input == "x");
    BOOST_TEST(c->options.timeout.count() == 5'000'000'000);
    BOOST_TEST(c->tty->first == 30);
    auto bad = cfg::parse_call(R"({"args": [1], "timeout": 5, "shell": true})");
    BOOST_TEST_REQUIRE(!bad.has_value());
    const auto& m = bad.error().diag.message;
    for (const char* part : {"command: is required", "args[0]", "timeout", "shell: unknown key"})
        BOOST_TEST(m.find(part) != std::string::npos, m << " lacks " << part);
}

BOOST_AUTO_TEST_SUITE_END()
