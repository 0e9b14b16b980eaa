// net/address_guard.cpp: see address_guard.hpp.
//
// The table (first match wins; IPv4-mapped IPv6 is unmapped before anything else):
//
//   IPv4                      class           source
//   100.100.100.200/32        metadata        Alibaba Cloud
//   168.63.129.16/32          metadata        Azure WireServer
//   192.0.0.192/32            metadata        OCI Classic
//   255.255.255.255/32        broadcast       RFC 919
//   0.0.0.0/8                 unspecified     "this network" (connect() reaches local listeners)
//   10.0.0.0/8                private_use     RFC 1918
//   100.64.0.0/10             shared          RFC 6598 (carrier-grade NAT)
//   127.0.0.0/8               loopback        RFC 1122
//   169.254.0.0/16            link_local      RFC 3927 (169.254.169.254, the usual metadata, too)
//   172.16.0.0/12             private_use     RFC 1918
//   192.0.0.0/24              reserved        IETF protocol assignments
//   192.0.2.0/24              reserved        TEST-NET-1
//   192.88.99.0/24            reserved        6to4 relay anycast (deprecated)
//   192.168.0.0/16            private_use     RFC 1918
//   198.18.0.0/15             reserved        benchmarking
//   198.51.100.0/24           reserved        TEST-NET-2
//   203.0.113.0/24            reserved        TEST-NET-3
//   224.0.0.0/4               multicast
//   240.0.0.0/4               reserved        future use
//
//   IPv6
//   ::/128                    unspecified
//   ::1/128                   loopback
//   ::/96 (compat)            embedded when the IPv4 in bytes 12-15 is refused, else reserved
//   64:ff9b::/96              embedded when the IPv4 in bytes 12-15 is refused, else reserved
//   64:ff9b:1::/48            embedded when bytes 12-15 hold a refused IPv4, else reserved
//   100::/64                  reserved        discard-only
//   2001::/32 (Teredo)        embedded when the server (bytes 4-7) or the client (NOT of
//                             bytes 12-15) is refused, else reserved
//   2001::/23                 reserved        IETF protocol assignments (global sub-blocks too)
//   2001:db8::/32             reserved        documentation
//   2002::/16 (6to4)          embedded when the IPv4 in bytes 2-5 is refused, else reserved
//   3fff::/20                 reserved        documentation (RFC 9637)
//   fd00:ec2::/32             metadata        AWS IMDS and friends
//   fd20:ce::254, fd00:c1::a9fe:a9fe, fd00:42::42, fd00:a9fe:a9fe::1, fd00:100::100:200
//                             metadata        GCP, OCI, Scaleway, Linode, Alibaba
//   fc00::/7                  private_use     unique local
//   fe80::/10                 link_local
//   ff00::/8                  multicast
//   outside 2000::/3          reserved        everything else not global unicast
//
// Then an address still `global` that is one of this host's own addresses is
// `host_interface`. An embedded IPv4 only adds refusals: an IPv6 prefix above is denied even
// when the IPv4 it carries is global (NAT64 to a public IPv4 needs an explicit CIDR allow).
#include "address_guard.hpp"

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <utility>

