// Config documents: the syntax, the schema and every rule, without I/O.
#include <sandbox/config/document.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace cfg = sandbox::config;
using sandbox::errc;

namespace {

// A document with one local entry "b" (lines 3 to 5) whose body `body` starts on line 6.
std::string entry(const std::string& body)
{
    return "version: v1\nsandboxes:\n  b:\n    backend: local\n    root: /tmp\n" + body;
}

// The same, with `defaults: <flow>` on line 6 (the flow mapping's '{' at column 15).
std::string defaults(const std::string& flow) { return entry("    defaults: " + flow + "\n"); }

// A document whose only entry "b" is `value` (on line 3, from column 6).
std::string top(const std::string& value) { return "version: v1\nsandboxes:\n  b: " + value + "\n"; }

std::string listed(const std::vector<cfg::problem>& ps)
{
    std::string s;
    for (const auto& p : ps)
        s += cfg::to_string(p) + "\n";
    return s;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The 1-based line and column of the first occurrence of `anchor` in `text` (ASCII).
std::pair<int, int> position_of(const std::string& text, const std::string& anchor)
{
    const auto at = text.find(anchor);
    BOOST_TEST_REQUIRE(at != std::string::npos, "no " << anchor << " in\n" << text);
    const auto line_start = text.rfind('\n', at);
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
    const auto column = at - (line_start == std::string::npos ? 0 : line_start + 1) + 1;
    return {line, static_cast<int>(column)};
}

// `p` is at `path`, its message contains `message`, at `line`:`column` (unless -1).
void check(const cfg::problem& p, const std::string& path, const std::string& message,
           int line = -1, int column = -1)
{
    BOOST_TEST((p.code == errc::validation));
    BOOST_TEST(p.path == path);
    BOOST_TEST(contains(p.message, message), p.message << " lacks " << message);
    if (line >= 0)
        BOOST_TEST(p.line == line, cfg::to_string(p));
    if (column >= 0)
        BOOST_TEST(p.column == column, cfg::to_string(p));
}

// `text` has exactly one problem, `check`ed.
void expect_one(const std::string& text, const std::string& path, const std::string& message,
                std::pair<int, int> at = {-1, -1})
{
    BOOST_TEST_CONTEXT("document:\n" << text)
    {
        const auto ps = cfg::check_document(text);
        BOOST_TEST(ps.size() == 1u, listed(ps));
        if (!ps.empty())
            check(ps.front(), path, message, at.first, at.second);
    }
}

// A refused duration or size: `errc::validation`, and the message says what `text` is not.
template <class T>
void expect_refused(const sandbox::outcome<T>& v, const std::string& text, const std::string& why)
{
    BOOST_TEST_REQUIRE(!v.has_value(), text);
    BOOST_TEST((v.error().code == errc::validation));
    BOOST_TEST(contains(v.error().diag.message, "\"" + text + "\" is not " + why), v.error().diag.message);
}

std::vector<std::string> names_of(const cfg::document& doc)
{
    std::vector<std::string> names;
    for (const auto& e : doc.sandboxes)
        names.push_back(e.name);
    return names;
}

struct rule
{
    std::string doc, path, message, anchor;
};

const std::string b = "sandboxes[\"b\"]", d = b + ".defaults", n = d + ".net",
                  res = d + ".resources", ap = b + ".approval";

} // namespace

BOOST_AUTO_TEST_SUITE(config_document)

BOOST_AUTO_TEST_CASE(an_empty_map_of_sandboxes_is_a_good_document)
{
    auto doc = cfg::parse_document("version: v1\nsandboxes: {}\n");
    BOOST_TEST_REQUIRE(doc.has_value());
    BOOST_TEST(doc->version == "v1");
    BOOST_TEST(doc->sandboxes.empty());
    BOOST_TEST(doc->daemon.max_body_bytes == 1 << 20);
    BOOST_TEST(doc->daemon.idle_timeout.count() == 60'000'000'000);
    BOOST_TEST(doc->daemon.max_connections_per_uid == 64);
    BOOST_TEST(doc->daemon.max_sessions_per_uid == 16);
    BOOST_TEST(doc->daemon.max_sessions == 128);
    BOOST_TEST(doc->daemon.session_output_budget == std::int64_t{512} << 20);
    BOOST_TEST(cfg::parse_document("---\nversion: \"v1\"\nsandboxes: {}\n").has_value());
}

BOOST_AUTO_TEST_CASE(every_rule_is_one_problem_at_its_path_and_position)
{
    const std::string n65(65, 'n'), v1 = "version: v1\nsandboxes:\n";
    const std::vector<rule> rules = {
        // The document.
        {"sandboxes: {}\n", "version", "is required (\"v1\")", "sandboxes"},
        {"version: v2\nsandboxes: {}\n", "version", "\"v2\" is not supported (want \"v1\")", "v2"},
        {"version: 1\nsandboxes: {}\n", "version",
         "must be a string, not an integer (quote it: \"1\")", "1\n"},
        {"version: v1\n", "sandboxes", "is required (a mapping of names", "version"},
        {v1, "sandboxes", "is required", "version"},
        {"version: v1\nsandboxes: ~\n", "sandboxes", "is required", "version"},
        {"version: v1\nsandboxes: [1]\n", "sandboxes", "must be a mapping, not a list", "[1]"},
        {"version: v1\nsandboxes: {}\nextra: 1\n", "extra",
         "unknown key (known here: version, sandboxes, daemon)", "extra"},
        // Names and the entry.
        {v1 + "  \"a b\": {backend: local, root: /tmp}\n", "sandboxes[\"a b\"]", "1 to 64 letters",
         "{"},
        {v1 + "  a/b: {backend: local, root: /tmp}\n", "sandboxes[\"a/b\"]", "1 to 64 letters",
         "{"},
        {v1 + "  \"\": {backend: local, root: /tmp}\n", "sandboxes[\"\"]", "1 to 64 letters", "{"},
        {v1 + "  " + n65 + ": {backend: local, root: /tmp}\n", "sandboxes[\"" + n65 + "\"]",
         "1 to 64", "{"},
        {top("5"), b, "must be a mapping, not an integer", "5"},
        {top("{root: /tmp}"), b + ".backend", "is required (local, bwrap, or a registered one)",
         "{"},
        {top("{backend: \"\", root: /tmp}"), b + ".backend", "must not be empty", "\"\""},
        {top("{backend: [x], root: /tmp}"), b + ".backend", "must be a string, not a list", "[x]"},
        {top("{backend: local}"), b + ".root", "is required (or workspace", "{"},
        {top("{backend: local, root: rel}"), b + ".root", "must be an absolute path", "rel}"},
        {top("{backend: local, root: \"\"}"), b + ".root", "must be an absolute path", "\"\""},
        {top("{backend: local, root: /tmp, workspace: w}"), b + ".root",
         "cannot be set with workspace (one of the two)", "/tmp"},
        {top("{backend: local, workspace: \"\"}"), b + ".workspace", "must not be empty", "\"\""},
        {entry("    color: red\n"), b + ".color",
         "unknown key (known here: backend, workspace, root, settings", "color"},
        // Defaults.
        {entry("    defaults: 5\n"), d, "must be a mapping, not an integer", "5"},
        {defaults("{timeout: 30}"), d + ".timeout", "not the bare number 30", "30"},
        {defaults("{timeout: 3x}"), d + ".timeout", "\"3x\" is not a duration: unknown unit \"x\"",
         "3x"},
        {defaults("{timeout: \"1h30\"}"), d + ".timeout", "a unit must follow 30", "\"1h30\""},
        {defaults("{kill_grace: 5}"), d + ".kill_grace", "not the bare number 5", "5}"},
        {defaults("{kill_grace: 2d}"), d + ".kill_grace", "unknown unit \"d\"", "2d"},
        {defaults("{kill_grace: true}"), d + ".kill_grace",
         "must be a duration string such as \"30s\", not a boolean", "true"},
        {defaults("{workdir: /x}"), d + ".workdir",
         "unknown key (known here: timeout, kill_grace, env, net, resources)", "workdir"},
        // Environment.
        {defaults("{env: {allow: [PATH, \"\"]}}"), d + ".env.allow[1]", "must not be empty",
         "\"\""},
        {defaults("{env: {allow: PATH}}"), d + ".env.allow",
         "must be a list of strings, not a string", "PATH"},
        {defaults("{env: {inject: {\"A=B\": xv}}}"), d + ".env.inject[\"A=B\"]",
         "must not be empty nor contain '='", "xv"},
        {defaults("{env: {inject: {\"\": xv}}}"), d + ".env.inject[\"\"]",
         "must not be empty nor contain '='", "xv"},
        {defaults("{env: {inject: {A: 1}}}"), d + ".env.inject[\"A\"]",
         "must be a string, not an integer (quote it: \"1\")", "1}"},
        {defaults("{env: {inject: {A: false}}}"), d + ".env.inject[\"A\"]",
         "not a boolean (quote it: \"false\")", "false"},
        {defaults("{env: {inject: [A]}}"), d + ".env.inject", "must be a mapping, not a list",
         "[A]"},
        {defaults("{env: {clear: true}}"), d + ".env.clear",
         "unknown key (known here: allow, inject)", "clear"},
        // Network modes.
        {defaults("{net: {allow_hosts: [x.com]}}"), n,
         "mode \"default\" cannot set allow_hosts, rules, proxy, unix_sockets, mitm, resolve or "
         "sni_check",
         "{allow_hosts"},
        {defaults("{net: {mode: inherit, rules: [{action: allow, host: x.com}]}}"), n,
         "mode \"inherit\" cannot set", "{mode"},
        {defaults("{net: {mode: deny_all, allow_hosts: [x.com]}}"), n,
         "mode \"deny_all\" cannot set", "{mode"},
        {defaults("{net: {mode: deny_all, proxy: \"http://p:1\"}}"), n,
         "mode \"deny_all\" cannot set", "{mode"},
        {defaults("{net: {mode: deny_all, unix_sockets: [/run/x.sock]}}"), n,
         "mode \"deny_all\" cannot set", "{mode"},
        {defaults("{net: {mode: deny_all, mitm: {enabled: false}}}"), n,
         "mode \"deny_all\" cannot set", "{mode"},
        {defaults("{net: {mode: allow_list}}"), n, "mode \"allow_list\" needs allow_hosts or rules",
         "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], proxy: \"http://p:1\"}}"),
         n + ".proxy", "mode \"allow_list\" cannot set proxy (use mode \"proxy\")", "\"http"},
        {defaults("{net: {mode: proxy}}"), n + ".proxy", "mode \"proxy\" needs proxy (a URL)",
         "{mode"},
        {defaults("{net: {mode: proxy, proxy: \"http://p:1\", allow_hosts: [x.com]}}"),
         n + ".allow_hosts", "mode \"proxy\" cannot set allow_hosts", "[x.com]"},
        {defaults("{net: {mode: deny_all, sni_check: off}}"), n, "mode \"deny_all\" cannot set",
         "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], sni_check: strict}}"),
         n + ".sni_check", "\"strict\" is not an sni_check (record, deny, off)", "strict"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], sni_check: [deny]}}"),
         n + ".sni_check", "must be a string, not a list", "[deny]"},
        {defaults("{net: {mode: open}}"), n + ".mode",
         "\"open\" is not a mode (default, deny_all, allow_list, proxy)", "open"},
        {defaults("{net: {mode: deny_all, dns: x}}"), n + ".dns",
         "unknown key (known here: mode, allow_hosts, rules, proxy", "dns"},
        // Network rules.
        {defaults("{net: {mode: allow_list, rules: [{action: maybe, host: x.com}]}}"),
         n + ".rules[0].action", "must be allow or deny, not \"maybe\"", "maybe"},
        {defaults("{net: {mode: allow_list, rules: [{host: x.com}]}}"), n + ".rules[0].action",
         "is required (allow or deny)", "{host"},
        {defaults("{net: {mode: allow_list, rules: [{action: allow}]}}"), n + ".rules[0].host",
         "is required", "{action"},
        {defaults("{net: {mode: allow_list, rules: [{action: allow, host: \" \"}]}}"),
         n + ".rules[0].host", "must not be blank", "\" \""},
        {defaults("{net: {mode: allow_list, rules: [{action: allow, host: x.com, port: 70000}]}}"),
         n + ".rules[0].port", "must be 0 (any) to 65535", "70000"},
        {defaults("{net: {mode: allow_list, rules: [{action: allow, host: x.com, port: -1}]}}"),
         n + ".rules[0].port", "must be 0 (any) to 65535", "-1"},
        {defaults("{net: {mode: allow_list, rules: [{action: allow, host: x.com, port: \"80\"}]}}"),
         n + ".rules[0].port", "must be an integer, not a string", "\"80\""},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], rules: {action: allow}}}"),
         n + ".rules", "must be a list of rules, not a mapping", "{action"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], rules: [x.org]}}"),
         n + ".rules[0]", "must be a mapping, not a string", "x.org"},
        {defaults("{net: {mode: allow_list, rules: [{action: allow, host: x.com, via: y}]}}"),
         n + ".rules[0].via", "unknown key (known here: action, host, port)", "via"},
        // MITM and the network policy's own checks.
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {on: true}}}"),
         n + ".mitm.on", "unknown key (known here: enabled, inspect_bodies", "on: true"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {enabled: yes}}}"),
         n + ".mitm.enabled", "must be true or false, not a string \"yes\"", "yes"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {max_body_bytes: -1}}}"),
         n + ".mitm.max_body_bytes", "must not be negative", "-1"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {origin_ca: [ca.pem]}}}"),
         n + ".mitm.origin_ca[0]", "must be an absolute path", "[ca.pem]"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {origin_ca: "
                  "[/nonexistent/ca.pem]}}}"),
         n + ".mitm.origin_ca[0]",
         "cannot read origin root /nonexistent/ca.pem: No such file or directory", "[/nonexistent"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {origin_ca_for: "
                  "[{host: x.com}]}}}"),
         n + ".mitm.origin_ca_for[0].file", "is required", "{host"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {origin_ca_for: "
                  "[{host: x.com, file: ca.pem}]}}}"),
         n + ".mitm.origin_ca_for[0].file", "must be an absolute path", "ca.pem"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {relay_non_tls: 1}}}"),
         n + ".mitm.relay_non_tls", "must be true or false", "1}}}"},
        {defaults("{net: {mode: proxy, proxy: \"ftp://p:1\"}}"), n,
         "proxy URL scheme 'ftp' is not supported; use http or socks5", "{mode"},
        {defaults("{net: {mode: proxy, proxy: \"http://\"}}"), n, "the proxy URL has no host",
         "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [\"a b\"]}}"), n,
         "invalid host pattern 'a b'", "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], unix_sockets: [rel]}}"), n,
         "unix socket path 'rel' is not absolute", "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [\"x.com:\"]}}"), n,
         "host 'x.com:': empty port after ':'", "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [\"x.com:99999\"]}}"), n,
         "the port must be 1 to 65535", "{mode"},
        {defaults("{net: {mode: deny_all, resolve: {git.test: 127.0.0.2}}}"), n,
         "cannot set allow_hosts, rules, proxy, unix_sockets, mitm, resolve or sni_check", "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], resolve: [git.test]}}"),
         n + ".resolve", "must be a mapping, not a list", "[git.test]"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], resolve: {git.test: []}}}"),
         n + ".resolve[\"git.test\"]", "an empty list pins nothing", "[]"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], resolve: {git.test: 8080}}}"),
         n + ".resolve[\"git.test\"]", "must be a string, not an integer", "8080"},
        {defaults(
             "{net: {mode: allow_list, allow_hosts: [x.com], resolve: {git.test: git.example}}}"),
         n, "'git.example' (for git.test) is not an IP address", "{mode"},
        {defaults("{net: {mode: allow_list, allow_hosts: [x.com], resolve: {\"*.git.test\": "
                  "10.0.0.1}}}"),
         n, "'*.git.test' is not a host name", "{mode"},
        // Resources.
        {defaults("{resources: {memory_bytes: -1}}"), res + ".memory_bytes", "must not be negative",
         "-1"},
        {defaults("{resources: {memory_bytes: 1MB}}"), res + ".memory_bytes",
         "decimal units are ambiguous; use KiB, MiB, GiB or TiB", "1MB"},
        {defaults("{resources: {disk_bytes: 1.5M}}"), res + ".disk_bytes", "unknown unit \".5M\"",
         "1.5M"},
        {defaults("{resources: {max_output_bytes: true}}"), res + ".max_output_bytes",
         "must be a byte count (an integer, or a string such as \"64MiB\"), not a boolean", "true"},
        {defaults("{resources: {max_processes: -3}}"), res + ".max_processes",
         "must not be negative", "-3"},
        {defaults("{resources: {max_processes: 1.5}}"), res + ".max_processes",
         "must be an integer in range, not 1.5", "1.5"},
        {defaults("{resources: {max_tasks: \"10\"}}"), res + ".max_tasks",
         "must be an integer, not a string", "\"10\""},
        {defaults("{resources: {cpu_millicores: 500}}"), res + ".cpu_millicores",
         "needs defaults.timeout (the cpu budget is a share of it)", "500"},
        {defaults("{resources: {gpu: 1}}"), res + ".gpu",
         "unknown key (known here: cpu_millicores, memory_bytes", "gpu"},
        // The command gate.
        {entry("    allowed_commands: [make, \"\"]\n"), b + ".allowed_commands[1]",
         "must not be empty", "\"\""},
        {entry("    allowed_commands: [make, true]\n"), b + ".allowed_commands[1]",
         "must be a string, not a boolean (quote it: \"true\")", "true"},
        {entry("    allowed_commands: make\n"), b + ".allowed_commands",
         "must be a list of strings, not a string", "make"},
        {entry("    command_match: base_name\n    allowed_commands: [make, /bin/rm]\n"),
         b + ".allowed_commands[1]", "command_match base_name compares base names: no '/' here",
         "/bin/rm"},
        {entry("    allowed_commands: [make, cc, make]\n"), b + ".allowed_commands[2]",
         "\"make\" is already in the list (item 0)", "make]"},
        {entry("    command_match: fuzzy\n"), b + ".command_match",
         "must be exact or base_name, not \"fuzzy\"", "fuzzy"},
        // Approval.
        {entry("    approval: {sensitive_commands: [\"rm*\", \"[abc\"]}\n"),
         ap + ".sensitive_commands[1]", "malformed command pattern \"[abc\": unclosed '['",
         "\"[abc"},
        {entry("    approval: {deadline: 0s}\n"), ap + ".deadline", "must be positive", "0s"},
        {entry("    approval: {deadline: \"0\"}\n"), ap + ".deadline", "must be positive", "\"0\""},
        {entry("    approval: {deadline: 10}\n"), ap + ".deadline", "not the bare number 10", "10"},
        {entry("    approval: {interactive: yes}\n"), ap + ".interactive",
         "must be true or false, not a string \"yes\"", "yes"},
        {entry("    approval: {ask: true}\n"), ap + ".ask",
         "unknown key (known here: outside_workdir", "ask"},
        {entry("    approval: [x]\n"), ap, "must be a mapping, not a list", "[x]"},
        // The daemon section.
        {"version: v1\ndaemon: {listen: rel.sock}\nsandboxes: {}\n", "daemon.listen",
         "must be an absolute path", "rel.sock"},
        {"version: v1\ndaemon: {audit_file: a.jsonl}\nsandboxes: {}\n", "daemon.audit_file",
         "must be an absolute path", "a.jsonl"},
        {"version: v1\ndaemon: {allow_uids: [-1]}\nsandboxes: {}\n", "daemon.allow_uids[0]",
         "is not a valid id", "-1"},
        {"version: v1\ndaemon: {allow_gids: \"5\"}\nsandboxes: {}\n", "daemon.allow_gids",
         "must be a list of numeric ids, not a string", "\"5\""},
        {"version: v1\ndaemon: {max_body_bytes: 0}\nsandboxes: {}\n", "daemon.max_body_bytes",
         "must be positive", "0}"},
        {"version: v1\ndaemon: {idle_timeout: \"0\"}\nsandboxes: {}\n", "daemon.idle_timeout",
         "must be positive", "\"0\""},
        {"version: v1\ndaemon: {port: 80}\nsandboxes: {}\n", "daemon.port",
         "unknown key (known here: listen, allow_uids", "port"},
        {"version: v1\ndaemon: {max_connections_per_uid: 0}\nsandboxes: {}\n",
         "daemon.max_connections_per_uid", "must be positive", "0}"},
        {"version: v1\ndaemon: {max_sessions_per_uid: -2}\nsandboxes: {}\n",
         "daemon.max_sessions_per_uid", "must be positive", "-2"},
        {"version: v1\ndaemon: {max_sessions: \"9\"}\nsandboxes: {}\n", "daemon.max_sessions",
         "must be an integer", "\"9\""},
        {"version: v1\ndaemon: {session_output_budget: 0}\nsandboxes: {}\n",
         "daemon.session_output_budget", "must be positive", "0}"},
        // run_as: caller or daemon, local entries only.
        {top("{backend: local, root: /tmp, run_as: root}"), b + ".run_as", "caller or daemon",
         "root}"},
        {top("{backend: bwrap, root: /tmp, run_as: daemon}"), b + ".run_as",
         "applies to the local backend only", "daemon}"},
    };
    for (const auto& r : rules)
        expect_one(r.doc, r.path, r.message, position_of(r.doc, r.anchor));
}

