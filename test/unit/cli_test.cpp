// test/unit/cli_test.cpp: sandbox-run's pure logic: durations, sizes, the command line and the
// default policy, exit statuses, JSON output and UTF-8 sanitizing.
#include "cli.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

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
                   row{"0.000000001s", 1ns}, row{"0.0000000009", 0ns}, row{"0.0015us", 1ns},
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
    BOOST_TEST(r->backend == "local");
}

BOOST_AUTO_TEST_CASE(each_flag_sets_its_field_only)
{
    auto r = parse({"--root", "/srv/root", "--workdir", "sub", "--timeout", "1.5s",
                    "--kill-grace=250ms", "--memory", "64M", "--cpu", "500", "--max-processes",
                    "16", "--max-output", "1K", "--json", "--backend", "local", "cmd"});
    BOOST_REQUIRE(r.has_value());
    const auto& o = r->request.options;
    BOOST_TEST(r->runner.root == "/srv/root");
    BOOST_TEST(o.work_dir == "sub");
    BOOST_TEST(o.timeout.count() == std::chrono::nanoseconds(1500ms).count());
    BOOST_TEST(o.kill_grace.count() == std::chrono::nanoseconds(250ms).count());
    BOOST_TEST(o.limits.memory_bytes == 64 * 1024 * 1024);
    BOOST_TEST(o.limits.cpu_millicores == 500);
    BOOST_TEST(o.limits.max_processes == 16);
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
    temp_file f(std::string("line 1\nbinary \0\xff end", 20));
    auto r = parse({"--stdin-file", f.path(), "cat"});
    BOOST_REQUIRE(r.has_value());
    BOOST_REQUIRE(r->request.options.input.has_value());
    BOOST_TEST(*r->request.options.input == std::string("line 1\nbinary \0\xff end", 20));

    temp_file empty("");
    auto e = parse({"--stdin-file", empty.path(), "cat"});
    BOOST_REQUIRE(e.has_value());
    BOOST_REQUIRE(e->request.options.input.has_value()); // set but empty: EOF at once
    BOOST_TEST(e->request.options.input->empty());

    auto missing = parse({"--stdin-file", "/nonexistent/sbx-cli-test", "cat"});
    BOOST_REQUIRE(!missing);
    BOOST_TEST(missing.error().code == errc::not_found);
    BOOST_TEST(missing.error().diag.path == "/nonexistent/sbx-cli-test");
    BOOST_TEST(missing.error().diag.message.find("/nonexistent/sbx-cli-test") !=
               std::string::npos);

    auto dir = parse({"--stdin-file", "/", "cat"});
    BOOST_REQUIRE(!dir);
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
    check_fails({"--backend", "bwrap", "cmd"}, errc::not_available, "unknown backend");
    check_fails({"--backend", "", "cmd"}, errc::not_available, "unknown backend");
    check_fails({"--enforcement", "--backend", "bwrap"}, errc::not_available, "bwrap");
    auto ok = parse({"--backend", "local", "cmd"});
    BOOST_REQUIRE(ok.has_value());
    BOOST_TEST(ok->backend == "local");
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
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::not_found), not_started) == 127);
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::forbidden), not_started) == 126);
    for (errc e : {errc::validation, errc::policy_denied, errc::not_available, errc::internal,
                   errc::conflict})
        BOOST_TEST(sbx_cli::exit_status_for(code(e), not_started) == 125, e);
    boost::system::error_code os(EIO, boost::system::system_category());
    BOOST_TEST(sbx_cli::exit_status_for(os, not_started) == 125);
    // Forbidden after the command ran is not "cannot execute".
    BOOST_TEST(sbx_cli::exit_status_for(code(errc::forbidden),
                                        result_with(exec_status::exited, 0)) == 125);
    // A success that ran nothing cannot be passed on as an exit code.
    BOOST_TEST(sbx_cli::exit_status_for(ok, not_started) == 125);
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

// ---- result_to_json ------------------------------------------------------------------------

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

    auto v = boost::json::parse(sbx_cli::result_to_json({}, r));
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
    BOOST_TEST(!o.contains("error"));
}

BOOST_AUTO_TEST_CASE(json_of_a_failure)
{
    exec_result r = result_with(exec_status::budget_exceeded, -1, 9);
    r.budget = sandbox::budget_kind::memory;
    r.diag.message = "memory cap exceeded";
    r.diag.limit = "memory";
    auto v = boost::json::parse(sbx_cli::result_to_json(code(errc::budget_exceeded), r));
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
    auto w = boost::json::parse(sbx_cli::result_to_json(aborted, bare));
    const auto& we = w.as_object().at("error").as_object();
    BOOST_TEST(we.at("code").as_string() == "aborted");
    BOOST_TEST(we.at("message").as_string() ==
               boost::system::error_code(boost::asio::error::operation_aborted).message());
    BOOST_TEST(w.as_object().at("status").as_string() == "not_started");
}

BOOST_AUTO_TEST_CASE(json_is_valid_utf8_for_any_output)
{
    exec_result r = result_with(exec_status::exited, 0);
    r.out.data = std::string("bin\xFF\xC3\0\x01 end", 11);
    r.err.data = "\xE2\x82";
    const std::string text = sbx_cli::result_to_json({}, r);
    BOOST_TEST(text.find('\n') == std::string::npos);
    boost::system::error_code ec;
    auto v = boost::json::parse(text, ec); // the parser rejects invalid UTF-8
    BOOST_REQUIRE(!ec);
    BOOST_TEST(v.as_object().at("stdout").as_string() ==
               "bin" + fffd + fffd + std::string("\0\x01 end", 6));
    BOOST_TEST(v.as_object().at("stderr").as_string() == fffd);
}

BOOST_AUTO_TEST_SUITE_END()
