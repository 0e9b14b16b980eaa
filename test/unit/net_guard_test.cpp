// test/unit/net_guard_test.cpp: the SSRF guard's address classes (net/address_guard.hpp),
// with every address of network.md §11.1.
#include "net/address_guard.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

namespace {

namespace net = sandbox::net;
namespace ip = boost::asio::ip;
using net::address_class;

std::string class_of(const net::address_guard& g, const char* text)
{
    return net::to_string(g.classify(ip::make_address(text)));
}

void check_class(const net::address_guard& g, const char* text, address_class expected)
{
    BOOST_TEST(class_of(g, text) == std::string(net::to_string(expected)), "address " << text);
}

} // namespace

BOOST_AUTO_TEST_SUITE(net_guard)

BOOST_AUTO_TEST_CASE(class_names)
{
    const std::vector<std::pair<address_class, const char*>> names = {
        {address_class::global, "global"},
        {address_class::unspecified, "unspecified"},
        {address_class::loopback, "loopback"},
        {address_class::private_use, "private"},
        {address_class::shared, "shared"},
        {address_class::link_local, "link_local"},
        {address_class::metadata, "metadata"},
        {address_class::multicast, "multicast"},
        {address_class::broadcast, "broadcast"},
        {address_class::reserved, "reserved"},
        {address_class::host_interface, "host_interface"},
        {address_class::embedded, "embedded"},
    };
    for (const auto& [c, name] : names)
        BOOST_TEST(std::string(net::to_string(c)) == name);
    BOOST_TEST(std::string(net::to_string(static_cast<address_class>(99))) == "unknown");
}

// §11.1: every address a name may resolve to that the guard refuses, with its class.
BOOST_AUTO_TEST_CASE(ssrf_addresses_of_section_11_1)
{
    const net::address_guard g;
    const std::vector<std::pair<const char*, address_class>> cases = {
        {"127.0.0.1", address_class::loopback},
        {"127.255.255.254", address_class::loopback},
        {"0.0.0.0", address_class::unspecified},
        {"::1", address_class::loopback},
        {"::", address_class::unspecified},
        {"::ffff:127.0.0.1", address_class::loopback},
        {"::ffff:0.0.0.0", address_class::unspecified},
        {"::127.0.0.1", address_class::embedded},     // compat
        {"64:ff9b::7f00:1", address_class::embedded}, // NAT64
        {"2002:7f00:1::", address_class::embedded},   // 6to4
        {"169.254.169.254", address_class::link_local},
        {"fe80::1", address_class::link_local},
        {"fd00:ec2::254", address_class::metadata},
        {"100.100.100.200", address_class::metadata},
        {"168.63.129.16", address_class::metadata},
        {"192.0.0.192", address_class::metadata},
        {"10.0.0.5", address_class::private_use},
        {"172.16.0.1", address_class::private_use},
        {"192.168.1.1", address_class::private_use},
        {"100.64.0.1", address_class::shared},
        {"198.18.0.1", address_class::reserved},
        {"240.0.0.1", address_class::reserved},
        {"224.0.0.1", address_class::multicast},
        {"255.255.255.255", address_class::broadcast},
    };
    for (const auto& [text, expected] : cases)
        check_class(g, text, expected);
}

BOOST_AUTO_TEST_CASE(ipv4_registry_edges)
{
    const net::address_guard g;
    check_class(g, "0.255.255.255", address_class::unspecified);
    check_class(g, "1.0.0.0", address_class::global);
    check_class(g, "9.255.255.255", address_class::global);
    check_class(g, "10.255.255.255", address_class::private_use);
    check_class(g, "11.0.0.0", address_class::global);
    check_class(g, "100.63.255.254", address_class::global);
    check_class(g, "100.64.0.0", address_class::shared);
    check_class(g, "100.127.255.255", address_class::shared);
    check_class(g, "100.128.0.1", address_class::global);
    check_class(g, "126.255.255.255", address_class::global);
    check_class(g, "128.0.0.0", address_class::global);
    check_class(g, "169.253.255.255", address_class::global);
    check_class(g, "169.254.0.0", address_class::link_local);
    check_class(g, "169.255.0.0", address_class::global);
    check_class(g, "172.15.255.255", address_class::global);
    check_class(g, "172.31.255.255", address_class::private_use);
    check_class(g, "172.32.0.0", address_class::global);
    check_class(g, "192.0.0.1", address_class::reserved);
    check_class(g, "192.0.1.1", address_class::global);
    check_class(g, "192.0.2.1", address_class::reserved);
    check_class(g, "192.88.99.1", address_class::reserved);
    check_class(g, "192.167.255.255", address_class::global);
    check_class(g, "192.169.0.0", address_class::global);
    check_class(g, "198.17.255.255", address_class::global);
    check_class(g, "198.19.255.255", address_class::reserved);
    check_class(g, "198.20.0.0", address_class::global);
    check_class(g, "198.51.100.1", address_class::reserved);
    check_class(g, "203.0.113.7", address_class::reserved);
    check_class(g, "223.255.255.255", address_class::global);
    check_class(g, "239.255.255.255", address_class::multicast);
    check_class(g, "255.255.255.254", address_class::reserved);
    check_class(g, "100.100.100.201", address_class::shared);
    check_class(g, "168.63.129.17", address_class::global);
}

BOOST_AUTO_TEST_CASE(global_addresses_pass)
{
    const net::address_guard g;
    for (const char* text : {"8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700::1111",
                             "2a00:1450:4001::200e", "::ffff:8.8.8.8", "2000::1",
                             "3ffe::1", "2001:200::1"})
        check_class(g, text, address_class::global);
}

