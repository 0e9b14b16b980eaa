// test/unit/cli_test.cpp: sandbox-run's pure logic: durations, sizes, the command line and the
// default policy, exit statuses, JSON output and UTF-8 sanitizing.
#include "cli.hpp"
#include "cli_internal.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <optional>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace sbx_cli = sandbox::cli;
using sandbox::errc;
using sandbox::exec_result;
using sandbox::exec_status;
using namespace std::chrono_literals;

// Parses `sandbox-run ARGS...` (argv[0] is added here).
sandbox::outcome<sbx_cli::run_config> parse(std::initializer_list<std::string> args)
{
    std::vector<std::string> storage{"sandbox-run"};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<const char*> argv;
    for (const auto& s : storage)
        argv.push_back(s.c_str());
    argv.push_back(nullptr);
    return sbx_cli::parse_command_line(static_cast<int>(storage.size()), argv.data());
}

// The parse must fail with `code`; its message must mention `needle`.
void check_fails(std::initializer_list<std::string> args, errc code, const std::string& needle)
{
    auto r = parse(args);
    BOOST_REQUIRE(!r);
    BOOST_TEST(r.error().code == code);
    BOOST_TEST(r.error().diag.message.find(needle) != std::string::npos,
               "message \"" << r.error().diag.message << "\" lacks \"" << needle << "\"");
}

// A file with `content`, removed on destruction.
class temp_file
{
public:
    explicit temp_file(const std::string& content)
    {
        char name[] = "/tmp/sbx-cli-test-XXXXXX";
        int fd = ::mkstemp(name);
        BOOST_REQUIRE(fd >= 0);
        ::close(fd);
        path_ = name;
        std::ofstream(path_, std::ios::binary) << content;
    }
    ~temp_file() { std::remove(path_.c_str()); }
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

exec_result result_with(exec_status s, int exit_code = -1, int signal = 0)
{
    exec_result r;
    r.status = s;
    r.exit_code = exit_code;
    r.signal = signal;
    return r;
}

boost::system::error_code code(errc e) { return make_error_code(e); }

const std::string fffd = "\xEF\xBF\xBD";

} // namespace

BOOST_AUTO_TEST_SUITE(cli)

// ---- parse_duration ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(duration_units)
{
    struct row
    {
        const char* text;
        std::chrono::nanoseconds want;
    };
    for (auto r : {row{"500ms", 500ms}, row{"2s", 2s}, row{"1m", 1min}, row{"1h", 1h},
                   row{"250us", 250us}, row{"7ns", 7ns}, row{"3", 3s}, row{"0", 0ns},
                   row{"0s", 0ns}, row{"1.5s", 1500ms}, row{"0.5", 500ms},
                   row{"1.25ms", 1250us}, row{"2.5m", 150s}, row{"1.5h", 90min},
                   row{"0.000000001s", 1ns}, row{"0.0015us", 2ns},
                   row{"007s", 7s}, row{"9223372036854775807ns", std::chrono::nanoseconds::max()}})
    {
        auto v = sbx_cli::parse_duration(r.text);
        BOOST_TEST_CONTEXT(r.text)
        {
            BOOST_REQUIRE(v.has_value());
            BOOST_TEST(v->count() == r.want.count());
        }
    }
}

