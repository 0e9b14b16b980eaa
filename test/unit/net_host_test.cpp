// test/unit/net_host_test.cpp: host canonicalization, ports and authorities
// (lib/host/canonical.hpp), with the literal forms, host syntax and IDN cases of network.md
// §11.6-§11.10.
#include "host/canonical.hpp"

#include <sandbox/host_port.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <string_view>

namespace {

namespace net = sandbox::net;
namespace ip = boost::asio::ip;

std::string describe(const sandbox::failure& f) { return sandbox::to_string(f.diag); }

// What a result holds, for messages (Boost.Test builds them even when the check passes).
template <class T, class F>
std::string outcome_text(const sandbox::outcome<T>& r, F value_text)
{
    return r ? "value " + value_text(*r) : "error " + describe(r.error());
}

net::canonical_host canon_ok(std::string_view text)
{
    auto r = net::canonicalize_host(text);
    BOOST_TEST_REQUIRE(r.has_value(), "'" << text << "' should canonicalize: "
                                          << describe(r.error()));
    return *r;
}

void check_ip(std::string_view text, std::string_view expected)
{
    BOOST_TEST_CONTEXT("host '" << text << "'")
    {
        const auto h = canon_ok(text);
        BOOST_TEST_REQUIRE(h.is_ip());
        BOOST_TEST(h.name.empty());
        BOOST_TEST((*h.ip == ip::make_address(expected)), "got " << h.text());
        BOOST_TEST(h.text() == std::string(expected));
    }
}

void check_name(std::string_view text, std::string_view expected)
{
    BOOST_TEST_CONTEXT("host '" << text << "'")
    {
        const auto h = canon_ok(text);
        BOOST_TEST(!h.is_ip());
        BOOST_TEST(h.name == std::string(expected));
        BOOST_TEST(h.text() == std::string(expected));
    }
}

void check_refused(std::string_view text)
{
    BOOST_TEST_CONTEXT("host '" << std::string(text) << "' (" << text.size() << " bytes)")
    {
        const auto r = net::canonicalize_host(text);
        BOOST_TEST_REQUIRE(r.has_error(),
                           outcome_text(r, [](const auto& h) { return h.text(); }));
        BOOST_TEST(r.error().code == sandbox::errc::validation);
        BOOST_TEST(r.error().diag.message.find('\n') == std::string::npos);
        BOOST_TEST(r.error().diag.message.find('\r') == std::string::npos);
    }
}

void check_port_refused(std::string_view text)
{
    BOOST_TEST_CONTEXT("port '" << text << "'")
    {
        const auto r = net::parse_port(text);
        BOOST_TEST_REQUIRE(r.has_error(),
                           outcome_text(r, [](auto p) { return std::to_string(p); }));
        BOOST_TEST(r.error().code == sandbox::errc::validation);
    }
}

void check_authority_refused(std::string_view text, std::optional<std::uint16_t> def = {})
{
    BOOST_TEST_CONTEXT("authority '" << std::string(text) << "'")
    {
        const auto r = net::parse_authority(text, def);
        BOOST_TEST_REQUIRE(r.has_error(), outcome_text(r, [](const auto& a) {
                               return a.host.text() + " port " + std::to_string(a.port);
                           }));
        BOOST_TEST(r.error().code == sandbox::errc::validation);
    }
}

net::authority authority_ok(std::string_view text, std::optional<std::uint16_t> def = {})
{
    auto r = net::parse_authority(text, def);
    BOOST_TEST_REQUIRE(r.has_value(), "'" << text << "' should parse: " << describe(r.error()));
    return *r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(net_host)

// §11.6: every numeric IPv4 spelling glibc's getaddrinfo accepts is that address.
BOOST_AUTO_TEST_CASE(ipv4_inet_aton_forms)
{
    for (const char* loopback : {"2130706433", "0x7f000001", "0X7F000001", "017700000001",
                                 "127.1", "0x7f.0.0.1", "0x7f.1", "0177.0.0.1",
                                 "127.000.000.001", "127.0.1", "127.0.0.1", "0x00007f.0x1"})
        check_ip(loopback, "127.0.0.1");
    check_ip("0", "0.0.0.0");
    check_ip("0.0.0.0", "0.0.0.0");
    check_ip("00", "0.0.0.0");
    check_ip("2852039166", "169.254.169.254");
    check_ip("0xa9fea9fe", "169.254.169.254");
    check_ip("4294967295", "255.255.255.255");
    check_ip("0xffffffff", "255.255.255.255");
    check_ip("1.2.3.4", "1.2.3.4");
    check_ip("1.2.772", "1.2.3.4");       // the last of three parts fills 16 bits
    check_ip("1.131844", "1.2.3.4");      // the last of two parts fills 24 bits
    check_ip("10.0.0.011", "10.0.0.9");   // octal
    check_ip("1.2.3.0xff", "1.2.3.255");
}

BOOST_AUTO_TEST_CASE(ipv4_out_of_range_or_malformed_is_not_an_address)
{
    // inet_aton rejects these, and as names they end in a numeric-looking label.
    for (const char* text : {"4294967296", "0x100000000", "256.1.1.1", "1.256.1.1",
                             "1.2.3.256", "1.2.65536", "1.16777216", "1.2.3.4.5", "08",
                             "0x", "0x1g", "09.1.1.1", "1..2", "1.2.3.4.", "1.2.3."})
        check_refused(text);
}

// §11.7: IPv6 forms; v4-mapped becomes IPv4; zone ids are refused.
BOOST_AUTO_TEST_CASE(ipv6_forms)
{
    check_ip("[::1]", "::1");
    check_ip("[0:0:0:0:0:0:0:1]", "::1");
    check_ip("::1", "::1");
    check_ip("[::]", "::");
    check_ip("[::ffff:127.0.0.1]", "127.0.0.1");
    check_ip("[::ffff:7f00:1]", "127.0.0.1");
    check_ip("::ffff:0.0.0.0", "0.0.0.0");
    check_ip("[2001:DB8::1]", "2001:db8::1");
    check_ip("[::127.0.0.1]", "::127.0.0.1"); // compat form stays IPv6 (the guard decodes it)
    const auto h = canon_ok("[::ffff:127.0.0.1]");
    BOOST_TEST(h.ip->is_v4());
    BOOST_TEST(h.ip->is_loopback());

    check_refused("[fe80::1%25lo]");
    check_refused("[fe80::1%lo]");
    check_refused("fe80::1%lo");
    check_refused("[::ffff:1.2.3.4%x.allowed.test]");
    check_refused("[::1");
    check_refused("[::1]x");
    check_refused("[1.2.3.4]");
    check_refused("[]");
    check_refused("[allowed.test]");
    check_refused("a:b");
    check_refused("allowed.test:443");
    check_refused("1:2:3:4:5:6:7:8:9");
}

// §11.8: host syntax.
BOOST_AUTO_TEST_CASE(names_are_lower_case_without_trailing_dot)
{
    check_name("allowed.test", "allowed.test");
    check_name("allowed.test.", "allowed.test");
    check_name("Allowed.TEST", "allowed.test");
    check_name("localhost", "localhost");
    check_name("LOCALHOST.", "localhost");
    check_name("foo.localhost", "foo.localhost");
    check_name("a_b.example", "a_b.example");
    check_name("123.example", "123.example");
    check_name("0x7f.0.0.1.example", "0x7f.0.0.1.example");
    check_refused("allowed.test..");
    check_refused(".allowed.test");
    check_refused("allowed..test");
    check_refused(".");
    check_refused("");
}

BOOST_AUTO_TEST_CASE(localhost_names)
{
    BOOST_TEST(sandbox::is_localhost_name("localhost"));
    BOOST_TEST(sandbox::is_localhost_name("foo.localhost"));
    BOOST_TEST(sandbox::is_localhost_name("a.b.localhost"));
    BOOST_TEST(sandbox::is_localhost_name("Foo.LocalHost"));
    BOOST_TEST(sandbox::is_localhost_name(canon_ok("LOCALHOST.").name));
    BOOST_TEST(!sandbox::is_localhost_name("notlocalhost"));
    BOOST_TEST(!sandbox::is_localhost_name("localhost.test"));
    BOOST_TEST(!sandbox::is_localhost_name("xlocalhost"));
    BOOST_TEST(!sandbox::is_localhost_name("localhos"));
    BOOST_TEST(!sandbox::is_localhost_name(""));
}

BOOST_AUTO_TEST_CASE(loopback_hosts)
{
    for (const char* h : {"localhost", "api.localhost", "127.0.0.1", "127.255.0.9", "::1", "[::1]",
                          "::ffff:127.0.0.1", "[::ffff:127.0.0.2]", "LOCALHOST"})
        BOOST_TEST(sandbox::is_loopback_host(h), h);
    for (const char* h : {"", "[]", "10.0.0.1", "::2", "[::ffff:10.0.0.1]", "127.0.0.1.test",
                          "host.sandbox.internal", "[localhost", "0.0.0.0"})
        BOOST_TEST(!sandbox::is_loopback_host(h), h);
}

BOOST_AUTO_TEST_CASE(forbidden_bytes_are_refused)
{
    check_refused(std::string_view("evil.test\0.allowed.test", 23));
    check_refused(std::string_view("\0", 1));
    check_refused("allowed.test\r\nX-Injected: 1");
    check_refused("allowed.test\n");
    check_refused("allowed.test\t");
    check_refused("allowed.test\x7f");
    check_refused("allowed .test");
    check_refused(" allowed.test");
    check_refused("allowed.test ");
    check_refused("%61llowed.test");
    check_refused("allowed.test@evil.test");
    check_refused("evil.test\\@allowed.test");
    check_refused("allowed.test/path");
    check_refused("allowed.test?q");
    check_refused("allowed.test#f");
    check_refused("*.allowed.test");
    check_refused("allowed!.test");
}

BOOST_AUTO_TEST_CASE(length_limits)
{
    const std::string label63(63, 'a');
    check_name(label63 + ".test", label63 + ".test");
    check_refused(std::string(64, 'a') + ".test");

    // 4 x 63 + 3 dots = 255: trimmed to 253 it passes, at 254 (without a trailing dot) not.
    const std::string name = label63 + "." + label63 + "." + label63 + "." + label63;
    const std::string at_253 = name.substr(name.size() - 253);
    BOOST_TEST_REQUIRE(at_253.front() != '.');
    check_name(at_253, at_253);
    check_name(at_253 + ".", at_253);
    check_refused(name.substr(name.size() - 254));
    check_refused(std::string(256, 'a'));
    std::string dotted_256;
    while (dotted_256.size() < 256)
        dotted_256 += "abc.";
    dotted_256.resize(255);
    dotted_256 += 'x';
    check_refused(dotted_256);
    check_refused(std::string(5000, 'a'));
}

// §11.9: IDN and look-alikes.
BOOST_AUTO_TEST_CASE(idna_names)
{
    // Cyrillic 'а' (U+0430) is another name than Latin 'a'.
    const auto cyrillic = canon_ok("\xd0\xb0llowed.test");
    BOOST_TEST(cyrillic.name.starts_with("xn--"));
    BOOST_TEST(cyrillic.name != "allowed.test");
    BOOST_TEST(cyrillic.name.ends_with(".test"));

    check_name("m\xc3\xbcnchen.test", "xn--mnchen-3ya.test");
    check_name("M\xc3\x9cNCHEN.test", "xn--mnchen-3ya.test");
    check_name("xn--mnchen-3ya.test", "xn--mnchen-3ya.test");
    check_name("XN--MNCHEN-3YA.Test", "xn--mnchen-3ya.test");
    check_name("fa\xc3\x9f.de", "xn--fa-hia.de"); // non-transitional: ß stays
    // U+3002 (ideographic full stop) is a dot under UTS-46, trailing one included.
    check_name("allowed\xe3\x80\x82test", "allowed.test");
    check_name("allowed\xe3\x80\x82test\xe3\x80\x82", "allowed.test");

    check_refused("xn--zz.test");        // bad punycode
    check_refused("xn--llowed-.test");   // bad punycode
    check_refused("xn--a.test");         // decodes to a disallowed label
    check_refused("\xff\xfe.test");      // not UTF-8
    check_refused("a\xef\xbc\x8f" "b.test"); // fullwidth solidus maps to '/'
    // Fullwidth digits map to "127.0.0.1": a numeric name is never a name.
    check_refused("\xef\xbc\x91\xef\xbc\x92\xef\xbc\x97\xef\xbc\x8e\xef\xbc\x90\xef\xbc\x8e"
                  "\xef\xbc\x90\xef\xbc\x8e\xef\xbc\x91");
}

BOOST_AUTO_TEST_CASE(to_ascii_name_maps_like_canonicalize)
{
    const auto check = [](std::string_view in, std::string_view out) {
        const auto r = net::to_ascii_name(in);
        BOOST_TEST_REQUIRE(r.has_value(), "'" << in << "': " << describe(r.error()));
        BOOST_TEST(*r == std::string(out));
    };
    check("m\xc3\xbcnchen.test", "xn--mnchen-3ya.test");
    check("Example.COM", "example.com");
    check("example.com.", "example.com");
    check("ab--cd.test", "ab--cd.test"); // plain ASCII is only lower-cased
    check("allowed\xe3\x80\x82test", "allowed.test");
    for (const char* bad : {"xn--zz.test", "a..b", "", "a b", "a%b", "\xff.test"})
    {
        const auto r = net::to_ascii_name(bad);
        BOOST_TEST(r.has_error(), "'" << bad << "' should be refused");
        if (r.has_error())
            BOOST_TEST(r.error().code == sandbox::errc::validation);
    }
}

// §11.10: ports.
BOOST_AUTO_TEST_CASE(ports)
{
    BOOST_TEST(*net::parse_port("1") == 1);
    BOOST_TEST(*net::parse_port("443") == 443);
    BOOST_TEST(*net::parse_port("65535") == 65535);
    for (const char* bad : {"0", "65536", "-1", "0443", "+443", "443 ", " 443", "", "4a",
                            "99999999999", "00", "0x1bb", "443\n"})
        check_port_refused(bad);
}

BOOST_AUTO_TEST_CASE(authorities)
{
    auto a = authority_ok("allowed.test:443");
    BOOST_TEST(a.host.name == "allowed.test");
    BOOST_TEST(a.port == 443);

    a = authority_ok("[::1]:8080");
    BOOST_TEST((*a.host.ip == ip::make_address("::1")));
    BOOST_TEST(a.port == 8080);

    a = authority_ok("[::ffff:127.0.0.1]:80");
    BOOST_TEST(a.host.ip->is_v4());

    a = authority_ok("2130706433:443");
    BOOST_TEST((*a.host.ip == ip::make_address("127.0.0.1")));
    a = authority_ok("0:443");
    BOOST_TEST((*a.host.ip == ip::make_address("0.0.0.0")));
    a = authority_ok("2852039166:80");
    BOOST_TEST((*a.host.ip == ip::make_address("169.254.169.254")));

    a = authority_ok("Allowed.Test", 80);
    BOOST_TEST(a.host.name == "allowed.test");
    BOOST_TEST(a.port == 80);
    a = authority_ok("[::1]", 443);
    BOOST_TEST(a.port == 443);

    check_authority_refused("allowed.test");     // CONNECT without a port
    check_authority_refused("[::1]");
    check_authority_refused("::1:443");           // unbracketed IPv6
    check_authority_refused("::1:443", 443);
    check_authority_refused("[fe80::1%25lo]:443");
    check_authority_refused("[fe80::1%lo]:443");
    check_authority_refused("[::ffff:1.2.3.4%x.allowed.test]:443");
    for (const char* port : {"0", "65536", "-1", "0443", "+443", "443 ", ""})
        check_authority_refused(std::string("allowed.test:") + port, 443);
    check_authority_refused(":443");
    check_authority_refused("[]:443");
    check_authority_refused("[::1]443");
    check_authority_refused("[::1");
    check_authority_refused("allowed.test@evil.test:443");
    check_authority_refused("evil.test:443.allowed.test");
    check_authority_refused(std::string_view("allowed.test:443\0", 17));
    check_authority_refused("allowed.test\r\n:443");
}

BOOST_AUTO_TEST_CASE(format_authority_round_trips)
{
    BOOST_TEST(net::format_authority(canon_ok("allowed.test"), 443) == "allowed.test:443");
    BOOST_TEST(net::format_authority(canon_ok("allowed.test"), 80, 80) == "allowed.test");
    BOOST_TEST(net::format_authority(canon_ok("allowed.test"), 8080, 80) == "allowed.test:8080");
    BOOST_TEST(net::format_authority(canon_ok("[::1]"), 443) == "[::1]:443");
    BOOST_TEST(net::format_authority(canon_ok("::1"), 443, 443) == "[::1]");
    BOOST_TEST(net::format_authority(canon_ok("127.1"), 80) == "127.0.0.1:80");
    BOOST_TEST(net::format_authority(canon_ok("[::ffff:1.2.3.4]"), 80) == "1.2.3.4:80");
    for (const char* text : {"allowed.test:443", "[2001:db8::1]:8443", "10.0.0.1:22"})
    {
        const auto a = authority_ok(text);
        BOOST_TEST(net::format_authority(a.host, a.port) == std::string(text));
    }
}

BOOST_AUTO_TEST_SUITE_END()
