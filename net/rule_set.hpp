// net/rule_set.hpp: a network policy's rules compiled once (at runner or call set-up),
// then matched per connection without a linear scan: exact names hashed, wildcard and
// suffix names in a reversed-label tree, IPs and CIDRs in a prefix tree. Deny wins.
#ifndef SANDBOX_LIB_NET_RULE_SET_HPP
#define SANDBOX_LIB_NET_RULE_SET_HPP

#include <sandbox/failure.hpp>
#include <sandbox/net_policy.hpp>

#include <boost/asio/ip/address.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::net {

/// \brief The result of matching one destination.
struct rule_match
{
    bool matched = false;
    /// Meaningful when `matched`.
    net_action action = net_action::deny;
    /// The deciding rule as "<action> <pattern as written>[:<port>]" ("allow github.com:443");
    /// empty when nothing matched.
    std::string rule{};
};

/// \brief Compiled rules. Copies share the compiled form.
class rule_set
{
public:
    rule_set();
    /// Compiles `p.rules`, then one allow rule per `p.allow_hosts` entry (`HOST[:PORT]`). A bad
    /// pattern or port is `errc::validation` with `limit` naming it ("net.rules[2].host",
    /// "net.allow_hosts[0]").
    static outcome<rule_set> compile(const net_policy& p);

    /// Name rules only (domain and wildcard patterns), for a canonical name
    /// (`canonical_host::name`). Any matching deny wins over every allow.
    rule_match match_name(std::string_view name, std::uint16_t port) const;
    /// IP and CIDR rules only, for an address (unmapped). Any matching deny wins.
    rule_match match_ip(const boost::asio::ip::address& a, std::uint16_t port) const;
    /// Number of compiled rules.
    std::size_t size() const noexcept;
    /// The ports that allow rules naming `host_loopback_name` exactly open (0: every
    /// port); a rule for a parent domain or a wildcard is not one of them.
    const std::vector<std::uint16_t>& host_loopback_ports() const noexcept;

    struct impl;

private:
    std::shared_ptr<const impl> impl_;
};

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_RULE_SET_HPP