BOOST_AUTO_TEST_CASE(duration_fractions_round_up_never_to_zero)
{
    // A positive duration must not become 0, which means "disabled".
    struct row
    {
        const char* text;
        std::chrono::nanoseconds want;
    };
    for (auto r : {row{"0.4ns", 1ns}, row{"0.0000000009", 1ns}, row{"0.0000000001s", 1ns},
                   row{"0.000000000000000001h", 1ns}, row{"1.0000000001s", 1'000'000'001ns},
                   row{"1.5ns", 2ns}, row{"0.0ns", 0ns}, row{"0.000", 0ns}})
    {
        auto v = sbx_cli::parse_duration(r.text);
        BOOST_TEST_CONTEXT(r.text)
        {
            BOOST_REQUIRE(v.has_value());
            BOOST_TEST(v->count() == r.want.count());
        }
    }
    // Rounding up past the largest duration is "too large", not a wrap.
    auto v = sbx_cli::parse_duration("9223372036.8547758071s");
    BOOST_REQUIRE(!v.has_value());
    BOOST_TEST(v.error().diag.message.find("too large") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(duration_rejects_bad_text)
{
    for (const char* text : {"", "-1s", "-0", "+1s", " 1s", "1s ", "1 s", "abc", "s", "1x",
                             "1sec", "1S", "1.s", ".5s", "1..5s", "1.5.s", "1e3", "0x10",
                             "1ms5", "10d"})
    {
        auto v = sbx_cli::parse_duration(text);
        BOOST_TEST_CONTEXT("\"" << text << "\"")
        {
            BOOST_REQUIRE(!v.has_value());
            BOOST_TEST(v.error().code == errc::validation);
            BOOST_TEST(!v.error().diag.message.empty());
        }
    }
}

BOOST_AUTO_TEST_CASE(duration_rejects_overflow)
{
    for (const char* text : {"9223372036854775808ns", "9223372037s", "2562048h",
                             "99999999999999999999999", "9223372036.9s", "153722867.3m"})
    {
        auto v = sbx_cli::parse_duration(text);
        BOOST_TEST_CONTEXT(text)
        {
            BOOST_REQUIRE(!v.has_value());
            BOOST_TEST(v.error().code == errc::validation);
            BOOST_TEST(v.error().diag.message.find("too large") != std::string::npos);
        }
    }
    // Just below the limit is fine.
    auto v = sbx_cli::parse_duration("9223372036.854775807s");
    BOOST_REQUIRE(v.has_value());
    BOOST_TEST(v->count() == std::chrono::nanoseconds::max().count());
}

// ---- parse_size ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(size_units)
{
    constexpr std::int64_t k = 1024;
    struct row
    {
        const char* text;
        std::int64_t want;
    };
    for (auto r : {row{"100", 100}, row{"0", 0}, row{"100b", 100}, row{"100B", 100},
                   row{"512K", 512 * k}, row{"512k", 512 * k}, row{"512KiB", 512 * k},
                   row{"512kib", 512 * k}, row{"64M", 64 * k * k}, row{"64MiB", 64 * k * k},
                   row{"64m", 64 * k * k}, row{"1G", k * k * k}, row{"1GiB", k * k * k},
                   row{"2T", 2 * k * k * k * k}, row{"2TiB", 2 * k * k * k * k},
                   row{"9223372036854775807", INT64_MAX}, row{"8388607T", 8388607 * k * k * k * k}})
    {
        auto v = sbx_cli::parse_size(r.text);
        BOOST_TEST_CONTEXT(r.text)
        {
            BOOST_REQUIRE(v.has_value());
            BOOST_TEST(*v == r.want);
        }
    }
}

BOOST_AUTO_TEST_CASE(size_rejects_bad_text)
{
    for (const char* text : {"", "-1", "-1M", "+1M", "M", "1.5G", "1 M", " 1M", "1M ", "1X",
                             "1Mi", "1MiBB", "0x10", "1e6", "abc", "1P"})
    {
        auto v = sbx_cli::parse_size(text);
        BOOST_TEST_CONTEXT("\"" << text << "\"")
        {
            BOOST_REQUIRE(!v.has_value());
            BOOST_TEST(v.error().code == errc::validation);
        }
    }
    // Decimal-looking units are refused as ambiguous rather than silently taken as binary.
    for (const char* text : {"1KB", "1MB", "1GB", "1TB", "1gb"})
    {
        auto v = sbx_cli::parse_size(text);
        BOOST_REQUIRE(!v.has_value());
        BOOST_TEST(v.error().diag.message.find("ambiguous") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(size_rejects_overflow)
{
    for (const char* text : {"9223372036854775808", "8388608T", "8589934592G", "9007199254740992K",
                             "99999999999999999999999"})
    {
        auto v = sbx_cli::parse_size(text);
        BOOST_TEST_CONTEXT(text)
        {
            BOOST_REQUIRE(!v.has_value());
            BOOST_TEST(v.error().code == errc::validation);
            BOOST_TEST(v.error().diag.message.find("too large") != std::string::npos);
        }
    }
}

// ---- default policy and parse_command_line -------------------------------------------------

BOOST_AUTO_TEST_CASE(default_policy_values)
{
    auto p = sbx_cli::default_policy();
    BOOST_REQUIRE(p.env.allow.has_value());
    std::vector<std::string> want{"PATH", "HOME",   "USER",     "LOGNAME", "LANG", "LC_ALL",
                                  "LC_CTYPE", "TERM", "TZ", "TMPDIR", "SHELL"};
    BOOST_TEST(*p.env.allow == want, boost::test_tools::per_element());
    BOOST_TEST(p.env.inject.empty());
    BOOST_TEST(p.timeout.count() == std::chrono::nanoseconds(10min).count());
    BOOST_TEST(p.kill_grace.count() == 0);
    BOOST_TEST(p.limits.max_output_bytes == 10 * 1024 * 1024);
    BOOST_TEST(p.limits.max_processes == 1024);
    BOOST_TEST(p.limits.memory_bytes == 0);
    BOOST_TEST(p.limits.cpu_millicores == 0);
    BOOST_TEST(p.limits.disk_bytes == 0);
    BOOST_TEST(!p.input.has_value());
    BOOST_TEST(p.work_dir.empty());
    // The usage text documents it.
    auto u = sbx_cli::usage();
    for (const auto& n : want)
        BOOST_TEST(u.find(n) != std::string::npos, n);
    for (const char* s : {"10m", "10 MiB", "1024", "--env-clear", "--stdin-file", "124", "137"})
        BOOST_TEST(u.find(s) != std::string::npos, s);
}

// One table makes the parser and the usage text: every option the usage lists is parsed,
// and every option parsed is listed, with its value name when it takes one.
BOOST_AUTO_TEST_CASE(the_usage_lists_exactly_the_options_parsed)
{
    const auto desc = sbx_cli::make_options();
    const std::string u = sbx_cli::usage();
    std::size_t listed = 0;
    for (std::size_t at = u.find("\n  -"); at != std::string::npos; at = u.find("\n  -", at + 1))
    {
        std::string label = u.substr(at + 3, u.find("  ", at + 3) - at - 3);
        if (label.rfind("-h, ", 0) == 0)
            label = label.substr(4);
        const std::string name = label.substr(2, label.find(' ') - 2);
        const auto* o = desc.find_nothrow(name, false);
        BOOST_TEST_REQUIRE(o != nullptr, name);
        BOOST_TEST((o->semantic()->max_tokens() > 0) == (label.find(' ') != std::string::npos),
                   label);
        ++listed;
    }
    BOOST_TEST(listed == desc.options().size());
}

BOOST_AUTO_TEST_CASE(tty_is_a_flag_that_excludes_json_and_stdin_file)
{
    auto r = parse({"--tty", "--", "bash"});
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->tty);
    BOOST_TEST(!parse({"bash"})->tty);
    check_fails({"--tty", "--json", "bash"}, errc::validation, "--tty and --json");
    check_fails({"--tty", "--stdin-file", "/dev/null", "bash"}, errc::validation,
                "--tty and --stdin-file");
}

BOOST_AUTO_TEST_CASE(defaults_applied)
{
    auto r = parse({"ls", "-l"});
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->request.command == "ls");
    BOOST_TEST(r->request.args == std::vector<std::string>{"-l"},
               boost::test_tools::per_element());
    auto p = sbx_cli::default_policy();
    const auto& o = r->request.options;
    BOOST_TEST(*o.env.allow == *p.env.allow, boost::test_tools::per_element());
    BOOST_TEST(o.timeout.count() == p.timeout.count());
    BOOST_TEST(o.kill_grace.count() == 0);
    BOOST_TEST(o.limits.max_output_bytes == p.limits.max_output_bytes);
    BOOST_TEST(o.limits.max_processes == 1024);
    BOOST_TEST(o.limits.memory_bytes == 0);
    BOOST_TEST(o.limits.cpu_millicores == 0);
    BOOST_TEST(!o.input.has_value());
    BOOST_TEST(r->runner.root == ".");
    BOOST_TEST(r->runner.default_max_output_bytes == sandbox::default_max_output_bytes);
    BOOST_TEST(!r->json);
    BOOST_TEST(!r->enforcement);
    BOOST_TEST(!r->help);
    BOOST_TEST(r->backend == "auto");
}

BOOST_AUTO_TEST_CASE(each_flag_sets_its_field_only)
{
    auto r = parse({"--root", "/srv/root", "--workdir", "sub", "--timeout", "1.5s",
                    "--kill-grace=250ms", "--memory", "64M", "--cpu", "500", "--max-processes",
                    "16", "--max-tasks", "64", "--max-output", "1K", "--json", "--backend",
                    "local", "cmd"});
    BOOST_REQUIRE(r.has_value());
    const auto& o = r->request.options;
    BOOST_TEST(r->runner.root == "/srv/root");
    BOOST_TEST(o.work_dir == "sub");
    BOOST_TEST(o.timeout.count() == std::chrono::nanoseconds(1500ms).count());
    BOOST_TEST(o.kill_grace.count() == std::chrono::nanoseconds(250ms).count());
    BOOST_TEST(o.limits.memory_bytes == 64 * 1024 * 1024);
    BOOST_TEST(o.limits.cpu_millicores == 500);
    BOOST_TEST(o.limits.max_processes == 16);
    BOOST_TEST(o.limits.max_tasks == 64);
    BOOST_TEST(o.limits.max_output_bytes == 1024);
    BOOST_TEST(r->json);
    BOOST_TEST(r->request.command == "cmd");
    BOOST_TEST(r->request.args.empty());
    // Untouched fields keep the default policy.
    BOOST_TEST(*o.env.allow == *sbx_cli::default_policy().env.allow,
               boost::test_tools::per_element());

    // One flag alone changes one field.
    auto t = parse({"--timeout", "0", "cmd"});
    BOOST_REQUIRE(t.has_value());
    BOOST_TEST(t->request.options.timeout.count() == 0);
    BOOST_TEST(t->request.options.limits.max_processes == 1024);
    BOOST_TEST(t->request.options.limits.max_output_bytes == 10 * 1024 * 1024);

    // "--max-output 0" lifts the cap entirely (request and runner default).
    auto m = parse({"--max-output", "0", "cmd"});
    BOOST_REQUIRE(m.has_value());
    BOOST_TEST(m->request.options.limits.max_output_bytes == 0);
    BOOST_TEST(m->runner.default_max_output_bytes == 0);
}

// Issue 33, item 1: an allow rule for a loopback address gets a note naming the host's
// loopback name; other rules get none.
BOOST_AUTO_TEST_CASE(a_loopback_allow_rule_is_noted_with_the_host_loopback_name)
{
    auto d = parse({"--backend", "bwrap", "--allow-host", "127.0.0.1:3141", "--allow-host",
                    "[::1]:8080", "--allow-host", "localhost", "--allow-host", "pypi.org",
                    "--deny-host", "127.0.0.2", "--", "pip"});
    BOOST_TEST_REQUIRE(d.has_value());
    const auto notes = sbx_cli::loopback_rule_notes(d->request.options.net);
    BOOST_TEST_REQUIRE(notes.size() == 3u);
    BOOST_TEST(notes[0].find("--allow-host host.sandbox.internal:3141") != std::string::npos,
               notes[0]);
    BOOST_TEST(notes[0].find("the sandbox's own loopback") != std::string::npos, notes[0]);
    BOOST_TEST(notes[1].find("--allow-host host.sandbox.internal:8080") != std::string::npos,
               notes[1]);
    BOOST_TEST(notes[2].ends_with("--allow-host host.sandbox.internal"), notes[2]); // any port
    auto plain = parse({"--backend", "bwrap", "--allow-host", "pypi.org:443", "--", "pip"});
    BOOST_TEST_REQUIRE(plain.has_value());
    BOOST_TEST(sbx_cli::loopback_rule_notes(plain->request.options.net).empty());
}

// Issue 33, item 5: an argument naming an existing file under the host's /tmp gets a note
// (the sandbox's /tmp is private), unless a --read-only or --writable path shows it.
BOOST_AUTO_TEST_CASE(a_host_tmp_argument_is_noted_unless_bound)
{
    auto exists = [](const std::string& p) { return p != "/tmp/missing.pem"; };
    auto d = parse({"--backend", "bwrap", "--writable", "/tmp/out", "--", "curl",
                    "--cacert=/tmp/ca.pem", "--key", "/tmp/key.pem", "/tmp/missing.pem",
                    "/tmp/out/log", "/tmp/", "x=/etc/tmp/y"});
    BOOST_TEST_REQUIRE(d.has_value());
    const auto notes = sbx_cli::private_tmp_notes(*d, exists);
    BOOST_TEST_REQUIRE(notes.size() == 2u);
    BOOST_TEST(notes[0].find("/tmp/ca.pem is on the host's /tmp") != std::string::npos, notes[0]);
    BOOST_TEST(notes[0].find("--read-only /tmp/ca.pem") != std::string::npos, notes[0]);
    BOOST_TEST(notes[1].find("/tmp/key.pem") != std::string::npos, notes[1]);
    auto bound = parse({"--backend", "bwrap", "--read-only", "/tmp/ca.pem", "--", "curl",
                        "--cacert", "/tmp/ca.pem"});
    BOOST_TEST_REQUIRE(bound.has_value());
    BOOST_TEST(sbx_cli::private_tmp_notes(*bound, exists).empty());
    BOOST_TEST((bound->bwrap.read_only == std::vector<std::string>{"/tmp/ca.pem"}));
    check_fails({"--backend", "bwrap", "--read-only", "rel/path", "true"}, errc::validation,
                "is not an absolute path");
    check_fails({"--backend", "local", "--read-only", "/tmp/x", "true"}, errc::validation,
                "--read-only");
}

BOOST_AUTO_TEST_CASE(net_and_bwrap_view_flags)
{
    auto d = parse({"--backend", "bwrap", "--net", "deny", "--writable", "/srv/cache",
                    "--writable", "/srv/out", "--read-deny", "/srv/secret", "--write-deny",
                    "Makefile", "--unix-socket", "/run/agent.sock", "--", "make"});
    BOOST_TEST_REQUIRE(d.has_value());
    BOOST_TEST((d->request.options.net.mode == sandbox::net_mode::deny_all));
    BOOST_TEST((d->bwrap.writable == std::vector<std::string>{"/srv/cache", "/srv/out"}));
    BOOST_TEST((d->bwrap.read_deny == std::vector<std::string>{"/srv/secret"}));
    BOOST_TEST((d->bwrap.write_deny == std::vector<std::string>{"Makefile"}));
    BOOST_TEST((d->bwrap.unix_sockets == std::vector<std::string>{"/run/agent.sock"}));
    BOOST_TEST(d->bwrap.sandbox_user.empty());
    auto u = parse({"--backend", "bwrap", "--sandbox-user", "builder:staff", "make"});
    BOOST_TEST_REQUIRE(u.has_value());
    BOOST_TEST(u->bwrap.sandbox_user == "builder:staff");
    check_fails({"--backend", "local", "--sandbox-user", "1000", "ls"}, errc::validation,
                "--backend bwrap");
    check_fails({"--backend", "bwrap", "--sandbox-user", "", "ls"}, errc::validation,
                "USER or USER:GROUP");
    BOOST_TEST((parse({"--net", "inherit", "ls"})->request.options.net.mode ==
                sandbox::net_mode::inherit));
    BOOST_TEST(parse({"ls"})->bwrap.empty());
    // The local backend cannot enforce a filesystem view; an unknown mode is a usage error.
    check_fails({"--backend", "local", "--writable", "/srv", "ls"}, errc::validation,
                "--backend bwrap");
    check_fails({"--backend", "local", "--read-deny", "/srv", "ls"}, errc::validation,
                "cannot enforce");
    check_fails({"--net", "allow", "ls"}, errc::validation, "allow-list, proxy, deny or inherit");
}

BOOST_AUTO_TEST_CASE(network_allow_list_flags)
{
    using sandbox::net_action;
    auto a = parse({"--backend", "bwrap", "--allow-host", "github.com:443", "--allow-host",
                    "*.npmjs.org", "--deny-host", "[::1]:8080", "--deny-host", "fd00::/8",
                    "--resolve", "api.test=127.0.0.1", "--", "npm", "ci"});
    BOOST_TEST_REQUIRE(a.has_value());
    const auto& net = a->request.options.net;
    // --allow-host alone chooses allow-list.
    BOOST_TEST((net.mode == sandbox::net_mode::allow_list));
    BOOST_TEST_REQUIRE(net.rules.size() == 4u);
    BOOST_TEST((net.rules[0].action == net_action::allow));
    BOOST_TEST(net.rules[0].host == "github.com");
    BOOST_TEST(net.rules[0].port == 443);
    BOOST_TEST(net.rules[1].host == "*.npmjs.org");
    BOOST_TEST(net.rules[1].port == 0);
    BOOST_TEST((net.rules[2].action == net_action::deny));
    BOOST_TEST(net.rules[2].host == "[::1]");
    BOOST_TEST(net.rules[2].port == 8080);
    BOOST_TEST(net.rules[3].host == "fd00::/8"); // colons without brackets: no port
    BOOST_TEST(net.rules[3].port == 0);
    BOOST_TEST_REQUIRE(a->net_proxy.resolve.size() == 1u);
    BOOST_TEST(a->net_proxy.resolve[0].first == "api.test");
    BOOST_TEST(a->net_proxy.resolve[0].second == "127.0.0.1");
    BOOST_TEST(a->request.options.net.validate().has_value());

    // --proxy chooses proxy mode; an explicit --net wins over the implication.
    auto p = parse({"--backend", "bwrap", "--proxy", "http://u:p@proxy.test:3128", "pip"});
    BOOST_TEST_REQUIRE(p.has_value());
    BOOST_TEST((p->request.options.net.mode == sandbox::net_mode::proxy));
    BOOST_TEST(p->request.options.net.proxy == "http://u:p@proxy.test:3128");
    auto d = parse({"--backend", "bwrap", "--net", "allow-list", "curl"});
    BOOST_TEST_REQUIRE(d.has_value()); // allow-list with no rule: nothing is reachable
    BOOST_TEST((d->request.options.net.mode == sandbox::net_mode::allow_list));

    // The local backend cannot confine the network: not_available, naming bwrap.
    check_fails({"--backend", "local", "--allow-host", "github.com", "git"},
                errc::not_available, "--backend bwrap");
    check_fails({"--backend", "local", "--net", "proxy", "--proxy", "http://p.test:1", "git"},
                errc::not_available, "--backend bwrap");
    check_fails({"--backend", "local", "--resolve", "a.test=1.2.3.4", "git"},
                errc::not_available, "--backend bwrap");
    // Rules that the mode would drop, bad ports and pins are usage errors.
    check_fails({"--backend", "bwrap", "--deny-host", "evil.test", "curl"}, errc::validation,
                "need --net allow-list or proxy");
    check_fails({"--backend", "bwrap", "--net", "deny", "--allow-host", "a.test", "curl"},
                errc::validation, "need --net allow-list or proxy");
    check_fails({"--backend", "bwrap", "--allow-host", "a.test:0", "curl"}, errc::validation,
                "1 to 65535");
    check_fails({"--backend", "bwrap", "--allow-host", "a.test:99999", "curl"},
                errc::validation, "1 to 65535");
    check_fails({"--backend", "bwrap", "--allow-host", "a.test:", "curl"}, errc::validation,
                "empty port");
    check_fails({"--backend", "bwrap", "--allow-host", ":443", "curl"}, errc::validation,
                "empty host");
    check_fails({"--backend", "bwrap", "--allow-host", "a.test", "--resolve", "a.test", "curl"},
                errc::validation, "HOST=ADDRESS");
    check_fails({"--backend", "bwrap", "--resolve", "a.test=1.2.3.4", "curl"},
                errc::validation, "--resolve needs");
    check_fails({"--backend", "bwrap", "--proxy", "", "curl"}, errc::validation, "empty URL");
}

// --sni-check: the server name of tunnels not inspected (net_policy::sni_check).
BOOST_AUTO_TEST_CASE(sni_check_flag)
{
    auto plain = parse({"--backend", "bwrap", "--allow-host", "a.test", "curl"});
    BOOST_TEST_REQUIRE(plain.has_value());
    BOOST_TEST((plain->request.options.net.sni_check == sandbox::sni_mode::record));
    for (const auto& [text, mode] : std::vector<std::pair<std::string, sandbox::sni_mode>>{
             {"deny", sandbox::sni_mode::deny},
             {"off", sandbox::sni_mode::off},
             {"record", sandbox::sni_mode::record}})
    {
        auto a =
            parse({"--backend", "bwrap", "--allow-host", "a.test", "--sni-check", text, "curl"});
        BOOST_TEST_REQUIRE(a.has_value(), text);
        BOOST_TEST((a->request.options.net.sni_check == mode), text);
    }
    check_fails({"--backend", "bwrap", "--allow-host", "a.test", "--sni-check", "strict", "curl"},
                errc::validation, "--sni-check: expected record, deny or off, got \"strict\"");
    check_fails({"--backend", "bwrap", "--sni-check", "deny", "curl"}, errc::validation,
                "--sni-check needs --net allow-list or proxy");
    check_fails({"--backend", "bwrap", "--net", "deny", "--sni-check", "off", "curl"},
                errc::validation, "--sni-check needs --net allow-list or proxy");
    // A config entry's network replaces the caller's whole: the flag would be dropped.
    check_fails({"--config", "/nonexistent.yaml", "--sandbox", "x", "--sni-check", "deny", "true"},
                errc::validation, "--sni-check cannot be used with --config");
}

BOOST_AUTO_TEST_CASE(policy_chain_flags)
{
    auto none = parse({"ls"});
    BOOST_TEST_REQUIRE(none.has_value());
    BOOST_TEST(none->chain.empty());
    auto c = parse({"--allow-command", "ls", "--allow-command=/bin/cat", "--ask", "rm",
                    "--ask", "mkfs*", "--ask-timeout", "30s", "--audit", "/var/log/a.jsonl",
                    "--", "ls"});
    BOOST_TEST_REQUIRE(c.has_value());
    BOOST_TEST((c->chain.allowed_commands == std::vector<std::string>{"ls", "/bin/cat"}));
    BOOST_TEST((c->chain.ask == std::vector<std::string>{"rm", "mkfs*"}));
    BOOST_TEST(c->chain.ask_timeout == 30s);
    BOOST_TEST(c->chain.audit == "/var/log/a.jsonl");
    BOOST_TEST(!c->chain.empty());
    // A malformed pattern is a usage error before anything runs, naming the pattern.
    auto bad = parse({"--ask", "rm[", "ls"});
    BOOST_TEST_REQUIRE(!bad);
    BOOST_TEST(bad.error().code == errc::validation);
    BOOST_TEST(bad.error().diag.rule == "rm[");
    check_fails({"--ask", "/bin/rm", "ls"}, errc::validation, "base name");
    check_fails({"--allow-command", "", "ls"}, errc::validation, "empty command name");
    check_fails({"--ask", "rm", "--ask-timeout", "0", "ls"}, errc::validation, "positive");
    check_fails({"--audit", "", "ls"}, errc::validation, "--audit");
    check_fails({"--ask-timeout", "5s", "ls"}, errc::validation, "needs --ask");
}

BOOST_AUTO_TEST_CASE(env_flags)
{
    auto allow = parse({"--env-allow", "FOO", "--env-allow=BAR", "cmd"});
    BOOST_REQUIRE(allow.has_value());
    BOOST_REQUIRE(allow->request.options.env.allow.has_value());
    BOOST_TEST(*allow->request.options.env.allow == (std::vector<std::string>{"FOO", "BAR"}),
               boost::test_tools::per_element());

    auto clear = parse({"--env-clear", "cmd"});
    BOOST_REQUIRE(clear.has_value());
    BOOST_REQUIRE(clear->request.options.env.allow.has_value());
    BOOST_TEST(clear->request.options.env.allow->empty());

    auto inject = parse({"--env", "A=1", "--env", "B=x=y", "--env=C=", "--env", "A=2", "cmd"});
    BOOST_REQUIRE(inject.has_value());
    const auto& in = inject->request.options.env.inject;
    BOOST_TEST(in.size() == 3u);
    BOOST_TEST(in.at("A") == "2"); // the last one wins
    BOOST_TEST(in.at("B") == "x=y");
    BOOST_TEST(in.at("C") == "");
    // Injection leaves the allow-list at its default.
    BOOST_TEST(*inject->request.options.env.allow == *sbx_cli::default_policy().env.allow,
               boost::test_tools::per_element());

    check_fails({"--env", "NOEQUALS", "cmd"}, errc::validation, "NAME=VALUE");
    check_fails({"--env", "=1", "cmd"}, errc::validation, "NAME=VALUE");
    check_fails({"--env-allow", "A=B", "cmd"}, errc::validation, "A=B");
    check_fails({"--env-clear", "--env-allow", "PATH", "cmd"}, errc::validation, "--env-clear");
}

BOOST_AUTO_TEST_CASE(stdin_file)
{
    // The file is opened, not read: the command gets the descriptor (blocking) as stdin.
    const std::string content("line 1\nbinary \0\xff end", 20);
    temp_file f(content);
    auto r = parse({"--stdin-file", f.path(), "cat"});
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(!r->request.options.input.has_value());
    BOOST_REQUIRE(r->request.stdin_fd);
    const int fd = r->request.stdin_fd->get();
    BOOST_TEST((::fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    BOOST_TEST((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0); // only the command's copy is stdin
    struct stat by_fd, by_path;
    BOOST_REQUIRE(::fstat(fd, &by_fd) == 0);
    BOOST_REQUIRE(::stat(f.path().c_str(), &by_path) == 0);
    BOOST_TEST(by_fd.st_ino == by_path.st_ino);
    std::string back(64, '\0');
    back.resize(static_cast<std::size_t>(::pread(fd, back.data(), back.size(), 0)));
    BOOST_TEST(back == content);
    BOOST_TEST(!r->stdin_fifo);

    // A FIFO nobody writes: opening it does not wait for a writer.
    const std::string fifo = f.path() + ".fifo";
    BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto p = parse({"--stdin-file", fifo, "cat"});
    ::unlink(fifo.c_str());
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST(p->stdin_fifo);
    BOOST_REQUIRE(p->request.stdin_fd);
    BOOST_TEST((::fcntl(p->request.stdin_fd->get(), F_GETFL) & O_NONBLOCK) == 0);

    auto missing = parse({"--stdin-file", "/nonexistent/sbx-cli-test", "cat"});
    BOOST_REQUIRE(!missing);
    BOOST_TEST(missing.error().code == errc::not_found);
    BOOST_TEST(missing.error().diag.path == "/nonexistent/sbx-cli-test");
    BOOST_TEST(missing.error().diag.message.find("/nonexistent/sbx-cli-test") !=
               std::string::npos);

    auto dir = parse({"--stdin-file", "/", "cat"});
    BOOST_REQUIRE(!dir);
    BOOST_TEST(dir.error().code == errc::validation);
    BOOST_TEST(dir.error().diag.path == "/");

    if (::geteuid() != 0) // root reads anything
    {
        std::filesystem::permissions(f.path(), std::filesystem::perms::none);
        auto denied = parse({"--stdin-file", f.path(), "cat"});
        BOOST_REQUIRE(!denied);
        BOOST_TEST(denied.error().code == errc::forbidden);
        BOOST_TEST(denied.error().diag.path == f.path());
    }
}

BOOST_AUTO_TEST_CASE(command_boundary)
{
    // "--" ends our options; what follows is the command even if it looks like an option.
    auto dash = parse({"--json", "--", "--weird-name", "--json", "-h"});
    BOOST_REQUIRE(dash.has_value());
    BOOST_TEST(dash->json);
    BOOST_TEST(dash->request.command == "--weird-name");
    BOOST_TEST(dash->request.args == (std::vector<std::string>{"--json", "-h"}),
               boost::test_tools::per_element());

    // The first non-option ends our options; option-like arguments after it are the command's.
    auto after = parse({"--timeout", "5s", "prog", "--json", "--timeout", "1s", "--", "-h"});
    BOOST_REQUIRE(after.has_value());
    BOOST_TEST(!after->json);
    BOOST_TEST(after->request.options.timeout.count() == std::chrono::nanoseconds(5s).count());
    BOOST_TEST(after->request.command == "prog");
    BOOST_TEST(after->request.args ==
                   (std::vector<std::string>{"--json", "--timeout", "1s", "--", "-h"}),
               boost::test_tools::per_element());

    // An option's value is not taken for the command, even when it looks like one.
    auto value = parse({"--workdir", "cmd-looking-dir", "--env", "X=1", "real", "arg"});
    BOOST_REQUIRE(value.has_value());
    BOOST_TEST(value->request.options.work_dir == "cmd-looking-dir");
    BOOST_TEST(value->request.command == "real");
    BOOST_TEST(value->request.args == std::vector<std::string>{"arg"},
               boost::test_tools::per_element());

    // "--" as the command's own argument, and a command right after "--" with no options.
    auto plain = parse({"--", "cmd", "--"});
    BOOST_REQUIRE(plain.has_value());
    BOOST_TEST(plain->request.command == "cmd");
    BOOST_TEST(plain->request.args == std::vector<std::string>{"--"},
               boost::test_tools::per_element());

    // A lone "-" is an ordinary argument (the command here).
    auto lone = parse({"-", "x"});
    BOOST_REQUIRE(lone.has_value());
    BOOST_TEST(lone->request.command == "-");
}

BOOST_AUTO_TEST_CASE(help_and_enforcement_need_no_command)
{
    for (auto args : {std::initializer_list<std::string>{"-h"}, {"--help"}, {"--json", "-h"}})
    {
        auto r = parse(args);
        BOOST_REQUIRE(r.has_value());
        BOOST_TEST(r->help);
    }
    auto e = parse({"--enforcement"});
    BOOST_REQUIRE(e.has_value());
    BOOST_TEST(e->enforcement);
    BOOST_TEST(e->request.command.empty());
}

BOOST_AUTO_TEST_CASE(usage_errors)
{
    check_fails({}, errc::validation, "missing COMMAND");
    check_fails({"--json"}, errc::validation, "missing COMMAND");
    check_fails({"--json", "--"}, errc::validation, "missing COMMAND");
    check_fails({"--bogus", "cmd"}, errc::validation, "--bogus");
    check_fails({"-x", "cmd"}, errc::validation, "-x");
    check_fails({"--timeout"}, errc::validation, "timeout");
    check_fails({"--timeout", "soon", "cmd"}, errc::validation, "--timeout");
    check_fails({"--timeout=-1s", "cmd"}, errc::validation, "negative");
    check_fails({"--kill-grace", "x", "cmd"}, errc::validation, "--kill-grace");
    check_fails({"--memory", "lots", "cmd"}, errc::validation, "--memory");
    check_fails({"--memory", "1GB", "cmd"}, errc::validation, "ambiguous");
    check_fails({"--max-output", "-5", "cmd"}, errc::validation, "--max-output");
    check_fails({"--cpu", "half", "cmd"}, errc::validation, "--cpu");
    check_fails({"--cpu=-1", "cmd"}, errc::validation, "negative");
    check_fails({"--max-processes", "1.5", "cmd"}, errc::validation, "--max-processes");
    check_fails({"--max-tasks", "-3", "cmd"}, errc::validation, "--max-tasks");
    check_fails({"--max-processes", "99999999999999999999", "cmd"}, errc::validation,
                "too large");
    check_fails({"--json=yes", "cmd"}, errc::validation, "json");
    check_fails({"--timeout", "1s", "--timeout", "2s", "cmd"}, errc::validation, "timeout");
    check_fails({"--root", "", "cmd"}, errc::validation, "--root");
    // No abbreviations: "--time" is not "--timeout".
    check_fails({"--time", "1s", "cmd"}, errc::validation, "--time");
    // The field is named in the diagnostics.
    auto r = parse({"--memory", "x", "cmd"});
    BOOST_REQUIRE(!r);
    BOOST_TEST(r.error().diag.limit == "memory");
}

BOOST_AUTO_TEST_CASE(unknown_backend)
{
    check_fails({"--backend", "firecracker", "cmd"}, errc::not_available, "unknown backend");
    check_fails({"--backend", "", "cmd"}, errc::not_available, "unknown backend");
    check_fails({"--enforcement", "--backend", "nspawn"}, errc::not_available, "nspawn");
    BOOST_TEST(parse({"--backend", "bwrap", "cmd"})->backend == "bwrap");
    BOOST_TEST(parse({"--backend", "auto", "cmd"})->backend == "auto");
    auto ok = parse({"--backend", "local", "cmd"});
    BOOST_REQUIRE(ok.has_value());
    BOOST_TEST(ok->backend == "local");
}

// ---- --backend auto ------------------------------------------------------------------------

// Under auto the flags only bwrap enforces are taken (choose_backend decides), and named.
BOOST_AUTO_TEST_CASE(auto_takes_the_flags_only_bwrap_enforces)
{
    BOOST_TEST(sbx_cli::bwrap_only_flags(*parse({"ls"})).empty());
    BOOST_TEST(sbx_cli::bwrap_only_flags(*parse({"--net", "inherit", "--memory", "1M", "ls"}))
                   .empty());
    auto v = parse({"--writable", "/srv", "--sandbox-user", "1000", "--net", "deny", "ls"});
    BOOST_TEST_REQUIRE(v.has_value());
    BOOST_TEST(v->backend == "auto");
    BOOST_TEST(sbx_cli::bwrap_only_flags(*v) ==
                   (std::vector<std::string>{"--writable", "--sandbox-user", "--net deny"}),
               boost::test_tools::per_element());
    auto n = parse({"--allow-host", "a.test", "--resolve", "a.test=1.2.3.4", "--read-deny",
                    "/srv/s", "--write-deny", "M", "--unix-socket", "/run/s", "curl"});
    BOOST_TEST_REQUIRE(n.has_value());
    BOOST_TEST(sbx_cli::bwrap_only_flags(*n) ==
                   (std::vector<std::string>{"--read-deny", "--write-deny", "--unix-socket",
                                             "--net allow-list (--allow-host)", "--resolve"}),
               boost::test_tools::per_element());
    BOOST_TEST(sbx_cli::bwrap_only_flags(*parse({"--proxy", "http://p.test:1", "pip"})) ==
                   std::vector<std::string>{"--net proxy (--proxy)"},
               boost::test_tools::per_element());
}

sandbox::failure bwrap_says(errc code, const std::string& message, const char* limit)
{
    return sandbox::make_failure(code, message, limit);
}

BOOST_AUTO_TEST_CASE(auto_picks_bwrap_when_it_can_run_the_command_line)
{
    auto c = sbx_cli::choose_backend(std::nullopt, {});
    BOOST_TEST(c.backend == "bwrap");
    BOOST_TEST(!c.refusal);
    BOOST_TEST(c.warning.empty());
    BOOST_TEST(c.reason.find("namespaces") != std::string::npos, c.reason);
    // Flags only bwrap enforces change nothing when it is usable.
    auto f = sbx_cli::choose_backend(std::nullopt, {"--writable"});
    BOOST_TEST(f.backend == "bwrap");
    BOOST_TEST(!f.refusal);
}

// auto asks bwrap's probe before the run only on a sign that namespaces may be refused;
// each sign alone is enough, none is the run-first path.
BOOST_AUTO_TEST_CASE(auto_probes_before_the_run_only_on_a_sign_against_namespaces)
{
    BOOST_TEST(!sbx_cli::probe_before_run({}));
    sbx_cli::namespace_signs s;
    s.seccomp_filtered = true;
    BOOST_TEST(sbx_cli::probe_before_run(s));
    s = {};
    s.userns_clone_off = true;
    BOOST_TEST(sbx_cli::probe_before_run(s));
    s = {};
    s.no_user_namespaces = true;
    BOOST_TEST(sbx_cli::probe_before_run(s));
    s = {};
    s.apparmor_restricts = true;
    BOOST_TEST(sbx_cli::probe_before_run(s));
}

// The signs as read from /proc: the Seccomp line of /proc/self/status (2 is a filter; 0 none,
// 1 strict mode, which could not run us anyway), and the three settings (-1: no such file).
BOOST_AUTO_TEST_CASE(namespace_signs_from_proc_text)
{
    const std::string filtered = "Name:\tsandbox-run\nNoNewPrivs:\t1\nSeccomp:\t2\n"
                                 "Seccomp_filters:\t1\nSpeculation_Store_Bypass:\tx\n";
    BOOST_TEST(sbx_cli::namespace_signs_of(filtered, -1, -1, -1).seccomp_filtered);
    const std::string none = "Name:\tx\nSeccomp:\t0\nSeccomp_filters:\t0\n";
    auto s = sbx_cli::namespace_signs_of(none, -1, 15000, -1);
    BOOST_TEST(!sbx_cli::probe_before_run(s));
    BOOST_TEST(!sbx_cli::namespace_signs_of("Seccomp_filters:\t2\n", 1, 1, 0).seccomp_filtered);
    BOOST_TEST(!sbx_cli::namespace_signs_of("", -1, -1, -1).seccomp_filtered);
    BOOST_TEST(sbx_cli::namespace_signs_of("Seccomp: 2", -1, -1, -1).seccomp_filtered); // no \n
    BOOST_TEST(sbx_cli::namespace_signs_of(none, 0, -1, -1).userns_clone_off);
    BOOST_TEST(!sbx_cli::namespace_signs_of(none, 1, -1, -1).userns_clone_off);
    BOOST_TEST(sbx_cli::namespace_signs_of(none, -1, 0, -1).no_user_namespaces);
    BOOST_TEST(sbx_cli::namespace_signs_of(none, -1, -1, 1).apparmor_restricts);
    BOOST_TEST(!sbx_cli::namespace_signs_of(none, -1, -1, 0).apparmor_restricts);
}

BOOST_AUTO_TEST_CASE(auto_falls_back_to_local_with_one_warning_when_bwrap_is_not_usable)
{
    const std::string why = "bwrap cannot create its namespaces on this host (user namespaces "
                            "may be disabled): setting up uid map: Permission denied";
    auto c = sbx_cli::choose_backend(bwrap_says(errc::not_available, why, "backend"), {});
    BOOST_TEST(c.backend == "local");
    BOOST_TEST(!c.refusal);
    BOOST_TEST(c.warning == "warning: bubblewrap is not usable here (" + why +
                                "); running on the local backend, which confines nothing");
    BOOST_TEST(c.reason == "bubblewrap is not usable here: " + why);
    // A missing bwrap, or credentials that cannot be masked: the same.
    auto m = sbx_cli::choose_backend(
        bwrap_says(errc::not_available, "bubblewrap (bwrap) was not found", "backend"), {});
    BOOST_TEST(m.backend == "local");
    BOOST_TEST(m.warning.find("(bubblewrap (bwrap) was not found)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(auto_refuses_flags_only_bwrap_enforces_where_it_is_not_usable)
{
    const std::string why = "bubblewrap (bwrap) was not found";
    auto c = sbx_cli::choose_backend(bwrap_says(errc::not_available, why, "backend"),
                                     {"--writable", "--net deny"});
    BOOST_TEST(c.backend == "bwrap");
    BOOST_TEST(c.warning.empty());
    BOOST_TEST_REQUIRE(c.refusal.has_value());
    BOOST_TEST(c.refusal->code == errc::not_available);
    BOOST_TEST(c.refusal->diag.message ==
               "--writable, --net deny need the bwrap backend, which is not usable here: " + why);
    BOOST_TEST(c.refusal->diag.limit == "backend");
    BOOST_TEST(c.refusal->diag.backend == "bwrap");
    BOOST_TEST(c.reason == "refused: " + c.refusal->diag.message);
    auto one = sbx_cli::choose_backend(bwrap_says(errc::not_available, why, "backend"),
                                       {"--read-deny"});
    BOOST_TEST_REQUIRE(one.refusal.has_value());
    BOOST_TEST(one.refusal->diag.message.find("--read-deny needs the bwrap") == 0u);
}

// What bwrap refuses on the command line is refused, never run unconfined: a root caller's
// root the sandbox user cannot reach (the rule of scripts/sandbox-run.sh), a root bwrap
// cannot make writable (a home directory: on the local backend it would be writable).
BOOST_AUTO_TEST_CASE(auto_refuses_a_command_line_bwrap_refuses)
{
    for (const std::string why :
         {"the root /root/p cannot be reached by the sandbox user nobody (Permission denied): "
          "a root caller's commands run as that user",
          "root /home/u cannot be writable: it is the home directory"})
    {
        auto f = bwrap_says(errc::validation, why, "root");
        f.diag.path = "/root/p";
        auto c = sbx_cli::choose_backend(f, {});
        BOOST_TEST(c.backend == "bwrap");
        BOOST_TEST(c.warning.empty());
        BOOST_TEST_REQUIRE(c.refusal.has_value());
        BOOST_TEST(c.refusal->code == errc::validation);
        BOOST_TEST(c.refusal->diag.message.find(why) == 0u, c.refusal->diag.message);
        BOOST_TEST(c.refusal->diag.message.find("--backend local") != std::string::npos);
        BOOST_TEST(c.refusal->diag.limit == "root");
        BOOST_TEST(c.refusal->diag.path == "/root/p");
        BOOST_TEST(c.reason == "refused: bubblewrap refuses this command line: " + why);
        // With flags only bwrap enforces: the same refusal.
        auto w = sbx_cli::choose_backend(f, {"--writable"});
        BOOST_TEST_REQUIRE(w.refusal.has_value());
        BOOST_TEST(w.refusal->code == errc::validation);
    }
    // Only not_available falls back: any other verdict is a refusal.
    auto other = sbx_cli::choose_backend(bwrap_says(errc::internal, "odd", "backend"), {});
    BOOST_TEST(other.refusal.has_value());
}

BOOST_AUTO_TEST_CASE(enforcement_json_names_the_backend_and_why)
{
    sandbox::enforcement_report e;
    e.filesystem_bounds = true;
    auto v = boost::json::parse(sbx_cli::enforcement_to_json(e, "bwrap", "because"));
    const auto& o = v.as_object();
    BOOST_TEST(o.begin()->key() == "backend"); // first, before the report's keys
    BOOST_TEST(o.at("backend").as_string() == "bwrap");
    BOOST_TEST(o.at("backend_reason").as_string() == "because");
    BOOST_TEST(o.at("filesystem_bounds").as_bool());
    BOOST_TEST(o.size() == boost::json::parse(sandbox::to_json(e)).as_object().size() + 2);
    auto plain = boost::json::parse(sbx_cli::enforcement_to_json({}, "local", "")).as_object();
    BOOST_TEST(plain.at("backend").as_string() == "local");
    BOOST_TEST(!plain.contains("backend_reason"));
}

BOOST_AUTO_TEST_CASE(cgroup_flag)
{
    BOOST_TEST(parse({"cmd"})->runner.cgroup == "auto");
    for (const char* v : {"auto", "off", "/sys/fs/cgroup/unified/jobs"})
        BOOST_TEST(parse({"--cgroup", v, "cmd"})->runner.cgroup == v);
    check_fails({"--cgroup", "jobs", "cmd"}, errc::validation, "--cgroup");
    check_fails({"--cgroup", "", "cmd"}, errc::validation, "--cgroup");
}

// ---- exit_status_for -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(exit_status_rows)
{
    const boost::system::error_code ok;
    // Exited: the child's code, zero or not.
    BOOST_TEST(sbx_cli::exit_status_for(ok, result_with(exec_status::exited, 0)) == 0);
    BOOST_TEST(sbx_cli::exit_status_for(ok, result_with(exec_status::exited, 3)) == 3);
    BOOST_TEST(sbx_cli::exit_status_for(ok, result_with(exec_status::exited, 255)) == 255);
    // Killed by a signal it did not get from us.
    BOOST_TEST(sbx_cli::exit_status_for(ok, result_with(exec_status::signaled, -1, 15)) == 143);
    BOOST_TEST(sbx_cli::exit_status_for(ok, result_with(exec_status::signaled, -1, 9)) == 137);
    // Limits and cancellation.
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::timeout),
                                        result_with(exec_status::timed_out, -1, 9)) == 124);
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::budget_exceeded),
                                        result_with(exec_status::budget_exceeded, -1, 9)) == 137);
    BOOST_TEST(sbx_cli::exit_status_for(boost::asio::error::operation_aborted,
                                        result_with(exec_status::cancelled, -1, 9)) == 130);
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::not_available),
                                        result_with(exec_status::unenforceable, -1, 9)) == 125);
    // Codes alone decide when the status says nothing ran.
    const auto not_started = result_with(exec_status::not_started);
    BOOST_TEST(sbx_cli::exit_status_for(boost::asio::error::operation_aborted, not_started) == 130);
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::timeout), not_started) == 124);
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::budget_exceeded), not_started) == 137);
    for (errc e : {errc::validation, errc::policy_denied, errc::not_available, errc::internal,
                   errc::conflict, errc::not_found, errc::forbidden})
        BOOST_TEST(sbx_cli::exit_status_for(code(e), not_started) == 125, e);
    boost::system::error_code os(EIO, boost::system::system_category());
    BOOST_TEST(sbx_cli::exit_status_for(os, not_started) == 125);
    // Forbidden after the command ran is not "cannot execute".
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::forbidden),
                                        result_with(exec_status::exited, 0)) == 125);
    // A success that ran nothing cannot be passed on as an exit code.
    BOOST_TEST(sbx_cli::exit_status_for(ok, not_started) == 125);
}