BOOST_AUTO_TEST_CASE(json_problems_have_the_same_paths_and_point_at_their_line)
{
    auto json = [](const std::string& defaults_json) {
        return "{\"version\": \"v1\",\n \"sandboxes\": {\"b\": {\"backend\": \"local\", \"root\": \"/tmp\",\n"
               "  \"defaults\": " + defaults_json + "}}}";
    };
    const std::vector<std::pair<std::string, rule>> rules = {
        {"{\"timeout\": 30}", {"", d + ".timeout", "not the bare number 30", ""}},
        {"{\"env\": {\"inject\": {\"A=B\": \"x\"}}}", {"", d + ".env.inject[\"A=B\"]", "'='", ""}},
        {"{\"net\": {\"mode\": \"open\"}}", {"", n + ".mode", "is not a mode", ""}},
        {"{\"net\": {\"mode\": \"allow_list\", \"rules\": [{\"action\": \"allow\", \"host\": \"x\", \"port\": 70000}]}}", {"", n + ".rules[0].port", "65535", ""}},
        {"{\"resources\": {\"memory_bytes\": \"1MB\"}}", {"", res + ".memory_bytes", "ambiguous", ""}},
        {"{\"gpu\": 1}", {"", d + ".gpu", "unknown key", ""}},
    };
    for (const auto& [body, r] : rules)
        expect_one(json(body), r.path, r.message, {3, -1});
    // JSON positions point where the value starts, as YAML's do: the opening quote of "v2".
    expect_one(R"({"version": "v2", "sandboxes": {}})", "version", "not supported", {1, 13});
}

