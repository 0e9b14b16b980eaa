// config/decode.cpp: the schema (docs/config.md): document, entries, defaults, env, net,
// resources, approval. Each section decodes what it can and records every problem; the rules
// that tie fields together run once the section is read.
#include "config/decode.hpp"

#include <sandbox/config/document.hpp>
#include <sandbox/net_policy.hpp>
#include <sandbox/policy/predicates.hpp>

#include <algorithm>
#include <cstdlib>

namespace sandbox::config::detail {
namespace {

bool absent(const node* n) { return n == nullptr || n->what == node::kind::null; }

bool good_name(std::string_view s)
{
    if (s.empty() || s.size() > 64)
        return false;
    return std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '-';
    });
}

void decode_env(reader& r, const node& n, const std::string& path, env_policy& env)
{
    if (!r.is_object(n, path))
        return;
    r.known_keys(n, path, {"allow", "inject"});
    if (const node* a = n.member("allow"); !absent(a))
        if (auto v = r.strings(*a, member_path(path, "allow")))
            env.allow = std::move(*v);
    const node* inj = n.member("inject");
    const std::string ip = member_path(path, "inject");
    if (absent(inj) || !r.is_object(*inj, ip))
        return;
    for (const auto& [k, v] : inj->members)
    {
        const std::string kp = ip + "[\"" + k + "\"]";
        if (k.empty() || k.find('=') != std::string::npos)
            r.fail(kp, &v, "a variable name must not be empty nor contain '='");
        else if (auto s = r.string(v, kp))
            env.inject[k] = std::move(*s);
    }
}

// Origin roots name files of the host: a document may, a call may not (it cannot make the
// daemon read its host's files).
bool may_read_roots(reader& r, const node& n, const std::string& path)
{
    if (!r.reads_host_files)
        r.fail(path, &n, "names files of the daemon's host: set it in the config document");
    return r.reads_host_files;
}

// One origin root file: an absolute path, read now.
std::optional<std::string> read_origin_root(reader& r, const node& n, const std::string& path,
                                            const std::string& file)
{
    if (file.empty() || file[0] != '/')
    {
        r.fail(path, &n, "must be an absolute path");
        return std::nullopt;
    }
    auto text = read_text_file(file, "origin root " + file, max_document_bytes);
    if (!text)
    {
        r.fail(path, &n, text.error().diag.message);
        return std::nullopt;
    }
    return std::move(*text);
}

// `origin_ca`: absolute paths of PEM files.
void decode_origin_roots(reader& r, const node& n, const std::string& path,
                         std::vector<std::string>& out)
{
    if (!may_read_roots(r, n, path))
        return;
    const auto files = r.strings(n, path);
    for (std::size_t i = 0; files && i < files->size(); ++i)
        if (auto text = read_origin_root(r, n, item_path(path, i), (*files)[i]))
            out.push_back(std::move(*text));
}

// An injected header's value: `value` (the text itself: a call may give it), or, in a
// document only, `value_env` (a variable of the daemon's environment) or `value_file` (an
// absolute path, its content without one trailing newline). Never quoted in a problem.
std::optional<std::string> decode_header_value(reader& r, const node& it, const std::string& p)
{
    const node* literal = it.member("value");
    const node* env = it.member("value_env");
    const node* file = it.member("value_file");
    if (absent(literal) + absent(env) + absent(file) != 2)
    {
        r.fail(p, &it, "needs exactly one of value, value_env, value_file");
        return std::nullopt;
    }
    if (!absent(literal))
        return r.string(*literal, member_path(p, "value"));
    const node* from = absent(env) ? file : env;
    const std::string fp = member_path(p, absent(env) ? "value_file" : "value_env");
    if (!r.reads_host_files)
    {
        r.fail(fp, from, "reads the daemon's host: set it in the config document");
        return std::nullopt;
    }
    auto name = r.string(*from, fp);
    if (!name)
        return std::nullopt;
    if (from == env)
    {
        const char* v = std::getenv(name->c_str());
        if (!v)
            r.fail(fp, from, "the environment has no " + *name);
        return v ? std::optional<std::string>(v) : std::nullopt;
    }
    if (name->empty() || name->front() != '/')
    {
        r.fail(fp, from, "must be an absolute path");
        return std::nullopt;
    }
    auto text = read_secret_file(*name, "header value file " + *name);
    if (!text)
    {
        r.fail(fp, from, text.error().diag.message);
        return std::nullopt;
    }
    return std::move(*text);
}