BOOST_AUTO_TEST_CASE(ipv6_registry)
{
    const net::address_guard g;
    check_class(g, "::2", address_class::embedded);          // compat carrying 0.0.0.2
    check_class(g, "100::1", address_class::reserved);       // discard-only
    check_class(g, "2001:db8::1", address_class::reserved);  // documentation
    check_class(g, "3fff::1", address_class::reserved);      // documentation (RFC 9637)
    check_class(g, "2001:10::1", address_class::reserved);   // inside 2001::/23
    check_class(g, "2001:1ff::1", address_class::reserved);
    check_class(g, "fc00::1", address_class::private_use);
    check_class(g, "fdff::1", address_class::private_use);
    check_class(g, "fd20:ce::254", address_class::metadata);
    check_class(g, "fd00:c1::a9fe:a9fe", address_class::metadata);
    check_class(g, "febf::1", address_class::link_local);
    check_class(g, "fec0::1", address_class::reserved);      // old site-local
    check_class(g, "ff02::2", address_class::multicast);
    check_class(g, "ff05::1:3", address_class::multicast);
    check_class(g, "4000::1", address_class::reserved);
    check_class(g, "1fff::1", address_class::reserved);
    check_class(g, "5f00::1", address_class::reserved);
    check_class(g, "::ffff:10.1.2.3", address_class::private_use);
    check_class(g, "::ffff:169.254.169.254", address_class::link_local);
}

// An embedded IPv4 only adds refusals: a global one leaves the prefix denied (reserved).
BOOST_AUTO_TEST_CASE(embedded_ipv4)
{
    const net::address_guard g;
    // NAT64 well-known /96 and local-use /48.
    check_class(g, "64:ff9b::a9fe:a9fe", address_class::embedded);
    check_class(g, "64:ff9b::a00:1", address_class::embedded);
    check_class(g, "64:ff9b::808:808", address_class::reserved);
    check_class(g, "64:ff9b:1::7f00:1", address_class::embedded);
    check_class(g, "64:ff9b:1::808:808", address_class::reserved);
    // 6to4: the IPv4 is in bytes 2-5.
    check_class(g, "2002:a9fe:a9fe::1", address_class::embedded);
    check_class(g, "2002:c0a8:101::1", address_class::embedded);
    check_class(g, "2002:808:808::1", address_class::reserved);
    // Teredo: the client is the complement of the last 32 bits, the server bytes 4-7.
    check_class(g, "2001:0:808:808::80ff:fffe", address_class::embedded);  // client 127.0.0.1
    check_class(g, "2001:0:808:808::f5ff:fffe", address_class::embedded);  // client 10.0.0.1
    check_class(g, "2001:0:a00:1::f7f7:f7f7", address_class::embedded);    // server 10.0.0.1
    check_class(g, "2001:0:808:808::f7f7:f7f7", address_class::reserved);  // both 8.8.8.8
    // Compat ::a.b.c.d.
    check_class(g, "::169.254.169.254", address_class::embedded);
    check_class(g, "::8.8.8.8", address_class::reserved);
}

BOOST_AUTO_TEST_CASE(unmapped_folds_only_v4_mapped)
{
    BOOST_TEST(net::unmapped(ip::make_address("::ffff:1.2.3.4")) == ip::make_address("1.2.3.4"));
    BOOST_TEST(net::unmapped(ip::make_address("::1.2.3.4")) == ip::make_address("::1.2.3.4"));
    BOOST_TEST(net::unmapped(ip::make_address("1.2.3.4")) == ip::make_address("1.2.3.4"));
    BOOST_TEST(net::unmapped(ip::make_address("2001:db8::1")) == ip::make_address("2001:db8::1"));
}

BOOST_AUTO_TEST_CASE(host_interface_addresses)
{
    // Given addresses: a global one becomes host_interface, mapped or not; special ones keep
    // their own class; others stay global.
    const net::address_guard g({ip::make_address("93.184.216.34"),
                                ip::make_address("2606:4700::1111"),
                                ip::make_address("10.0.0.7"), ip::make_address("::1")});
    check_class(g, "93.184.216.34", address_class::host_interface);
    check_class(g, "::ffff:93.184.216.34", address_class::host_interface);
    check_class(g, "2606:4700::1111", address_class::host_interface);
    check_class(g, "10.0.0.7", address_class::private_use);
    check_class(g, "::1", address_class::loopback);
    check_class(g, "93.184.216.35", address_class::global);
    check_class(g, "8.8.8.8", address_class::global);

    // The real interfaces: every address getifaddrs reports is refused.
    const auto host = net::address_guard::with_host_interfaces();
    BOOST_TEST((host.classify(ip::make_address("127.0.0.1")) == address_class::loopback));
    BOOST_TEST((host.classify(ip::make_address("8.8.8.8")) == address_class::global));
    ifaddrs* list = nullptr;
    BOOST_TEST_REQUIRE(::getifaddrs(&list) == 0);
    int seen = 0;
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next)
    {
        if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET)
            continue;
        const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        const ip::address a = ip::address_v4(ntohl(sin->sin_addr.s_addr));
        ++seen;
        BOOST_TEST((host.classify(a) != address_class::global), "interface address " << a);
    }
    ::freeifaddrs(list);
    BOOST_TEST(seen > 0);
}

BOOST_AUTO_TEST_SUITE_END()