#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace sandbox::net {
namespace {

namespace ip = boost::asio::ip;
using bytes16 = ip::address_v6::bytes_type;

struct v4_prefix
{
    std::uint32_t network;
    int length;
    address_class cls;
};

constexpr std::uint32_t v4(unsigned a, unsigned b, unsigned c, unsigned d) noexcept
{
    return (a << 24) | (b << 16) | (c << 8) | d;
}

constexpr std::array<v4_prefix, 19> v4_table = {{
    {v4(100, 100, 100, 200), 32, address_class::metadata},
    {v4(168, 63, 129, 16), 32, address_class::metadata},
    {v4(192, 0, 0, 192), 32, address_class::metadata},
    {v4(255, 255, 255, 255), 32, address_class::broadcast},
    {v4(0, 0, 0, 0), 8, address_class::unspecified},
    {v4(10, 0, 0, 0), 8, address_class::private_use},
    {v4(100, 64, 0, 0), 10, address_class::shared},
    {v4(127, 0, 0, 0), 8, address_class::loopback},
    {v4(169, 254, 0, 0), 16, address_class::link_local},
    {v4(172, 16, 0, 0), 12, address_class::private_use},
    {v4(192, 0, 0, 0), 24, address_class::reserved},
    {v4(192, 0, 2, 0), 24, address_class::reserved},
    {v4(192, 88, 99, 0), 24, address_class::reserved},
    {v4(192, 168, 0, 0), 16, address_class::private_use},
    {v4(198, 18, 0, 0), 15, address_class::reserved},
    {v4(198, 51, 100, 0), 24, address_class::reserved},
    {v4(203, 0, 113, 0), 24, address_class::reserved},
    {v4(224, 0, 0, 0), 4, address_class::multicast},
    {v4(240, 0, 0, 0), 4, address_class::reserved},
}};

address_class classify_v4(std::uint32_t a) noexcept
{
    for (const auto& p : v4_table)
    {
        const std::uint32_t mask = p.length == 0 ? 0 : ~std::uint32_t{0} << (32 - p.length);
        if ((a & mask) == p.network)
            return p.cls;
    }
    return address_class::global;
}

std::uint32_t v4_at(const bytes16& b, std::size_t at) noexcept
{
    return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) |
           (std::uint32_t{b[at + 2]} << 8) | std::uint32_t{b[at + 3]};
}

// True when the first `length` bits of `b` equal those of `prefix` (given as up to 16 bytes).
bool in_prefix(const bytes16& b, std::initializer_list<unsigned char> prefix, int length) noexcept
{
    std::size_t i = 0;
    for (const unsigned char p : prefix)
    {
        const int bits = length - static_cast<int>(i * 8);
        if (bits <= 0)
            return true;
        const unsigned mask = bits >= 8 ? 0xFFu : (0xFF00u >> bits) & 0xFFu;
        if ((b[i] & mask) != (p & mask))
            return false;
        ++i;
    }
    for (; static_cast<int>(i * 8) < length; ++i)
    {
        const int bits = length - static_cast<int>(i * 8);
        const unsigned mask = bits >= 8 ? 0xFFu : (0xFF00u >> bits) & 0xFFu;
        if ((b[i] & mask) != 0)
            return false;
    }
    return true;
}

// A denied IPv6 prefix carrying an IPv4: `embedded` when that IPv4 is refused itself.
address_class carrying(std::uint32_t v4_bits) noexcept
{
    return classify_v4(v4_bits) == address_class::global ? address_class::reserved
                                                         : address_class::embedded;
}

address_class teredo(const bytes16& b) noexcept
{
    const bool refused = classify_v4(v4_at(b, 4)) != address_class::global ||
                         classify_v4(~v4_at(b, 12)) != address_class::global;
    return refused ? address_class::embedded : address_class::reserved;
}

bool is_v6_metadata(const bytes16& b) noexcept
{
    static const std::array<ip::address_v6, 5> singles = {
        ip::make_address_v6("fd20:ce::254"),     ip::make_address_v6("fd00:c1::a9fe:a9fe"),
        ip::make_address_v6("fd00:42::42"),      ip::make_address_v6("fd00:a9fe:a9fe::1"),
        ip::make_address_v6("fd00:100::100:200"),
    };
    if (in_prefix(b, {0xfd, 0x00, 0x0e, 0xc2}, 32))
        return true;
    for (const auto& s : singles)
        if (s.to_bytes() == b)
            return true;
    return false;
}