BOOST_AUTO_TEST_CASE(a_problem_is_written_with_its_path_and_position)
{
    const auto ps = cfg::check_document(entry("    defaults:\n      timeout: 30\n"));
    BOOST_TEST_REQUIRE(ps.size() == 1u, listed(ps));
    BOOST_TEST(ps[0].line == 7);
    BOOST_TEST(ps[0].column == 16);
    BOOST_TEST(cfg::to_string(ps[0]) ==
               "sandboxes[\"b\"].defaults.timeout: must be a duration string with a unit, such "
               "as \"30s\" or \"2m\", not the bare number 30 (line 7, column 16)");
    BOOST_TEST(cfg::to_string({errc::validation, "", 0, 0, "too big"}) == "document: too big");
}

BOOST_AUTO_TEST_CASE(a_duplicate_key_is_reported_with_its_line)
{
    const std::string rules = defaults("{net: {mode: allow_list, rules: [{action: allow, action: deny, host: x}]}}");
    expect_one("version: v1\nversion: v1\nsandboxes: {}\n", "version", "duplicate key \"version\" (first at line 1)", {2, 1});
    expect_one(entry("  b:\n    backend: local\n    root: /tmp\n"), b, "duplicate key \"b\" (first at line 3)", {6, 3});
    expect_one(entry("    root: /var\n"), b + ".root", "duplicate key \"root\" (first at line 5)", {6, 5});
    expect_one(entry("    defaults:\n      env:\n        inject:\n          A: x\n          A: y\n"),
               d + ".env.inject[\"A\"]", "duplicate key \"A\" (first at line 9)", {10, 11});
    expect_one(rules, n + ".rules[0].action", "duplicate key \"action\" (first at line 6)", position_of(rules, "action: deny"));
    // JSON: the line of the second key.
    expect_one("{\"version\": \"v1\",\n\"version\": \"v1\", \"sandboxes\": {}}", "version",
               "duplicate key \"version\" (first at line 1)", {2, -1});
    expect_one(R"({"version": "v1", "sandboxes": {"b": {"backend": "local", "root": "/tmp", "backend": "bwrap"}}})",
               b + ".backend", "duplicate key \"backend\"");
}

BOOST_AUTO_TEST_CASE(a_second_document_aliases_tags_and_complex_keys_are_refused)
{
    expect_one("version: v1\nsandboxes: {}\n---\nversion: v1\n", "", "multiple YAML documents", {3, 1});
    const auto alias = cfg::check_document("version: v1\nsandboxes:\n  a: &x {backend: local, root: /tmp}\n  b: *x\n");
    BOOST_TEST_REQUIRE(!alias.empty());
    check(alias[0], b, "aliases are not supported (write the value out)", 4, 6);
    expect_one("version: !!str v1\nsandboxes: {}\n", "version", "explicit tags are not supported (tag:yaml.org,2002:str)", {1, 10});
    expect_one("version: v1\nsandboxes: !!map {}\n", "sandboxes", "explicit tags are not supported", {2, 12});
    expect_one(top("{backend: !custom local, root: /tmp}"), b + ".backend", "(!custom)", {3, 16});
    const auto complex = cfg::check_document("version: v1\nsandboxes: {}\n[a]: b\n");
    BOOST_TEST_REQUIRE(!complex.empty());
    check(complex[0], "", "a mapping key must be a plain string", 3, 1);
    // JSON: a second value, on the same line or later; the first is still checked.
    expect_one(R"({"version":"v1","sandboxes":{}} {"x":1})", "", "multiple JSON documents", {1, 33});
    expect_one("{\"version\":\"v1\",\"sandboxes\":{}}\n\n  []", "", "a second value follows the first", {3, 3});
    const auto both = cfg::check_document(R"({"version":"v2","sandboxes":{}} 1)");
    BOOST_TEST_REQUIRE(both.size() == 2u, listed(both));
    check(both[0], "version", "\"v2\" is not supported");
    check(both[1], "", "multiple JSON documents");
}

