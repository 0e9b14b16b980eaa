// tools/sandbox-run/policy_flags.cpp: the network flags (--net, --allow-host, --deny-host,
// --proxy, --resolve, --sni-check, --inspect, --exclude-inspect, --origin-ca, --allow-request,
// --deny-request, --inject-header, --replace-header) and the policy chain's
// (--allow-command, --ask, --ask-timeout,
// --audit), checked as they are read so that a bad one is a usage error before anything runs.
#include "cli_internal.hpp"

#include <sandbox/config/document.hpp>
#include <sandbox/error.hpp>
#include <sandbox/policy/predicates.hpp>

#include <boost/program_options/variables_map.hpp>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace sandbox::cli {

namespace po = boost::program_options;

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

std::vector<std::string> list_of(const po::variables_map& vm, const char* name)
{
    return vm.count(name) ? vm[name].as<std::vector<std::string>>() : std::vector<std::string>{};
}

// The value of --inject-header's NAME=@env:VAR or @file:PATH. A variable is taken out of
// sandbox-run's environment once read (the command cannot inherit it); a file is hidden
// from the sandbox's view (read-deny).
outcome<std::string> header_value_from(std::string_view source, const std::string& flag,
                                       run_config& cfg)
{
    constexpr std::string_view env = "@env:", file = "@file:";
    if (source.starts_with(env) && source.size() > env.size())
    {
        const std::string name(source.substr(env.size()));
        const char* v = std::getenv(name.c_str());
        if (!v)
            return make_failure(errc::validation, flag + ": the environment has no " + name,
                                "net.mitm.inject_headers");
        std::string value = v;
        ::unsetenv(name.c_str());
        return value;
    }
    if (source.starts_with(file) && source.size() > file.size())
    {
        const std::string path(source.substr(file.size()));
        auto text = sandbox::config::read_secret_file(path, flag);
        if (!text)
        {
            failure f = text.error();
            f.diag.limit = "net.mitm.inject_headers";
            return f;
        }
        cfg.bwrap.read_deny.push_back(path);
        return std::move(*text);
    }
    return make_failure(errc::validation,
                        flag + ": the value comes from @env:VAR or @file:PATH (a value on the "
                               "command line is visible to every process on the host)",
                        "net.mitm.inject_headers");
}

// --inject-header / --replace-header 'HOST_PATTERN: Name=@env:VAR' (or @file:PATH).
outcome<sandbox::header_injection> parse_injection(const std::string& text, bool replace,
                                                   run_config& cfg)
{
    const std::string flag =
        std::string(replace ? "--replace-header " : "--inject-header ") + in_quotes(text);
    // The host ends at the first ':' outside brackets (an IPv6 literal has its own).
    std::size_t colon = std::string::npos;
    for (std::size_t i = 0, depth = 0; i < text.size() && colon == std::string::npos; ++i)
        if (text[i] == '[')
            ++depth;
        else if (text[i] == ']' && depth > 0)
            --depth;
        else if (text[i] == ':' && depth == 0)
            colon = i;
    const std::size_t eq = text.find('=', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || eq == std::string::npos)
        return make_failure(errc::validation, flag + " is not 'HOST_PATTERN: Name=@env:VAR'",
                            "net.mitm.inject_headers");
    const auto trim = [](std::string_view v) {
        while (!v.empty() && v.front() == ' ')
            v.remove_prefix(1);
        while (!v.empty() && v.back() == ' ')
            v.remove_suffix(1);
        return std::string(v);
    };
    sandbox::header_injection h;
    h.host = trim(std::string_view(text).substr(0, colon));
    h.name = trim(std::string_view(text).substr(colon + 1, eq - colon - 1));
    h.replace = replace;
    auto value = header_value_from(trim(std::string_view(text).substr(eq + 1)), flag, cfg);
    if (!value)
        return value.error();
    h.value = std::move(*value);
    return h;
}

// --allow-request, --deny-request, --inject-header, --replace-header: the requests' rules and
// headers; the hosts they name are inspected.
outcome<void> parse_request_flags(const po::variables_map& vm, run_config& cfg,
                                  sandbox::mitm_policy& m)
{
    for (auto [name, action] : {std::pair{"allow-request", sandbox::net_action::allow},
                                std::pair{"deny-request", sandbox::net_action::deny}})
        for (const auto& t : list_of(vm, name))
            m.requests.push_back({action, t});
    for (auto [name, replace] :
         {std::pair{"inject-header", false}, std::pair{"replace-header", true}})
        for (const auto& t : list_of(vm, name))
        {
            auto h = parse_injection(t, replace, cfg);
            if (!h)
                return h.error();
            m.inject_headers.push_back(std::move(*h));
        }
    return {};
}

