// bench/parse_bench.cpp: how long reading a request body or a config document holds the
// daemon's event loop (sandbox::config::parse_call, parse_document), against
// boost::json::parse of the same bytes in the same run.
//
// Cases (one JSON line each; ratio = value / baseline; medians over rounds, in ms):
//   wide_json_call      parse_call of a ~1 MiB body whose env.inject has 80,000 keys
//   wide_yaml_document  parse_document of a ~1 MiB YAML document (flow style after "--- ")
//                       whose entry's env.inject has 80,000 keys; the baseline parses the
//                       same bytes without the "--- "
//   unknown_keys_call   parse_call of a ~1 MiB body with 80,000 unknown keys at the top
//                       (refused: one problem each, every one in the message)
//   syntax_error_call   parse_call of a ~1 MiB body whose one string ends in a control
//                       character (refused, at that character: the extra passes that find
//                       it); the baseline parses the same body without it
//   deep_json_call      parse_call of 30,000 nested lists (refused: too deep); the baseline
//                       parses them all (max_depth lifted)
//   deep_yaml_document  parse_document of the same bytes, read as YAML (refused)
//   typical_call        parse_call of a request as sandbox-run --connect sends one
//   typical_document    parse_document of a JSON document with two entries
//
// The target (docs/config.md): at most 50 ms of loop time for any body of the maximum size.
//
// Usage: parse_bench [--rounds N] [--quick] [--case NAME]. Exit status: 0, or 1 when a case was not
// accepted or refused as it should be; 64 on a usage error.
#include "common.hpp"

#include <sandbox/config/document.hpp>

#include <boost/json/parse.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace {

namespace cfg = sandbox::config;
using clock_type = std::chrono::steady_clock;

bool failed = false;

void check(bool ok, const char* what)
{
    if (!ok)
    {
        std::fprintf(stderr, "parse_bench: %s\n", what);
        failed = true;
    }
}

template <class F>
double timed_ms(F f)
{
    const auto t0 = clock_type::now();
    f();
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// `{"k00000": "v", ...}`: `keys` members.
std::string wide_object(int keys)
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

std::string deep_lists(int levels) { return std::string(levels, '[') + std::string(levels, ']'); }

std::string wide_call(int keys)
{
    return R"({"command":"env","env":{"inject":)" + wide_object(keys) + "}}";
}

// The wide object with a command added: every other key is unknown.
std::string unknown_keys_call(int keys)
{
    return R"({"command":"env",)" + wide_object(keys).substr(1);
}

// A call whose command is a ~1 MiB string; `last` ends it (a control character there is a
// syntax error at the last value's last byte: the positional passes' worst case).
std::string long_string_call(char last)
{
    return R"({"command":")" + std::string((1 << 20) - 40, 'x') + last + "\"}";
}

std::string document_with(const std::string& defaults)
{
    return R"({"version":"v1","sandboxes":{"b":{"backend":"local","root":"/tmp","defaults":)" +
           defaults + "}}}";
}

const char* typical_call_text = R"({"command": "make", "args": ["-j2", "all"],
  "work_dir": "src", "timeout": "5m", "env": {"inject": {"CI": "1", "LANG": "C.UTF-8"}},
  "resources": {"memory_bytes": "2GiB", "max_processes": 256}})";

const char* typical_document_text = R"({"version": "v1",
  "daemon": {"listen": "/run/sandboxd.sock", "allow_uids": [1000], "max_body_bytes": "1MiB"},
  "sandboxes": {
    "build": {"backend": "local", "root": "/srv/build",
      "defaults": {"timeout": "10m", "kill_grace": "5s",
        "env": {"allow": ["PATH", "HOME"], "inject": {"CI": "1"}},
        "resources": {"memory_bytes": "4GiB", "max_processes": 512}},
      "allowed_commands": ["make", "cmake", "ninja"],
      "approval": {"outside_workdir": true}},
    "agent": {"backend": "local", "root": "/srv/agent",
      "defaults": {"timeout": "30s",
        "net": {"mode": "allow_list",
          "rules": [{"action": "allow", "host": "pypi.org", "port": 443}]}}}}})";

struct bench_case
{
    const char* name;
    std::string text;     // what ours reads
    std::string baseline; // what boost::json::parse reads
    std::function<bool(const std::string&)> ours; // true when accepted
    bool accept;
};

bool call_ok(const std::string& text) { return cfg::parse_call(text).has_value(); }
bool document_ok(const std::string& text) { return cfg::parse_document(text).has_value(); }

double baseline_ms(const std::string& text)
{
    boost::json::parse_options opts;
    opts.max_depth = text.size(); // the whole of a deep one
    boost::system::error_code ec;
    const double ms = timed_ms([&] { boost::json::parse(text, ec, {}, opts); });
    check(!ec, "boost::json::parse refused a baseline");
    return ms;
}

void run(const bench_case& c, int rounds)
{
    const auto r = bench::measure_rounds(rounds, [&] {
        const double base = baseline_ms(c.baseline);
        bool accepted = false;
        const double ours = timed_ms([&] { accepted = c.ours(c.text); });
        check(accepted == c.accept, c.name);
        return std::pair(ours, base);
    });
    bench::print_json("parse", c.name, r.ours_median(), "ms", r.base_median());
}

} // namespace

int main(int argc, char** argv)
{
    int rounds = 5;
    std::string only;
    for (int i = 1; i < argc; ++i)
    {
        const std::string arg = argv[i];
        if (arg == "--quick")
            rounds = 1;
        else if (arg == "--rounds" && i + 1 < argc)
            rounds = std::atoi(argv[++i]);
        else if (arg == "--case" && i + 1 < argc)
            only = argv[++i];
        else
        {
            std::fprintf(stderr, "usage: parse_bench [--rounds N] [--quick] [--case NAME]\n");
            return 64;
        }
    }
    bench::print_machine(stdout);
    const std::string wide_yaml = document_with(R"({"env":{"inject":)" + wide_object(80000) + "}}");
    const std::string deep = deep_lists(30000);
    const bench_case cases[] = {
        {"wide_json_call", wide_call(80000), wide_call(80000), call_ok, true},
        {"wide_yaml_document", "--- " + wide_yaml, wide_yaml, document_ok, true},
        {"unknown_keys_call", unknown_keys_call(80000), unknown_keys_call(80000), call_ok, false},
        {"syntax_error_call", long_string_call('\x01'), long_string_call('y'), call_ok, false},
        {"deep_json_call", deep, deep, call_ok, false},
        {"deep_yaml_document", deep, deep, document_ok, false},
        {"typical_call", typical_call_text, typical_call_text, call_ok, true},
        {"typical_document", typical_document_text, typical_document_text, document_ok, true},
    };
    for (const auto& c : cases)
    {
        if (!only.empty() && only != c.name)
            continue;
        check(c.text.size() <= cfg::max_document_bytes, "a case is larger than 1 MiB");
        run(c, rounds);
    }
    return failed ? 1 : 0;
}