BOOST_AUTO_TEST_CASE(yes_and_on_are_strings_so_a_boolean_field_refuses_them)
{
    const auto ps = cfg::check_document(
        entry("    approval: {outside_workdir: on, interactive: yes, non_default_network: no}\n"));
    BOOST_TEST_REQUIRE(ps.size() == 3u, listed(ps));
    check(ps[0], ap + ".outside_workdir", "must be true or false, not a string \"on\"", 6, 33);
    check(ps[1], ap + ".interactive", "not a string \"yes\"");
    check(ps[2], ap + ".non_default_network", "not a string \"no\"");
    auto doc = cfg::parse_document(entry("    defaults: {env: {inject: {A: yes, B: on, C: \"true\"}}}\n"
                                         "    approval: {interactive: True, outside_workdir: FALSE}\n"));
    BOOST_TEST_REQUIRE(doc.has_value(), doc.error().diag.message);
    const auto& e = doc->sandboxes.at(0);
    BOOST_TEST((e.defaults.env.inject == std::map<std::string, std::string>{{"A", "yes"}, {"B", "on"}, {"C", "true"}}));
    BOOST_TEST(e.approval.interactive);
    BOOST_TEST(!e.approval.outside_workdir);
}

BOOST_AUTO_TEST_CASE(syntax_errors_have_a_line_and_nothing_else_is_reported)
{
    expect_one("version: v9\nsandboxes: [unclosed\n", "sandboxes[1]", "not valid YAML: while parsing a flow sequence", {3, 1});
    expect_one("version: v9\n  bad: indent\n", "", "not valid YAML: mapping values are not allowed", {2, 6});
    expect_one("version: v9\nsandboxes:\n\tb: {}\n", "sandboxes", "not valid YAML", {3, 1});
    expect_one("{\"version\": \"v9\",\n \"sandboxes\": {]}", "", "not valid JSON: syntax error", {2, 16});
    expect_one("{\"version\": \"v9\", \"sandboxes\": {}", "", "not valid JSON", {1, -1});
    expect_one("{\"version\": \"v9\", // no comments\n \"sandboxes\": {}}", "", "not valid JSON", {1, 19});
    expect_one("{\"version\": \"v9\", \"sandboxes\": {},}", "", "not valid JSON", {1, 35});
    // Deep inside a long string (found by narrowing passes, not a byte at a time): at the
    // control character, after `{"a": "` and 10,000 x.
    expect_one("{\"a\": \"" + std::string(10000, 'x') + "\x01\"}", "", "not valid JSON", {1, 10008});
    expect_one("{\"a\": [1, 2,\n" + std::string(5000, ' ') + "tru]}", "", "not valid JSON", {2, 5004});
}

BOOST_AUTO_TEST_CASE(an_empty_document_is_one_problem)
{
    for (const std::string text : {"", "  \n\n", "# only a comment\n"})
        expect_one(text, "", "the document is empty", {1, 1});
    expect_one("~\n", "", "must be a mapping, not null", {1, 1});
    expect_one("[1, 2]\n", "", "must be a mapping, not a list", {1, 1});
    const auto braces = cfg::check_document("{}");
    BOOST_TEST_REQUIRE(braces.size() == 2u, listed(braces));
    check(braces[0], "version", "is required");
    check(braces[1], "sandboxes", "is required");
    expect_one(std::string(cfg::max_document_bytes + 1, ' '), "", "the document is larger than 1048576 bytes", {0, 0});
}

BOOST_AUTO_TEST_CASE(a_number_beyond_int64_is_not_an_integer)
{
    const std::string rule = "{\"action\": \"allow\", \"host\": \"x\", \"port\": ";
    const auto ps = cfg::check_document(
        R"({"version": "v1", "sandboxes": {"b": {"backend": "local", "root": "/tmp", "defaults": {)"
        R"("net": {"mode": "allow_list", "rules": [)" + rule + "9223372036854775808}, " + rule +
        "99999999999999999999}]}, \"resources\": {\"memory_bytes\": 9223372036854775808, "
        "\"max_tasks\": -9223372036854775809, \"max_processes\": 9223372036854775807}}}}}");
    BOOST_TEST_REQUIRE(ps.size() == 4u, listed(ps));
    check(ps[0], n + ".rules[0].port", "must be an integer in range, not 9223372036854775808");
    check(ps[1], n + ".rules[1].port", "must be an integer in range, not 99999999999999999999");
    check(ps[2], res + ".memory_bytes", "must be a byte count");
    check(ps[3], res + ".max_tasks", "must be an integer in range, not -9223372036854775809");
    expect_one(defaults("{resources: {max_tasks: 9223372036854775808}}"), res + ".max_tasks",
               "must be an integer in range, not 9223372036854775808", {6, 39});
    expect_one(defaults("{resources: {max_tasks: 1e3}}"), res + ".max_tasks", "must be an integer in range, not 1e3");
}

BOOST_AUTO_TEST_CASE(every_problem_is_reported_at_once_in_document_order)
{
    const std::string text = "version: v9\nsandboxes:\n  b:\n    backend: local\n    root: rel\n"
                             "    root: /x\n    defaults: {timeout: 5}\n  c: {backend: \"\"}\n"
                             "daemon: {listen: rel}\n";
    const auto ps = cfg::check_document(text);
    BOOST_TEST_REQUIRE(ps.size() == 7u, listed(ps));
    check(ps[0], "version", "is not supported", 1, 10);
    check(ps[1], b + ".root", "must be an absolute path", 5, 11);
    check(ps[2], b + ".root", "duplicate key", 6, 5);
    check(ps[3], d + ".timeout", "bare number 5", 7, 25);
    check(ps[4], "sandboxes[\"c\"].root", "is required", 8, 6); // at the entry's '{'
    check(ps[5], "sandboxes[\"c\"].backend", "must not be empty", 8, 16);
    check(ps[6], "daemon.listen", "must be an absolute path", 9, 18); // decoded first
    const auto doc = cfg::parse_document(text);
    BOOST_TEST_REQUIRE(!doc.has_value());
    BOOST_TEST((doc.error().code == errc::validation));
    std::string message = "sandbox config: 7 problems:";
    for (const auto& p : ps)
        message += "\n" + cfg::to_string(p);
    BOOST_TEST(doc.error().diag.message == message);
    BOOST_TEST(doc.error().diag.rule == "version");
    const auto single = cfg::parse_document("version: v2\nsandboxes: {}\n");
    BOOST_TEST_REQUIRE(!single.has_value());
    BOOST_TEST(single.error().diag.message ==
               "sandbox config: version: \"v2\" is not supported (want \"v1\") (line 1, column 10)");
}

BOOST_AUTO_TEST_CASE(a_refused_net_field_is_not_reported_again_by_the_policy_check)
{
    // The rule's host is reported once, not again as an invalid host pattern of the net.
    expect_one(defaults("{net: {mode: allow_list, rules: [{action: allow}]}}"), n + ".rules[0].host", "is required");
    // An unknown key does not hide the policy's own check.
    const auto ps = cfg::check_document(defaults("{net: {mode: proxy, proxy: \"ftp://p:1\", dns: x}}"));
    BOOST_TEST_REQUIRE(ps.size() == 2u, listed(ps));
    check(ps[0], n, "scheme 'ftp'");
    check(ps[1], n + ".dns", "unknown key");
}