// The hosts the request rules and injections name, as written ("GET api.test/x": api.test).
std::vector<std::string> request_hosts(const sandbox::mitm_policy& m)
{
    std::vector<std::string> out;
    for (const auto& r : m.requests)
    {
        const std::size_t from = r.pattern.find_first_not_of(' ', r.pattern.find(' '));
        if (from != std::string::npos)
            out.push_back(r.pattern.substr(from, r.pattern.find('/', from) - from));
    }
    for (const auto& h : m.inject_headers)
        out.push_back(h.host);
    return out;
}

// An origin root's file read for `flag` (its text, or the failure with `limit`).
outcome<std::string> read_root(const std::string& file, const std::string& flag, const char* limit)
{
    auto text = sandbox::config::read_text_file(file, flag + " " + in_quotes(file),
                                                sandbox::config::max_document_bytes);
    if (!text)
    {
        failure f = text.error();
        f.diag.limit = limit;
        return f;
    }
    return std::move(*text);
}

// --origin-ca-for 'HOST_PATTERN=FILE': the roots of one host pattern's origins.
outcome<void> parse_scoped_roots(const std::vector<std::string>& given, sandbox::mitm_policy& m)
{
    for (std::size_t i = 0; i < given.size(); ++i)
    {
        const std::string limit = "net.mitm.origin_ca_for[" + std::to_string(i) + "]";
        const auto eq = given[i].find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == given[i].size())
            return make_failure(
                errc::validation,
                "--origin-ca-for " + in_quotes(given[i]) + " is not HOST_PATTERN=FILE", limit);
        auto text = read_root(given[i].substr(eq + 1), "--origin-ca-for", limit.c_str());
        if (!text)
            return text.error();
        m.origin_ca_for.push_back({given[i].substr(0, eq), std::move(*text)});
    }
    return {};
}

// --inspect, --exclude-inspect, --origin-ca, --origin-ca-for and the request flags:
// net.mitm, each origin root read from its file.
outcome<void> parse_inspect_flags(const po::variables_map& vm, run_config& cfg)
{
    sandbox::net_policy& net = cfg.request.options.net;
    auto hosts = list_of(vm, "inspect");
    auto excluded = list_of(vm, "exclude-inspect");
    auto roots = list_of(vm, "origin-ca");
    const auto scoped_roots = list_of(vm, "origin-ca-for");
    const bool per_request = vm.count("allow-request") || vm.count("deny-request") ||
                             vm.count("inject-header") || vm.count("replace-header");
    if (hosts.empty() && !per_request)
    {
        if (!excluded.empty() || !roots.empty() || !scoped_roots.empty())
            return make_failure(errc::validation,
                                "--exclude-inspect, --origin-ca and --origin-ca-for need --inspect",
                                "net.mitm");
        return {};
    }
    if (net.mode != sandbox::net_mode::allow_list && net.mode != sandbox::net_mode::proxy)
        return make_failure(errc::validation,
                            "--inspect and the request flags need --net allow-list or proxy "
                            "(the egress proxy inspects; --allow-host chooses allow-list)",
                            "net.mitm");
    sandbox::mitm_policy m;
    m.enabled = true;
    m.hosts = std::move(hosts);
    m.exclude_hosts = std::move(excluded);
    if (auto r = parse_request_flags(vm, cfg, m); !r)
        return r;
    if (m.hosts.empty()) // only request flags: the hosts they name alone are inspected
        m.hosts = request_hosts(m);
    for (const auto& file : roots)
    {
        auto text = read_root(file, "--origin-ca", "net.mitm.origin_ca");
        if (!text)
            return text.error();
        m.origin_ca.push_back(std::move(*text));
    }
    if (auto r = parse_scoped_roots(scoped_roots, m); !r)
        return r;
    net.mitm = std::move(m);
    // The rules and headers are checked now: a bad one is a usage error, before the backend
    // looks at anything else.
    sandbox::net_policy probe = net;
    probe.unix_sockets.clear(); // (--unix-socket is read later, and checked with the rest)
    return probe.validate();
}

} // namespace

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
    if (has("sni-check"))
    {
        const std::string text = vm["sni-check"].as<std::string>();
        auto m = sandbox::parse_sni_mode(text);
        if (!m)
            return make_failure(errc::validation,
                                "--sni-check: expected record, deny or off, got " + in_quotes(text),
                                "net.sni_check");
        net.sni_check = *m;
    }
    if (auto r = imply_net_mode(net, has("net")); !r)
        return r;
    const bool proxied =
        net.mode == sandbox::net_mode::allow_list || net.mode == sandbox::net_mode::proxy;
    if (has("sni-check") && !proxied)
        return make_failure(errc::validation,
                            "--sni-check needs --net allow-list or proxy (the egress proxy reads "
                            "the server names)",
                            "net.sni_check");
    if (auto r = parse_inspect_flags(vm, cfg); !r)
        return r;
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

outcome<run_config::chain_flags> parse_chain_flags(const po::variables_map& vm)
{
    run_config::chain_flags c;
    auto list = [&vm](const char* name) { return list_of(vm, name); };
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

} // namespace sandbox::cli