BOOST_AUTO_TEST_CASE(exit_126_and_127_belong_to_the_command)
{
    auto refused = [](const char* field, int err) {
        exec_result r = result_with(exec_status::not_started);
        r.diag.limit = field;
        if (err != 0)
            r.diag.cause = boost::system::error_code(err, boost::system::system_category());
        return r;
    };
    auto status = [&](int err, const char* field) {
        return sbx_cli::exit_status_for(code(sandbox::errc_from_errno(err)), refused(field, err));
    };
    // The OS refused the command: 127 not found, 126 found but not executable.
    BOOST_TEST(status(ENOENT, "command") == 127);
    BOOST_TEST(status(ENOTDIR, "command") == 127);
    BOOST_TEST(status(EACCES, "command") == 126);
    BOOST_TEST(status(ENOEXEC, "command") == 126);
    BOOST_TEST(status(E2BIG, "command") == 126);
    BOOST_TEST(status(ETXTBSY, "command") == 126);
    // The sandbox refused before anything ran: the work dir or the root is missing, not a
    // directory, or outside the root.
    for (const char* field : {"work_dir", "root"})
        for (int err : {ENOENT, ENOTDIR, EACCES})
            BOOST_TEST(status(err, field) == 125, field << " errno " << err);
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::forbidden), refused("work_dir", 0)) == 125);
    // Our machinery failing at spawn (descriptors, memory, the worker's protocol) is 125.
    for (int err : {EMFILE, ENOMEM, EAGAIN, EPROTO})
        BOOST_TEST(status(err, "command") == 125, "errno " << err);
    // A malformed command (empty, NUL byte) is a usage error, not the OS refusing it.
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::validation), refused("command", 0)) == 125);
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::not_found), refused("command", 0)) == 125);
}

