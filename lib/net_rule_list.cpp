// lib/net_rule_list.cpp: see net_rule_list.hpp.
#include "net_rule_list.hpp"

#include <cstddef>
#include <string_view>
#include <utility>

namespace sandbox::detail {
namespace {

constexpr int max_port = 65535;

std::string indexed(std::string_view field, std::size_t index)
{
    return std::string(field) + "[" + std::to_string(index) + "]";
}

failure at(failure f, std::string limit)
{
    f.diag.limit = std::move(limit);
    return f;
}

std::string rule_text(net_action action, std::string_view pattern, int port)
{
    std::string s = to_string(action);
    s += ' ';
    s += pattern;
    if (port != 0)
    {
        s += ':';
        s += std::to_string(port);
    }
    return s;
}

// One rule: `base` names it ("net.rules[2]"), `host_limit` its host ("net.rules[2].host").
outcome<checked_rule> check_rule(std::string_view host, net_action action, int port,
                                 const std::string& base, std::string host_limit)
{
    if (action != net_action::deny && action != net_action::allow)
        return make_failure(errc::validation,
                            "rule action " + std::to_string(static_cast<int>(action)) +
                                " is neither deny (0) nor allow (1)",
                            base + ".action");
    if (port < 0 || port > max_port)
        return make_failure(errc::validation,
                            "rule port " + std::to_string(port) +
                                " is out of range (0-65535; 0 means any port)",
                            base + ".port");
    auto pattern = parse_host_pattern(host);
    if (!pattern)
        return at(pattern.error(), std::move(host_limit));
    return checked_rule{std::move(*pattern), action, static_cast<std::uint16_t>(port),
                        rule_text(action, host, port)};
}

} // namespace

outcome<std::vector<checked_rule>> check_rule_list(const net_policy& p)
{
    std::vector<checked_rule> list;
    list.reserve(p.rules.size() + p.allow_hosts.size());
    for (std::size_t i = 0; i < p.rules.size(); ++i)
    {
        const auto& r = p.rules[i];
        const std::string base = indexed("net.rules", i);
        auto checked = check_rule(r.host, r.action, r.port, base, base + ".host");
        if (!checked)
            return checked.error();
        list.push_back(std::move(*checked));
    }
    for (std::size_t i = 0; i < p.allow_hosts.size(); ++i)
    {
        const std::string limit = indexed("net.allow_hosts", i);
        auto split = split_host_port(p.allow_hosts[i]);
        if (!split)
            return at(split.error(), limit);
        auto checked = check_rule(split->host, net_action::allow, split->port, limit, limit);
        if (!checked)
            return checked.error();
        list.push_back(std::move(*checked));
    }
    return list;
}

} // namespace sandbox::detail
