// test/unit/net_rules_test.cpp: compiled rules (net/rule_set.hpp): deny wins, label
// alignment, wildcards, ports, CIDRs, v4-mapped and IDN rules, compile failures, and 1,000
// rules checked against a plain linear matcher.
#include "net/rule_set.hpp"

#include "host/canonical.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace {

namespace sbx = sandbox;
namespace net = sandbox::net;
namespace ip = boost::asio::ip;
using sbx::net_action;

sbx::net_policy policy(std::vector<sbx::net_rule> rules, std::vector<std::string> hosts = {})
{
    sbx::net_policy p;
    p.mode = sbx::net_mode::allow_list;
    p.rules = std::move(rules);
    p.allow_hosts = std::move(hosts);
    return p;
}

net::rule_set compile_ok(const sbx::net_policy& p)
{
    auto r = net::rule_set::compile(p);
    BOOST_TEST_REQUIRE(r.has_value(), "compile: " << sbx::to_string(r.error().diag));
    return *r;
}

std::string verdict(const net::rule_match& m)
{
    if (!m.matched)
        return "none";
    return std::string(sbx::to_string(m.action)) + " (" + m.rule + ")";
}

std::string on_name(const net::rule_set& s, const char* name, std::uint16_t port = 443)
{
    return verdict(s.match_name(name, port));
}

std::string on_ip(const net::rule_set& s, const char* addr, std::uint16_t port = 443)
{
    return verdict(s.match_ip(ip::make_address(addr), port));
}