BOOST_AUTO_TEST_CASE(shrinking_the_timeout_keeps_the_cpu_budget)
{
    sandbox::exec_options o;
    o.timeout = 10s;
    o.limits.cpu_millicores = 1000; // 10 s of cpu
    sbx_cli::shrink_timeout(o, 100ms);
    BOOST_TEST(o.timeout.count() == std::chrono::nanoseconds(100ms).count());
    BOOST_TEST(sandbox::cpu_budget(o).count() >= std::chrono::nanoseconds(10s).count());
    BOOST_TEST(sandbox::cpu_budget(o).count() < std::chrono::nanoseconds(10s).count() + 100);

    sandbox::exec_options odd;
    odd.timeout = 3s;
    odd.limits.cpu_millicores = 333; // 0.999 s
    sbx_cli::shrink_timeout(odd, 7ms);
    BOOST_TEST(sandbox::cpu_budget(odd).count() >= std::chrono::nanoseconds(999ms).count());

    // Nothing left: 1 ns, never 0 ("no timeout").
    sandbox::exec_options none;
    none.timeout = 1s;
    sbx_cli::shrink_timeout(none, -5ms);
    BOOST_TEST(none.timeout.count() == 1);
    BOOST_TEST(none.limits.cpu_millicores == 0); // no cpu cap stays no cpu cap
}

