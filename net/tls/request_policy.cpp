// net/tls/request_policy.cpp: request rules (deny wins; allow rules close their hosts to the
// rest) and header injections, compiled and judged.
#include "request_policy.hpp"

#include <algorithm>
#include <array>

namespace sandbox::net::tls {

namespace {

std::vector<unsigned char> bytes_of(const address& a)
{
    if (a.is_v4())
    {
        const auto b = a.to_v4().to_bytes();
        return {b.begin(), b.end()};
    }
    const auto b = a.to_v6().to_bytes();
    return {b.begin(), b.end()};
}

bool in_block(const detail::host_pattern& p, const address& a)
{
    if (a.is_v4() != p.address.is_v4())
        return false;
    const auto x = bytes_of(a);
    const auto n = bytes_of(p.address);
    for (int bit = 0; bit < p.prefix_length; ++bit)
    {
        const unsigned mask = 0x80u >> (bit % 8);
        if ((x[bit / 8] & mask) != (n[bit / 8] & mask))
            return false;
    }
    return true;
}

std::string upper(std::string_view s)
{
    std::string u(s);
    std::transform(u.begin(), u.end(), u.begin(),
                   [](char c) { return c >= 'a' && c <= 'z' ? char(c - 32) : c; });
    return u;
}

std::string lower(std::string_view s)
{
    std::string l(s);
    std::transform(l.begin(), l.end(), l.begin(), detail::to_lower_ascii);
    return l;
}

failure with_limit(failure f, const char* field, std::size_t i)
{
    f.diag.limit = std::string(field) + "[" + std::to_string(i) + "]";
    return f;
}

} // namespace

bool host_pattern_names(const detail::host_pattern& p, const canonical_host& h)
{
    using detail::host_kind;
    const auto under = [&](const std::string& name) {
        return name.size() > p.host.size() &&
               name.compare(name.size() - p.host.size(), p.host.size(), p.host) == 0 &&
               name[name.size() - p.host.size() - 1] == '.';
    };
    switch (p.kind)
    {
    case host_kind::domain: return !h.ip && (h.name == p.host || under(h.name));
    case host_kind::wildcard_domain: return !h.ip && under(h.name);
    case host_kind::ip: return h.ip && *h.ip == p.address;
    case host_kind::cidr: return h.ip && in_block(p, *h.ip);
    }
    return false;
}

outcome<request_policy> request_policy::compile(const std::vector<http_request_rule>& rules,
                                                const std::vector<header_injection>& headers)
{
    request_policy out;
    for (std::size_t i = 0; i < rules.size(); ++i)
    {
        auto p = detail::parse_request_pattern(rules[i].pattern);
        if (!p)
            return with_limit(p.error(), "net.mitm.requests", i);
        rule r;
        r.action = rules[i].action;
        r.lower_path = lower(p->path);
        r.pattern = std::move(*p);
        r.text = std::string(to_string(rules[i].action)) + " " + rules[i].pattern;
        out.rules_.push_back(std::move(r));
    }
    for (std::size_t i = 0; i < headers.size(); ++i)
    {
        const header_injection& h = headers[i];
        auto host = detail::parse_host_pattern(h.host);
        if (!host)
            return with_limit(host.error(), "net.mitm.inject_headers", i);
        if (auto r = detail::check_injected_header_name(h.name); !r)
            return with_limit(r.error(), "net.mitm.inject_headers", i);
        if (auto r = detail::check_injected_header_value(h.value); !r)
            return with_limit(r.error(), "net.mitm.inject_headers", i);
        out.headers_.push_back({std::move(*host), injection{h.name, h.value, h.replace}});
    }
    return out;
}

bool request_policy::matches(const rule& r, const request_forms& q) const
{
    const auto& methods = r.pattern.methods;
    if (!methods.empty() && std::find(methods.begin(), methods.end(), q.method) == methods.end())
        return false;
    if (detail::path_matches(r.pattern.path, q.path.strict))
        return true;
    // A deny also catches the spellings an origin may decode or fold into its path.
    return r.action == net_action::deny && (detail::path_matches(r.lower_path, q.folded) ||
                                            detail::path_matches(r.lower_path, q.path.loose));
}

request_verdict request_policy::judge(const canonical_host& host, std::string_view method,
                                      const detail::canonical_path& path) const
{
    const rule* allow = nullptr;
    bool host_has_allow = false;
    const request_forms q{upper(method), path, lower(path.strict)}; // once, for every rule
    for (const rule& r : rules_)
    {
        if (!host_pattern_names(r.pattern.host, host))
            continue;
        host_has_allow = host_has_allow || r.action == net_action::allow;
        if (!matches(r, q))
            continue;
        if (r.action == net_action::deny)
            return {false, r.text, "rule"};
        if (!allow)
            allow = &r;
    }
    if (allow)
        return {true, allow->text, "rule"};
    if (host_has_allow)
        return {false, {}, "no_allow_rule"};
    return {true, {}, "no_rule"};
}

bool request_policy::names(const canonical_host& host) const
{
    return std::any_of(rules_.begin(), rules_.end(),
                       [&](const rule& r) { return host_pattern_names(r.pattern.host, host); }) ||
           std::any_of(headers_.begin(), headers_.end(),
                       [&](const header& h) { return host_pattern_names(h.host, host); });
}

std::vector<std::pair<std::string, const detail::host_pattern*>> request_policy::hosts() const
{
    std::vector<std::pair<std::string, const detail::host_pattern*>> out;
    for (std::size_t i = 0; i < rules_.size(); ++i)
        out.emplace_back("net.mitm.requests[" + std::to_string(i) + "]", &rules_[i].pattern.host);
    for (std::size_t i = 0; i < headers_.size(); ++i)
        out.emplace_back("net.mitm.inject_headers[" + std::to_string(i) + "]", &headers_[i].host);
    return out;
}

std::vector<const injection*> request_policy::injections_for(const canonical_host& host) const
{
    std::vector<const injection*> out;
    for (const header& h : headers_)
    {
        if (!host_pattern_names(h.host, host))
            continue;
        const bool named = std::any_of(out.begin(), out.end(), [&](const injection* i) {
            return lower(i->name) == lower(h.what.name);
        });
        if (!named)
            out.push_back(&h.what);
    }
    return out;
}

} // namespace sandbox::net::tls
