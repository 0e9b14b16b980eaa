// test/unit/net_policy_test.cpp: network policy validation and host pattern parsing.
#include <sandbox/net_policy.hpp>

#include "host/pattern.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/test/unit_test.hpp>

#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace sbx = sandbox;
using sbx::detail::host_kind;

// The valid policy of the reference test, in allow_list mode (so without a proxy URL).
sbx::net_policy reference_policy()
{
    sbx::net_policy p;
    p.mode = sbx::net_mode::allow_list;
    p.rules = {
        {sbx::net_action::deny, "*.internal.example", 0},
        {sbx::net_action::allow, "example.com", 443},
        {sbx::net_action::allow, "10.0.0.0/8", 0},
    };
    p.unix_sockets = {"/var/run/docker.sock"};
    sbx::mitm_policy mitm;
    mitm.enabled = true;
    mitm.inspect_bodies = true;
    mitm.max_body_bytes = 64 * 1024;
    mitm.hosts = {"api.example.com", "*.svc.example"};
    mitm.exclude_hosts = {"bank.example.com"};
    p.mitm = mitm;
    return p;
}

// A valid policy in proxy mode with an authenticated socks5 upstream.
sbx::net_policy proxy_policy()
{
    sbx::net_policy p = reference_policy();
    p.mode = sbx::net_mode::proxy;
    p.proxy = "socks5://user:pass@127.0.0.1:1080";
    return p;
}

std::string describe(const sbx::outcome<>& r)
{
    if (r)
        return "valid";
    return sbx::to_string(r.error().diag);
}

void check_valid(const sbx::net_policy& p)
{
    const auto r = p.validate();
    BOOST_TEST(r.has_value(), "expected a valid policy, got: " << describe(r));
}

// Checks that validation fails with errc::validation at `limit`, and that the message
// mentions `message_part` when given.
void check_invalid(const sbx::net_policy& p, const std::string& limit,
                   std::string_view message_part = {})
{
    BOOST_TEST_CONTEXT("expected a failure at " << limit)
    {
        const auto r = p.validate();
        BOOST_TEST_REQUIRE(r.has_error());
        BOOST_TEST(r.error().code == sbx::errc::validation);
        BOOST_TEST(r.error().diag.limit == limit, "got: " << describe(r));
        BOOST_TEST(!r.error().diag.message.empty());
        BOOST_TEST(r.error().diag.message.find('\n') == std::string::npos);
        if (!message_part.empty())
            BOOST_TEST(r.error().diag.message.find(message_part) != std::string::npos,
                       "message: " << r.error().diag.message);
    }
}

sbx::net_policy with_rule_host(std::string host)
{
    sbx::net_policy p = reference_policy();
    p.rules[1].host = std::move(host);
    return p;
}

sbx::net_policy with_proxy(std::string url)
{
    sbx::net_policy p = proxy_policy();
    p.proxy = std::move(url);
    return p;
}

sbx::detail::host_pattern parse_ok(std::string_view text)
{
    auto r = sbx::detail::parse_host_pattern(text);
    BOOST_TEST_REQUIRE(r.has_value(),
                       "'" << text << "' should parse: " << sbx::to_string(r.error().diag));
    return *r;
}