// ---- sanitize_utf8 -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(sanitize_keeps_valid_text)
{
    for (std::string s : {std::string(""), std::string("plain ascii\n\t"),
                          std::string("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
                          std::string("\xEF\xBF\xBD"), std::string("nul\0inside", 10),
                          std::string("\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF")})
        BOOST_TEST(sbx_cli::sanitize_utf8(s) == s);
}

BOOST_AUTO_TEST_CASE(printable_text_escapes_what_a_terminal_would_act_on)
{
    using sandbox::cli::printable_text;
    BOOST_TEST(printable_text("plain text: /a b/c-1.txt ~") == "plain text: /a b/c-1.txt ~");
    BOOST_TEST(printable_text("\x1b[2J\a\r\n\t") == "\\x1b[2J\\x07\\x0d\\x0a\\x09");
    BOOST_TEST(printable_text(std::string("nul\0del\x7f", 8)) == "nul\\x00del\\x7f");
    // C1 controls (U+009B, a CSI to some terminals) and every other non-ASCII byte.
    BOOST_TEST(printable_text("\xc2\x9b" "caf\xc3\xa9") == "\\xc2\\x9bcaf\\xc3\\xa9");
}

BOOST_AUTO_TEST_CASE(sanitize_replaces_each_invalid_sequence)
{
    struct row
    {
        std::string in;
        std::string want;
    };
    for (const auto& r : {
             row{"\x80", fffd},                                 // lone continuation
             row{"a\xBF" "b", "a" + fffd + "b"},                // continuation mid-text
             row{"\xFF\xFE", fffd + fffd},                      // never valid bytes
             row{"\xC0\xAF", fffd + fffd},                      // overlong '/'
             row{"\xC3", fffd},                                 // truncated at the end
             row{"\xC3" "A", fffd + "A"},                       // broken by ASCII
             row{"\xE2\x82", fffd},                             // maximal subpart: one U+FFFD
             row{"\xE2\x82" "x", fffd + "x"},
             row{"\xE0\x80\x80", fffd + fffd + fffd},           // overlong 3-byte
             row{"\xED\xA0\x80", fffd + fffd + fffd},           // surrogate
             row{"\xF0\x9F\x98", fffd},                         // truncated 4-byte
             row{"\xF0\x9F\x98\xF0\x9F\x98\x80", fffd + "\xF0\x9F\x98\x80"},
             row{"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd}, // above U+10FFFF
             row{"\xF5\x80", fffd + fffd},
             row{"ok\xE2\x82\xAC\xE2" "ok", "ok\xE2\x82\xAC" + fffd + "ok"},
         })
    {
        auto out = sbx_cli::sanitize_utf8(r.in);
        BOOST_TEST(out == r.want);
        BOOST_TEST(sbx_cli::sanitize_utf8(out) == out); // idempotent
    }
}

// ---- to_json(exec_result) ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(json_of_a_success)
{
    exec_result r = result_with(exec_status::exited, 3);
    r.out.data = "hello\n";
    r.err.data = "warn \"quoted\"\n";
    r.err.truncated = true;
    r.err.dropped_bytes = 42;
    r.wall_time = 1500us;
    r.cpu_time = 250us;
    r.peak_memory_bytes = 4096;

    auto v = boost::json::parse(sandbox::to_json(r));
    BOOST_REQUIRE(v.is_object());
    const auto& o = v.as_object();
    BOOST_TEST(o.at("exit_code").to_number<int>() == 3);
    BOOST_TEST(o.at("stdout").as_string() == "hello\n");
    BOOST_TEST(o.at("stderr").as_string() == "warn \"quoted\"\n");
    BOOST_TEST(o.at("stdout_truncated").as_bool() == false);
    BOOST_TEST(o.at("stderr_truncated").as_bool() == true);
    BOOST_TEST(o.at("stdout_dropped_bytes").to_number<std::uint64_t>() == 0u);
    BOOST_TEST(o.at("stderr_dropped_bytes").to_number<std::uint64_t>() == 42u);
    BOOST_TEST(o.at("status").as_string() == "exited");
    BOOST_TEST(o.at("signal").to_number<int>() == 0);
    BOOST_TEST(!o.contains("budget"));
    BOOST_TEST(o.at("duration_ms").as_double() == 1.5);
    BOOST_TEST(o.at("cpu_time_ms").as_double() == 0.25);
    BOOST_TEST(o.at("peak_memory_bytes").to_number<std::uint64_t>() == 4096u);
    BOOST_TEST(o.at("in_cgroup").as_bool() == false);
    BOOST_TEST(!o.contains("error"));
    BOOST_TEST(!o.contains("backend"));
    r.in_cgroup = true;
    BOOST_TEST(boost::json::parse(sandbox::to_json(r)).at("in_cgroup").as_bool());
    BOOST_TEST(boost::json::parse(sandbox::to_json(r, {}, "bwrap")).at("backend") == "bwrap");
}

BOOST_AUTO_TEST_CASE(json_of_a_failure)
{
    exec_result r = result_with(exec_status::budget_exceeded, -1, 9);
    r.budget = sandbox::budget_kind::memory;
    r.diag.message = "memory cap exceeded";
    r.diag.limit = "memory";
    auto v = boost::json::parse(sandbox::to_json(r, code(errc::budget_exceeded)));
    const auto& o = v.as_object();
    BOOST_TEST(o.at("exit_code").to_number<int>() == -1);
    BOOST_TEST(o.at("status").as_string() == "budget_exceeded");
    BOOST_TEST(o.at("signal").to_number<int>() == 9);
    BOOST_TEST(o.at("budget").as_string() == "memory");
    const auto& e = o.at("error").as_object();
    BOOST_TEST(e.at("code").as_string() == "budget_exceeded");
    BOOST_TEST(e.at("message").as_string() == sandbox::to_string(r.diag));

    // Without diagnostics the message falls back to the code's message.
    exec_result bare;
    const boost::system::error_code aborted = boost::asio::error::operation_aborted;
    auto w = boost::json::parse(sandbox::to_json(bare, aborted));
    const auto& we = w.as_object().at("error").as_object();
    BOOST_TEST(we.at("code").as_string() == "aborted");
    BOOST_TEST(we.at("message").as_string() ==
               boost::system::error_code(boost::asio::error::operation_aborted).message());
    BOOST_TEST(w.as_object().at("status").as_string() == "not_started");
}

BOOST_AUTO_TEST_CASE(json_numbers_are_plain)
{
    exec_result r = result_with(exec_status::exited, 0);
    struct row
    {
        std::chrono::nanoseconds d;
        const char* text;
    };
    for (auto [d, text] : {row{1003200us, "1003.2"}, row{1000ms, "1000.0"}, row{0ns, "0.0"},
                           row{1ns, "0.000001"}, row{123456789ns, "123.456789"},
                           row{std::chrono::nanoseconds::max(), "9223372036854.775807"}})
    {
        r.wall_time = d;
        r.cpu_time = d;
        r.peak_memory_bytes = std::numeric_limits<std::uint64_t>::max();
        const std::string json = sandbox::to_json(r);
        BOOST_TEST_CONTEXT(json)
        {
            BOOST_TEST(json.find(std::string("\"duration_ms\":") + text + ",") !=
                       std::string::npos);
            BOOST_TEST(json.find(std::string("\"cpu_time_ms\":") + text + ",") !=
                       std::string::npos);
            BOOST_TEST(json.find("\"peak_memory_bytes\":18446744073709551615,") !=
                       std::string::npos);
            auto v = boost::json::parse(json);
            for (const auto& [key, value] : v.as_object())
            {
                if (!value.is_number())
                    continue;
                // The raw text of every number: digits, a sign, a point; no exponent.
                const auto at = json.find("\"" + std::string(key) + "\":") + key.size() + 3;
                const auto raw = json.substr(at, json.find_first_of(",}", at) - at);
                BOOST_TEST(raw.find_first_not_of("-0123456789.") == std::string::npos, raw);
            }
            BOOST_TEST(v.as_object().at("duration_ms").is_double()); // one JSON type always
        }
    }
}

BOOST_AUTO_TEST_CASE(json_reads_back_what_it_wrote)
{
    exec_result r = result_with(exec_status::budget_exceeded, -1);
    r.signal = 9;
    r.diag.message = "memory cap of 1 MiB reached";
    r.diag.limit = "memory";
    r.diag.cause = boost::system::error_code(ENOMEM, boost::system::system_category());
    auto [ec, back] =
        sandbox::exec_result_from_json(sandbox::to_json(r, code(errc::budget_exceeded)));
    BOOST_TEST(ec == code(errc::budget_exceeded));
    BOOST_TEST(back.exit_code == -1);
    BOOST_TEST(back.signal == 9);
    BOOST_TEST(back.status == exec_status::budget_exceeded);
    BOOST_TEST(back.diag.message == sandbox::to_string(r.diag)); // the text as written
    BOOST_TEST(back.diag.limit == "memory");
    BOOST_TEST(back.diag.cause.value() == ENOMEM);

    exec_result ok = result_with(exec_status::exited, 3);
    ok.out.data = "line one\nline \"two\"\n";
    ok.err = {"warning\n", true, 4096};
    auto [ok_ec, ok_back] = sandbox::exec_result_from_json(sandbox::to_json(ok));
    BOOST_TEST(!ok_ec);
    BOOST_TEST(ok_back.exit_code == 3);
    BOOST_TEST(ok_back.status == exec_status::exited);
    BOOST_TEST(ok_back.out.data == ok.out.data); // sandbox-run --connect --instance prints them
    BOOST_TEST(!ok_back.out.truncated);
    BOOST_TEST(ok_back.err.data == "warning\n");
    BOOST_TEST(ok_back.err.truncated);
    BOOST_TEST(ok_back.err.dropped_bytes == 4096u);

    for (const char* bad : {"", "[1]", "{\"exit_code\":", "not json"})
    {
        auto [bad_ec, bad_r] = sandbox::exec_result_from_json(bad);
        BOOST_TEST(bad_ec == code(errc::internal), bad);
        BOOST_TEST(!bad_r.diag.message.empty(), bad);
    }
}

BOOST_AUTO_TEST_CASE(json_is_valid_utf8_for_any_output)
{
    exec_result r = result_with(exec_status::exited, 0);
    r.out.data = std::string("bin\xFF\xC3\0\x01 end", 11);
    r.err.data = "\xE2\x82";
    const std::string text = sandbox::to_json(r);
    BOOST_TEST(text.find('\n') == std::string::npos);
    boost::system::error_code ec;
    auto v = boost::json::parse(text, ec); // the parser rejects invalid UTF-8
    BOOST_REQUIRE(!ec);
    BOOST_TEST(v.as_object().at("stdout").as_string() ==
               "bin" + fffd + fffd + std::string("\0\x01 end", 6));
    BOOST_TEST(v.as_object().at("stderr").as_string() == fffd);
}

BOOST_AUTO_TEST_SUITE_END()