// Calls `each(item, its path)` for every mapping of the list `n` (of `what`s); a value that
// is not a list, or an item that is not a mapping, is a problem.
template <class Each>
void each_mapping(reader& r, const node& n, const std::string& path, const char* what, Each each)
{
    if (n.what != node::kind::array)
    {
        r.fail(path, &n, std::string("must be a list of ") + what + ", not " + kind_name(n.what));
        return;
    }
    for (std::size_t i = 0; i < n.items.size(); ++i)
    {
        const std::string p = item_path(path, i);
        if (r.is_object(n.items[i], p))
            each(n.items[i], p);
    }
}

// `origin_ca_for`: `{host, file}` each, the roots of one host pattern's origins.
void decode_scoped_roots(reader& r, const node& n, const std::string& path,
                         std::vector<scoped_origin_ca>& out)
{
    if (!may_read_roots(r, n, path))
        return;
    each_mapping(r, n, path, "roots", [&](const node& it, const std::string& p) {
        r.known_keys(it, p, {"host", "file"});
        scoped_origin_ca entry;
        std::optional<std::string> file;
        const node* file_node = it.member("file");
        if (const node* v = it.member("host"); absent(v))
            r.fail(member_path(p, "host"), &it, "is required");
        else if (auto t = r.string(*v, member_path(p, "host")))
            entry.host = std::move(*t);
        if (absent(file_node))
            r.fail(member_path(p, "file"), &it, "is required");
        else
            file = r.string(*file_node, member_path(p, "file"));
        if (!file)
            return;
        if (auto text = read_origin_root(r, *file_node, member_path(p, "file"), *file))
        {
            entry.pem = std::move(*text);
            out.push_back(std::move(entry));
        }
    });
}

void decode_injections(reader& r, const node& n, const std::string& path,
                       std::vector<header_injection>& out)
{
    each_mapping(r, n, path, "headers", [&](const node& it, const std::string& p) {
        r.known_keys(it, p, {"host", "name", "value", "value_env", "value_file", "replace"});
        header_injection h;
        for (auto [key, field] : {std::pair{"host", &h.host}, std::pair{"name", &h.name}})
        {
            const node* v = it.member(key);
            if (absent(v))
                r.fail(member_path(p, key), &it, "is required");
            else if (auto t = r.string(*v, member_path(p, key)))
                *field = std::move(*t);
        }
        if (const node* v = it.member("replace"); !absent(v))
            h.replace = r.boolean(*v, member_path(p, "replace")).value_or(false);
        if (auto value = decode_header_value(r, it, p))
            h.value = std::move(*value);
        out.push_back(std::move(h));
    });
}

std::optional<mitm_policy> decode_mitm(reader& r, const node& n, const std::string& path)
{
    if (!r.is_object(n, path))
        return std::nullopt;
    r.known_keys(n, path,
                 {"enabled", "inspect_bodies", "max_body_bytes", "hosts", "exclude_hosts",
                  "relay_non_tls", "origin_ca", "origin_ca_for", "allow_requests", "deny_requests",
                  "inject_headers"});
    mitm_policy m;
    for (auto [key, action] : {std::pair{"allow_requests", net_action::allow},
                               std::pair{"deny_requests", net_action::deny}})
        if (const node* v = n.member(key); !absent(v))
            for (auto& t :
                 r.strings(*v, member_path(path, key)).value_or(std::vector<std::string>{}))
                m.requests.push_back({action, std::move(t)});
    if (const node* v = n.member("inject_headers"); !absent(v))
        decode_injections(r, *v, member_path(path, "inject_headers"), m.inject_headers);
    if (const node* v = n.member("relay_non_tls"); !absent(v))
        m.relay_non_tls = r.boolean(*v, member_path(path, "relay_non_tls")).value_or(false);
    if (const node* v = n.member("origin_ca"); !absent(v))
        decode_origin_roots(r, *v, member_path(path, "origin_ca"), m.origin_ca);
    if (const node* v = n.member("origin_ca_for"); !absent(v))
        decode_scoped_roots(r, *v, member_path(path, "origin_ca_for"), m.origin_ca_for);
    if (const node* v = n.member("enabled"); !absent(v))
        m.enabled = r.boolean(*v, member_path(path, "enabled")).value_or(false);
    if (const node* v = n.member("inspect_bodies"); !absent(v))
        m.inspect_bodies = r.boolean(*v, member_path(path, "inspect_bodies")).value_or(false);
    if (const node* v = n.member("max_body_bytes"); !absent(v))
        m.max_body_bytes = r.size(*v, member_path(path, "max_body_bytes")).value_or(0);
    if (const node* v = n.member("hosts"); !absent(v))
        m.hosts = r.strings(*v, member_path(path, "hosts")).value_or(std::vector<std::string>{});
    if (const node* v = n.member("exclude_hosts"); !absent(v))
        m.exclude_hosts =
            r.strings(*v, member_path(path, "exclude_hosts")).value_or(std::vector<std::string>{});
    return m;
}

