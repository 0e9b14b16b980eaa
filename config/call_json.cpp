// config/call_json.cpp: the other way round from parse_call: a request as a call's JSON
// (what `sandbox-run --connect` sends to sandboxd, and what sandboxd shows its approver),
// and a net policy in a document's syntax.
#include <sandbox/config/document.hpp>

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

namespace sandbox::config {
namespace {

namespace json = boost::json;

json::array strings(const std::vector<std::string>& v)
{
    return json::array(v.begin(), v.end());
}

std::string ns(std::chrono::nanoseconds d)
{
    return std::to_string(d.count()) + "ns";
}

// The proxy URL with its password (if any) replaced by "***".
std::string without_password(const std::string& url)
{
    const auto scheme = url.find("://");
    const auto at = url.rfind('@');
    if (scheme == std::string::npos || at == std::string::npos || at < scheme)
        return url;
    const auto colon = url.find(':', scheme + 3);
    if (colon == std::string::npos || colon > at)
        return url;
    return url.substr(0, colon + 1) + "***" + url.substr(at);
}

} // namespace

boost::json::object net_policy_to_json(const net_policy& n)
{
    json::object o;
    o["mode"] = to_string(n.mode);
    o["allow_hosts"] = strings(n.allow_hosts);
    json::array rules;
    for (const auto& r : n.rules)
        rules.push_back(
            json::object{{"action", to_string(r.action)}, {"host", r.host}, {"port", r.port}});
    o["rules"] = std::move(rules);
    o["proxy"] = without_password(n.proxy);
    o["unix_sockets"] = strings(n.unix_sockets);
    json::object pins;
    for (const auto& [name, address] : n.resolve) // a name: its addresses, in order
    {
        json::value& addresses = pins[name];
        if (!addresses.is_array())
            addresses.emplace_array();
        addresses.as_array().emplace_back(address);
    }
    o["resolve"] = std::move(pins);
    if (n.sni_check != sni_mode::record)         // (the default left out: a daemon of an earlier
        o["sni_check"] = to_string(n.sni_check); // version takes the call as it did)
    if (n.mitm)
        o["mitm"] = json::object{{"enabled", n.mitm->enabled},
                                 {"inspect_bodies", n.mitm->inspect_bodies},
                                 {"max_body_bytes", n.mitm->max_body_bytes},
                                 {"hosts", strings(n.mitm->hosts)},
                                 {"exclude_hosts", strings(n.mitm->exclude_hosts)},
                                 {"relay_non_tls", n.mitm->relay_non_tls}};
    if (n.mitm)
    {
        json::array allow, deny, headers;
        for (const auto& r : n.mitm->requests)
            (r.action == net_action::allow ? allow : deny).emplace_back(r.pattern);
        for (const auto& h : n.mitm->inject_headers) // never the value
            headers.push_back(
                json::object{{"host", h.host}, {"name", h.name}, {"replace", h.replace}});
        o["mitm"].as_object()["allow_requests"] = std::move(allow);
        o["mitm"].as_object()["deny_requests"] = std::move(deny);
        o["mitm"].as_object()["inject_headers"] = std::move(headers);
    }
    return o;
}

std::string call_to_json(const exec_request& r)
{
    const auto& o = r.options;
    json::object call{{"command", r.command}, {"args", strings(r.args)}};
    if (!o.work_dir.empty())
        call["work_dir"] = o.work_dir;
    if (o.timeout.count() > 0)
        call["timeout"] = ns(o.timeout);
    if (o.kill_grace.count() > 0)
        call["kill_grace"] = ns(o.kill_grace);
    json::object env;
    if (o.env.allow)
        env["allow"] = strings(*o.env.allow);
    if (!o.env.inject.empty())
    {
        json::object inject;
        for (const auto& [k, v] : o.env.inject)
            inject[k] = v;
        env["inject"] = std::move(inject);
    }
    if (!env.empty())
        call["env"] = std::move(env);
    if (o.net.mode != sandbox::net_mode::inherit)
    {
        auto net = net_policy_to_json(o.net);
        net["proxy"] = o.net.proxy; // the real one: the daemon needs it
        if (o.net.proxy.empty())
            net.erase("proxy");
        net["mode"] = to_string(o.net.mode);
        call["net"] = std::move(net);
    }
    json::object res;
    auto put = [&](const char* k, std::int64_t v) {
        if (v > 0)
            res[k] = v;
    };
    put("memory_bytes", o.limits.memory_bytes);
    put("cpu_millicores", o.limits.cpu_millicores);
    put("max_output_bytes", o.limits.max_output_bytes);
    put("max_processes", o.limits.max_processes);
    put("max_tasks", o.limits.max_tasks);
    if (!res.empty())
        call["resources"] = std::move(res);
    return json::serialize(call);
}

} // namespace sandbox::config