void check_compile_fails(const sbx::net_policy& p, const std::string& limit)
{
    BOOST_TEST_CONTEXT("expected a failure at " << limit)
    {
        const auto r = net::rule_set::compile(p);
        BOOST_TEST_REQUIRE(r.has_error());
        BOOST_TEST(r.error().code == sbx::errc::validation);
        BOOST_TEST(r.error().diag.limit == limit);
        BOOST_TEST(!r.error().diag.message.empty());
        // Validation walks the same rule list (lib/net_rule_list.hpp): the same refusal.
        const auto v = p.validate();
        BOOST_TEST_REQUIRE(v.has_error());
        BOOST_TEST(v.error().diag.message == r.error().diag.message);
        BOOST_TEST(v.error().diag.limit == limit);
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(net_rules)

BOOST_AUTO_TEST_CASE(empty_rule_set_matches_nothing)
{
    const net::rule_set none;
    BOOST_TEST(none.size() == 0u);
    BOOST_TEST(on_name(none, "allowed.test") == "none");
    BOOST_TEST(on_ip(none, "1.2.3.4") == "none");
    const auto compiled = compile_ok(policy({}));
    BOOST_TEST(compiled.size() == 0u);
    BOOST_TEST(on_name(compiled, "allowed.test") == "none");
}

BOOST_AUTO_TEST_CASE(domain_matches_itself_and_subdomains_label_aligned)
{
    const auto s = compile_ok(policy({{net_action::allow, "allowed.test", 0}}));
    BOOST_TEST(s.size() == 1u);
    BOOST_TEST(on_name(s, "allowed.test") == "allow (allow allowed.test)");
    BOOST_TEST(on_name(s, "www.allowed.test") == "allow (allow allowed.test)");
    BOOST_TEST(on_name(s, "a.b.allowed.test") == "allow (allow allowed.test)");
    BOOST_TEST(on_name(s, "notallowed.test") == "none");
    BOOST_TEST(on_name(s, "allowed.test.evil.test") == "none");
    BOOST_TEST(on_name(s, "allowed.testx") == "none");
    BOOST_TEST(on_name(s, "test") == "none");
    BOOST_TEST(on_name(s, "") == "none");
}

BOOST_AUTO_TEST_CASE(wildcard_matches_subdomains_only)
{
    const auto s = compile_ok(policy({{net_action::allow, "*.wild.test", 0}}));
    BOOST_TEST(on_name(s, "wild.test") == "none");
    BOOST_TEST(on_name(s, "a.wild.test") == "allow (allow *.wild.test)");
    BOOST_TEST(on_name(s, "a.b.wild.test") == "allow (allow *.wild.test)");
    BOOST_TEST(on_name(s, "notwild.test") == "none");
    BOOST_TEST(on_name(s, "a.notwild.test") == "none");
}

BOOST_AUTO_TEST_CASE(deny_wins_in_either_order)
{
    const sbx::net_rule allow{net_action::allow, "allowed.test", 0};
    const sbx::net_rule deny{net_action::deny, "secret.allowed.test", 0};
    for (const auto& rules : {std::vector{allow, deny}, std::vector{deny, allow}})
    {
        const auto s = compile_ok(policy(rules));
        BOOST_TEST(on_name(s, "secret.allowed.test") == "deny (deny secret.allowed.test)");
        BOOST_TEST(on_name(s, "x.secret.allowed.test") == "deny (deny secret.allowed.test)");
        BOOST_TEST(on_name(s, "www.allowed.test") == "allow (allow allowed.test)");
    }

    // The same exact name allowed and denied; a wildcard deny over an exact allow; an
    // allow_hosts entry against a deny rule.
    auto s = compile_ok(policy({allow, {net_action::deny, "allowed.test", 0}}));
    BOOST_TEST(on_name(s, "allowed.test") == "deny (deny allowed.test)");
    s = compile_ok(policy({{net_action::allow, "a.wild.test", 0},
                           {net_action::deny, "*.wild.test", 0}}));
    BOOST_TEST(on_name(s, "a.wild.test") == "deny (deny *.wild.test)");
    s = compile_ok(policy({{net_action::deny, "allowed.test", 0}}, {"allowed.test"}));
    BOOST_TEST(on_name(s, "allowed.test") == "deny (deny allowed.test)");

    // IP: a denied address inside an allowed range (smokescreen #236), both orders.
    const sbx::net_rule range{net_action::allow, "192.168.0.0/16", 0};
    const sbx::net_rule one{net_action::deny, "192.168.1.5", 0};
    for (const auto& rules : {std::vector{range, one}, std::vector{one, range}})
    {
        s = compile_ok(policy(rules));
        BOOST_TEST(on_ip(s, "192.168.1.5") == "deny (deny 192.168.1.5)");
        BOOST_TEST(on_ip(s, "192.168.1.6") == "allow (allow 192.168.0.0/16)");
    }
}

BOOST_AUTO_TEST_CASE(the_first_deciding_rule_is_named)
{
    const auto s = compile_ok(policy({{net_action::allow, "test", 0},
                                      {net_action::allow, "allowed.test", 0},
                                      {net_action::deny, "x.allowed.test", 0},
                                      {net_action::deny, "*.test", 0}}));
    BOOST_TEST(on_name(s, "allowed.test") == "deny (deny *.test)");
    BOOST_TEST(on_name(s, "x.allowed.test") == "deny (deny x.allowed.test)");
    BOOST_TEST(on_name(s, "test") == "allow (allow test)");
}

BOOST_AUTO_TEST_CASE(ports)
{
    const auto s = compile_ok(policy({{net_action::allow, "allowed.test", 443},
                                      {net_action::deny, "allowed.test", 22},
                                      {net_action::allow, "10.9.0.0/16", 8080},
                                      {net_action::allow, "any.test", 0}}));
    BOOST_TEST(on_name(s, "allowed.test", 443) == "allow (allow allowed.test:443)");
    BOOST_TEST(on_name(s, "allowed.test", 22) == "deny (deny allowed.test:22)");
    BOOST_TEST(on_name(s, "allowed.test", 80) == "none");
    BOOST_TEST(on_name(s, "any.test", 1) == "allow (allow any.test)");
    BOOST_TEST(on_name(s, "any.test", 65535) == "allow (allow any.test)");
    BOOST_TEST(on_ip(s, "10.9.3.4", 8080) == "allow (allow 10.9.0.0/16:8080)");
    BOOST_TEST(on_ip(s, "10.9.3.4", 8081) == "none");

    const auto port_rule = [](int port) {
        return policy({{net_action::allow, "a.test", 0}, {net_action::allow, "b.test", port}});
    };
    check_compile_fails(port_rule(-1), "net.rules[1].port");
    check_compile_fails(port_rule(65536), "net.rules[1].port");
    BOOST_TEST(compile_ok(port_rule(65535)).size() == 2u);
}

BOOST_AUTO_TEST_CASE(cidr_masks_the_address)
{
    const auto s = compile_ok(policy({{net_action::allow, "10.0.0.0/8", 0},
                                      {net_action::allow, "1.2.3.4", 0},
                                      {net_action::allow, "2001:db8::/32", 0},
                                      {net_action::deny, "[2001:db8::1]", 0},
                                      {net_action::allow, "0.0.0.0/0", 9}}));
    BOOST_TEST(on_ip(s, "10.0.0.0") == "allow (allow 10.0.0.0/8)");
    BOOST_TEST(on_ip(s, "10.255.255.255") == "allow (allow 10.0.0.0/8)");
    BOOST_TEST(on_ip(s, "11.0.0.0") == "none");
    BOOST_TEST(on_ip(s, "1.2.3.4") == "allow (allow 1.2.3.4)");
    BOOST_TEST(on_ip(s, "1.2.3.5") == "none");
    BOOST_TEST(on_ip(s, "2001:db8:ffff::7") == "allow (allow 2001:db8::/32)");
    BOOST_TEST(on_ip(s, "2001:db8::1") == "deny (deny [2001:db8::1])");
    BOOST_TEST(on_ip(s, "2001:db9::1") == "none");
    BOOST_TEST(on_ip(s, "8.8.8.8", 9) == "allow (allow 0.0.0.0/0:9)");
    BOOST_TEST(on_ip(s, "::1", 9) == "none");
    // A mapped query is the IPv4 address.
    BOOST_TEST(on_ip(s, "::ffff:10.1.2.3") == "allow (allow 10.0.0.0/8)");
    // Names never match IP rules, nor addresses name rules.
    BOOST_TEST(on_name(s, "1.2.3.4") == "none");

    // Host bits after the prefix are refused at compile time, naming the rule.
    check_compile_fails(policy({{net_action::allow, "10.0.0.1/8", 0}}), "net.rules[0].host");
}

BOOST_AUTO_TEST_CASE(v6_prefixes_at_every_boundary)
{
    const auto s = compile_ok(policy({{net_action::allow, "2001:db8:aaaa:bbbb::/64", 0},
                                      {net_action::deny, "2001:db8:aaaa:bbbb:8000::/65", 0},
                                      {net_action::allow, "fd00::/8", 0},
                                      {net_action::allow, "::/0", 7}}));
    BOOST_TEST(on_ip(s, "2001:db8:aaaa:bbbb::1") == "allow (allow 2001:db8:aaaa:bbbb::/64)");
    BOOST_TEST(on_ip(s, "2001:db8:aaaa:bbbb:7fff::1") == "allow (allow 2001:db8:aaaa:bbbb::/64)");
    BOOST_TEST(on_ip(s, "2001:db8:aaaa:bbbb:8000::1") ==
               "deny (deny 2001:db8:aaaa:bbbb:8000::/65)");
    BOOST_TEST(on_ip(s, "2001:db8:aaaa:bbbc::1") == "none");
    BOOST_TEST(on_ip(s, "fdff:1::1") == "allow (allow fd00::/8)");
    BOOST_TEST(on_ip(s, "fe00::1") == "none");
    BOOST_TEST(on_ip(s, "2606:4700::1111", 7) == "allow (allow ::/0:7)");
    BOOST_TEST(on_ip(s, "1.2.3.4", 7) == "none"); // IPv4 is not inside ::/0
}

BOOST_AUTO_TEST_CASE(v4_mapped_rules_are_ipv4_rules)
{
    const auto s = compile_ok(policy({{net_action::allow, "::ffff:127.0.0.1", 0},
                                      {net_action::deny, "::ffff:10.0.0.0/104", 0},
                                      {net_action::allow, "10.0.0.0/8", 0}}));
    BOOST_TEST(on_ip(s, "127.0.0.1") == "allow (allow ::ffff:127.0.0.1)");
    BOOST_TEST(on_ip(s, "::ffff:127.0.0.1") == "allow (allow ::ffff:127.0.0.1)");
    BOOST_TEST(on_ip(s, "10.2.3.4") == "deny (deny ::ffff:10.0.0.0/104)");
    BOOST_TEST(on_ip(s, "127.0.0.2") == "none");
}

BOOST_AUTO_TEST_CASE(canonical_request_hosts_meet_the_rules)
{
    // Every spelling of 127.0.0.1 reaches the one rule once canonicalized (§11.6).
    const auto s = compile_ok(policy({{net_action::allow, "127.0.0.1", 0}}));
    for (const char* text : {"2130706433", "0x7f000001", "017700000001", "127.1", "0x7f.0.0.1",
                             "0177.0.0.1", "127.000.000.001", "[::ffff:127.0.0.1]",
                             "[::ffff:7f00:1]"})
    {
        const auto h = net::canonicalize_host(text);
        BOOST_TEST_REQUIRE(h.has_value(), text);
        BOOST_TEST(verdict(s.match_ip(*h->ip, 443)) == "allow (allow 127.0.0.1)", text);
    }
    const auto names = compile_ok(policy({{net_action::allow, "allowed.test", 443}}));
    const auto trailing = net::canonicalize_host("ALLOWED.test.");
    BOOST_TEST_REQUIRE(trailing.has_value());
    BOOST_TEST(verdict(names.match_name(trailing->name, 443)) ==
               "allow (allow allowed.test:443)");
}

BOOST_AUTO_TEST_CASE(idn_rules)
{
    const auto s = compile_ok(policy({{net_action::allow, "m\xc3\xbcnchen.test", 0},
                                      {net_action::allow, "*.xn--bcher-kva.test", 0},
                                      {net_action::allow, "allowed\xe3\x80\x82test", 0}}));
    const auto canon = [](const char* text) {
        const auto h = net::canonicalize_host(text);
        BOOST_TEST_REQUIRE(h.has_value(), text);
        return h->name;
    };
    BOOST_TEST(on_name(s, "xn--mnchen-3ya.test") == "allow (allow m\xc3\xbcnchen.test)");
    BOOST_TEST(verdict(s.match_name(canon("M\xc3\x9cNCHEN.test"), 443)) ==
               "allow (allow m\xc3\xbcnchen.test)");
    BOOST_TEST(verdict(s.match_name(canon("a.b\xc3\xbc" "cher.test"), 443)) ==
               "allow (allow *.xn--bcher-kva.test)");
    // U+3002 in the rule and in the request: both mean allowed.test.
    BOOST_TEST(verdict(s.match_name(canon("allowed.test"), 443)) ==
               "allow (allow allowed\xe3\x80\x82test)");
    BOOST_TEST(verdict(s.match_name(canon("allowed\xe3\x80\x82test"), 443)) ==
               "allow (allow allowed\xe3\x80\x82test)");
    // Cyrillic 'а' is another name.
    BOOST_TEST(verdict(s.match_name(canon("\xd0\xb0llowed.test"), 443)) == "none");
}

BOOST_AUTO_TEST_CASE(bad_patterns_fail_with_their_limit)
{
    const sbx::net_rule ok{net_action::allow, "ok.test", 0};
    check_compile_fails(policy({ok, {net_action::allow, "xn--zz.test", 0}}), "net.rules[1].host");
    check_compile_fails(policy({ok, {net_action::allow, "*.xn--zz.test", 0}}),
                        "net.rules[1].host");
    check_compile_fails(policy({{net_action::deny, "a..b", 0}}), "net.rules[0].host");
    check_compile_fails(policy({{net_action::deny, "*", 0}}), "net.rules[0].host");
    check_compile_fails(policy({{net_action::deny, "", 0}}), "net.rules[0].host");
    check_compile_fails(policy({{net_action::deny, "b\xc3" "cher.test", 0}}), "net.rules[0].host");
    check_compile_fails(policy({{net_action::deny, "a\xef\xbc\x8f" "b.test", 0}}),
                        "net.rules[0].host"); // fullwidth '/' maps to '/'
    check_compile_fails(policy({{static_cast<net_action>(5), "ok.test", 0}}),
                        "net.rules[0].action");
    check_compile_fails(policy({ok}, {"fine.test", "bad..test"}), "net.allow_hosts[1]");
    check_compile_fails(policy({ok}, {"xn--zz.test"}), "net.allow_hosts[0]");
}

BOOST_AUTO_TEST_CASE(allow_hosts_are_any_port_allows_after_the_rules)
{
    const auto s = compile_ok(policy({{net_action::deny, "x.a.test", 0}}, {"a.test", "10.0.0.0/8"}));
    BOOST_TEST(s.size() == 3u);
    BOOST_TEST(on_name(s, "a.test", 1) == "allow (allow a.test)");
    BOOST_TEST(on_name(s, "x.a.test", 1) == "deny (deny x.a.test)");
    BOOST_TEST(on_ip(s, "10.1.1.1", 2) == "allow (allow 10.0.0.0/8)");
}

BOOST_AUTO_TEST_CASE(allow_hosts_with_a_port_allow_that_port_only)
{
    const auto s = compile_ok(policy({}, {"a.test:8443", "10.0.0.1:22", "[2001:db8::1]:443"}));
    BOOST_TEST(on_name(s, "a.test", 8443) == "allow (allow a.test:8443)");
    BOOST_TEST(on_name(s, "a.test", 443) == "none");
    BOOST_TEST(on_ip(s, "10.0.0.1", 22) == "allow (allow 10.0.0.1:22)");
    BOOST_TEST(on_ip(s, "10.0.0.1", 23) == "none");
    BOOST_TEST(on_ip(s, "2001:db8::1", 443) != "none");
    check_compile_fails(policy({}, {"a.test:0"}), "net.allow_hosts[0]");
}

// Only an allow rule naming the host's loopback exactly opens it, port by port.
BOOST_AUTO_TEST_CASE(host_loopback_ports_come_from_exact_allow_rules_only)
{
    const auto s = compile_ok(policy({{net_action::allow, "Host.Sandbox.Internal.", 8080},
                                      {net_action::allow, "sandbox.internal", 0},
                                      {net_action::allow, "*.sandbox.internal", 0},
                                      {net_action::deny, "host.sandbox.internal", 22}},
                                     {"host.sandbox.internal:3128", "x.host.sandbox.internal"}));
    BOOST_TEST((s.host_loopback_ports() == std::vector<std::uint16_t>{8080, 3128}));
    BOOST_TEST((compile_ok(policy({}, {"host.sandbox.internal"})).host_loopback_ports() ==
                std::vector<std::uint16_t>{0}));
    BOOST_TEST(compile_ok(policy({}, {"internal"})).host_loopback_ports().empty());
}

// 1,000 rules of every kind against a plain linear matcher written here.
namespace {

struct plain_rule
{
    int kind; // 0 domain, 1 wildcard, 2 cidr
    std::string name;
    ip::address network;
    int length;
    net_action action;
    int port;
    std::string text;
};

bool in_cidr(const ip::address& a, const plain_rule& r)
{
    if (a.is_v4() != r.network.is_v4())
        return false;
    const auto bytes_of = [](const ip::address& x) {
        std::vector<unsigned char> b;
        if (x.is_v4())
            for (auto c : x.to_v4().to_bytes())
                b.push_back(c);
        else
            for (auto c : x.to_v6().to_bytes())
                b.push_back(c);
        return b;
    };
    const auto x = bytes_of(a);
    const auto n = bytes_of(r.network);
    for (int bit = 0; bit < r.length; ++bit)
    {
        const int mask = 0x80 >> (bit % 8);
        if ((x[static_cast<std::size_t>(bit / 8)] & mask) != (n[static_cast<std::size_t>(bit / 8)] & mask))
            return false;
    }
    return true;
}

bool plain_matches(const plain_rule& r, const std::string& name, const ip::address* a, int port)
{
    if (r.port != 0 && r.port != port)
        return false;
    if (r.kind == 2)
        return a != nullptr && in_cidr(*a, r);
    if (a != nullptr)
        return false;
    const bool sub = name.size() > r.name.size() && name.ends_with("." + r.name);
    return r.kind == 0 ? (name == r.name || sub) : sub;
}

std::string plain_verdict(const std::vector<plain_rule>& rules, const std::string& name,
                          const ip::address* a, int port)
{
    const plain_rule* allow = nullptr;
    for (const auto& r : rules)
    {
        if (!plain_matches(r, name, a, port))
            continue;
        if (r.action == net_action::deny)
            return "deny (" + r.text + ")";
        if (allow == nullptr)
            allow = &r;
    }
    return allow ? "allow (" + allow->text + ")" : "none";
}

} // namespace

BOOST_AUTO_TEST_CASE(thousand_rules_agree_with_a_linear_scan)
{
    std::vector<sbx::net_rule> rules;
    std::vector<plain_rule> plain;
    for (int i = 0; i < 1000; ++i)
    {
        const net_action action = i % 7 == 3 ? net_action::deny : net_action::allow;
        const int port = i % 5 == 0 ? 443 : 0;
        std::string host;
        plain_rule p{i % 3, {}, {}, 0, action, port, {}};
        if (p.kind == 0)
            host = p.name = "h" + std::to_string(i) + ".d" + std::to_string(i % 10) + ".test";
        else if (p.kind == 1)
            host = "*." + (p.name = "w" + std::to_string(i % 50) + ".test");
        else if (i % 2 == 0)
        {
            p.length = 8 + i % 25;
            const std::uint32_t base = (10u << 24) | (static_cast<std::uint32_t>(i) << 8);
            const std::uint32_t mask = ~std::uint32_t{0} << (32 - p.length);
            p.network = ip::address_v4(base & mask);
            host = p.network.to_string() + "/" + std::to_string(p.length);
        }
        else
        {
            p.length = 32 + i % 97;
            auto b = ip::make_address_v6("2001:db8::").to_bytes();
            b[4] = static_cast<unsigned char>(i);
            b[15] = static_cast<unsigned char>(i * 7);
            for (int bit = p.length; bit < 128; ++bit)
                b[static_cast<std::size_t>(bit / 8)] &= static_cast<unsigned char>(~(0x80 >> (bit % 8)));
            p.network = ip::address_v6(b);
            host = p.network.to_string() + "/" + std::to_string(p.length);
        }
        p.text = std::string(sbx::to_string(action)) + " " + host +
                 (port ? ":" + std::to_string(port) : "");
        rules.push_back({action, host, port});
        plain.push_back(std::move(p));
    }
    const auto s = compile_ok(policy(rules));
    BOOST_TEST(s.size() == 1000u);

    // The plain matcher names the first deny, else the first allow: the same rule.
    int checked = 0;
    for (int i = 0; i < 1200; ++i)
    {
        for (const int port : {443, 80})
        {
            const std::string names[] = {
                "h" + std::to_string(i) + ".d" + std::to_string(i % 10) + ".test",
                "x.h" + std::to_string(i) + ".d" + std::to_string(i % 10) + ".test",
                "a.b.w" + std::to_string(i % 60) + ".test", "w" + std::to_string(i % 60) + ".test",
                "h" + std::to_string(i) + ".d" + std::to_string((i + 1) % 10) + ".test"};
            for (const auto& n : names)
            {
                BOOST_TEST(verdict(s.match_name(n, static_cast<std::uint16_t>(port))) ==
                               plain_verdict(plain, n, nullptr, port),
                           n << ":" << port);
                ++checked;
            }
            const std::uint32_t v4 = (10u << 24) | (static_cast<std::uint32_t>(i) << 8) |
                                     static_cast<std::uint32_t>(i % 256);
            auto b = ip::make_address_v6("2001:db8::").to_bytes();
            b[4] = static_cast<unsigned char>(i);
            b[15] = static_cast<unsigned char>(i * 7 + i % 3);
            for (const ip::address& a :
                 {ip::address(ip::address_v4(v4)), ip::address(ip::address_v6(b))})
            {
                BOOST_TEST(verdict(s.match_ip(a, static_cast<std::uint16_t>(port))) ==
                               plain_verdict(plain, {}, &a, port),
                           a << ":" << port);
                ++checked;
            }
        }
    }
    BOOST_TEST(checked == 1200 * 2 * 7);
}

BOOST_AUTO_TEST_CASE(copies_share_the_compiled_form)
{
    const auto s = compile_ok(policy({{net_action::allow, "allowed.test", 0}}));
    const net::rule_set copy = s; // NOLINT(performance-unnecessary-copy-initialization)
    BOOST_TEST(on_name(copy, "allowed.test") == "allow (allow allowed.test)");
    BOOST_TEST(copy.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