// Issue 33, item 2: names pinned in a document, and allow_hosts with ports, as the CLI
// takes them; a call (sandboxd's body) writes them the same way.
BOOST_AUTO_TEST_CASE(pinned_names_and_ported_allow_hosts_are_read)
{
    const auto doc = cfg::parse_document(
        defaults("{net: {mode: allow_list, allow_hosts: [\"git.test:8080\", \"127.0.0.2:8080\", "
                 "\"host.sandbox.internal:3141\"], resolve: {git.test: 127.0.0.2, "
                 "mirror.test: [10.0.0.1, \"::1\"]}}}"));
    BOOST_TEST_REQUIRE(doc.has_value(), (doc ? "" : doc.error().diag.message));
    const auto& net = doc->sandboxes.at(0).defaults.net;
    BOOST_TEST((net.allow_hosts == std::vector<std::string>{"git.test:8080", "127.0.0.2:8080",
                                                            "host.sandbox.internal:3141"}));
    using pin = std::pair<std::string, std::string>;
    BOOST_TEST((net.resolve == std::vector<pin>{{"git.test", "127.0.0.2"},
                                                {"mirror.test", "10.0.0.1"},
                                                {"mirror.test", "::1"}}));
    const auto call = cfg::parse_call(
        R"({"command": "git", "net": {"mode": "allow_list", "allow_hosts": ["git.test:80"],)"
        R"( "resolve": {"git.test": "127.0.0.2"}}})");
    BOOST_TEST_REQUIRE(call.has_value(), (call ? "" : call.error().diag.message));
    BOOST_TEST((call->options.net.resolve == std::vector<pin>{{"git.test", "127.0.0.2"}}));
}

// The server name of uninspected tunnels: the key in a document and in a call, written back
// the same way (net_policy_to_json, what sandbox-run --connect sends to sandboxd).
BOOST_AUTO_TEST_CASE(sni_check_is_read_and_written_back)
{
    const auto doc = cfg::parse_document(
        defaults("{net: {mode: allow_list, allow_hosts: [x.test], sni_check: deny}}"));
    BOOST_TEST_REQUIRE(doc.has_value(), (doc ? "" : doc.error().diag.message));
    const auto& net = doc->sandboxes.at(0).defaults.net;
    BOOST_TEST((net.sni_check == sandbox::sni_mode::deny));
    BOOST_TEST(cfg::net_policy_to_json(net).at("sni_check").as_string() == "deny");
    const auto call = cfg::parse_call(R"({"command": "curl", "net": {"mode": "allow_list", )"
                                      R"("allow_hosts": ["x.test"], "sni_check": "off"}})");
    BOOST_TEST_REQUIRE(call.has_value(), (call ? "" : call.error().diag.message));
    BOOST_TEST((call->options.net.sni_check == sandbox::sni_mode::off));
    sandbox::net_policy plain; // the default is left out (an earlier daemon takes the call)
    BOOST_TEST(!cfg::net_policy_to_json(plain).contains("sni_check"));
}