void decode_rules(reader& r, const node& n, const std::string& path, std::vector<net_rule>& out)
{
    each_mapping(r, n, path, "rules", [&](const node& it, const std::string& p) {
        r.known_keys(it, p, {"action", "host", "port"});
        net_rule rule;
        const node* a = it.member("action");
        if (absent(a))
            r.fail(member_path(p, "action"), &it, "is required (allow or deny)");
        else if (auto s = r.string(*a, member_path(p, "action")))
        {
            if (*s == "allow" || *s == "deny")
                rule.action = *s == "allow" ? net_action::allow : net_action::deny;
            else
                r.fail(member_path(p, "action"), a, "must be allow or deny, not \"" + *s + "\"");
        }
        const node* h = it.member("host");
        if (absent(h))
            r.fail(member_path(p, "host"), &it, "is required");
        else if (auto s = r.string(*h, member_path(p, "host")))
        {
            if (s->find_first_not_of(" \t") == std::string::npos)
                r.fail(member_path(p, "host"), h, "must not be blank");
            rule.host = std::move(*s);
        }
        if (const node* port = it.member("port"); !absent(port))
            if (auto v = r.integer(*port, member_path(p, "port")))
            {
                if (*v < 0 || *v > 65535)
                    r.fail(member_path(p, "port"), port, "must be 0 (any) to 65535");
                else
                    rule.port = static_cast<int>(*v);
            }
        out.push_back(std::move(rule));
    });
}

// The rules between the fields of `net` (the mode decides which may be set).
void check_net_mode(reader& r, const node& n, const std::string& path, const net_policy& net,
                    const std::string& mode_text)
{
    const bool hosts = !net.allow_hosts.empty(), rules = !net.rules.empty();
    const bool proxy = !net.proxy.empty(), sockets = !net.unix_sockets.empty();
    const bool pins = !net.resolve.empty(), sni = net.sni_check != sni_mode::record;
    switch (net.mode)
    {
    case net_mode::inherit:
    case net_mode::deny_all:
        if (hosts || rules || proxy || sockets || net.mitm || pins || sni)
            r.fail(path, &n,
                   "mode \"" + mode_text +
                       "\" cannot set allow_hosts, rules, proxy, unix_sockets, mitm, resolve "
                       "or sni_check");
        break;
    case net_mode::allow_list:
        if (!hosts && !rules)
            r.fail(path, &n, "mode \"allow_list\" needs allow_hosts or rules");
        if (proxy)
            r.fail(member_path(path, "proxy"), n.member("proxy"),
                   "mode \"allow_list\" cannot set proxy (use mode \"proxy\")");
        break;
    case net_mode::proxy:
        if (!proxy)
            r.fail(member_path(path, "proxy"), &n, "mode \"proxy\" needs proxy (a URL)");
        if (hosts)
            r.fail(member_path(path, "allow_hosts"), n.member("allow_hosts"),
                   "mode \"proxy\" cannot set allow_hosts (the upstream decides; deny rules "
                   "may narrow it)");
        break;
    }
}

// `resolve`: a mapping from a host name to an IP address, or to a list of them.
void decode_pins(reader& r, const node& n, const std::string& path, net_policy& net)
{
    if (!r.is_object(n, path))
        return;
    for (const auto& [k, v] : n.members)
    {
        const std::string kp = path + "[\"" + k + "\"]";
        std::vector<std::string> addresses;
        if (v.what == node::kind::array)
            addresses = r.strings(v, kp).value_or(std::vector<std::string>{});
        else if (auto s = r.string(v, kp))
            addresses.push_back(std::move(*s));
        if (v.what == node::kind::array && v.items.empty())
            r.fail(kp, &v, "an empty list pins nothing");
        for (auto& a : addresses)
            net.resolve.emplace_back(k, std::move(a));
    }
}

