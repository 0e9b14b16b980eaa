// tools/sandbox-run/cli.cpp: option parsing, default policy, exit status and JSON of sandbox-run.
#include "cli.hpp"

#include <sandbox/host_port.hpp>

#include <sandbox/error.hpp>
#include <sandbox/policy/predicates.hpp>

#include <boost/asio/error.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string_view.hpp>
#include <boost/json/value.hpp>
#include <boost/program_options/errors.hpp>
#include <boost/program_options/options_description.hpp>
#include <boost/program_options/parsers.hpp>
#include <boost/program_options/value_semantic.hpp>
#include <boost/program_options/variables_map.hpp>
#include <utility>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::cli {

namespace po = boost::program_options;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

bool is_digit(char c) { return c >= '0' && c <= '9'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// A whole string of decimal digits as a non-negative int64; nullopt-like failure otherwise.
outcome<std::int64_t> parse_count(std::string_view text, const char* what)
{
    if (text.empty())
        return make_failure(errc::validation, std::string("empty ") + what);
    if (text[0] == '-')
        return make_failure(errc::validation, std::string(what) + " " + in_quotes(text) +
                                                  " is negative");
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range)
        return make_failure(errc::validation, std::string(what) + " " + in_quotes(text) +
                                                  " is too large");
    if (ec != std::errc() || end != text.data() + text.size() || !is_digit(text[0]))
        return make_failure(errc::validation, std::string("invalid ") + what + " " +
                                                  in_quotes(text) + ": expected an integer");
    return v;
}

} // namespace

// ---------------------------------------------------------------------------------------
// Durations and sizes
// ---------------------------------------------------------------------------------------

outcome<std::chrono::nanoseconds> parse_duration(std::string_view text)
{
    auto bad = [&](const std::string& why) {
        return make_failure(errc::validation, "invalid duration " + in_quotes(text) + ": " + why);
    };
    if (text.empty())
        return make_failure(errc::validation, "empty duration");
    if (text[0] == '-')
        return bad("durations cannot be negative");

    std::size_t i = 0;
    while (i < text.size() && is_digit(text[i]))
        ++i;
    std::string_view whole = text.substr(0, i);
    std::string_view fraction;
    if (i < text.size() && text[i] == '.')
    {
        std::size_t start = ++i;
        while (i < text.size() && is_digit(text[i]))
            ++i;
        fraction = text.substr(start, i - start);
        if (fraction.empty())
            return bad("expected digits after the decimal point");
    }
    if (whole.empty())
        return bad("expected a number with an optional unit (ns, us, ms, s, m, h)");

    std::string_view unit_text = text.substr(i);
    std::uint64_t unit = 0;
    if (unit_text.empty() || unit_text == "s")
        unit = 1'000'000'000;
    else if (unit_text == "ns")
        unit = 1;
    else if (unit_text == "us")
        unit = 1'000;
    else if (unit_text == "ms")
        unit = 1'000'000;
    else if (unit_text == "m")
        unit = 60'000'000'000;
    else if (unit_text == "h")
        unit = 3'600'000'000'000;
    else
        return bad("unknown unit " + in_quotes(unit_text) + " (use ns, us, ms, s, m or h)");

    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), n);
    if (ec == std::errc::result_out_of_range)
        return bad("too large");
    if (ec != std::errc() || end != whole.data() + whole.size())
        return bad("expected a number");
    constexpr auto max = static_cast<std::uint64_t>(int64_max);
    if (n > max / unit)
        return bad("too large");
    std::uint64_t total = n * unit;

    // ceil(0.fraction * unit), exactly: Horner's rule from the last digit; each step keeps
    // the value below 2 * unit, and rounding up at every step equals rounding up once at the
    // end. Rounding up keeps a positive duration positive ("0.4ns" is 1 ns, not "none").
    std::uint64_t part = 0;
    for (auto it = fraction.rbegin(); it != fraction.rend(); ++it)
        part = (static_cast<std::uint64_t>(*it - '0') * unit + part + 9) / 10;
    if (part > max - total)
        return bad("too large");
    total += part;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(total));
}

outcome<std::int64_t> parse_size(std::string_view text)
{
    auto bad = [&](const std::string& why) {
        return make_failure(errc::validation, "invalid size " + in_quotes(text) + ": " + why);
    };
    if (text.empty())
        return make_failure(errc::validation, "empty size");
    if (text[0] == '-')
        return bad("sizes cannot be negative");

    std::size_t i = 0;
    while (i < text.size() && is_digit(text[i]))
        ++i;
    if (i == 0)
        return bad("expected an integer with an optional unit (K, M, G, T, KiB, ...)");
    if (i < text.size() && text[i] == '.')
        return bad("fractions are not allowed (use a smaller unit)");

    std::string unit_text;
    for (char c : text.substr(i))
        unit_text += lower(c);
    int shift = 0;
    if (unit_text.empty() || unit_text == "b")
        shift = 0;
    else if (unit_text == "k" || unit_text == "kib")
        shift = 10;
    else if (unit_text == "m" || unit_text == "mib")
        shift = 20;
    else if (unit_text == "g" || unit_text == "gib")
        shift = 30;
    else if (unit_text == "t" || unit_text == "tib")
        shift = 40;
    else if (unit_text == "kb" || unit_text == "mb" || unit_text == "gb" || unit_text == "tb")
        return bad("ambiguous unit " + in_quotes(text.substr(i)) +
                   " (units are binary: use K, M, G, T or KiB, MiB, GiB, TiB)");
    else
        return bad("unknown unit " + in_quotes(text.substr(i)) +
                   " (use K, M, G, T or KiB, MiB, GiB, TiB)");

    std::int64_t n = 0;
    std::string_view digits = text.substr(0, i);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc::result_out_of_range)
        return bad("too large");
    if (ec != std::errc() || end != digits.data() + digits.size())
        return bad("expected an integer");
    if (n > (int64_max >> shift))
        return bad("too large");
    return n << shift;
}

// ---------------------------------------------------------------------------------------
// Policy and command line
// ---------------------------------------------------------------------------------------