// Everything in ::/8 (unspecified, loopback, compat), 64:ff9b::/32-ish NAT64 and 100::/64.
address_class classify_low_v6(const bytes16& b) noexcept
{
    if (in_prefix(b, {}, 96))
    {
        const std::uint32_t low = v4_at(b, 12);
        if (low == 0)
            return address_class::unspecified;
        if (low == 1)
            return address_class::loopback;
        return carrying(low);
    }
    if (in_prefix(b, {0x00, 0x64, 0xff, 0x9b}, 96) ||
        in_prefix(b, {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48))
        return carrying(v4_at(b, 12));
    return address_class::reserved; // 100::/64 and the rest outside 2000::/3
}

address_class classify_v6(const bytes16& b) noexcept
{
    if (b[0] == 0x00 || b[0] == 0x01)
        return classify_low_v6(b);
    if (in_prefix(b, {0x20, 0x01, 0x00, 0x00}, 32))
        return teredo(b);
    if (in_prefix(b, {0x20, 0x01, 0x00}, 23) || in_prefix(b, {0x20, 0x01, 0x0d, 0xb8}, 32) ||
        in_prefix(b, {0x3f, 0xff}, 20))
        return address_class::reserved;
    if (in_prefix(b, {0x20, 0x02}, 16))
        return carrying(v4_at(b, 2));
    if (in_prefix(b, {0x20}, 3))
        return address_class::global;
    if (is_v6_metadata(b))
        return address_class::metadata;
    if (in_prefix(b, {0xfc}, 7))
        return address_class::private_use;
    if (in_prefix(b, {0xfe, 0x80}, 10))
        return address_class::link_local;
    if (b[0] == 0xff)
        return address_class::multicast;
    return address_class::reserved;
}

// An address as compared with the host's list: unmapped, without an IPv6 scope id.
ip::address comparable(const ip::address& a)
{
    const ip::address u = unmapped(a);
    if (u.is_v6() && u.to_v6().scope_id() != 0)
        return ip::address_v6(u.to_v6().to_bytes());
    return u;
}

} // namespace

const char* to_string(address_class c) noexcept
{
    switch (c)
    {
    case address_class::global: return "global";
    case address_class::unspecified: return "unspecified";
    case address_class::loopback: return "loopback";
    case address_class::private_use: return "private";
    case address_class::shared: return "shared";
    case address_class::link_local: return "link_local";
    case address_class::metadata: return "metadata";
    case address_class::multicast: return "multicast";
    case address_class::broadcast: return "broadcast";
    case address_class::reserved: return "reserved";
    case address_class::host_interface: return "host_interface";
    case address_class::embedded: return "embedded";
    }
    return "unknown";
}

ip::address unmapped(const ip::address& a)
{
    if (a.is_v6() && a.to_v6().is_v4_mapped())
        return ip::make_address_v4(ip::v4_mapped, a.to_v6());
    return a;
}

address_guard::address_guard(std::vector<ip::address> host_addresses)
    : host_(std::move(host_addresses))
{
    for (auto& a : host_)
        a = comparable(a);
}

address_guard address_guard::with_host_interfaces()
{
    std::vector<ip::address> found;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0)
        return address_guard(std::move(found));
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next)
    {
        if (i->ifa_addr == nullptr)
            continue;
        if (i->ifa_addr->sa_family == AF_INET)
        {
            const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
            found.emplace_back(ip::address_v4(ntohl(sin->sin_addr.s_addr)));
        }
        else if (i->ifa_addr->sa_family == AF_INET6)
        {
            const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
            bytes16 b{};
            std::copy(std::begin(sin6->sin6_addr.s6_addr), std::end(sin6->sin6_addr.s6_addr),
                      b.begin());
            found.emplace_back(ip::address_v6(b));
        }
    }
    ::freeifaddrs(list);
    return address_guard(std::move(found));
}

address_class address_guard::classify(const ip::address& a) const
{
    const ip::address u = unmapped(a);
    const address_class c =
        u.is_v4() ? classify_v4(u.to_v4().to_uint()) : classify_v6(u.to_v6().to_bytes());
    if (c != address_class::global || host_.empty())
        return c;
    const ip::address bare = comparable(u);
    for (const auto& h : host_)
        if (h == bare)
            return address_class::host_interface;
    return address_class::global;
}

} // namespace sandbox::net
