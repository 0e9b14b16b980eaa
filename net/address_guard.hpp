// net/address_guard.hpp: the SSRF guard: classes of special-purpose addresses that the
// proxy never dials unless an explicit IP/CIDR allow rule covers them (docs/security.md).
// Pure logic (the host's interface addresses are read once, by `with_host_interfaces`).
#ifndef SANDBOX_LIB_NET_ADDRESS_GUARD_HPP
#define SANDBOX_LIB_NET_ADDRESS_GUARD_HPP

#include <boost/asio/ip/address.hpp>

#include <vector>

namespace sandbox::net {

/// \brief What an address is. Everything but `global` is refused by default.
enum class address_class
{
    global,         ///< ordinary public unicast
    unspecified,    ///< 0.0.0.0/8, :: (connect() to these reaches local listeners)
    loopback,       ///< 127/8, ::1, `localhost` names
    private_use,    ///< 10/8, 172.16/12, 192.168/16, fc00::/7
    shared,         ///< 100.64/10 (carrier-grade NAT)
    link_local,     ///< 169.254/16, fe80::/10
    metadata,       ///< cloud metadata outside link-local (100.100.100.200, 168.63.129.16, fd00:ec2::/32, ...)
    multicast,      ///< 224/4, ff00::/8
    broadcast,      ///< 255.255.255.255
    reserved,       ///< 240/4 and the rest of the IANA special-purpose registries (documentation, benchmarking, 192.0.0/24, ...)
    host_interface, ///< an address of one of this host's interfaces
    embedded,       ///< IPv6 carrying a refused IPv4 (NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo, compat)
};

/// "global", "unspecified", "loopback", "private", "shared", "link_local", "metadata",
/// "multicast", "broadcast", "reserved", "host_interface", "embedded".
const char* to_string(address_class c) noexcept;

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) as IPv4; anything else unchanged.
boost::asio::ip::address unmapped(const boost::asio::ip::address& a);

/// \brief Classifies addresses. Cheap to copy.
class address_guard
{
public:
    /// `host_addresses`: this host's own addresses (classed `host_interface` when not
    /// already special).
    explicit address_guard(std::vector<boost::asio::ip::address> host_addresses = {});
    /// With this host's interface addresses (getifaddrs).
    static address_guard with_host_interfaces();

    /// The first class that refuses `a` (checked unmapped, embedded IPv4 included: an
    /// embedding only adds refusals), or `global`.
    address_class classify(const boost::asio::ip::address& a) const;

private:
    std::vector<boost::asio::ip::address> host_;
};

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_ADDRESS_GUARD_HPP