void check_parse_fails(std::string_view text, std::string_view message_part = {})
{
    BOOST_TEST_CONTEXT("pattern " << sbx::detail::quote_for_message(text))
    {
        const auto r = sbx::detail::parse_host_pattern(text);
        BOOST_TEST_REQUIRE(r.has_error());
        BOOST_TEST(r.error().code == sbx::errc::validation);
        BOOST_TEST(r.error().diag.limit.empty());
        BOOST_TEST(r.error().diag.message.find(sbx::detail::quote_for_message(text)) !=
                       std::string::npos,
                   "message should quote the text: " << r.error().diag.message);
        if (!message_part.empty())
            BOOST_TEST(r.error().diag.message.find(message_part) != std::string::npos,
                       "message: " << r.error().diag.message);
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(net_policy)

// ---- enum text forms -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(net_mode_text_forms)
{
    BOOST_TEST(std::string(sbx::to_string(sbx::net_mode::inherit)) == "default");
    BOOST_TEST(std::string(sbx::to_string(sbx::net_mode::deny_all)) == "deny_all");
    BOOST_TEST(std::string(sbx::to_string(sbx::net_mode::allow_list)) == "allow_list");
    BOOST_TEST(std::string(sbx::to_string(sbx::net_mode::proxy)) == "proxy");
    BOOST_TEST(std::string(sbx::to_string(static_cast<sbx::net_mode>(7))) == "unknown");

    for (const auto m : {sbx::net_mode::inherit, sbx::net_mode::deny_all,
                         sbx::net_mode::allow_list, sbx::net_mode::proxy})
    {
        const auto parsed = sbx::parse_net_mode(sbx::to_string(m));
        BOOST_TEST_REQUIRE(parsed.has_value());
        BOOST_TEST((*parsed == m));
    }
    BOOST_TEST((sbx::parse_net_mode("inherit") == sbx::net_mode::inherit));
    BOOST_TEST(!sbx::parse_net_mode("").has_value());
    BOOST_TEST(!sbx::parse_net_mode("unknown").has_value());
    BOOST_TEST(!sbx::parse_net_mode("Proxy").has_value());
    BOOST_TEST(!sbx::parse_net_mode("deny_all ").has_value());

    std::ostringstream os;
    os << sbx::net_mode::allow_list << ' ' << sbx::net_mode::inherit;
    BOOST_TEST(os.str() == "allow_list default");
}

BOOST_AUTO_TEST_CASE(net_action_text_forms)
{
    BOOST_TEST(std::string(sbx::to_string(sbx::net_action::deny)) == "deny");
    BOOST_TEST(std::string(sbx::to_string(sbx::net_action::allow)) == "allow");
    BOOST_TEST(std::string(sbx::to_string(static_cast<sbx::net_action>(9))) == "unknown");
    BOOST_TEST((sbx::net_rule{}.action == sbx::net_action::deny));
}

// ---- valid policies --------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(default_policy_is_valid) { check_valid(sbx::net_policy{}); }

BOOST_AUTO_TEST_CASE(reference_policy_is_valid) { check_valid(reference_policy()); }

BOOST_AUTO_TEST_CASE(proxy_mode_policy_is_valid)
{
    check_valid(proxy_policy());
    for (const char* url :
         {"http://proxy.example:3128", "HTTP://proxy.example:3128/", "SoCkS5://10.0.0.1",
          "http://user@proxy.example:8080", "http://[::1]:3128", "socks5://u:p@proxy_host:1",
          "http://h:65535", "socks5h://proxy.example:1080", "http://h:08080"})
    {
        BOOST_TEST_CONTEXT("proxy " << url) { check_valid(with_proxy(url)); }
    }
}

BOOST_AUTO_TEST_CASE(other_valid_combinations)
{
    sbx::net_policy deny_all;
    deny_all.mode = sbx::net_mode::deny_all;
    deny_all.unix_sockets = {"/run/a.sock", "/tmp/b.sock"};
    check_valid(deny_all);

    // MITM settings that are present but disabled are harmless under any mode.
    sbx::net_policy inherit;
    inherit.mitm = sbx::mitm_policy{};
    inherit.mitm->max_body_bytes = 10;
    check_valid(inherit);
    deny_all.mitm = inherit.mitm;
    check_valid(deny_all);

    sbx::net_policy allow_list;
    allow_list.mode = sbx::net_mode::allow_list;
    allow_list.allow_hosts = {"example.com", "*.example.org", "192.0.2.7", "2001:db8::/32",
                              "[::1]", "EXAMPLE.NET."};
    check_valid(allow_list);

    sbx::net_policy edge = reference_policy();
    edge.rules.push_back({sbx::net_action::allow, "0.0.0.0/0", 65535});
    edge.rules.push_back({sbx::net_action::deny, "::/0", 0});
    edge.rules.push_back({sbx::net_action::allow, "EXAMPLE.COM", 1});
    edge.mitm->max_body_bytes = 0;
    edge.mitm->hosts.clear();
    edge.mitm->exclude_hosts.clear();
    check_valid(edge);
}

// ---- failures the reference also reports -----------------------------------------------------

BOOST_AUTO_TEST_CASE(reference_failures)
{
    check_invalid(with_proxy("ftp://proxy.example:21"), "net.proxy", "scheme");
    check_invalid(with_proxy("socks5://:pass@127.0.0.1:1080"), "net.proxy", "user");

    sbx::net_policy p = reference_policy();
    p.rules[1].action = static_cast<sbx::net_action>(9);
    check_invalid(p, "net.rules[1].action", "9");

    check_invalid(with_rule_host(" "), "net.rules[1].host");

    p = reference_policy();
    p.rules[2].port = 70000;
    check_invalid(p, "net.rules[2].port", "70000");

    p = reference_policy();
    p.unix_sockets = {"/ok.sock", "relative/socket.sock"};
    check_invalid(p, "net.unix_sockets[1]", "absolute");
    BOOST_TEST(p.validate().error().diag.path == "relative/socket.sock");

    p = reference_policy();
    p.mitm->max_body_bytes = -1;
    check_invalid(p, "net.mitm.max_body_bytes");
    p.mitm->max_body_bytes = 64ll * 1024 * 1024 + 1; // a body shown to hooks is held whole
    check_invalid(p, "net.mitm.max_body_bytes", "64 MiB");
    p.mitm->max_body_bytes = 64ll * 1024 * 1024;
    check_valid(p);

    p = reference_policy();
    p.mitm->hosts.push_back(" ");
    check_invalid(p, "net.mitm.hosts[2]");

    p = reference_policy();
    p.mitm->exclude_hosts = {""};
    check_invalid(p, "net.mitm.exclude_hosts[0]");
}

// ---- mode ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(mode_out_of_range)
{
    sbx::net_policy p;
    p.mode = static_cast<sbx::net_mode>(7);
    check_invalid(p, "net.mode", "7");
    p.mode = static_cast<sbx::net_mode>(-1);
    check_invalid(p, "net.mode");

    // The mode is checked before anything else.
    p = proxy_policy();
    p.mode = static_cast<sbx::net_mode>(4);
    p.proxy = "ftp://x";
    check_invalid(p, "net.mode");
}

// ---- proxy URL -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(proxy_scheme)
{
    check_invalid(with_proxy("https://proxy.example:443"), "net.proxy", "scheme");
    check_invalid(with_proxy("socks4://proxy.example:1080"), "net.proxy", "scheme");
}

BOOST_AUTO_TEST_CASE(proxy_port)
{
    check_invalid(with_proxy("http://proxy.example:0"), "net.proxy", "port");
    check_invalid(with_proxy("http://proxy.example:70000"), "net.proxy", "port");
    check_invalid(with_proxy("http://proxy.example:99999999999999999999"), "net.proxy", "port");
    check_invalid(with_proxy("http://proxy.example:"), "net.proxy", "port");
}

BOOST_AUTO_TEST_CASE(proxy_url_shape)
{
    check_invalid(with_proxy("http://proxy.example:3128?x=1"), "net.proxy", "query");
    check_invalid(with_proxy("http://proxy.example:3128/?"), "net.proxy", "query");
    check_invalid(with_proxy("http://proxy.example:3128#frag"), "net.proxy", "fragment");
    check_invalid(with_proxy("http://proxy.example:3128/path"), "net.proxy", "path");
    check_invalid(with_proxy("http://:3128"), "net.proxy", "host");
    check_invalid(with_proxy("socks5:proxy.example"), "net.proxy", "host");
    // The host is canonicalized when validated, as the egress proxy dials it.
    check_invalid(with_proxy("http://xn--zz.example:3128"), "net.proxy", "IDNA");
    check_invalid(with_proxy("http://1.2.3.256:3128"), "net.proxy", "number");
    check_invalid(with_proxy("socks5://bad..name:1080"), "net.proxy", "host");
    check_invalid(with_proxy("127.0.0.1:1080"), "net.proxy");
    check_invalid(with_proxy("http://proxy example"), "net.proxy");
    check_invalid(with_proxy(" http://proxy.example"), "net.proxy");
    check_invalid(with_proxy("http://@proxy.example"), "net.proxy", "user");
    check_invalid(with_proxy("http://a%3Ab:c@proxy.example"), "net.proxy", "user");
    check_invalid(with_proxy("socks5://" + std::string(256, 'u') + ":p@proxy.example"), "net.proxy",
                  "255");
    check_invalid(with_proxy("socks5://u:" + std::string(256, 'p') + "@proxy.example"), "net.proxy",
                  "255");
    check_valid(with_proxy("http://" + std::string(256, 'u') + ":p@proxy.example")); // Basic
}

BOOST_AUTO_TEST_CASE(proxy_messages_hide_credentials)
{
    for (const char* url : {"socks5://user:s3cret@proxy.example:0",
                            "https://user:s3cret@proxy.example", "http://user:s3cret@h/p",
                            "http://user:s3cret@h:1?q", "http://user:s3cret@h:1#f",
                            "http://user:s3cret@h:1 x"})
    {
        BOOST_TEST_CONTEXT("proxy " << url)
        {
            const auto r = with_proxy(url).validate();
            BOOST_TEST_REQUIRE(r.has_error());
            BOOST_TEST(r.error().diag.limit == "net.proxy");
            BOOST_TEST(sbx::to_string(r.error().diag).find("s3cret") == std::string::npos);
        }
    }
}

// ---- host patterns in the policy -------------------------------------------------------------

BOOST_AUTO_TEST_CASE(rule_host_syntax)
{
    check_invalid(with_rule_host("a.*.com"), "net.rules[1].host", "'*'");
    check_invalid(with_rule_host("*"), "net.rules[1].host", "'*'");
    check_invalid(with_rule_host("10.0.0.0/33"), "net.rules[1].host", "out of range");
    check_invalid(with_rule_host("10.0.0.1/8"), "net.rules[1].host", "host bits are set");
    check_invalid(with_rule_host("fe80::1::2"), "net.rules[1].host", "IPv6");
    check_invalid(with_rule_host(std::string(64, 'a') + ".example"), "net.rules[1].host",
                  "longer than 63");
    check_invalid(with_rule_host("b\xc3" "cher.example"), "net.rules[1].host", "UTF-8");
    // Refused when validated, not first when the proxy compiles its rules: IDNA refuses
    // the A-label (a bad Punycode), and a mapped name that ends in a number.
    check_invalid(with_rule_host("xn--zz.test"), "net.rules[1].host", "IDNA");
    check_invalid(with_rule_host("*.xn--zz.test"), "net.rules[1].host", "IDNA");
    check_invalid(with_rule_host("a\xe3\x80\x82"
                                 "1"),
                  "net.rules[1].host", "numeric");
    check_invalid(with_rule_host("example.com:443"), "net.rules[1].host");
    check_invalid(with_rule_host(""), "net.rules[1].host", "empty");
}

BOOST_AUTO_TEST_CASE(rule_port_range)
{
    sbx::net_policy p = reference_policy();
    p.rules[0].port = -1;
    check_invalid(p, "net.rules[0].port");
    p.rules[0].port = 65536;
    check_invalid(p, "net.rules[0].port");
    p.rules[0].port = 65535;
    check_valid(p);
}

BOOST_AUTO_TEST_CASE(uppercase_hosts_are_accepted)
{
    check_valid(with_rule_host("WWW.Example.COM"));
    check_valid(with_rule_host("*.Example.COM."));
    sbx::net_policy p = reference_policy();
    p.allow_hosts = {"API.EXAMPLE.COM"};
    p.mitm->hosts = {"Api.Example.Com"};
    check_valid(p);
}

BOOST_AUTO_TEST_CASE(allow_hosts_are_checked)
{
    sbx::net_policy p = reference_policy();
    p.allow_hosts = {"example.org", "bad host"};
    check_invalid(p, "net.allow_hosts[1]", "whitespace");
    p.allow_hosts = {"*"};
    check_invalid(p, "net.allow_hosts[0]");
}

// `allow_hosts` takes HOST:PORT as `--allow-host` does (issue 33, item 2).
BOOST_AUTO_TEST_CASE(allow_hosts_take_a_port)
{
    sbx::net_policy p = reference_policy();
    p.allow_hosts = {"example.org:8443", "192.0.2.7:80", "[2001:db8::1]:443", "2001:db8::2",
                     "host.sandbox.internal:3128"};
    check_valid(p);
    for (const char* bad : {"example.org:", "example.org:0", "example.org:65536", ":80",
                            "example.org:http", "[2001:db8::1]:"})
    {
        BOOST_TEST_CONTEXT(bad)
        {
            p.allow_hosts = {"fine.test", bad};
            check_invalid(p, "net.allow_hosts[1]");
        }
    }
}

// `resolve` pins: a host name to an IP literal, only where the egress proxy serves.
BOOST_AUTO_TEST_CASE(pins_are_names_to_addresses)
{
    sbx::net_policy p = reference_policy();
    p.resolve = {{"git.test", "127.0.0.2"}, {"git.test", "::1"}, {"Mirror.Test", "10.0.0.1"}};
    check_valid(p);
    p.resolve = {{"git.test", "127.0.0.2"}, {"*.git.test", "127.0.0.2"}};
    check_invalid(p, "net.resolve[1]", "not a host name");
    p.resolve = {{"10.0.0.1", "127.0.0.2"}};
    check_invalid(p, "net.resolve[0]", "not a host name");
    p.resolve = {{"git.test", "git.example"}};
    check_invalid(p, "net.resolve[0]", "not an IP address");
    p.resolve = {{"git.test", "10.0.0.0/8"}};
    check_invalid(p, "net.resolve[0]", "not an IP address");
    for (auto mode : {sbx::net_mode::inherit, sbx::net_mode::deny_all})
    {
        sbx::net_policy q;
        q.mode = mode;
        q.resolve = {{"git.test", "127.0.0.2"}};
        check_invalid(q, "net.resolve", "no effect");
    }
}

BOOST_AUTO_TEST_CASE(unix_socket_paths)
{
    sbx::net_policy p = reference_policy();
    p.unix_sockets = {""};
    check_invalid(p, "net.unix_sockets[0]", "absolute");
    p.unix_sockets = {"/a.sock", std::string("/b\0c.sock", 9)};
    check_invalid(p, "net.unix_sockets[1]", "NUL");
}

BOOST_AUTO_TEST_CASE(mitm_host_syntax)
{
    sbx::net_policy p = reference_policy();
    p.mitm->hosts = {"ok.example", "a.*.example"};
    check_invalid(p, "net.mitm.hosts[1]");
    p = reference_policy();
    p.mitm->exclude_hosts = {"ok.example", "10.0.0.0/129"};
    check_invalid(p, "net.mitm.exclude_hosts[1]");
}

// ---- consistency between mode and fields -----------------------------------------------------

BOOST_AUTO_TEST_CASE(inherit_mode_consistency)
{
    sbx::net_policy p;
    p.allow_hosts = {"example.com"};
    check_invalid(p, "net.allow_hosts", "no effect under mode \"default\"");

    p = sbx::net_policy{};
    p.rules = {{sbx::net_action::allow, "example.com", 0}};
    check_invalid(p, "net.rules", "no effect under mode \"default\"");

    p = sbx::net_policy{};
    p.proxy = "http://proxy.example:3128";
    check_invalid(p, "net.proxy", "no effect under mode \"default\"");

    p = sbx::net_policy{};
    p.unix_sockets = {"/run/a.sock"};
    check_invalid(p, "net.unix_sockets", "no effect under mode \"default\"");

    p = sbx::net_policy{};
    p.mitm = sbx::mitm_policy{};
    p.mitm->enabled = true;
    check_invalid(p, "net.mitm.enabled", "no effect under mode \"default\"");

    // Syntax errors are reported before consistency problems.
    p = sbx::net_policy{};
    p.rules = {{sbx::net_action::allow, "a..b", 0}};
    check_invalid(p, "net.rules[0].host");
}

BOOST_AUTO_TEST_CASE(deny_all_mode_consistency)
{
    sbx::net_policy base;
    base.mode = sbx::net_mode::deny_all;

    sbx::net_policy p = base;
    p.allow_hosts = {"example.com"};
    check_invalid(p, "net.allow_hosts", "no effect under mode \"deny_all\"");

    p = base;
    p.rules = {{sbx::net_action::deny, "example.com", 0}};
    check_invalid(p, "net.rules", "no effect under mode \"deny_all\"");

    p = base;
    p.proxy = "socks5://127.0.0.1:1080";
    check_invalid(p, "net.proxy", "no effect under mode \"deny_all\"");

    p = base;
    p.mitm = sbx::mitm_policy{};
    p.mitm->enabled = true;
    check_invalid(p, "net.mitm.enabled", "no effect under mode \"deny_all\"");
}

BOOST_AUTO_TEST_CASE(allow_list_and_proxy_mode_consistency)
{
    sbx::net_policy p = reference_policy();
    p.proxy = "socks5://user:pass@127.0.0.1:1080";
    check_invalid(p, "net.proxy", "mode \"proxy\"");

    p = proxy_policy();
    p.proxy.clear();
    check_invalid(p, "net.proxy", "proxy mode needs a proxy URL");

    // MITM is allowed with both modes that route through the host-side proxy.
    p = proxy_policy();
    BOOST_TEST(p.mitm->enabled);
    check_valid(p);
    BOOST_TEST(reference_policy().mitm->enabled);
    check_valid(reference_policy());
}

// ---- parse_host_pattern ----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(host_pattern_domains)
{
    auto p = parse_ok("example.com");
    BOOST_TEST((p.kind == host_kind::domain));
    BOOST_TEST(p.host == "example.com");
    BOOST_TEST(p.prefix_length == -1);

    BOOST_TEST(parse_ok("Example.COM.").host == "example.com");
    BOOST_TEST(parse_ok("localhost").host == "localhost");
    BOOST_TEST(parse_ok("xn--bcher-kva.example").host == "xn--bcher-kva.example");
    BOOST_TEST(parse_ok("a-b.c0.1x").host == "a-b.c0.1x");
    BOOST_TEST(parse_ok("123.example").host == "123.example");
    // UTF-8 labels become A-labels (IDNA UTS-46), the spelling of every destination host.
    BOOST_TEST(parse_ok("B\xc3\xbc"
                        "cher.Example")
                   .host == "xn--bcher-kva.example");
    BOOST_TEST(parse_ok("\xe4\xbe\x8b\xe3\x81\x88.jp").host == "xn--r8jz45g.jp");
    p = parse_ok("*.m\xc3\xbcnchen.test");
    BOOST_TEST((p.kind == host_kind::wildcard_domain));
    BOOST_TEST(p.host == "xn--mnchen-3ya.test");
    // A full-width dot separates labels once mapped, as it does in a destination host.
    BOOST_TEST(parse_ok("allowed\xe3\x80\x82test").host == "allowed.test");

    p = parse_ok("*.Internal.Example.");
    BOOST_TEST((p.kind == host_kind::wildcard_domain));
    BOOST_TEST(p.host == "internal.example");
    BOOST_TEST(parse_ok("*.com").host == "com");
}

BOOST_AUTO_TEST_CASE(host_pattern_length_limits)
{
    const std::string label63(63, 'a');
    BOOST_TEST(parse_ok(label63 + ".example").host == label63 + ".example");
    check_parse_fails(std::string(64, 'a') + ".example", "longer than 63");

    // 4 x 63 + 3 dots = 255; trim to exactly 253 and 254 characters.
    std::string name = label63 + "." + label63 + "." + label63 + "." + label63;
    const std::string at_253 = name.substr(name.size() - 253);
    const std::string at_254 = name.substr(name.size() - 254);
    BOOST_TEST_REQUIRE(at_253.front() != '.');
    BOOST_TEST_REQUIRE(at_254.front() != '.');
    BOOST_TEST(parse_ok(at_253).host.size() == 253u);
    BOOST_TEST(parse_ok(at_253 + ".").host.size() == 253u);
    check_parse_fails(at_254, "253");
}

BOOST_AUTO_TEST_CASE(host_pattern_addresses)
{
    namespace ip = boost::asio::ip;

    auto p = parse_ok("192.0.2.7");
    BOOST_TEST((p.kind == host_kind::ip));
    BOOST_TEST(p.host.empty());
    BOOST_TEST((p.address == ip::make_address("192.0.2.7")));
    BOOST_TEST(p.prefix_length == -1);

    p = parse_ok("::1");
    BOOST_TEST((p.kind == host_kind::ip));
    BOOST_TEST(p.address.is_v6());
    BOOST_TEST(p.address.is_loopback());

    p = parse_ok("[::1]");
    BOOST_TEST((p.kind == host_kind::ip));
    BOOST_TEST((p.address == ip::make_address("::1")));

    p = parse_ok("[2001:DB8::1]");
    BOOST_TEST((p.address == ip::make_address("2001:db8::1")));

    p = parse_ok("::ffff:192.0.2.1");
    BOOST_TEST(p.address.is_v6());
}

BOOST_AUTO_TEST_CASE(host_pattern_cidr)
{
    namespace ip = boost::asio::ip;

    auto p = parse_ok("10.0.0.0/8");
    BOOST_TEST((p.kind == host_kind::cidr));
    BOOST_TEST((p.address == ip::make_address("10.0.0.0")));
    BOOST_TEST(p.prefix_length == 8);

    BOOST_TEST(parse_ok("0.0.0.0/0").prefix_length == 0);
    BOOST_TEST(parse_ok("192.168.1.1/32").prefix_length == 32);
    BOOST_TEST(parse_ok("172.16.0.0/12").prefix_length == 12);
    BOOST_TEST(parse_ok("::/0").prefix_length == 0);
    BOOST_TEST(parse_ok("2001:db8::1/128").prefix_length == 128);

    p = parse_ok("FD00::/8");
    BOOST_TEST((p.kind == host_kind::cidr));
    BOOST_TEST(p.address.is_v6());
    BOOST_TEST((p.address == ip::make_address("fd00::")));

    check_parse_fails("10.0.0.1/8", "host bits are set");
    check_parse_fails("10.0.0.1/8", "10.0.0.0/8");
    check_parse_fails("172.16.0.0/11", "host bits are set");
    check_parse_fails("2001:db8::1/64", "2001:db8::/64");
    check_parse_fails("10.0.0.0/33", "0-32");
    check_parse_fails("::/129", "0-128");
    check_parse_fails("10.0.0.0/");
    check_parse_fails("10.0.0.0/x");
    check_parse_fails("10.0.0.0/+8");
    check_parse_fails("10.0.0.0/-1");
    check_parse_fails("10.0.0.0/08");
    check_parse_fails("10.0.0.0/8/8");
    check_parse_fails("10/8");
    check_parse_fails("/8");
    check_parse_fails("example.com/8");
    check_parse_fails("[fd00::]/8", "without brackets");
}

BOOST_AUTO_TEST_CASE(host_pattern_rejects)
{
    check_parse_fails("", "empty");
    check_parse_fails(" ", "whitespace");
    check_parse_fails("exa mple.com", "whitespace");
    check_parse_fails(" example.com", "whitespace");
    check_parse_fails("example.com\n", "whitespace");
    check_parse_fails("example.com\t");
    check_parse_fails(std::string("exa\0mple.com", 12));
    check_parse_fails("-a.com", "'-'");
    check_parse_fails("a-.com", "'-'");
    check_parse_fails("a..com", "empty label");
    check_parse_fails(".a.com", "empty label");
    check_parse_fails("a.com..", "empty label");
    check_parse_fails(".", "empty");
    check_parse_fails("a_b.com", "'_'");
    check_parse_fails("ex@mple.com");
    check_parse_fails("example.com/");
    check_parse_fails("*", "'*'");
    check_parse_fails("a.*.com", "'*'");
    check_parse_fails("*.*.com", "'*'");
    check_parse_fails("*a.com", "'*'");
    check_parse_fails("a*.com", "'*'");
    check_parse_fails("example.*", "'*'");
    check_parse_fails("*.", "empty");
    check_parse_fails("*..com", "empty label");
    check_parse_fails("*.1.2.3.4", "numeric");
    check_parse_fails("1.2.3", "numeric");
    check_parse_fails("256.1.1.1", "numeric");
    check_parse_fails("01.2.3.4");
    check_parse_fails("fe80::1::2", "IPv6");
    check_parse_fails("fe80::1%eth0", "zone");
    check_parse_fails("[fe80::1%1]", "zone");
    check_parse_fails("example.com:443", "port");
    check_parse_fails("[::1", "brackets");
    check_parse_fails("[::1]:443", "brackets");
    check_parse_fails("[1.2.3.4]", "IPv6");
    check_parse_fails("[]");
    check_parse_fails("b\xc3" "cher.example", "UTF-8");
    check_parse_fails("\xff.example", "UTF-8");
    check_parse_fails("*.\xe4\xbe\x8b_.jp", "'_'");
}

BOOST_AUTO_TEST_CASE(quote_for_message_is_one_safe_line)
{
    using sbx::detail::quote_for_message;
    BOOST_TEST(quote_for_message("abc") == "'abc'");
    BOOST_TEST(quote_for_message("") == "''");
    BOOST_TEST(quote_for_message("a'b\\c") == "'a\\'b\\\\c'");
    BOOST_TEST(quote_for_message("a\nb\x7f") == "'a\\x0ab\\x7f'");
    BOOST_TEST(quote_for_message("\xc3\xbc") == "'\\xc3\\xbc'");
    BOOST_TEST(quote_for_message(std::string_view("\0", 1)) == "'\\x00'");
    BOOST_TEST(quote_for_message("abcdef", 3) == "'abc'... (6 bytes)");
    BOOST_TEST(quote_for_message("abc", 3) == "'abc'");
}

BOOST_AUTO_TEST_SUITE_END()