void decode_net(reader& r, const node& n, const std::string& path, net_policy& net)
{
    if (!r.is_object(n, path))
        return;
    r.known_keys(
        n, path,
        {"mode", "allow_hosts", "rules", "proxy", "unix_sockets", "mitm", "resolve", "sni_check"});
    const std::size_t before = r.count(); // a field already refused: no second word on it
    std::string mode_text = "default";
    if (const node* m = n.member("mode"); !absent(m))
        if (auto s = r.string(*m, member_path(path, "mode")))
        {
            mode_text = *s;
            if (*s == "" || *s == "default" || *s == "inherit")
                net.mode = net_mode::inherit;
            else if (*s == "deny_all")
                net.mode = net_mode::deny_all;
            else if (*s == "allow_list")
                net.mode = net_mode::allow_list;
            else if (*s == "proxy")
                net.mode = net_mode::proxy;
            else
            {
                r.fail(member_path(path, "mode"), m,
                       "\"" + *s + "\" is not a mode (default, deny_all, allow_list, proxy)");
                return;
            }
        }
    if (const node* v = n.member("allow_hosts"); !absent(v))
        net.allow_hosts = r.strings(*v, member_path(path, "allow_hosts")).value_or(
            std::vector<std::string>{});
    if (const node* v = n.member("rules"); !absent(v))
        decode_rules(r, *v, member_path(path, "rules"), net.rules);
    if (const node* v = n.member("proxy"); !absent(v))
        net.proxy = r.string(*v, member_path(path, "proxy")).value_or("");
    if (const node* v = n.member("unix_sockets"); !absent(v))
        net.unix_sockets = r.strings(*v, member_path(path, "unix_sockets")).value_or(
            std::vector<std::string>{});
    if (const node* v = n.member("mitm"); !absent(v))
        net.mitm = decode_mitm(r, *v, member_path(path, "mitm"));
    if (const node* v = n.member("resolve"); !absent(v))
        decode_pins(r, *v, member_path(path, "resolve"), net);
    if (const node* v = n.member("sni_check"); !absent(v))
        if (auto s = r.string(*v, member_path(path, "sni_check")))
        {
            if (auto m = parse_sni_mode(*s))
                net.sni_check = *m;
            else
                r.fail(member_path(path, "sni_check"), v,
                       "\"" + *s + "\" is not an sni_check (record, deny, off)");
        }
    check_net_mode(r, n, path, net, mode_text);
    if (r.count() != before)
        return;
    if (auto v = net.validate(); !v)
        r.fail(path, &n, v.error().diag.message);
}

void decode_resources(reader& r, const node& n, const std::string& path, resource_limits& l)
{
    if (!r.is_object(n, path))
        return;
    r.known_keys(n, path, {"cpu_millicores", "memory_bytes", "disk_bytes", "max_output_bytes",
                                "max_processes", "max_tasks"});
    auto size = [&](const char* key, std::int64_t& out) {
        if (const node* v = n.member(key); !absent(v))
            out = r.size(*v, member_path(path, key)).value_or(0);
    };
    auto count = [&](const char* key, std::int64_t& out) {
        if (const node* v = n.member(key); !absent(v))
            if (auto i = r.integer(*v, member_path(path, key)))
            {
                if (*i < 0)
                    r.fail(member_path(path, key), v, "must not be negative");
                else
                    out = *i;
            }
    };
    count("cpu_millicores", l.cpu_millicores);
    size("memory_bytes", l.memory_bytes);
    size("disk_bytes", l.disk_bytes);
    size("max_output_bytes", l.max_output_bytes);
    count("max_processes", l.max_processes);
    count("max_tasks", l.max_tasks);
}

} // namespace

