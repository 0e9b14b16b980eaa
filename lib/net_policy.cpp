// lib/net_policy.cpp: text forms of the network enums and net_policy::validate().
#include <sandbox/net_policy.hpp>

#include "host/pattern.hpp"
#include "host/request_pattern.hpp"
#include "net_rule_list.hpp"
#include "proxy_url.hpp"

#include <cstddef>
#include <initializer_list>
#include <ostream>
#include <string>
#include <utility>

namespace sandbox {
namespace {

failure invalid(std::string message, std::string limit)
{
    return make_failure(errc::validation, std::move(message), std::move(limit));
}

std::string indexed(std::string_view field, std::size_t index)
{
    std::string s(field);
    s += '[';
    s += std::to_string(index);
    s += ']';
    return s;
}

// Parses a host pattern and, on failure, attaches the field path as the diagnostics limit.
outcome<> check_host(std::string_view text, std::string limit)
{
    auto parsed = detail::parse_host_pattern(text);
    if (parsed.has_error())
    {
        failure f = parsed.error();
        f.diag.limit = std::move(limit);
        return f;
    }
    return {};
}

outcome<> check_host_list(const std::vector<std::string>& hosts, std::string_view field)
{
    for (std::size_t i = 0; i < hosts.size(); ++i)
    {
        if (auto r = check_host(hosts[i], indexed(field, i)); !r)
            return r;
    }
    return {};
}

// `resolve`: each pin a domain name (no wildcard, no address) and an IP literal.
outcome<> check_pins(const std::vector<std::pair<std::string, std::string>>& pins)
{
    for (std::size_t i = 0; i < pins.size(); ++i)
    {
        const std::string limit = indexed("net.resolve", i);
        auto name = detail::parse_host_pattern(pins[i].first);
        if (!name || name->kind != detail::host_kind::domain)
            return invalid("net.resolve: " + detail::quote_for_message(pins[i].first) +
                               " is not a host name",
                           limit);
        auto ip = detail::parse_host_pattern(pins[i].second);
        if (!ip || ip->kind != detail::host_kind::ip)
            return invalid("net.resolve: " + detail::quote_for_message(pins[i].second) + " (for " +
                               name->host + ") is not an IP address",
                           limit);
    }
    return {};
}

// One parser for the URL (proxy_url.hpp), which the egress proxy reads it with too.
outcome<> check_proxy(std::string_view proxy)
{
    if (auto parsed = detail::parse_proxy_url(proxy); !parsed)
        return parsed.error();
    return {};
}

outcome<> check_unix_sockets(const std::vector<std::string>& sockets)
{
    for (std::size_t i = 0; i < sockets.size(); ++i)
    {
        const std::string& socket = sockets[i];
        const std::string path = indexed("net.unix_sockets", i);
        if (socket.find('\0') != std::string::npos)
            return invalid("unix socket path " + detail::quote_for_message(socket) +
                               " contains a NUL byte",
                           path);
        if (socket.empty() || socket.front() != '/')
        {
            failure f = invalid("unix socket path " + detail::quote_for_message(socket) +
                                    " is not absolute",
                                path);
            f.diag.path = socket;
            return f;
        }
    }
    return {};
}

// An injected header: its host, name and value (never quoted in a message).
outcome<> check_injection(const header_injection& h)
{
    if (auto p = detail::parse_host_pattern(h.host); !p)
        return p.error();
    if (auto r = detail::check_injected_header_name(h.name); !r)
        return r;
    if (auto r = detail::check_injected_header_value(h.value); !r)
    {
        failure f = r.error();
        f.diag.message = "header " + h.name + ": " + f.diag.message;
        return f;
    }
    return {};
}

outcome<> check_mitm(const mitm_policy& mitm)
{
    if (mitm.max_body_bytes < 0)
        return invalid("MITM max_body_bytes " + std::to_string(mitm.max_body_bytes) +
                           " is negative",
                       "net.mitm.max_body_bytes");
    if (mitm.max_body_bytes > 64ll * 1024 * 1024)
        return invalid("MITM max_body_bytes " + std::to_string(mitm.max_body_bytes) +
                           " is over 64 MiB (a body shown to the hooks is held whole)",
                       "net.mitm.max_body_bytes");
    if (auto r = check_host_list(mitm.hosts, "net.mitm.hosts"); !r)
        return r;
    if (auto r = check_host_list(mitm.exclude_hosts, "net.mitm.exclude_hosts"); !r)
        return r;
    for (std::size_t i = 0; i < mitm.requests.size(); ++i)
        if (auto p = detail::parse_request_pattern(mitm.requests[i].pattern); !p)
            return invalid(p.error().diag.message, indexed("net.mitm.requests", i));
    for (std::size_t i = 0; i < mitm.inject_headers.size(); ++i)
        if (auto r = check_injection(mitm.inject_headers[i]); !r)
            return invalid(r.error().diag.message, indexed("net.mitm.inject_headers", i));
    for (std::size_t i = 0; i < mitm.origin_ca_for.size(); ++i)
        if (auto p = detail::parse_host_pattern(mitm.origin_ca_for[i].host); !p)
            return invalid(p.error().diag.message, indexed("net.mitm.origin_ca_for", i) + ".host");
    return {};
}

failure no_effect(const char* field, net_mode mode)
{
    std::string message = field;
    message += " has no effect under mode \"";
    message += to_string(mode);
    message += '"';
    return invalid(std::move(message), field);
}

// The first of `fields` (a name, and whether the policy sets it) that is set, refused as
// having no effect under `mode`.
outcome<> refuse_set_fields(std::initializer_list<std::pair<const char*, bool>> fields,
                            net_mode mode)
{
    for (const auto& [name, set] : fields)
        if (set)
            return no_effect(name, mode);
    return {};
}

// Refuses fields that the chosen mode would silently ignore.
outcome<> check_consistency(const net_policy& p)
{
    const bool mitm_enabled = p.mitm && p.mitm->enabled;
    const bool sni_set = p.sni_check != sni_mode::record;
    switch (p.mode)
    {
    case net_mode::inherit:
        return refuse_set_fields({{"net.allow_hosts", !p.allow_hosts.empty()},
                                  {"net.rules", !p.rules.empty()},
                                  {"net.proxy", !p.proxy.empty()},
                                  {"net.unix_sockets", !p.unix_sockets.empty()},
                                  {"net.mitm.enabled", mitm_enabled},
                                  {"net.resolve", !p.resolve.empty()},
                                  {"net.sni_check", sni_set}},
                                 p.mode);
    case net_mode::deny_all: // unix sockets are allowed through a deny-all sandbox
        return refuse_set_fields({{"net.allow_hosts", !p.allow_hosts.empty()},
                                  {"net.rules", !p.rules.empty()},
                                  {"net.proxy", !p.proxy.empty()},
                                  {"net.mitm.enabled", mitm_enabled},
                                  {"net.resolve", !p.resolve.empty()},
                                  {"net.sni_check", sni_set}},
                                 p.mode);
    case net_mode::allow_list:
        if (!p.proxy.empty())
            return invalid("net.proxy has no effect under mode \"allow_list\"; an upstream "
                           "proxy needs mode \"proxy\"",
                           "net.proxy");
        break;
    case net_mode::proxy:
        if (p.proxy.empty())
            return invalid("proxy mode needs a proxy URL", "net.proxy");
        break;
    }
    return {};
}

} // namespace

const char* to_string(net_mode m) noexcept
{
    switch (m)
    {
    case net_mode::inherit: return "default";
    case net_mode::deny_all: return "deny_all";
    case net_mode::allow_list: return "allow_list";
    case net_mode::proxy: return "proxy";
    }
    return "unknown";
}

std::optional<net_mode> parse_net_mode(std::string_view s) noexcept
{
    if (s == "default" || s == "inherit")
        return net_mode::inherit;
    if (s == "deny_all")
        return net_mode::deny_all;
    if (s == "allow_list")
        return net_mode::allow_list;
    if (s == "proxy")
        return net_mode::proxy;
    return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, net_mode m) { return os << to_string(m); }

const char* to_string(sni_mode m) noexcept
{
    switch (m)
    {
    case sni_mode::record: return "record";
    case sni_mode::deny: return "deny";
    case sni_mode::off: return "off";
    }
    return "unknown";
}

std::optional<sni_mode> parse_sni_mode(std::string_view s) noexcept
{
    for (sni_mode m : {sni_mode::record, sni_mode::deny, sni_mode::off})
        if (s == to_string(m))
            return m;
    return std::nullopt;
}

const char* to_string(net_action a) noexcept
{
    switch (a)
    {
    case net_action::deny: return "deny";
    case net_action::allow: return "allow";
    }
    return "unknown";
}

outcome<> net_policy::validate() const
{
    const int m = static_cast<int>(mode);
    if (m < static_cast<int>(net_mode::inherit) || m > static_cast<int>(net_mode::proxy))
        return invalid("network mode " + std::to_string(m) +
                           " is not one of default, deny_all, allow_list, proxy",
                       "net.mode");
    if (!parse_sni_mode(to_string(sni_check)))
        return invalid("sni_check " + std::to_string(static_cast<int>(sni_check)) +
                           " is not one of record, deny, off",
                       "net.sni_check");
    if (!proxy.empty())
    {
        if (auto r = check_proxy(proxy); !r)
            return r;
    }
    if (auto r = detail::check_rule_list(*this); !r) // (net::rule_set compiles the same list)
        return r.error();
    if (auto r = check_unix_sockets(unix_sockets); !r)
        return r;
    if (auto r = check_pins(resolve); !r)
        return r;
    if (mitm)
    {
        if (auto r = check_mitm(*mitm); !r)
            return r;
    }
    return check_consistency(*this);
}

} // namespace sandbox
