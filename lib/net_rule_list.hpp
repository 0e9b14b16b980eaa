// lib/net_rule_list.hpp: a policy's rules (`net.rules`, then `net.allow_hosts`), checked in
// one walk: `net_policy::validate` runs it to refuse a bad policy, `net::rule_set::compile`
// to build its lookup tables from the same parsed patterns and the same messages.
#ifndef SANDBOX_LIB_NET_RULE_LIST_HPP
#define SANDBOX_LIB_NET_RULE_LIST_HPP

#include <sandbox/failure.hpp>
#include <sandbox/net_policy.hpp>

#include "host/pattern.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace sandbox::detail {

/// One rule as written, checked.
struct checked_rule
{
    host_pattern pattern;
    net_action action = net_action::deny;
    std::uint16_t port = 0; // 0: any port
    /// How a match names the rule: "allow example.com:443" (the pattern as written).
    std::string text;
};

/// \brief The rules of `p` in the order they are numbered: `net.rules`, then each
/// `net.allow_hosts` entry as an allow rule (`HOST` or `HOST:PORT`).
///
/// Fails with `errc::validation` at the first bad rule; its diagnostics' limit names the
/// field (`net.rules[2].port`, `net.allow_hosts[0]`).
SANDBOX_DECL outcome<std::vector<checked_rule>> check_rule_list(const net_policy& p);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_NET_RULE_LIST_HPP