void decode_defaults(reader& r, const node& n, const std::string& path, exec_options& o,
                     std::initializer_list<std::string_view> more_keys)
{
    if (!r.is_object(n, path))
        return;
    std::vector<std::string_view> known{"timeout", "kill_grace", "env", "net", "resources"};
    known.insert(known.end(), more_keys.begin(), more_keys.end());
    r.known_keys(n, path, known);
    if (const node* v = n.member("timeout"); !absent(v))
        o.timeout = r.duration(*v, member_path(path, "timeout")).value_or(o.timeout);
    if (const node* v = n.member("kill_grace"); !absent(v))
        o.kill_grace = r.duration(*v, member_path(path, "kill_grace")).value_or(o.kill_grace);
    if (const node* v = n.member("env"); !absent(v))
        decode_env(r, *v, member_path(path, "env"), o.env);
    if (const node* v = n.member("net"); !absent(v))
        decode_net(r, *v, member_path(path, "net"), o.net);
    const node* res = n.member("resources");
    if (!absent(res))
        decode_resources(r, *res, member_path(path, "resources"), o.limits);
    if (o.limits.cpu_millicores > 0 && o.timeout.count() == 0)
        r.fail(member_path(member_path(path, "resources"), "cpu_millicores"),
               res ? res->member("cpu_millicores") : nullptr,
               "needs defaults.timeout (the cpu budget is a share of it)");
}

namespace {

void decode_approval(reader& r, const node& n, const std::string& path, approval_config& a)
{
    if (!r.is_object(n, path))
        return;
    r.known_keys(n, path, {"outside_workdir", "non_default_network", "interactive",
                                "sensitive_commands", "deadline"});
    auto flag = [&](const char* key, bool& out) {
        if (const node* v = n.member(key); !absent(v))
            out = r.boolean(*v, member_path(path, key)).value_or(false);
    };
    flag("outside_workdir", a.outside_workdir);
    flag("non_default_network", a.non_default_network);
    flag("interactive", a.interactive);
    if (const node* v = n.member("sensitive_commands"); !absent(v))
    {
        const std::string p = member_path(path, "sensitive_commands");
        a.sensitive_commands = r.strings(*v, p).value_or(std::vector<std::string>{});
        for (std::size_t i = 0; i < a.sensitive_commands.size(); ++i)
            try
            {
                (void)command_patterns({a.sensitive_commands[i]});
            }
            catch (const sandbox::error& e)
            {
                r.fail(item_path(p, i), &v->items[i], e.diag().message);
            }
    }
    if (const node* v = n.member("deadline"); !absent(v))
        if (auto d = r.duration(*v, member_path(path, "deadline")))
        {
            if (d->count() <= 0)
                r.fail(member_path(path, "deadline"), v, "must be positive");
            else
                a.deadline = *d;
        }
}

void decode_where(reader& r, const node& n, const std::string& path, sandbox_entry& e)
{
    const node* ws = n.member("workspace");
    const node* root = n.member("root");
    if (absent(ws) && absent(root))
        r.fail(member_path(path, "root"), &n, "is required (or workspace: a name the "
                                              "application lists)");
    else if (!absent(ws) && !absent(root))
        r.fail(member_path(path, "root"), root, "cannot be set with workspace (one of the two)");
    else if (!absent(ws))
    {
        e.workspace = r.string(*ws, member_path(path, "workspace")).value_or("");
        if (ws->what == node::kind::string && e.workspace.empty())
            r.fail(member_path(path, "workspace"), ws, "must not be empty");
    }
    else if (auto s = r.string(*root, member_path(path, "root")))
    {
        if (s->empty() || s->front() != '/')
            r.fail(member_path(path, "root"), root, "must be an absolute path");
        e.root = std::move(*s);
    }
}

void decode_gate(reader& r, const node& n, const std::string& path, sandbox_entry& e)
{
    if (const node* v = n.member("command_match"); !absent(v))
        if (auto s = r.string(*v, member_path(path, "command_match")))
        {
            if (*s == "exact" || *s == "base_name")
                e.match = *s == "exact" ? command_match::exact : command_match::base_name;
            else
                r.fail(member_path(path, "command_match"), v,
                       "must be exact or base_name, not \"" + *s + "\"");
        }
    const node* v = n.member("allowed_commands");
    if (v == nullptr)
        return;
    const std::string p = member_path(path, "allowed_commands");
    if (v->what == node::kind::null) // written but empty: as absent, said so in docs
        return;
    auto list = r.strings(*v, p);
    if (!list)
        return;
    for (std::size_t i = 0; i < list->size(); ++i)
    {
        if (e.match == command_match::base_name && (*list)[i].find('/') != std::string::npos)
            r.fail(item_path(p, i), &v->items[i],
                   "command_match base_name compares base names: no '/' here");
        const auto first = std::find(list->begin(), list->begin() + static_cast<std::ptrdiff_t>(i),
                                     (*list)[i]);
        if (first != list->begin() + static_cast<std::ptrdiff_t>(i))
            r.fail(item_path(p, i), &v->items[i],
                   "\"" + (*list)[i] + "\" is already in the list (item " +
                       std::to_string(first - list->begin()) + ")");
    }
    e.allowed_commands = std::move(*list);
}

// `run_as`: caller or daemon, for the local backend only.
void decode_run_as(reader& r, const node& n, const std::string& path, sandbox_entry& e)
{
    const node* v = n.member("run_as");
    if (absent(v))
        return;
    const std::string where = member_path(path, "run_as");
    auto s = r.string(*v, where);
    if (!s)
        return;
    if (*s == "daemon")
        e.run_as = run_as_user::daemon;
    else if (*s != "caller")
        r.fail(where, v, "caller or daemon");
    else
        e.run_as = run_as_user::caller;
    if (e.backend != "local")
        r.fail(where, v, "applies to the local backend only (bwrap runs commands as its "
                         "settings.sandbox_user)");
}

sandbox_entry decode_entry(reader& r, const std::string& name, const node& n,
                           const std::string& path)
{
    sandbox_entry e;
    e.name = name;
    e.line = n.key_line;
    e.column = n.key_column;
    if (!good_name(name))
        r.fail(path, &n, "a sandbox name is 1 to 64 letters, digits, '.', '_' or '-'");
    if (!r.is_object(n, path))
        return e;
    r.known_keys(n, path, {"backend", "workspace", "root", "settings", "defaults",
                                "allowed_commands", "command_match", "approval", "run_as"});
    if (const node* b = n.member("backend"); absent(b))
        r.fail(member_path(path, "backend"), &n, "is required (local, bwrap, or a registered one)");
    else if (auto s = r.string(*b, member_path(path, "backend")))
    {
        if (s->empty())
            r.fail(member_path(path, "backend"), b, "must not be empty");
        e.backend = std::move(*s);
    }
    decode_where(r, n, path, e);
    if (const node* s = n.member("settings"); !absent(s))
        e.settings = to_json(*s);
    if (const node* d = n.member("defaults"); !absent(d))
        decode_defaults(r, *d, member_path(path, "defaults"), e.defaults);
    decode_gate(r, n, path, e);
    if (const node* a = n.member("approval"); !absent(a))
        decode_approval(r, *a, member_path(path, "approval"), e.approval);
    decode_run_as(r, n, path, e);
    return e;
}

} // namespace