namespace {

const std::vector<std::string>& default_env_allow()
{
    static const std::vector<std::string> names{"PATH", "HOME",    "USER",     "LOGNAME",
                                                "LANG", "LC_ALL",  "LC_CTYPE", "TERM",
                                                "TZ",   "TMPDIR",  "SHELL"};
    return names;
}

constexpr std::chrono::nanoseconds default_timeout = 10min;
constexpr std::int64_t default_max_processes = 1024;

po::options_description make_options()
{
    po::options_description d("sandbox-run options");
    // clang-format off
    d.add_options()
        ("root", po::value<std::string>(), "")
        ("workdir", po::value<std::string>(), "")
        ("timeout", po::value<std::string>(), "")
        ("kill-grace", po::value<std::string>(), "")
        ("memory", po::value<std::string>(), "")
        ("cpu", po::value<std::string>(), "")
        ("max-processes", po::value<std::string>(), "")
        ("max-tasks", po::value<std::string>(), "")
        ("max-output", po::value<std::string>(), "")
        ("env-allow", po::value<std::vector<std::string>>()->composing(), "")
        ("env-clear", po::bool_switch(), "")
        ("env", po::value<std::vector<std::string>>()->composing(), "")
        ("stdin-file", po::value<std::string>(), "")
        ("json", po::bool_switch(), "")
        ("tty", po::bool_switch(), "")
        ("enforcement", po::bool_switch(), "")
        ("cgroup", po::value<std::string>(), "")
        ("backend", po::value<std::string>(), "")
        ("net", po::value<std::string>(), "")
        ("allow-host", po::value<std::vector<std::string>>()->composing(), "")
        ("deny-host", po::value<std::vector<std::string>>()->composing(), "")
        ("proxy", po::value<std::string>(), "")
        ("resolve", po::value<std::vector<std::string>>()->composing(), "")
        ("writable", po::value<std::vector<std::string>>()->composing(), "")
        ("read-only", po::value<std::vector<std::string>>()->composing(), "")
        ("read-deny", po::value<std::vector<std::string>>()->composing(), "")
        ("write-deny", po::value<std::vector<std::string>>()->composing(), "")
        ("unix-socket", po::value<std::vector<std::string>>()->composing(), "")
        ("sandbox-user", po::value<std::string>(), "")
        ("allow-command", po::value<std::vector<std::string>>()->composing(), "")
        ("ask", po::value<std::vector<std::string>>()->composing(), "")
        ("ask-timeout", po::value<std::string>(), "")
        ("audit", po::value<std::string>(), "")
        ("config", po::value<std::string>(), "")
        ("sandbox", po::value<std::string>(), "")
        ("check", po::bool_switch(), "")
        ("workspace", po::value<std::vector<std::string>>()->composing(), "")
        ("connect", po::value<std::string>(), "")
        ("help,h", po::bool_switch(), "");
    // clang-format on
    return d;
}

// Index of the first argument that belongs to the command (argc when there is none), and
// whether a "--" separator was seen just before it.
struct split_point
{
    int command = 0;
    bool separator = false;
};

split_point find_command(int argc, const char* const* argv, const po::options_description& d)
{
    int i = 1;
    while (i < argc)
    {
        std::string_view a = argv[i];
        if (a == "--")
            return {i + 1, true};
        if (a.size() < 2 || a[0] != '-')
            return {i, false};
        if (a.size() > 2 && a[1] == '-' && a.find('=') == std::string_view::npos)
        {
            // "--name VALUE": skip the value too when the option takes one. Unknown options
            // are left for program_options to reject.
            const po::option_description* o =
                d.find_nothrow(std::string(a.substr(2)), false, false, false);
            if (o && o->semantic()->max_tokens() > 0)
                ++i;
        }
        ++i;
    }
    return {argc, false};
}

struct stdin_file
{
    std::shared_ptr<const unique_fd> fd;
    bool fifo = false;
};

outcome<stdin_file> open_input_file(const std::string& path)
{
    auto fail = [&](int e, const std::string& why) {
        auto f = make_failure(errc_from_errno(e), "--stdin-file " + in_quotes(path) + ": " + why,
                              "input");
        f.diag.path = path;
        f.diag.cause = boost::system::error_code(e, boost::system::system_category());
        return f;
    };
    // O_NONBLOCK: opening a FIFO must not wait for a writer before the timeout even starts
    // (main waits for one under the timeout); the child gets a blocking descriptor.
    unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (!fd)
        return fail(errno, std::strerror(errno));
    struct stat st;
    if (::fstat(fd.get(), &st) != 0)
        return fail(errno, std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        return fail(EISDIR, "is a directory");
    int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
        return fail(errno, std::strerror(errno));
    stdin_file f;
    f.fd = std::make_shared<const unique_fd>(std::move(fd));
    f.fifo = S_ISFIFO(st.st_mode);
    return f;
}

// --config, --sandbox, --check, --workspace, and the flags an entry decides instead.
outcome<void> parse_config_flags(const po::variables_map& vm, run_config& cfg)
{
    auto has = [&vm](const char* name) { return vm.count(name) > 0 && !vm[name].defaulted(); };
    cfg.check = vm["check"].as<bool>();
    if (has("config") && (cfg.config_file = vm["config"].as<std::string>()).empty())
        return make_failure(errc::validation, "--config: empty file name", "config");
    if (has("sandbox"))
        cfg.sandbox_name = vm["sandbox"].as<std::string>();
    if (has("workspace"))
        for (const auto& kv : vm["workspace"].as<std::vector<std::string>>())
        {
            const auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
                return make_failure(errc::validation,
                                    "--workspace: expected NAME=DIR, got " + in_quotes(kv),
                                    "workspace");
            cfg.workspaces[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
    if (has("connect"))
    {
        cfg.connect = vm["connect"].as<std::string>();
        if (cfg.connect.empty() || cfg.sandbox_name.empty())
            return make_failure(errc::validation, "--connect SOCKET needs --sandbox NAME",
                                "connect");
        for (const char* flag :
             {"config", "check", "workspace", "backend", "root", "cgroup", "writable", "read-only",
              "read-deny", "write-deny", "unix-socket", "sandbox-user", "resolve", "allow-command",
              "ask", "ask-timeout", "audit", "enforcement"})
            if (has(flag) && (std::string_view(flag) != "check" || cfg.check) &&
                (std::string_view(flag) != "enforcement" || vm["enforcement"].as<bool>()))
                return make_failure(errc::validation,
                                    std::string("--") + flag +
                                        " cannot be used with --connect (the daemon's sandbox "
                                        "decides it, or the client cannot do it yet)",
                                    "connect");
        cfg.tty = vm["tty"].as<bool>();
        const bool json = vm["json"].as<bool>(); // (cfg.json is set after these flags)
        if (has("stdin-file") && (cfg.tty || json))
            return make_failure(errc::validation,
                                "--stdin-file with --connect is streamed to the session: not "
                                "with --tty (the terminal is stdin) or --json (one exec)",
                                "stdin-file");
        if (has("stdin-file"))
        {
            auto file = open_input_file(vm["stdin-file"].as<std::string>());
            if (!file)
                return file.error();
            cfg.request.stdin_fd = std::move(file->fd);
            cfg.stdin_fifo = file->fifo;
        }
        if (cfg.tty && json)
            return make_failure(errc::validation,
                                "--tty and --json exclude each other (a terminal session is "
                                "streamed to this terminal)",
                                "tty");
        return {};
    }
    if (cfg.config_file.empty())
    {
        for (const char* flag : {"sandbox", "check", "workspace"})
            if (has(flag) && (std::string_view(flag) != "check" || cfg.check))
                return make_failure(errc::validation,
                                    std::string("--") + flag + " needs --config FILE", "config");
        return {};
    }
    if (cfg.check && !cfg.sandbox_name.empty())
        return make_failure(errc::validation, "--check checks every entry: no --sandbox",
                            "config");
    if (!cfg.check && cfg.sandbox_name.empty())
        return make_failure(errc::validation, "--config needs --sandbox NAME (or --check)",
                            "config");
    for (const char* flag : {"backend", "root", "cgroup", "writable", "read-only", "read-deny",
                             "write-deny", "unix-socket", "sandbox-user", "resolve"})
        if (has(flag))
            return make_failure(
                errc::validation,
                std::string("--") + flag + " cannot be used with --config: the entry decides it " +
                    (std::string_view(flag) == "resolve" ? "(pin names in its defaults.net.resolve)"
                                                         : "(its backend, root and settings)"),
                "config");
    return {};
}

failure option_failure(const char* option, const failure& inner, const char* field)
{
    failure f = inner;
    f.diag.message = std::string("--") + option + ": " + inner.diag.message;
    f.diag.limit = field;
    return f;
}

} // namespace

sandbox::exec_options default_policy()
{
    sandbox::exec_options o;
    o.env.allow = default_env_allow();
    o.timeout = default_timeout;
    o.kill_grace = 0ns;
    o.limits.max_output_bytes = sandbox::default_max_output_bytes;
    o.limits.max_processes = default_max_processes;
    o.limits.memory_bytes = 0;
    o.limits.cpu_millicores = 0;
    return o;
}

outcome<sandbox::net_rule> parse_host_rule(std::string_view text, sandbox::net_action action)
{
    auto split = sandbox::split_host_port(text); // the library's reading of HOST:PORT
    if (!split)
    {
        failure f = split.error();
        f.diag.limit = "net.rules";
        return f;
    }
    sandbox::net_rule rule;
    rule.action = action;
    rule.host = std::string(split->host);
    rule.port = split->port;
    return rule;
}

std::vector<std::string> loopback_rule_notes(const sandbox::net_policy& net)
{
    std::vector<std::string> out;
    for (const auto& r : net.rules)
    {
        if (r.action != sandbox::net_action::allow || !sandbox::is_loopback_host(r.host))
            continue;
        const std::string port = r.port > 0 ? ":" + std::to_string(r.port) : "";
        out.push_back("note: --allow-host " + r.host + port + ": inside the sandbox " + r.host +
                      " is the sandbox's own loopback (clients do not proxy it: no_proxy "
                      "lists localhost, 127.0.0.1 and ::1); to reach a service on the host's "
                      "loopback, use the name " +
                      std::string(sandbox::host_loopback_name) + " and allow it: --allow-host " +
                      std::string(sandbox::host_loopback_name) + port);
    }
    return out;
}

namespace {

// `path` is `dir` or below it.
bool under(const std::string& path, const std::string& dir)
{
    if (dir.empty())
        return false;
    const std::string d = dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
    return path == d || path.rfind(d + "/", 0) == 0;
}

// The /tmp paths an argument names: all of it, or what follows its first '='.
std::optional<std::string> tmp_path_in(const std::string& arg)
{
    for (const std::string& candidate :
         {arg, arg.find('=') == std::string::npos ? std::string() : arg.substr(arg.find('=') + 1)})
        if (candidate.rfind("/tmp/", 0) == 0 && candidate.size() > 5)
            return candidate;
    return std::nullopt;
}

} // namespace

std::vector<std::string> private_tmp_notes(const run_config& cfg,
                                           const std::function<bool(const std::string&)>& exists)
{
    std::vector<std::string> out;
    std::vector<std::string> shown = cfg.bwrap.writable;
    shown.insert(shown.end(), cfg.bwrap.read_only.begin(), cfg.bwrap.read_only.end());
    shown.push_back(cfg.runner.root);
    std::vector<std::string> args{cfg.request.command};
    args.insert(args.end(), cfg.request.args.begin(), cfg.request.args.end());
    for (const auto& arg : args)
    {
        const auto path = tmp_path_in(arg);
        if (!path || !exists(*path) ||
            std::any_of(shown.begin(), shown.end(), [&](auto& d) { return under(*path, d); }))
            continue;
        out.push_back("note: " + *path +
                      " is on the host's /tmp, which the sandbox does not see (its /tmp is "
                      "private): bind it with --read-only " +
                      *path + " (or --writable DIR for a directory the command writes)");
    }
    return out;
}

outcome<std::pair<std::string, std::string>> parse_resolve(std::string_view text)
{
    const auto eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
        return make_failure(errc::validation,
                            "--resolve: expected HOST=ADDRESS, got " + in_quotes(text),
                            "resolve");
    return std::pair{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

namespace {

outcome<sandbox::net_mode> parse_net_mode_flag(const std::string& n)
{
    if (n == "deny" || n == "deny_all" || n == "deny-all")
        return sandbox::net_mode::deny_all;
    if (n == "inherit" || n == "default")
        return sandbox::net_mode::inherit;
    if (n == "allow-list" || n == "allow_list")
        return sandbox::net_mode::allow_list;
    if (n == "proxy")
        return sandbox::net_mode::proxy;
    return make_failure(errc::validation,
                        "--net: expected allow-list, proxy, deny or inherit, got " + in_quotes(n),
                        "net.mode");
}

// --allow-host and --proxy choose their mode when --net does not; a mode that cannot use
// them is a usage error, not a silent drop.
outcome<void> imply_net_mode(sandbox::net_policy& net, bool mode_given)
{
    const bool rules = !net.rules.empty();
    const bool proxy = !net.proxy.empty();
    if (!mode_given)
    {
        if (proxy)
            net.mode = sandbox::net_mode::proxy;
        else if (rules && std::any_of(net.rules.begin(), net.rules.end(), [](auto& r) {
                     return r.action == sandbox::net_action::allow;
                 }))
            net.mode = sandbox::net_mode::allow_list;
    }
    const bool proxied =
        net.mode == sandbox::net_mode::allow_list || net.mode == sandbox::net_mode::proxy;
    if ((rules || proxy) && !proxied)
        return make_failure(errc::validation,
                            "--allow-host, --deny-host and --proxy need --net allow-list or "
                            "proxy (--allow-host and --proxy choose them)",
                            "net.mode");
    return {};
}

// --net, --allow-host, --deny-host, --proxy, --resolve: the network policy and the proxy's
// pins. All of it needs the bwrap backend (its egress proxy); the local backend refuses it.
outcome<void> parse_net_flags(const po::variables_map& vm, run_config& cfg)
{
    auto has = [&vm](const char* name) { return vm.count(name) > 0 && !vm[name].defaulted(); };
    sandbox::net_policy& net = cfg.request.options.net;
    if (has("net"))
    {
        auto m = parse_net_mode_flag(vm["net"].as<std::string>());
        if (!m)
            return m.error();
        net.mode = *m;
    }
    for (auto [name, action] : {std::pair{"allow-host", sandbox::net_action::allow},
                                std::pair{"deny-host", sandbox::net_action::deny}})
        if (has(name))
            for (const auto& t : vm[name].as<std::vector<std::string>>())
            {
                auto rule = parse_host_rule(t, action);
                if (!rule)
                    return rule.error();
                net.rules.push_back(std::move(*rule));
            }
    if (has("proxy") && (net.proxy = vm["proxy"].as<std::string>()).empty())
        return make_failure(errc::validation, "--proxy: empty URL", "net.proxy");
    if (has("resolve"))
        for (const auto& t : vm["resolve"].as<std::vector<std::string>>())
        {
            auto pin = parse_resolve(t);
            if (!pin)
                return pin.error();
            cfg.net_proxy.resolve.push_back(std::move(*pin));
        }
    if (auto r = imply_net_mode(net, has("net")); !r)
        return r;
    const bool proxied =
        net.mode == sandbox::net_mode::allow_list || net.mode == sandbox::net_mode::proxy;
    if ((proxied || !cfg.net_proxy.resolve.empty()) && cfg.backend == "local")
    {
        auto f = make_failure(errc::not_available,
                              "--net allow-list and proxy, --allow-host, --deny-host, --proxy "
                              "and --resolve need --backend bwrap or auto (its egress proxy); "
                              "the local backend cannot confine a command's network",
                              "net.mode");
        f.diag.backend = cfg.backend;
        return f;
    }
    if (!cfg.net_proxy.resolve.empty() && !proxied)
        return make_failure(errc::validation,
                            "--resolve needs --net allow-list or proxy (it pins names for the "
                            "egress proxy)",
                            "resolve");
    return {};
}

} // namespace

// --allow-command, --ask, --ask-timeout, --audit: checked here, so a bad pattern or name
// is a usage error before anything runs.
outcome<run_config::chain_flags> parse_chain_flags(const po::variables_map& vm)
{
    run_config::chain_flags c;
    auto list = [&vm](const char* name) {
        return vm.count(name) ? vm[name].as<std::vector<std::string>>()
                              : std::vector<std::string>{};
    };
    if (vm.count("allow-command"))
    {
        c.allowed_commands = list("allow-command");
        for (const auto& n : *c.allowed_commands)
            if (n.empty())
                return make_failure(errc::validation, "--allow-command: empty command name",
                                    "allowed_commands");
    }
    c.ask = list("ask");
    try
    {
        (void)sandbox::command_patterns(c.ask);
    }
    catch (const sandbox::error& e)
    {
        auto f = make_failure(errc::validation, "--ask: " + e.diag().message, "ask");
        f.diag.rule = e.diag().rule;
        return f;
    }
    if (vm.count("ask-timeout") && c.ask.empty())
        return make_failure(errc::validation, "--ask-timeout needs --ask", "ask_timeout");
    if (vm.count("ask-timeout"))
    {
        auto v = parse_duration(vm["ask-timeout"].as<std::string>());
        if (!v)
            return option_failure("ask-timeout", v.error(), "ask_timeout");
        if (*v <= std::chrono::nanoseconds::zero())
            return make_failure(errc::validation, "--ask-timeout: must be positive",
                                "ask_timeout");
        c.ask_timeout = *v;
    }
    if (vm.count("audit"))
    {
        c.audit = vm["audit"].as<std::string>();
        if (c.audit.empty())
            return make_failure(errc::validation, "--audit: empty file name", "audit");
    }
    return c;
}

outcome<run_config> parse_command_line(int argc, const char* const* argv)
{
    const po::options_description desc = make_options();
    const split_point split = find_command(argc, argv, desc);

    po::variables_map vm;
    try
    {
        std::vector<std::string> ours(argv + (argc > 0 ? 1 : 0),
                                      argv + (split.separator ? split.command - 1
                                                              : split.command));
        namespace style = po::command_line_style;
        const int s = style::unix_style & ~style::allow_guessing;
        po::store(po::command_line_parser(ours).options(desc).style(s).run(), vm);
        po::notify(vm);
    }
    catch (const po::error& e)
    {
        return make_failure(errc::validation, e.what());
    }

    run_config cfg;
    if (auto r = parse_config_flags(vm, cfg); !r)
        return r.error();
    // Through a config entry, the entry's policy is the default and the flags narrow it.
    cfg.request.options =
        cfg.config_file.empty() && cfg.connect.empty() ? default_policy() : exec_options{};
    cfg.runner.default_max_output_bytes = sandbox::default_max_output_bytes;
    exec_options& o = cfg.request.options;
    auto has = [&vm](const char* name) { return vm.count(name) > 0 && !vm[name].defaulted(); };
    auto text = [&vm](const char* name) { return vm[name].as<std::string>(); };

    cfg.help = vm["help"].as<bool>();
    if (cfg.help)
        return cfg;
    cfg.json = vm["json"].as<bool>();
    cfg.tty = vm["tty"].as<bool>();
    if (cfg.tty && cfg.json)
        return make_failure(errc::validation,
                            "--tty and --json exclude each other (a terminal session is "
                            "interactive; its output is not captured)",
                            "tty");
    cfg.enforcement = vm["enforcement"].as<bool>();

    if (has("backend"))
        cfg.backend = text("backend");
    if (cfg.backend != "auto" && cfg.backend != "local" && cfg.backend != "bwrap")
    {
        auto f = make_failure(errc::not_available,
                              "unknown backend " + in_quotes(cfg.backend) +
                                  " (\"auto\", \"local\" or \"bwrap\")",
                              "backend");
        f.diag.backend = cfg.backend;
        return f;
    }

    if (auto r = parse_net_flags(vm, cfg); !r)
        return r.error();
    for (auto [name, target] :
         {std::pair{"writable", &cfg.bwrap.writable}, std::pair{"read-deny", &cfg.bwrap.read_deny},
          std::pair{"write-deny", &cfg.bwrap.write_deny},
          std::pair{"unix-socket", &cfg.bwrap.unix_sockets},
          std::pair{"read-only", &cfg.bwrap.read_only}})
        if (has(name))
            *target = vm[name].as<std::vector<std::string>>();
    for (const auto& p : cfg.bwrap.read_only)
        if (p.empty() || p.front() != '/')
            return make_failure(errc::validation,
                                "--read-only: " + in_quotes(p) + " is not an absolute path",
                                "read_only");
    if (has("sandbox-user") && (cfg.bwrap.sandbox_user = text("sandbox-user")).empty())
        return make_failure(errc::validation, "--sandbox-user: expected USER or USER:GROUP",
                            "sandbox_user");
    if (!cfg.bwrap.empty() && cfg.backend == "local")
        return make_failure(errc::validation,
                            "--writable, --read-only, --read-deny, --write-deny, "
                            "--unix-socket and --sandbox-user need --backend bwrap or auto "
                            "(the local backend "
                            "cannot enforce them)",
                            "backend");

    if (auto chain = parse_chain_flags(vm); !chain)
        return chain.error();
    else
        cfg.chain = std::move(*chain);

    if (has("root"))
    {
        cfg.runner.root = text("root");
        if (cfg.runner.root.empty())
            return make_failure(errc::validation, "--root: empty directory", "root");
    }
    if (has("workdir"))
        o.work_dir = text("workdir");
    if (has("cgroup"))
    {
        cfg.runner.cgroup = text("cgroup");
        const auto& c = cfg.runner.cgroup;
        if (c != "auto" && c != "off" && (c.empty() || c.front() != '/'))
            return make_failure(errc::validation,
                                "--cgroup: auto, off, or an absolute directory of the cgroup2 "
                                "mount, not '" + c + "'",
                                "cgroup");
    }

    struct duration_option
    {
        const char* name;
        const char* field;
        std::chrono::nanoseconds* target;
    };
    for (auto d : {duration_option{"timeout", "timeout", &o.timeout},
                   duration_option{"kill-grace", "kill_grace", &o.kill_grace}})
    {
        if (!has(d.name))
            continue;
        auto v = parse_duration(text(d.name));
        if (!v)
            return option_failure(d.name, v.error(), d.field);
        *d.target = *v;
    }

    struct number_option
    {
        const char* name;
        const char* field;
        std::int64_t* target;
        bool size;
    };
    for (auto n : {number_option{"memory", "memory", &o.limits.memory_bytes, true},
                   number_option{"cpu", "cpu", &o.limits.cpu_millicores, false},
                   number_option{"max-processes", "processes", &o.limits.max_processes, false},
                   number_option{"max-tasks", "tasks", &o.limits.max_tasks, false},
                   number_option{"max-output", "output", &o.limits.max_output_bytes, true}})
    {
        if (!has(n.name))
            continue;
        auto v = n.size ? parse_size(text(n.name)) : parse_count(text(n.name), "number");
        if (!v)
            return option_failure(n.name, v.error(), n.field);
        *n.target = *v;
    }
    // "--max-output 0" keeps everything: no request cap and no runner default either.
    if (has("max-output") && o.limits.max_output_bytes == 0)
        cfg.runner.default_max_output_bytes = 0;

    const bool env_clear = vm["env-clear"].as<bool>();
    if (env_clear && has("env-allow"))
        return make_failure(errc::validation, "--env-clear and --env-allow exclude each other",
                            "env");
    if (env_clear)
        o.env.allow = std::vector<std::string>{};
    if (has("env-allow"))
    {
        auto names = vm["env-allow"].as<std::vector<std::string>>();
        for (const auto& n : names)
            if (n.empty() || n.find('=') != std::string::npos)
                return make_failure(errc::validation,
                                    "--env-allow: invalid variable name " + in_quotes(n), "env");
        o.env.allow = std::move(names);
    }
    if (has("env"))
    {
        for (const auto& kv : vm["env"].as<std::vector<std::string>>())
        {
            auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0)
                return make_failure(errc::validation,
                                    "--env: expected NAME=VALUE, got " + in_quotes(kv), "env");
            o.env.inject[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
    }

    if (has("stdin-file") && cfg.tty)
        return make_failure(errc::validation,
                            "--tty and --stdin-file exclude each other (the terminal is stdin)",
                            "tty");
    if (has("stdin-file"))
    {
        auto file = open_input_file(text("stdin-file"));
        if (!file)
            return file.error();
        cfg.request.stdin_fd = std::move(file->fd);
        cfg.stdin_fifo = file->fifo;
    }

    if (split.command < argc)
    {
        cfg.request.command = argv[split.command];
        cfg.request.args.assign(argv + split.command + 1, argv + argc);
    }
    else if (!cfg.enforcement && !cfg.check)
        return make_failure(errc::validation, "missing COMMAND", "command");
    if (cfg.check && split.command < argc)
        return make_failure(errc::validation, "--check takes no COMMAND", "command");
    return cfg;
}

// ---------------------------------------------------------------------------------------
// The backend
// ---------------------------------------------------------------------------------------

std::vector<std::string> bwrap_only_flags(const run_config& cfg)
{
    std::vector<std::string> out;
    for (auto [flag, given] : {std::pair{"--writable", !cfg.bwrap.writable.empty()},
                               std::pair{"--read-deny", !cfg.bwrap.read_deny.empty()},
                               std::pair{"--write-deny", !cfg.bwrap.write_deny.empty()},
                               std::pair{"--unix-socket", !cfg.bwrap.unix_sockets.empty()},
                               std::pair{"--read-only", !cfg.bwrap.read_only.empty()},
                               std::pair{"--sandbox-user", !cfg.bwrap.sandbox_user.empty()}})
        if (given)
            out.emplace_back(flag);
    switch (cfg.request.options.net.mode)
    {
    case sandbox::net_mode::deny_all: out.emplace_back("--net deny"); break;
    case sandbox::net_mode::allow_list: out.emplace_back("--net allow-list (--allow-host)"); break;
    case sandbox::net_mode::proxy: out.emplace_back("--net proxy (--proxy)"); break;
    case sandbox::net_mode::inherit: break;
    }
    if (!cfg.net_proxy.resolve.empty())
        out.emplace_back("--resolve");
    return out;
}

namespace {

std::string joined(const std::vector<std::string>& names)
{
    std::string out;
    for (const auto& n : names)
        out += (out.empty() ? "" : ", ") + n;
    return out;
}

} // namespace

backend_choice choose_backend(const std::optional<failure>& bwrap_check,
                              const std::vector<std::string>& bwrap_only)
{
    backend_choice c;
    c.backend = "bwrap";
    if (!bwrap_check)
    {
        c.reason = "bubblewrap can create its namespaces here for this command line";
        return c;
    }
    const std::string& why = bwrap_check->diag.message;
    failure refusal = *bwrap_check;
    refusal.diag.backend = "bwrap";
    if (bwrap_check->code != errc::not_available)
    {
        // bwrap refuses this command line: the local backend would run it unconfined.
        refusal.diag.message += " (the default backend, auto, runs commands inside "
                                "bubblewrap and never falls back to the local backend for "
                                "a command line bubblewrap refuses; --backend local runs it "
                                "unconfined)";
        c.reason = "refused: bubblewrap refuses this command line: " + why;
        c.refusal = std::move(refusal);
        return c;
    }
    if (!bwrap_only.empty())
    {
        refusal.diag.message = joined(bwrap_only) + " need" + (bwrap_only.size() == 1 ? "s" : "") +
                               " the bwrap backend, which is not usable here: " + why;
        c.reason = "refused: " + refusal.diag.message;
        c.refusal = std::move(refusal);
        return c;
    }
    c.backend = "local";
    c.reason = "bubblewrap is not usable here: " + why;
    c.warning = "warning: bubblewrap is not usable here (" + why +
                "); running on the local backend, which confines nothing";
    return c;
}

std::string enforcement_to_json(const sandbox::enforcement_report& e, std::string_view backend,
                                std::string_view reason)
{
    boost::json::object out;
    out["backend"] = boost::json::string_view(backend.data(), backend.size());
    if (!reason.empty())
        out["backend_reason"] =
            sanitize_utf8(std::string(reason)); // bwrap's stderr may be in it
    const boost::json::value report = boost::json::parse(to_json(e));
    for (const auto& kv : report.as_object())
        out[kv.key()] = kv.value();
    return boost::json::serialize(out);
}

// ---------------------------------------------------------------------------------------
// Outcome reporting
// ---------------------------------------------------------------------------------------

bool command_refused(const sandbox::exec_result& r)
{
    if (r.status != exec_status::not_started || r.diag.limit != "command" || !r.diag.cause)
        return false;
    // The OS said no to the command itself, not to our machinery (EMFILE, EPROTO, ...).
    const errc e = errc_from_errno(r.diag.cause.value());
    return e == errc::not_found || e == errc::forbidden || e == errc::validation ||
           e == errc::conflict;
}

void shrink_timeout(sandbox::exec_options& o, std::chrono::nanoseconds left)
{
    left = std::max<std::chrono::nanoseconds>(left, 1ns);
    const auto budget = sandbox::cpu_budget(o);
    o.timeout = left;
    if (budget <= 0ns)
        return;
    __extension__ typedef unsigned __int128 wide;
    const wide mc = (static_cast<wide>(budget.count()) * 1000 +
                     static_cast<wide>(left.count()) - 1) /
                    static_cast<wide>(left.count());
    o.limits.cpu_millicores = mc > static_cast<wide>(int64_max) ? int64_max
                                                                 : static_cast<std::int64_t>(mc);
}

int exit_status_for(const boost::system::error_code& ec, const sandbox::exec_result& r)
{
    if (!ec && r.status == exec_status::exited)
        return r.exit_code >= 0 && r.exit_code <= 255 ? r.exit_code : exit_sandbox_failure;
    switch (r.status)
    {
    case exec_status::signaled:
    case exec_status::terminated: return 128 + r.signal;
    case exec_status::timed_out: return exit_timeout;
    case exec_status::budget_exceeded: return exit_budget;
    case exec_status::cancelled: return exit_cancelled;
    case exec_status::unenforceable: return exit_sandbox_failure;
    case exec_status::exited:
    case exec_status::not_started: break;
    }
    if (!ec)
        return exit_sandbox_failure; // a success that ran nothing: not a result we can pass on
    if (ec == boost::asio::error::operation_aborted)
        return exit_cancelled;
    if (ec == errc::timeout)
        return exit_timeout;
    if (ec == errc::budget_exceeded)
        return exit_budget;
    if (command_refused(r))
        return ec == errc::not_found ? exit_not_found : exit_not_executable;
    return exit_sandbox_failure;
}

std::string printable_text(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (const unsigned char c : text)
    {
        if (c >= 0x20 && c < 0x7f)
        {
            out += static_cast<char>(c);
            continue;
        }
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
    }
    return out;
}

namespace {

json::value strings_or_null(const std::optional<std::vector<std::string>>& v)
{
    if (!v)
        return nullptr;
    return json::array(v->begin(), v->end());
}

// Milliseconds: an integer when whole (as JSON readers expect 30000, not 3E4).
json::value millis(std::chrono::nanoseconds d)
{
    if (d.count() % 1000000 == 0)
        return d.count() / 1000000;
    return static_cast<double>(d.count()) / 1e6;
}

} // namespace

std::string entry_to_json(const sandbox::config::sandbox_entry& e, std::string_view root,
                          const sandbox::enforcement_report& enforcement)
{
    const auto& d = e.defaults;
    json::object env{{"allow", strings_or_null(d.env.allow)}};
    json::object inject;
    for (const auto& [k, v] : d.env.inject)
        inject[k] = v;
    env["inject"] = std::move(inject);
    json::object limits{{"memory_bytes", d.limits.memory_bytes},
                        {"cpu_millicores", d.limits.cpu_millicores},
                        {"disk_bytes", d.limits.disk_bytes},
                        {"max_output_bytes", d.limits.max_output_bytes},
                        {"max_processes", d.limits.max_processes},
                        {"max_tasks", d.limits.max_tasks}};
    json::object approval{{"outside_workdir", e.approval.outside_workdir},
                          {"non_default_network", e.approval.non_default_network},
                          {"interactive", e.approval.interactive},
                          {"sensitive_commands", json::array(e.approval.sensitive_commands.begin(),
                                                             e.approval.sensitive_commands.end())},
                          {"deadline_ms", millis(e.approval.deadline)}};
    json::object policy{
        {"timeout_ms", millis(d.timeout)},
        {"kill_grace_ms", millis(d.kill_grace)},
        {"env", std::move(env)},
        {"net", sandbox::config::net_policy_to_json(d.net)},
        {"resources", std::move(limits)},
        {"allowed_commands", strings_or_null(e.allowed_commands)},
        {"command_match", e.match == sandbox::command_match::exact ? "exact" : "base_name"},
        {"approval", std::move(approval)}};
    json::object o{{"name", e.name},
                   {"backend", e.backend},
                   {"root", std::string(root)},
                   {"run_as", sandbox::config::to_string(e.run_as)},
                   {"policy", std::move(policy)},
                   {"enforcement", json::parse(sandbox::to_json(enforcement))}};
    return json::serialize(o);
}

std::string usage()
{
    std::string env_list;
    for (const auto& n : default_env_allow())
        env_list += (env_list.empty() ? "" : " ") + n;
    return "Usage: sandbox-run [options] [--] COMMAND [ARG...]\n"
           "\n"
           "Runs COMMAND under the policy below, inside bubblewrap (host / read-only, the\n"
           "root writable, private /tmp and pid namespace, credentials hidden, no\n"
           "capabilities; run by root: as the sandbox user) when bwrap can create its\n"
           "namespaces here, else on the local backend (host processes in their own process\n"
           "group, no isolation) with a warning (see --backend), and exits with its exit\n"
           "status. Options end at \"--\" or at the first argument that is not an option or\n"
           "an option's value; all arguments from there on belong to COMMAND, even those\n"
           "that look like options.\n"
           "\n"
           "Options:\n"
           "  --root DIR          directory that work directories are confined to; with\n"
           "                      bwrap, also the directory the command can write\n"
           "                      (default: the current directory)\n"
           "  --workdir DIR       work directory: relative to the root, or absolute inside it\n"
           "                      (default: the root)\n"
           "  --timeout DUR       wall-clock limit; the whole tree is killed when it elapses;\n"
           "                      0 disables it\n"
           "  --kill-grace DUR    time between SIGTERM and SIGKILL when the tree is stopped\n"
           "                      (default 0: SIGKILL at once)\n"
           "  --memory SIZE       cap on the tree's memory: its summed PSS (proportional set\n"
           "                      size: a page shared by N processes counts 1/N), judged\n"
           "                      once its summed RSS reaches the cap; in a cgroup with the\n"
           "                      memory controller, the kernel's memory.max; 0 disables it\n"
           "  --cpu MILLICORES    cpu-time budget as a share of the timeout (1000 = one core\n"
           "                      for the whole timeout); needs a timeout; 0 disables it\n"
           "  --max-processes N   cap on live processes in the tree (threads not counted);\n"
           "                      0 disables it\n"
           "  --max-tasks N       cap on live threads of all processes in the tree; 0\n"
           "                      disables it\n"
           "  --max-output SIZE   with --json, bytes kept per stream, the rest is counted\n"
           "                      and dropped; 0 keeps everything\n"
           "  --env-allow NAME    pass host variable NAME (repeatable; replaces the default\n"
           "                      list)\n"
           "  --env-clear         pass no host variable at all\n"
           "  --env NAME=VALUE    set NAME in the child's environment (repeatable)\n"
           "  --stdin-file FILE   FILE is the command's stdin, read by the command itself\n"
           "                      (any size; a FIFO is waited for under the timeout)\n"
           "                      (default: /dev/null)\n"
           "  --json              print one JSON object with the outcome and the captured\n"
           "                      output, instead of streaming the output through as it\n"
           "                      is produced\n"
           "  --tty               run COMMAND on a pseudo-terminal of its own, connected to\n"
           "                      ours (which must be a terminal): raw mode while it runs,\n"
           "                      window size changes passed on, Ctrl-C goes to COMMAND\n"
           "  --enforcement       print what the backend enforces on this host (JSON) and,\n"
           "                      with --backend auto, which backend it chose and why; exit\n"
           "  --cgroup WHERE      auto (default): each command's tree in a cgroup of its own\n"
           "                      under our cgroup v2 when it is writable (killed at once,\n"
           "                      cpu counted by the kernel), else the /proc sampler; off:\n"
           "                      the sampler only; DIR: a delegated cgroup v2 directory\n"
           "                      (refused when it cannot be used)\n"
           "  --backend NAME      auto (default): bwrap when it can create its namespaces\n"
           "                      here, else local with a warning; but a command line\n"
           "                      bwrap refuses (a root it cannot make writable, a root\n"
           "                      the sandbox user cannot reach) or that needs bwrap\n"
           "                      (--writable, --net deny, ...) where it is not usable is\n"
           "                      refused (125), never run on local instead. local or\n"
           "                      bwrap: that backend, no fallback\n"
           "  --net MODE          inherit (default); deny: no network but loopback, host\n"
           "                      sockets under /run hidden; allow-list: only the hosts\n"
           "                      --allow-host allows, through an egress proxy on the host\n"
           "                      (the command gets HTTP_PROXY etc.; other traffic fails);\n"
           "                      proxy: everything through --proxy URL (all but inherit:\n"
           "                      bwrap only)\n"
           "  --allow-host PATTERN[:PORT]  allow a destination: example.com (and its\n"
           "                      subdomains), *.example.com, an IP or a CIDR such as\n"
           "                      10.0.0.0/8; no port: any (repeatable; implies --net\n"
           "                      allow-list). Loopback, private and link-local addresses\n"
           "                      need an explicit IP or CIDR rule. The host's own\n"
           "                      loopback is host.sandbox.internal (127.0.0.1 inside is\n"
           "                      the sandbox's): --allow-host host.sandbox.internal:PORT\n"
           "  --deny-host PATTERN[:PORT]  refuse a destination; wins over every allow\n"
           "                      (repeatable)\n"
           "  --proxy URL         send everything through this upstream proxy:\n"
           "                      http://[user:pass@]host:port or socks5://... (implies\n"
           "                      --net proxy)\n"
           "  --resolve HOST=ADDRESS  the egress proxy resolves HOST to ADDRESS without a\n"
           "                      lookup (repeatable)\n"
           "  --writable DIR      with bwrap: also bind DIR read-write (repeatable)\n"
           "  --read-only PATH    with bwrap: bind host PATH read-only at the same place,\n"
           "                      through the private /tmp (repeatable)\n"
           "  --read-deny PATH    with bwrap: hide PATH, on top of the built-in list of\n"
           "                      credentials under your home (repeatable)\n"
           "  --write-deny PATH   with bwrap: keep PATH read-only inside the writable\n"
           "                      directories, even if missing (repeatable; relative: in\n"
           "                      each of them; git's hooks and config files, editor and\n"
           "                      tool files and rc files are built in)\n"
           "  --unix-socket PATH  with bwrap: let the command connect to this host socket\n"
           "                      (repeatable)\n"
           "  --sandbox-user USER[:GROUP]  with bwrap, for a root caller: run commands as\n"
           "                      this user (name or number; default nobody:nogroup),\n"
           "                      which must be able to reach the root and --writable\n"
           "                      dirs (refused otherwise); one it cannot write is\n"
           "                      read-only to the command\n"
           "  --allow-command NAME  run COMMAND only if it is NAME, exactly as typed\n"
           "                      (repeatable; /bin/rm and rm are different names);\n"
           "                      otherwise refuse with exit status 125\n"
           "  --ask PATTERN       a COMMAND whose base name matches the shell glob PATTERN\n"
           "                      needs a yes typed on the controlling terminal (never\n"
           "                      read from stdin); no terminal, no or a late answer\n"
           "                      refuses with exit status 125 (repeatable)\n"
           "  --ask-timeout DUR   how long --ask waits for the answer (default: 1m)\n"
           "  --audit FILE        append a JSON line to FILE for every decision and the\n"
           "                      outcome, and for every connection through the egress\n"
           "                      proxy (created if missing, never truncated)\n"
           "  --config FILE       a config document (JSON or YAML, docs/config.md) naming\n"
           "                      sandboxes: run COMMAND through the one --sandbox NAME\n"
           "                      names, with its backend, root and policy; the flags\n"
           "                      above then only narrow that policy (the stricter value\n"
           "                      of each field wins) and the default policy below does\n"
           "                      not apply; --backend, --root, --cgroup and the bwrap\n"
           "                      view flags are refused (the entry decides them)\n"
           "  --sandbox NAME      the entry of --config to run through\n"
           "  --check             with --config: check the document and build every\n"
           "                      entry, print each one's policy and enforcement (JSON),\n"
           "                      exit 0, or 125 listing every problem\n"
           "  --workspace NAME=DIR  a workspace the entries of --config may name\n"
           "                      (repeatable)\n"
           "  --connect SOCKET    run COMMAND through the sandbox --sandbox NAME of the\n"
           "                      sandboxd listening on SOCKET (docs/sandboxd.md): output\n"
           "                      streamed, same exit status; the flags only narrow the\n"
           "                      sandbox's policy; --tty attaches to a terminal session,\n"
           "                      --stdin-file is streamed to it; no chain flags\n"
           "  -h, --help          print this text and exit\n"
           "\n"
           "DUR is a number with an optional unit ns, us, ms, s, m or h (default: s), for\n"
           "example 500ms, 1.5s or 2m; fractions round up to whole nanoseconds. SIZE is an\n"
           "integer with an optional unit K, M, G, T or KiB, MiB, GiB, TiB, all powers of\n"
           "1024 (default: bytes), for example 64M.\n"
           "\n"
           "Default policy (each option replaces only its own part):\n"
           "  environment     only " +
           env_list +
           "\n"
           "  timeout         10m\n"
           "  output          streamed; with --json 10 MiB kept per stream\n"
           "  processes       1024\n"
           "  tasks           no cap\n"
           "  memory, cpu     no cap\n"
           "  kill grace      0 (SIGKILL at once)\n"
           "\n"
           "Exit status:\n"
           "  N               COMMAND exited with status N\n"
           "  128+N           COMMAND was killed by signal N\n"
           "  124             the timeout elapsed and the tree was killed\n"
           "  125             sandbox-run failed before COMMAND ran: bad usage, a work dir or\n"
           "                  root that is missing, not a directory or outside the root,\n"
           "                  refused or unenforceable policy, internal error\n"
           "  126             COMMAND exists but cannot be executed\n"
           "  127             COMMAND was not found\n"
           "  130             interrupted by SIGINT or SIGTERM; the tree was killed\n"
           "  141             the reader of the streamed output went away; the tree was\n"
           "                  killed\n"
           "  137             a memory, cpu, process or task cap was exceeded; the tree was\n"
           "                  killed\n";
}

} // namespace sandbox::cli