// Issue 34: TLS inspection's origin roots are files of the document's host, read with the
// document; a call (a daemon client's body) cannot name any, so it cannot make the daemon
// read its files.
BOOST_AUTO_TEST_CASE(origin_roots_are_read_from_a_document_and_refused_in_a_call)
{
    const auto file = std::filesystem::temp_directory_path() /
                      ("sbx-origin-ca-" + std::to_string(::getpid()) + ".pem");
    std::ofstream(file) << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const auto doc = cfg::parse_document(
        defaults("{net: {mode: allow_list, allow_hosts: [x.com], mitm: {enabled: true, "
                 "relay_non_tls: true, origin_ca: [\"" +
                 file.string() + "\"], origin_ca_for: [{host: \"*.corp.test\", file: \"" +
                 file.string() + "\"}]}}}"));
    std::filesystem::remove(file);
    BOOST_TEST_REQUIRE(doc.has_value(), (doc ? "" : doc.error().diag.message));
    const auto& mitm = doc->sandboxes.at(0).defaults.net.mitm;
    BOOST_TEST_REQUIRE(mitm.has_value());
    BOOST_TEST(mitm->relay_non_tls);
    BOOST_TEST(
        (mitm->origin_ca == std::vector<std::string>{
                                "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}));
    BOOST_TEST_REQUIRE(mitm->origin_ca_for.size() == 1u);
    BOOST_TEST(mitm->origin_ca_for[0].host == "*.corp.test");
    BOOST_TEST(mitm->origin_ca_for[0].pem == mitm->origin_ca[0]);
    const auto call = cfg::parse_call(
        R"({"command": "x", "net": {"mode": "allow_list", "allow_hosts": ["x.com"],)"
        R"( "mitm": {"enabled": true, "origin_ca": ["/etc/shadow"]}}})");
    BOOST_TEST_REQUIRE(!call.has_value());
    BOOST_TEST(call.error().diag.message.find(
                   "net.mitm.origin_ca: names files of the daemon's host") != std::string::npos,
               call.error().diag.message);
    const auto scoped = cfg::parse_call(
        R"({"command": "x", "net": {"mode": "allow_list", "allow_hosts": ["x.com"],)"
        R"( "mitm": {"enabled": true, "origin_ca_for": [{"host": "x.com", "file": "/etc/shadow"}]}}})");
    BOOST_TEST_REQUIRE(!scoped.has_value());
    BOOST_TEST(scoped.error().diag.message.find(
                   "net.mitm.origin_ca_for: names files of the daemon's host") != std::string::npos,
               scoped.error().diag.message);
}

// Issue 34: request rules and injected headers. A document may take a header's value from
// the daemon's environment or a file; a call only as text (what its client holds).
BOOST_AUTO_TEST_CASE(request_rules_and_injected_headers_are_read)
{
    const auto file = std::filesystem::temp_directory_path() /
                      ("sbx-header-" + std::to_string(::getpid()) + ".txt");
    std::ofstream(file) << "Bearer from-file\n";
    ::setenv("SBX_CONFIG_TEST_TOKEN", "from-env", 1);
    const auto doc = cfg::parse_document(defaults(
        "{net: {mode: allow_list, allow_hosts: [api.test], mitm: {enabled: true, "
        "allow_requests: [\"GET api.test/repos/**\"], deny_requests: [\"* api.test/admin/**\"], "
        "inject_headers: [{host: api.test, name: Authorization, value_file: \"" +
        file.string() +
        "\"}, {host: api.test, name: X-Env, value_env: SBX_CONFIG_TEST_TOKEN, replace: true}]}}}"));
    std::filesystem::remove(file);
    ::unsetenv("SBX_CONFIG_TEST_TOKEN");
    BOOST_TEST_REQUIRE(doc.has_value(), (doc ? "" : doc.error().diag.message));
    const auto& mitm = doc->sandboxes.at(0).defaults.net.mitm;
    BOOST_TEST_REQUIRE(mitm.has_value());
    BOOST_TEST_REQUIRE(mitm->requests.size() == 2u);
    BOOST_TEST((mitm->requests[1].action == sandbox::net_action::deny));
    BOOST_TEST(mitm->requests[1].pattern == "* api.test/admin/**");
    BOOST_TEST_REQUIRE(mitm->inject_headers.size() == 2u);
    BOOST_TEST(mitm->inject_headers[0].value == "Bearer from-file");
    BOOST_TEST(!mitm->inject_headers[0].replace);
    BOOST_TEST(mitm->inject_headers[1].value == "from-env");
    BOOST_TEST(mitm->inject_headers[1].replace);
    const std::string net = R"({"command": "x", "net": {"mode": "allow_list", "allow_hosts": )"
                            R"(["api.test"], "mitm": {"enabled": true, "inject_headers": )";
    auto call =
        cfg::parse_call(net + R"([{"host": "api.test", "name": "X-T", "value": "t0k"}]}}})");
    BOOST_TEST_REQUIRE(call.has_value(), (call ? "" : call.error().diag.message));
    BOOST_TEST(call->options.net.mitm->inject_headers.at(0).value == "t0k");
    for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
             {R"([{"host": "api.test", "name": "X-T", "value_env": "HOME"}]}}})",
              "value_env: reads the daemon's host"},
             {R"([{"host": "api.test", "name": "X-T", "value_file": "/etc/shadow"}]}}})",
              "value_file: reads the daemon's host"},
             {R"([{"host": "api.test", "name": "X-T"}]}}})",
              "needs exactly one of value, value_env, value_file"},
             {R"([{"host": "api.test", "name": "X-T", "value": "a\r\nb: c"}]}}})",
              "a control byte"}})
    {
        auto refused = cfg::parse_call(net + body);
        BOOST_TEST_REQUIRE(!refused.has_value(), body);
        BOOST_TEST(refused.error().diag.message.find(message) != std::string::npos,
                   refused.error().diag.message);
    }
}

BOOST_AUTO_TEST_CASE(run_as_and_the_daemon_bounds_are_read)
{
    const auto doc = cfg::parse_document(
        "version: v1\n"
        "daemon: {max_connections_per_uid: 8, max_sessions_per_uid: 2, max_sessions: 5, "
        "session_output_budget: 3MiB, instance_idle: 90s, max_instances_per_uid: 3, "
        "max_instances: 7}\n"
        "sandboxes:\n"
        "  shared: {backend: local, root: /tmp, run_as: daemon}\n"
        "  mine: {backend: local, root: /tmp, run_as: caller}\n"
        "  plain: {backend: local, root: /tmp}\n");
    BOOST_TEST_REQUIRE(doc.has_value(), doc.error().diag.message);
    BOOST_TEST(doc->daemon.max_connections_per_uid == 8);
    BOOST_TEST(doc->daemon.max_sessions_per_uid == 2);
    BOOST_TEST(doc->daemon.max_sessions == 5);
    BOOST_TEST(doc->daemon.session_output_budget == 3 << 20);
    BOOST_TEST(doc->daemon.instance_idle.count() == 90'000'000'000);
    BOOST_TEST(doc->daemon.max_instances_per_uid == 3);
    BOOST_TEST(doc->daemon.max_instances == 7);
    const auto zero = cfg::parse_document("version: v1\ndaemon: {instance_idle: 0s, "
                                          "max_instances: 0}\nsandboxes: {}\n");
    BOOST_TEST_REQUIRE(!zero.has_value());
    for (const char* part :
         {"daemon.instance_idle: must be positive", "daemon.max_instances: must be positive"})
        BOOST_TEST(contains(zero.error().diag.message, part), zero.error().diag.message);
    BOOST_TEST((doc->find("shared")->run_as == cfg::run_as_user::daemon));
    BOOST_TEST((doc->find("mine")->run_as == cfg::run_as_user::caller));
    BOOST_TEST((doc->find("plain")->run_as == cfg::run_as_user::caller)); // the safe default
    BOOST_TEST(std::string(cfg::to_string(cfg::run_as_user::daemon)) == "daemon");
}

BOOST_AUTO_TEST_CASE(json_and_yaml_decode_to_the_same_values)
{
    const std::string yaml = R"(version: v1
daemon: {listen: /run/s.sock, allow_uids: [1000, 1001], allow_gids: [50], audit_file: /var/log/a, max_body_bytes: 64KiB, idle_timeout: 90s}
sandboxes:
  zeta:
    backend: bwrap
    workspace: main
    settings: {writable_paths: [out], share_net: false, depth: 2}
    defaults:
      timeout: 1h30m
      kill_grace: 250ms
      env: {allow: [PATH, HOME], inject: {CI: "1", MODE: fast}}
      net:
        mode: allow_list
        allow_hosts: [pypi.org]
        rules:
          - {action: deny, host: "*.internal", port: 443}
          - {action: allow, host: example.com}
        unix_sockets: [/run/docker.sock]
        mitm: {enabled: true, inspect_bodies: true, max_body_bytes: 1MiB, hosts: [pypi.org], exclude_hosts: [bank.example]}
      resources: {memory_bytes: 64MiB, disk_bytes: 1G, cpu_millicores: 500, max_output_bytes: 1048576, max_processes: 64, max_tasks: 256}
    allowed_commands: [python3, make]
    command_match: base_name
    approval: {outside_workdir: true, non_default_network: true, interactive: false, sensitive_commands: ["rm*", curl], deadline: 2m}
  proxied:
    backend: local
    root: /srv/p
    defaults:
      net: {mode: proxy, proxy: "socks5://127.0.0.1:1080", rules: [{action: deny, host: evil.example}]}
  alpha: {backend: local, root: /tmp, allowed_commands: []}
  mid: {backend: local, root: /tmp, allowed_commands: null}
)";
    const std::string json = R"({"version": "v1",
 "daemon": {"listen": "/run/s.sock", "allow_uids": [1000, 1001], "allow_gids": [50],
            "audit_file": "/var/log/a", "max_body_bytes": "64KiB", "idle_timeout": "90s"},
 "sandboxes": {
  "zeta": {"backend": "bwrap", "workspace": "main",
    "settings": {"writable_paths": ["out"], "share_net": false, "depth": 2},
    "defaults": {"timeout": "1h30m", "kill_grace": "250ms",
      "env": {"allow": ["PATH", "HOME"], "inject": {"CI": "1", "MODE": "fast"}},
      "net": {"mode": "allow_list", "allow_hosts": ["pypi.org"],
              "rules": [{"action": "deny", "host": "*.internal", "port": 443},
                        {"action": "allow", "host": "example.com"}],
              "unix_sockets": ["/run/docker.sock"],
              "mitm": {"enabled": true, "inspect_bodies": true, "max_body_bytes": "1MiB",
                       "hosts": ["pypi.org"], "exclude_hosts": ["bank.example"]}},
      "resources": {"memory_bytes": "64MiB", "disk_bytes": "1G", "cpu_millicores": 500,
                    "max_output_bytes": 1048576, "max_processes": 64, "max_tasks": 256}},
    "allowed_commands": ["python3", "make"], "command_match": "base_name",
    "approval": {"outside_workdir": true, "non_default_network": true, "interactive": false,
                 "sensitive_commands": ["rm*", "curl"], "deadline": "2m"}},
  "proxied": {"backend": "local", "root": "/srv/p", "defaults": {"net": {"mode": "proxy",
    "proxy": "socks5://127.0.0.1:1080", "rules": [{"action": "deny", "host": "evil.example"}]}}},
  "alpha": {"backend": "local", "root": "/tmp", "allowed_commands": []},
  "mid": {"backend": "local", "root": "/tmp", "allowed_commands": null}}})";
    using strings = std::vector<std::string>;
    const auto settings = boost::json::parse(R"({"writable_paths": ["out"], "share_net": false, "depth": 2})");
    for (const auto* text : {&yaml, &json})
        BOOST_TEST_CONTEXT((text == &yaml ? "yaml" : "json"))
        {
            auto doc = cfg::parse_document(*text);
            BOOST_TEST_REQUIRE(doc.has_value(), doc.error().diag.message);
            const auto& dm = doc->daemon;
            BOOST_TEST((dm.allow_uids == std::vector<std::uint32_t>{1000, 1001}));
            BOOST_TEST((dm.allow_gids == std::vector<std::uint32_t>{50}));
            BOOST_TEST((dm.listen == "/run/s.sock" && dm.audit_file == "/var/log/a"));
            BOOST_TEST(dm.max_body_bytes == 65536);
            BOOST_TEST(dm.idle_timeout.count() == 90'000'000'000);
            BOOST_TEST((names_of(*doc) == strings{"alpha", "mid", "proxied", "zeta"}));
            BOOST_TEST((doc->find("alpha")->allowed_commands == strings{})); // nothing may run
            BOOST_TEST(!doc->find("mid")->allowed_commands.has_value());     // null: no gate
            BOOST_TEST(!doc->find("proxied")->allowed_commands.has_value()); // absent: no gate
            const auto& z = *doc->find("zeta");
            BOOST_TEST((z.backend == "bwrap" && z.workspace == "main" && z.root.empty()));
            BOOST_TEST(z.settings == settings);
            const auto& o = z.defaults;
            BOOST_TEST(o.timeout.count() == 5400'000'000'000);
            BOOST_TEST(o.kill_grace.count() == 250'000'000);
            BOOST_TEST((o.env.allow == strings{"PATH", "HOME"}));
            BOOST_TEST((o.env.inject == std::map<std::string, std::string>{{"CI", "1"}, {"MODE", "fast"}}));
            BOOST_TEST((o.net.mode == sandbox::net_mode::allow_list));
            BOOST_TEST((o.net.allow_hosts == strings{"pypi.org"}));
            BOOST_TEST_REQUIRE(o.net.rules.size() == 2u);
            BOOST_TEST((o.net.rules[0].action == sandbox::net_action::deny));
            BOOST_TEST(o.net.rules[0].host == "*.internal");
            BOOST_TEST(o.net.rules[0].port == 443);
            BOOST_TEST((o.net.rules[1].action == sandbox::net_action::allow));
            BOOST_TEST(o.net.rules[1].host == "example.com");
            BOOST_TEST(o.net.rules[1].port == 0);
            BOOST_TEST((o.net.unix_sockets == strings{"/run/docker.sock"}));
            BOOST_TEST_REQUIRE(o.net.mitm.has_value());
            BOOST_TEST((o.net.mitm->enabled && o.net.mitm->inspect_bodies));
            BOOST_TEST(o.net.mitm->max_body_bytes == 1 << 20);
            BOOST_TEST((o.net.mitm->hosts == strings{"pypi.org"}));
            BOOST_TEST((o.net.mitm->exclude_hosts == strings{"bank.example"}));
            BOOST_TEST(o.limits.memory_bytes == 67108864);
            BOOST_TEST(o.limits.disk_bytes == 1 << 30);
            BOOST_TEST(o.limits.cpu_millicores == 500);
            BOOST_TEST(o.limits.max_output_bytes == 1048576);
            BOOST_TEST(o.limits.max_processes == 64);
            BOOST_TEST(o.limits.max_tasks == 256);
            BOOST_TEST((z.allowed_commands == strings{"python3", "make"}));
            BOOST_TEST((z.match == sandbox::command_match::base_name));
            BOOST_TEST((z.approval.outside_workdir && z.approval.non_default_network));
            BOOST_TEST(!z.approval.interactive);
            BOOST_TEST((z.approval.sensitive_commands == strings{"rm*", "curl"}));
            BOOST_TEST(z.approval.deadline.count() == 120'000'000'000);
            const auto& p = *doc->find("proxied");
            BOOST_TEST(p.root == "/srv/p");
            BOOST_TEST((p.defaults.net.mode == sandbox::net_mode::proxy));
            BOOST_TEST(p.defaults.net.proxy == "socks5://127.0.0.1:1080");
            BOOST_TEST_REQUIRE(p.defaults.net.rules.size() == 1u);
            BOOST_TEST(p.defaults.net.rules[0].host == "evil.example");
            // What the document leaves out keeps its default.
            BOOST_TEST((p.defaults.timeout.count() == 0 && !p.defaults.env.allow && !p.defaults.net.mitm));
            BOOST_TEST((p.match == sandbox::command_match::exact));
            BOOST_TEST(!p.approval.any());
            BOOST_TEST(p.approval.deadline.count() == 300'000'000'000);
            BOOST_TEST(p.settings.is_null());
            if (text == &yaml) // where the entry's key is
                BOOST_TEST((z.line == 4 && z.column == 3 && doc->find("alpha")->line == 29));
        }
}

BOOST_AUTO_TEST_CASE(entries_are_sorted_by_name_and_found_by_exact_name)
{
    const std::string n64(64, 'n');
    auto doc = cfg::parse_document("version: v1\nsandboxes:\n  zed: {backend: local, root: /z}\n"
                                   "  alpha: {backend: local, root: /a}\n  Alpha: {backend: local, root: /A}\n"
                                   "  b.1: {backend: local, root: /b1}\n  b-2: {backend: local, root: /b2}\n"
                                   "  _x: {backend: local, root: /x}\n  " + n64 + ": {backend: local, root: /n}\n");
    BOOST_TEST_REQUIRE(doc.has_value(), doc.error().diag.message);
    BOOST_TEST((names_of(*doc) == std::vector<std::string>{"Alpha", "_x", "alpha", "b-2", "b.1", n64, "zed"}));
    BOOST_TEST_REQUIRE(doc->find("alpha") != nullptr);
    BOOST_TEST(doc->find("alpha")->root == "/a");
    BOOST_TEST(doc->find("Alpha")->root == "/A");
    BOOST_TEST(doc->find("zed")->line == 3);
    BOOST_TEST(doc->find("ALPHA") == nullptr);
    BOOST_TEST(doc->find("alph") == nullptr);
    BOOST_TEST(doc->find("") == nullptr);
    BOOST_TEST(cfg::document{}.find("alpha") == nullptr);
}

BOOST_AUTO_TEST_CASE(durations_are_numbers_with_units)
{
    const std::vector<std::pair<std::string, std::int64_t>> good = {
        {"0", 0}, {"0s", 0}, {"30s", 30'000'000'000}, {"1h30m", 5'400'000'000'000},
        {"1.5s", 1'500'000'000}, {"250ms", 250'000'000}, {"10us", 10'000}, {"3\xC2\xB5s", 3'000},
        {"1ns", 1}, {"0.4ns", 1}, {"1h2m3s4ms5us6ns", 3'723'004'005'006}, {"2h", 7'200'000'000'000},
        {"9223372036854775807ns", 9223372036854775807}, {"0." + std::string(400, '0') + "1s", 1}};
    auto ns_of = [](const std::string& t) { auto v = cfg::parse_duration(t); return v ? v->count() : -1; };
    for (const auto& [text, ns] : good)
        BOOST_TEST(ns_of(text) == ns, text);
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"", "it is empty"}, {"5", "a unit must follow 5"}, {"-1s", "a number must come before each unit"},
        {"5q", "unknown unit \"q\""}, {"1.2.3s", "a number must come before each unit"},
        {"s", "a number must come before each unit"}, {"30S", "unknown unit \"S\""},
        {"1 s", "unknown unit \" s\""}, {"1e3s", "unknown unit \"e\""}, {"99999999999h", "it is too long"},
        {"9223372036854775808ns", "it is too long"},
        {"1m1m", "each unit once, from the largest down"},
        {"30m1h", "each unit once, from the largest down"}, {std::string(5000, '9') + "s", "it is too long"}};
    for (const auto& [text, why] : bad) // a huge number is refused, not thrown
        expect_refused(cfg::parse_duration(text), text, "a duration: " + why);
    // And in a document: a problem, not an exception.
    const auto ps = cfg::check_document(defaults("{timeout: " + std::string(5000, '9') + "s}"));
    BOOST_TEST_REQUIRE(ps.size() == 1u);
    BOOST_TEST(contains(ps[0].message, "it is too long"));
}

BOOST_AUTO_TEST_CASE(sizes_are_integers_with_binary_units)
{
    const std::vector<std::pair<std::string, std::int64_t>> good = {
        {"0", 0}, {"64MiB", 67108864}, {"1G", 1 << 30}, {"512k", 512 << 10}, {"512K", 512 << 10},
        {"1kib", 1024}, {"100B", 100}, {"2T", std::int64_t(2) << 40}, {"1TiB", std::int64_t(1) << 40},
        {"9223372036854775807", 9223372036854775807}, {"8388607T", std::int64_t(8388607) << 40}};
    auto bytes_of = [](const std::string& t) { auto v = cfg::parse_size(t); return v ? *v : -1; };
    for (const auto& [text, bytes] : good)
        BOOST_TEST(bytes_of(text) == bytes, text);
    const std::vector<std::pair<std::string, std::string>> bad = {
        {"", "it must start with digits"}, {"1MB", "decimal units are ambiguous"},
        {"1kb", "decimal units are ambiguous"}, {"-1", "it must start with digits"},
        {"1.5M", "unknown unit \".5M\""}, {"x", "it must start with digits"}, {"1 M", "unknown unit \" M\""},
        {"9223372036854775808", "it is too large"}, {"99999999999999999999", "it is too large"},
        {"8388608T", "it is too large"}};
    for (const auto& [text, why] : bad)
        expect_refused(cfg::parse_size(text), text, "a byte count: " + why);
}

namespace {

// `levels` lists, each the only item of the one around it.
std::string nested(std::size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

// The path of the innermost of `levels` nested lists at `path`.
std::string nested_path(std::string path, std::size_t levels)
{
    for (std::size_t i = 1; i < levels; ++i)
        path += "[0]";
    return path;
}

// A JSON entry "b" (also YAML) whose settings are `settings`, all on line 1.
const std::string json_settings =
    R"({"version": "v1", "sandboxes": {"b": {"backend": "local", "root": "/tmp", "settings": )";
std::string json_entry(const std::string& settings) { return json_settings + settings + "}}}"; }

// A flow mapping of `keys` keys "k00000"... (~13 bytes each), each mapped to "v".
std::string wide_mapping(int keys)
{
    std::string s = "{";
    char member[32];
    for (int i = 0; i < keys; ++i)
    {
        std::snprintf(member, sizeof member, "%s\"k%05d\":\"v\"", i ? "," : "", i);
        s += member;
    }
    return s + "}";
}

const std::string limit_named =
    "nest deeper than the limit of " + std::to_string(cfg::max_nesting_depth) + " levels";

} // namespace

BOOST_AUTO_TEST_CASE(a_document_may_nest_to_the_limit_and_not_one_level_deeper)
{
    // Settings are the 4th level: the root, sandboxes and "b" hold them.
    const std::size_t inside = cfg::max_nesting_depth - 3, column = 14 + inside + 1;
    BOOST_TEST(cfg::check_document(entry("    settings: " + nested(inside) + "\n")).empty());
    expect_one(entry("    settings: " + nested(inside + 1) + "\n"), nested_path(b + ".settings", inside + 1),
               limit_named, {6, static_cast<int>(column)});
    BOOST_TEST(cfg::check_document(json_entry(nested(inside))).empty());
    expect_one(json_entry(nested(inside + 1)), nested_path(b + ".settings", inside + 1), limit_named,
               {1, static_cast<int>(json_settings.size() + inside + 1)});
    // Mappings count as lists do: sandboxes' mapping is the 2nd level.
    std::string mappings = "version: v1\nsandboxes: ", past = "sandboxes[\"a\"]";
    for (int i = 0; i < 100; ++i)
        mappings += "{a: ";
    mappings += "1" + std::string(100, '}') + "\n";
    for (std::size_t level = 4; level <= cfg::max_nesting_depth + 1; ++level)
        past += ".a";
    const auto deep = cfg::parse_document(mappings);
    BOOST_TEST_REQUIRE(!deep.has_value());
    BOOST_TEST((deep.error().code == errc::validation));
    BOOST_TEST(contains(deep.error().diag.message, limit_named), deep.error().diag.message);
    BOOST_TEST(deep.error().diag.rule == past);
}

BOOST_AUTO_TEST_CASE(a_call_nested_too_deep_is_refused_with_the_limit)
{
    const auto at_limit = cfg::parse_call(R"({"command": "x", "args": )" + nested(cfg::max_nesting_depth - 1) + "}");
    BOOST_TEST_REQUIRE(!at_limit.has_value());
    BOOST_TEST(!contains(at_limit.error().diag.message, limit_named), at_limit.error().diag.message);
    BOOST_TEST(contains(at_limit.error().diag.message, "args[0]: must be a string"), at_limit.error().diag.message);
    const auto deeper = cfg::parse_call(R"({"command": "x", "args": )" + nested(cfg::max_nesting_depth) + "}");
    BOOST_TEST_REQUIRE(!deeper.has_value());
    BOOST_TEST((deeper.error().code == errc::validation));
    BOOST_TEST(contains(deeper.error().diag.message, limit_named), deeper.error().diag.message);
    BOOST_TEST(deeper.error().diag.rule == nested_path("args", cfg::max_nesting_depth));
}

BOOST_AUTO_TEST_CASE(thirty_thousand_levels_are_one_problem_at_the_limit)
{
    // 60 KB; read to the end, it took gigabytes (a path per open level). Not timed here:
    // bench/parse_bench measures it.
    const std::string deep = nested(30000);
    const std::size_t past = cfg::max_nesting_depth + 1;
    expect_one(deep, nested_path("", past), limit_named, {1, static_cast<int>(past)}); // YAML
    expect_one("{\"a\": " + deep + "}", nested_path("a", past - 1), limit_named, {1, static_cast<int>(5 + past)});
    const auto call = cfg::parse_call("{\"args\": " + deep + "}");
    BOOST_TEST_REQUIRE(!call.has_value());
    BOOST_TEST(contains(call.error().diag.message, limit_named), call.error().diag.message);
}

BOOST_AUTO_TEST_CASE(a_wide_mapping_is_read_and_its_one_duplicate_found)
{
    // 80,000 keys in one mapping (~1 MiB): each key once, then one again on the next line.
    const std::string wide = wide_mapping(80000), dup = ",\n\"k00000\": \"w\"}";
    const std::string json = json_entry(R"({"env": {"inject": )" + wide + "}}");
    BOOST_TEST_REQUIRE(json.size() <= cfg::max_document_bytes);
    const auto doc = cfg::parse_document(json);
    BOOST_TEST_REQUIRE(doc.has_value(), doc.error().diag.message);
    const auto& settings = doc->sandboxes.at(0).settings.as_object();
    BOOST_TEST(settings.at("env").as_object().at("inject").as_object().size() == 80000u);
    const std::string with_dup = json_entry(R"({"env": {"inject": )" + wide.substr(0, wide.size() - 1) + dup + "}}");
    // JSON and YAML alike: at the key's first byte.
    expect_one(with_dup, b + ".settings.env.inject.k00000", "duplicate key \"k00000\" (first at line 1)", {2, 1});
    expect_one("--- " + with_dup, b + ".settings.env.inject.k00000",
               "duplicate key \"k00000\" (first at line 1)", {2, 1});
    const auto call = cfg::parse_call(R"({"command": "env", "env": {"inject": )" + wide + "}}");
    BOOST_TEST_REQUIRE(call.has_value(), call.error().diag.message);
    BOOST_TEST(call->options.env.inject.size() == 80000u);
}

BOOST_AUTO_TEST_CASE(json_values_are_placed_where_their_token_starts)
{
    // Strings with escapes and multi-byte characters, numbers, literals and containers, each
    // refused by the schema so that its position shows.
    const std::string text = "{\"version\": \"v1\",\n \"sandboxes\": {\"b\": {\"backend\": \"local\", "
                             "\"root\": \"/tmp\",\n  \"defaults\": {\"env\": {\"inject\": {\"\\\"\u00e9\": 1}},"
                             "\n   \"timeout\": true,   \"network\": [], \"cwd\": null}}}}";
    const auto doc = cfg::parse_document(text);
    BOOST_TEST_REQUIRE(!doc.has_value());
    const auto& m = doc.error().diag.message;
    // On line 3 the key `"\"é"` is 5 columns wide (é is one), so `1` is at column 42; a
    // problem about a key is at the key's opening quote.
    for (const char* part : {"(line 3, column 42)", "(line 4, column 15)", "network: unknown key",
                             "(line 4, column 23)", "cwd: unknown key", "(line 4, column 38)"})
        BOOST_TEST(contains(m, part), m << " lacks " << part);
}

BOOST_AUTO_TEST_CASE(problems_past_a_hundred_are_counted_not_listed)
{
    // 80,000 unknown keys (~1 MiB): the first hundred listed, the rest counted in one line.
    std::string body = R"({"command": "true")";
    for (int i = 0; i < 80000; ++i)
        body += ", \"x" + std::to_string(i) + "\": 1";
    body += "}";
    BOOST_TEST_REQUIRE(body.size() <= cfg::max_document_bytes);
    const auto call = cfg::parse_call(body);
    BOOST_TEST_REQUIRE(!call.has_value());
    const auto& m = call.error().diag.message;
    BOOST_TEST(contains(m, "more than 100 problems:"), m.substr(0, 200));
    BOOST_TEST(contains(m, "x99: unknown key"));
    BOOST_TEST(!contains(m, "x100: unknown key"));
    BOOST_TEST(contains(m, "... and 79900 more problems (only the first 100 are listed)"));
    BOOST_TEST(m.size() < 100 * 200u);
    // Duplicates alike, in a document.
    std::string dups = R"({"version": "v1", "sandboxes": {"b": {"backend": "local", "root": "/tmp", "defaults": {"env": {"inject": {"K": "1")";
    for (int i = 0; i < 500; ++i)
        dups += R"(, "K": "1")";
    dups += "}}}}}}";
    const auto doc = cfg::parse_document(dups);
    BOOST_TEST_REQUIRE(!doc.has_value());
    BOOST_TEST(contains(doc.error().diag.message, "... and 400 more problems"), doc.error().diag.message.substr(0, 300));
}

BOOST_AUTO_TEST_CASE(a_call_is_written_like_the_defaults)
{
    auto c = cfg::parse_call(R"({"command": "make", "args": ["-j2"], "work_dir": "src",
        "stdin": "x", "timeout": "5s", "tty": {"rows": 30, "cols": 100},
        "env": {"inject": {"A": "1"}}})");
    BOOST_TEST_REQUIRE(c.has_value(), c.error().diag.message);
    BOOST_TEST(c->command == "make");
    BOOST_TEST((c->args == std::vector<std::string>{"-j2"}));
    BOOST_TEST(c->options.work_dir == "src");
    BOOST_TEST(*c->options.input == "x");
    BOOST_TEST(c->options.timeout.count() == 5'000'000'000);
    BOOST_TEST(c->tty->first == 30);
    BOOST_TEST(c->tty->second == 100);
    auto bad = cfg::parse_call(R"({"args": [1], "timeout": 5, "shell": true})");
    BOOST_TEST_REQUIRE(!bad.has_value());
    BOOST_TEST((bad.error().code == errc::validation));
    const auto& m = bad.error().diag.message;
    for (const char* part : {"command: is required", "args[0]", "timeout", "shell: unknown key"})
        BOOST_TEST(m.find(part) != std::string::npos, m << " lacks " << part);
}

BOOST_AUTO_TEST_CASE(an_instance_is_opened_with_the_options_of_a_call_and_nothing_else)
{
    auto o = cfg::parse_instance_call(R"({"work_dir": "src", "timeout": "10m",
        "env": {"inject": {"A": "1"}}, "resources": {"max_processes": 64}})");
    BOOST_TEST_REQUIRE(o.has_value(), o.error().diag.message);
    BOOST_TEST(o->work_dir == "src");
    BOOST_TEST(o->timeout.count() == 600'000'000'000);
    BOOST_TEST(o->limits.max_processes == 64);
    auto empty = cfg::parse_instance_call("");
    BOOST_TEST_REQUIRE(empty.has_value());
    BOOST_TEST(empty->work_dir.empty());
    BOOST_TEST(empty->timeout.count() == 0);
    auto bad = cfg::parse_instance_call(R"({"command": "ls", "stdin": "x", "tty": true})");
    BOOST_TEST_REQUIRE(!bad.has_value());
    BOOST_TEST((bad.error().code == errc::validation));
    for (const char* part : {"command: unknown key", "stdin: unknown key", "tty: unknown key"})
        BOOST_TEST(contains(bad.error().diag.message, part), bad.error().diag.message);
    BOOST_TEST(!cfg::parse_instance_call("[1]").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