boost::json::value to_json(const node& n)
{
    switch (n.what)
    {
    case node::kind::null: return nullptr;
    case node::kind::boolean: return n.boolean;
    case node::kind::integer: return n.integer;
    case node::kind::number: return n.number;
    case node::kind::string: return boost::json::string(n.text);
    case node::kind::array:
    {
        boost::json::array a;
        for (const auto& i : n.items)
            a.push_back(to_json(i));
        return a;
    }
    case node::kind::object:
    {
        boost::json::object o;
        for (const auto& [k, v] : n.members)
            o[k] = to_json(v);
        return o;
    }
    }
    return nullptr;
}

namespace {

void decode_ids(reader& r, const node& n, const std::string& path, std::vector<std::uint32_t>& out)
{
    if (n.what != node::kind::array)
    {
        r.fail(path, &n, std::string("must be a list of numeric ids, not ") + kind_name(n.what));
        return;
    }
    for (std::size_t i = 0; i < n.items.size(); ++i)
        if (auto v = r.integer(n.items[i], item_path(path, i)))
        {
            if (*v < 0 || *v > 0xFFFFFFFE)
                r.fail(item_path(path, i), &n.items[i], "is not a valid id");
            else
                out.push_back(static_cast<std::uint32_t>(*v));
        }
}

// A positive count of the daemon section (a connection or session bound).
void decode_count(reader& r, const node& n, const char* key, std::int64_t& out)
{
    const std::string path = std::string("daemon.") + key;
    if (const node* v = n.member(key); !absent(v))
        if (auto i = r.integer(*v, path))
        {
            if (*i <= 0)
                r.fail(path, v, "must be positive");
            else
                out = *i;
        }
}

// What one client or the clients together may hold of the daemon.
void decode_daemon_bounds(reader& r, const node& n, daemon_config& d)
{
    decode_count(r, n, "max_connections_per_uid", d.max_connections_per_uid);
    decode_count(r, n, "max_sessions_per_uid", d.max_sessions_per_uid);
    decode_count(r, n, "max_sessions", d.max_sessions);
    decode_count(r, n, "max_instances_per_uid", d.max_instances_per_uid);
    decode_count(r, n, "max_instances", d.max_instances);
    if (const node* v = n.member("session_output_budget"); !absent(v))
        if (auto b = r.size(*v, "daemon.session_output_budget"))
        {
            if (*b <= 0)
                r.fail("daemon.session_output_budget", v, "must be positive");
            else
                d.session_output_budget = *b;
        }
}

void decode_daemon(reader& r, const node& n, daemon_config& d)
{
    const std::string path = "daemon";
    if (!r.is_object(n, path))
        return;
    r.known_keys(n, path,
                 {"listen", "allow_uids", "allow_gids", "audit_file", "max_body_bytes",
                  "idle_timeout", "session_linger", "max_connections_per_uid",
                  "max_sessions_per_uid", "max_sessions", "session_output_budget", "instance_idle",
                  "max_instances_per_uid", "max_instances"});
    if (const node* v = n.member("listen"); !absent(v))
        if (auto s = r.string(*v, "daemon.listen"))
        {
            if (s->empty() || s->front() != '/')
                r.fail("daemon.listen", v, "must be an absolute path");
            d.listen = std::move(*s);
        }
    if (const node* v = n.member("allow_uids"); !absent(v))
        decode_ids(r, *v, "daemon.allow_uids", d.allow_uids);
    if (const node* v = n.member("allow_gids"); !absent(v))
        decode_ids(r, *v, "daemon.allow_gids", d.allow_gids);
    if (const node* v = n.member("audit_file"); !absent(v))
        if (auto s = r.string(*v, "daemon.audit_file"))
        {
            if (s->empty() || s->front() != '/')
                r.fail("daemon.audit_file", v, "must be an absolute path");
            d.audit_file = std::move(*s);
        }
    if (const node* v = n.member("max_body_bytes"); !absent(v))
        if (auto b = r.size(*v, "daemon.max_body_bytes"))
        {
            if (*b <= 0)
                r.fail("daemon.max_body_bytes", v, "must be positive");
            else
                d.max_body_bytes = *b;
        }
    if (const node* v = n.member("idle_timeout"); !absent(v))
        if (auto t = r.duration(*v, "daemon.idle_timeout"))
        {
            if (t->count() <= 0)
                r.fail("daemon.idle_timeout", v, "must be positive");
            else
                d.idle_timeout = *t;
        }
    if (const node* v = n.member("session_linger"); !absent(v))
        if (auto t = r.duration(*v, "daemon.session_linger"))
        {
            if (t->count() <= 0)
                r.fail("daemon.session_linger", v, "must be positive");
            else
                d.session_linger = *t;
        }
    if (const node* v = n.member("instance_idle"); !absent(v))
        if (auto t = r.duration(*v, "daemon.instance_idle"))
        {
            if (t->count() <= 0)
                r.fail("daemon.instance_idle", v, "must be positive");
            else
                d.instance_idle = *t;
        }
    decode_daemon_bounds(r, n, d);
}

} // namespace

document decode_document(const node& root, std::vector<problem>& sink, bool clean)
{
    reader r(sink);
    r.reads_host_files = true;
    document d;
    if (!r.is_object(root, ""))
        return d;
    r.known_keys(root, "", {"version", "sandboxes", "daemon"});
    if (const node* v = root.member("daemon"); !absent(v))
        decode_daemon(r, *v, d.daemon);
    if (const node* v = root.member("version"); absent(v))
        r.fail("version", &root, "is required (\"v1\")");
    else if (auto s = r.string(*v, "version"))
    {
        if (*s != "v1")
            r.fail("version", v, "\"" + *s + "\" is not supported (want \"v1\")");
        d.version = std::move(*s);
    }
    const node* boxes = root.member("sandboxes");
    if (absent(boxes))
    {
        r.fail("sandboxes", &root, "is required (a mapping of names to sandboxes; {} for none)");
        return d;
    }
    if (!r.is_object(*boxes, "sandboxes"))
        return d;
    for (const auto& [name, entry] : boxes->members)
    {
        const std::size_t before = r.count();
        auto e = decode_entry(r, name, entry, "sandboxes[\"" + name + "\"]");
        if (!clean || r.count() == before)
            d.sandboxes.push_back(std::move(e));
    }
    std::sort(d.sandboxes.begin(), d.sandboxes.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    return d;
}

} // namespace sandbox::config::detail
