// test/net/egress_test.cpp: egress::open and refuse against a scripted resolver and real
// loopback sockets (network.md §11 items 1-5, 6-7 literal forms, 10, 18-19), and the upstream
// proxy clients against in-test fake upstreams. 127.0.0.2 with an explicit allow rule
// stands in for a public address.
#include "egress_fakes.hpp"

#include "net/upstream.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <ifaddrs.h>

namespace sandbox::net::test {
namespace {

using asio::awaitable;
using asio::use_awaitable;

/// One open on a fresh context; the rig's records are checked by the caller.
opened open_once(egress_rig& rig, asio::io_context& ctx, std::string host, std::uint16_t port,
                 net_protocol protocol = net_protocol::connect)
{
    auto gate = rig.make(ctx.get_executor());
    std::optional<opened> out;
    run_on(ctx, [&]() -> awaitable<void> {
        auto t = target(host, port);
        out.emplace(co_await gate->open(protocol, host, std::move(t)));
    });
    return std::move(*out);
}

void check_one_record(const egress_rig& rig, net_verdict v, const std::string& reason)
{
    BOOST_REQUIRE_EQUAL(rig.records->size(), 1u);
    const auto& r = rig.records->front();
    BOOST_CHECK(r.event == net_event::decision);
    BOOST_CHECK_EQUAL(to_string(r.verdict), to_string(v));
    BOOST_CHECK_EQUAL(r.reason, reason);
}

/// This host's interface addresses (not loopback), from getifaddrs.
std::vector<std::string> interface_addresses()
{
    std::vector<std::string> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0)
        return out;
    for (auto* i = list; i; i = i->ifa_next)
    {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
        const asio::ip::address_v4 a(ntohl(sin->sin_addr.s_addr));
        if (!a.is_loopback())
            out.push_back(a.to_string());
    }
    freeifaddrs(list);
    return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(egress_parse_upstream)

BOOST_AUTO_TEST_CASE(http_with_credentials_and_default_ports)
{
    auto u = parse_upstream("http://us%40er:p%3Ass@Proxy.Corp:8080").value();
    BOOST_CHECK(u.scheme == upstream_proxy::kind::http);
    BOOST_CHECK_EQUAL(u.host.text(), "proxy.corp");
    BOOST_CHECK_EQUAL(u.port, 8080);
    BOOST_REQUIRE(u.user);
    BOOST_CHECK_EQUAL(*u.user, "us@er");
    BOOST_CHECK_EQUAL(u.password, "p:ss");
    BOOST_CHECK_EQUAL(parse_upstream("http://127.0.0.1").value().port, 80);
    auto s = parse_upstream("socks5://[::1]/").value();
    BOOST_CHECK(s.scheme == upstream_proxy::kind::socks5);
    BOOST_CHECK_EQUAL(s.port, 1080);
    BOOST_CHECK_EQUAL(s.host.text(), "::1");
    BOOST_CHECK(!s.user);
    auto h = parse_upstream("SOCKS5H://u@0x7f.1").value(); // the name goes to the upstream
    BOOST_CHECK(h.scheme == upstream_proxy::kind::socks5);
    BOOST_CHECK_EQUAL(h.host.text(), "127.0.0.1");
    BOOST_CHECK_EQUAL(h.port, 1080);
    BOOST_REQUIRE(h.user);
    BOOST_CHECK_EQUAL(*h.user, "u");
}

// Whatever the policy's validation accepts, the egress reads the same way (one parser):
// the only refusals left to the egress are hosts IDNA or the address forms refuse.
BOOST_AUTO_TEST_CASE(agrees_with_the_policy_validation)
{
    for (const char* url :
         {"http://proxy.example:3128", "HTTP://proxy.example:3128/", "SoCkS5://10.0.0.1",
          "http://user@proxy.example:8080", "http://[::1]:3128", "socks5://u:p@h:1",
          "http://h:08080", "http://:3128", "socks5:h", "ftp://h", "http://h/p", "http://@h",
          // hosts: the validation canonicalizes them as the egress does (IDNA, IPv4 forms)
          "http://bad..name", "http://xn--zz.test:3128", "http://1.2.3.256:1",
          "http://M%C3%BCnchen.test:1", "http://0x7f.1:3128"})
    {
        sandbox::net_policy p;
        p.mode = sandbox::net_mode::proxy;
        p.proxy = url;
        const bool valid = !p.validate().has_error();
        BOOST_CHECK_MESSAGE(valid == parse_upstream(url).has_value(), url);
    }
}

BOOST_AUTO_TEST_CASE(refuses_other_forms)
{
    for (const char* bad :
         {"https://h:1", "ftp://h", "h:8080", "http://h:0", "http://h:65536", "http://h/path",
          "http://h?q", "http://h#f", "http://:pw@h", "http://a%3Ab:c@h", "http://[fe80::1%25lo]:1",
          "socks5://", "", "http://bad..name", "http://h%00x"})
    {
        auto r = parse_upstream(bad);
        BOOST_CHECK_MESSAGE(!r, bad);
        if (!r)
        {
            BOOST_CHECK_EQUAL(r.error().diag.limit, "net.proxy");
            BOOST_CHECK(r.error().code == make_error_code(errc::validation));
        }
    }
}

BOOST_AUTO_TEST_CASE(basic_authorization_header)
{
    auto u = parse_upstream("http://user:pa%3Ass@h:1").value();
    BOOST_CHECK_EQUAL(basic_authorization(u), "Basic dXNlcjpwYTpzcw==");
    BOOST_CHECK_EQUAL(basic_authorization(parse_upstream("http://h:1").value()), "");
}

BOOST_AUTO_TEST_CASE(make_egress_config_checks_mode_proxy_and_limits)
{
    asio::io_context ctx;
    net_policy p;
    p.mode = net_mode::proxy;
    p.rules = {deny("denied.test")};
    p.proxy = "socks5://127.0.0.1:1080";
    auto cfg = make_egress_config(ctx.get_executor(), p, proxy_options{}, {});
    BOOST_REQUIRE(cfg);
    BOOST_CHECK(cfg->upstream.has_value());
    BOOST_CHECK(!cfg->has_allow_rules);
    BOOST_CHECK(cfg->dns != nullptr);

    p.proxy = "ftp://127.0.0.1";
    auto bad = make_egress_config(ctx.get_executor(), p, proxy_options{}, {});
    BOOST_REQUIRE(!bad);
    BOOST_CHECK_EQUAL(bad.error().diag.limit, "net.proxy");

    p.mode = net_mode::allow_list;
    p.proxy.clear();
    p.allow_hosts = {"allowed.test"};
    auto list = make_egress_config(ctx.get_executor(), p, proxy_options{}, {});
    BOOST_REQUIRE(list);
    BOOST_CHECK(list->has_allow_rules);
    BOOST_CHECK(!list->upstream.has_value());

    proxy_options zero;
    zero.limits.dial_timeout = std::chrono::milliseconds(0);
    auto z = make_egress_config(ctx.get_executor(), p, zero, {});
    BOOST_REQUIRE(!z);
    BOOST_CHECK_EQUAL(z.error().diag.limit, "limits.dial_timeout");
    for (const auto hello : {std::chrono::milliseconds(-1), std::chrono::milliseconds::max()})
    {
        proxy_options odd;
        odd.limits.client_hello_timeout = hello; // none, or one `now +` would overflow
        auto h = make_egress_config(ctx.get_executor(), p, odd, {});
        BOOST_REQUIRE(!h);
        BOOST_CHECK_EQUAL(h.error().diag.limit, "limits.client_hello_timeout");
    }

    p.mode = net_mode::inherit;
    BOOST_CHECK(!make_egress_config(ctx.get_executor(), p, proxy_options{}, {}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(egress_ssrf)

// §11.1: an allowed name that resolves to a special-purpose address is denied with its class.
BOOST_AUTO_TEST_CASE(special_answers_are_denied_with_their_class)
{
    std::vector<std::string> special = {"127.0.0.1",
                                        "127.255.255.254",
                                        "0.0.0.0",
                                        "::1",
                                        "::",
                                        "::ffff:127.0.0.1",
                                        "::ffff:0.0.0.0",
                                        "::127.0.0.1",
                                        "64:ff9b::7f00:1",
                                        "2002:7f00:1::",
                                        "169.254.169.254",
                                        "fe80::1",
                                        "fd00:ec2::254",
                                        "100.100.100.200",
                                        "168.63.129.16",
                                        "192.0.0.192",
                                        "10.0.0.5",
                                        "172.16.0.1",
                                        "192.168.1.1",
                                        "100.64.0.1",
                                        "198.18.0.1",
                                        "240.0.0.1",
                                        "224.0.0.1",
                                        "255.255.255.255"};
    for (const auto& a : interface_addresses())
        special.push_back(a);
    for (const auto& a : special)
    {
        BOOST_TEST_CONTEXT(a)
        {
            egress_rig rig({allow("allowed.test")});
            rig.dns->pin("allowed.test", {a});
            asio::io_context ctx;
            auto o = open_once(rig, ctx, "allowed.test", 443);
            BOOST_CHECK(o.status == open_status::denied);
            BOOST_CHECK(!o.socket.is_open());
            BOOST_CHECK_EQUAL(rig.dns->calls, 1u);
            BOOST_REQUIRE_EQUAL(rig.records->size(), 1u);
            const auto& r = rig.records->front();
            BOOST_CHECK(r.verdict == net_verdict::denied);
            const address_class c = rig.cfg.guard.classify(asio::ip::make_address(a));
            BOOST_CHECK(c != address_class::global);
            BOOST_CHECK_EQUAL(r.reason, to_string(c));
            BOOST_CHECK(o.message.find(to_string(c)) != std::string::npos);
            const std::string shown = unmapped(asio::ip::make_address(a)).to_string();
            BOOST_CHECK(o.message.find(shown) == std::string::npos);
            BOOST_REQUIRE_EQUAL(r.resolved.size(), 1u);
            BOOST_CHECK_EQUAL(r.resolved[0], shown);
            BOOST_CHECK(r.dialed.empty());
        }
    }
}

// §11.2: mixed answers, both orders: only the allowed answer is dialled.
BOOST_AUTO_TEST_CASE(mixed_answers_dial_only_the_allowed_one)
{
    for (bool reversed : {false, true})
    {
        BOOST_TEST_CONTEXT("reversed " << reversed)
        {
            asio::io_context ctx;
            auto [pub, loop] = listen_pair(ctx, "127.0.0.2", "127.0.0.1");
            const auto port = pub.local_endpoint().port();
            egress_rig rig({allow("allowed.test"), allow("127.0.0.2/32")});
            std::vector<std::string> answers = {"127.0.0.2", "127.0.0.1"};
            if (reversed)
                std::swap(answers[0], answers[1]);
            rig.dns->pin("allowed.test", answers);
            auto o = open_once(rig, ctx, "allowed.test", port);
            BOOST_REQUIRE(o.status == open_status::connected);
            BOOST_CHECK(o.socket.is_open());
            check_one_record(rig, net_verdict::allowed, "rule");
            const auto& r = rig.records->front();
            BOOST_CHECK_EQUAL(r.dialed, "127.0.0.2:" + std::to_string(port));
            BOOST_CHECK_EQUAL(r.rule, "allow allowed.test");
            BOOST_CHECK_EQUAL(r.resolved.size(), 2u);
            BOOST_CHECK(saw_connection(pub));
            BOOST_CHECK(!saw_connection(loop));
        }
    }
}

BOOST_AUTO_TEST_CASE(all_answers_refused_is_denied_with_the_first_class)
{
    egress_rig rig({allow("allowed.test")});
    rig.dns->pin("allowed.test", {"10.0.0.5", "127.0.0.1"});
    asio::io_context ctx;
    auto o = open_once(rig, ctx, "allowed.test", 443);
    BOOST_CHECK(o.status == open_status::denied);
    check_one_record(rig, net_verdict::denied, "private");
}

// §11.3: the resolver answers public once and loopback afterwards: one lookup per open,
// and the dial goes to the vetted literal.
BOOST_AUTO_TEST_CASE(rebinding_resolver_is_asked_once_per_open)
{
    asio::io_context ctx;
    auto [pub, loop] = listen_pair(ctx, "127.0.0.2", "127.0.0.1");
    const auto port = pub.local_endpoint().port();
    egress_rig rig({allow("rebind.test"), allow("127.0.0.2/32")});
    rig.dns->script["rebind.test"] = {scripted_resolver::answer({"127.0.0.2"}),
                                      scripted_resolver::answer({"127.0.0.1"})};
    auto o = open_once(rig, ctx, "rebind.test", port);
    BOOST_REQUIRE(o.status == open_status::connected);
    BOOST_CHECK_EQUAL(rig.dns->calls, 1u);
    BOOST_CHECK_EQUAL(rig.records->front().dialed, "127.0.0.2:" + std::to_string(port));
    BOOST_CHECK(saw_connection(pub));
    BOOST_CHECK(!saw_connection(loop));

    ctx.restart();
    auto second = open_once(rig, ctx, "rebind.test", port);
    BOOST_CHECK(second.status == open_status::denied);
    BOOST_CHECK_EQUAL(rig.dns->calls, 2u);
    BOOST_CHECK_EQUAL(rig.records->back().reason, "loopback");
    BOOST_CHECK(!saw_connection(loop));
}

// §11.4: a refused name is never looked up.
BOOST_AUTO_TEST_CASE(refused_names_are_not_looked_up)
{
    struct refusal
    {
        const char* host;
        const char* reason;
    };
    for (const refusal& c :
         {refusal{"secret.denied.test", "rule"}, refusal{"other.test", "no_rule"},
          refusal{"localhost", "loopback"}, refusal{"LOCALHOST.", "loopback"},
          refusal{"foo.localhost", "loopback"}})
    {
        BOOST_TEST_CONTEXT(c.host)
        {
            egress_rig rig({allow("allowed.test"), allow("localhost"), deny("denied.test")});
            rig.dns->pin("secret.denied.test", {"203.0.113.7"});
            asio::io_context ctx;
            auto o = open_once(rig, ctx, c.host, 443);
            BOOST_CHECK(o.status == open_status::denied);
            BOOST_CHECK_EQUAL(rig.dns->calls, 0u);
            check_one_record(rig, net_verdict::denied, c.reason);
            BOOST_CHECK_EQUAL(rig.records->front().requested_host, c.host);
        }
    }
}

// §11.5: a private/loopback answer passes only with an explicit CIDR allow rule.
BOOST_AUTO_TEST_CASE(explicit_cidr_allow_rule_admits_a_private_answer)
{
    asio::io_context ctx;
    auto l = listen_on(ctx, "127.0.0.2");
    const auto port = l.local_endpoint().port();
    {
        egress_rig rig({allow("intranet.test")});
        rig.dns->pin("intranet.test", {"127.0.0.2"});
        auto o = open_once(rig, ctx, "intranet.test", port);
        BOOST_CHECK(o.status == open_status::denied);
        BOOST_CHECK(!saw_connection(l));
    }
    ctx.restart();
    egress_rig rig({allow("intranet.test"), allow("127.0.0.0/30")});
    rig.dns->pin("intranet.test", {"127.0.0.2"});
    auto o = open_once(rig, ctx, "intranet.test", port);
    BOOST_CHECK(o.status == open_status::connected);
    BOOST_CHECK(saw_connection(l));
}

BOOST_AUTO_TEST_CASE(ip_deny_rule_wins_over_cidr_allow)
{
    egress_rig rig({allow("allowed.test"), allow("127.0.0.0/8"), deny("127.0.0.2")});
    rig.dns->pin("allowed.test", {"127.0.0.2"});
    asio::io_context ctx;
    auto o = open_once(rig, ctx, "allowed.test", 443);
    BOOST_CHECK(o.status == open_status::denied);
    check_one_record(rig, net_verdict::denied, "rule");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(egress_literals)

// §11.6-7: every spelling is judged as the address it connects to.
BOOST_AUTO_TEST_CASE(literal_spellings_are_judged_as_their_address)
{
    for (const char* s : {"2130706433", "0x7f000001", "017700000001", "127.1", "0x7f.0.0.1",
                          "0177.0.0.1", "0", "0.0.0.0", "2852039166", "0xa9fea9fe", "[::1]",
                          "[0:0:0:0:0:0:0:1]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::]"})
    {
        BOOST_TEST_CONTEXT(s)
        {
            egress_rig rig({allow("allowed.test")});
            asio::io_context ctx;
            auto o = open_once(rig, ctx, s, 443);
            BOOST_CHECK(o.status == open_status::denied);
            BOOST_REQUIRE_EQUAL(rig.records->size(), 1u);
            const auto& reason = rig.records->front().reason;
            BOOST_CHECK(reason == "loopback" || reason == "unspecified" || reason == "link_local");
            BOOST_CHECK_EQUAL(rig.dns->calls, 0u);
        }
    }
}

BOOST_AUTO_TEST_CASE(allowed_literal_connects_under_every_spelling)
{
    asio::io_context ctx;
    auto l = listen_on(ctx, "127.0.0.1");
    const auto port = l.local_endpoint().port();
    for (const char* s : {"127.0.0.1", "2130706433", "0x7f.1", "127.1", "[::ffff:127.0.0.1]"})
    {
        BOOST_TEST_CONTEXT(s)
        {
            ctx.restart();
            egress_rig rig({allow("127.0.0.1")});
            auto o = open_once(rig, ctx, s, port);
            BOOST_CHECK(o.status == open_status::connected);
            check_one_record(rig, net_verdict::allowed, "rule");
            BOOST_CHECK_EQUAL(rig.records->front().host, "127.0.0.1");
            BOOST_CHECK_EQUAL(rig.records->front().dialed, "127.0.0.1:" + std::to_string(port));
            BOOST_CHECK(saw_connection(l));
        }
    }
}

// Issue 33, item 1: the reserved name reaches the host's 127.0.0.1 (or ::1), with no
// lookup, only through an allow rule naming it; the guard keeps refusing loopback otherwise.
BOOST_AUTO_TEST_CASE(host_loopback_name_needs_a_rule_naming_it)
{
    asio::io_context ctx;
    auto l = listen_on(ctx, "127.0.0.1");
    const auto port = l.local_endpoint().port();
    const std::uint16_t other = port == 65535 ? 1 : port + 1;
    struct refused_case
    {
        const char* what;
        std::vector<net_rule> rules;
        net_mode mode;
    };
    const std::vector<refused_case> refused = {
        {"a parent domain", {allow("sandbox.internal")}, net_mode::allow_list},
        {"a wildcard", {allow("*.sandbox.internal")}, net_mode::allow_list},
        {"another port", {allow(std::string(host_loopback_name), other)}, net_mode::allow_list},
        {"proxy mode's default", {deny("blocked.test")}, net_mode::proxy},
        {"an IP rule for the address", {allow("127.0.0.1")}, net_mode::allow_list},
    };
    for (const auto& c : refused)
    {
        BOOST_TEST_CONTEXT(c.what)
        {
            ctx.restart();
            egress_rig rig(c.rules, c.mode);
            auto o = open_once(rig, ctx, std::string(host_loopback_name), port);
            BOOST_CHECK(o.status == open_status::denied);
            check_one_record(rig, net_verdict::denied, "no_rule");
            BOOST_CHECK_EQUAL(rig.dns->calls, 0u);
        }
    }
    BOOST_CHECK(!saw_connection(l));
    for (const char* spelling : {"host.sandbox.internal", "HOST.Sandbox.Internal."})
    {
        BOOST_TEST_CONTEXT(spelling)
        {
            ctx.restart();
            egress_rig rig({allow(std::string(host_loopback_name), port)});
            auto o = open_once(rig, ctx, spelling, port);
            BOOST_CHECK(o.status == open_status::connected);
            check_one_record(rig, net_verdict::allowed, "rule");
            BOOST_CHECK_EQUAL(rig.records->front().dialed, "127.0.0.1:" + std::to_string(port));
            BOOST_CHECK_EQUAL(rig.dns->calls, 0u);
            BOOST_CHECK(saw_connection(l));
        }
    }
    // An IP deny rule still refuses each address; `localhost` stays the guard's.
    ctx.restart();
    egress_rig denied({allow(std::string(host_loopback_name)), deny("127.0.0.0/8"), deny("::1")});
    auto d = open_once(denied, ctx, std::string(host_loopback_name), port);
    BOOST_CHECK(d.status == open_status::denied);
    check_one_record(denied, net_verdict::denied, "rule");
    ctx.restart();
    egress_rig local({allow(std::string(host_loopback_name)), allow("localhost")});
    auto h = open_once(local, ctx, "localhost", port);
    BOOST_CHECK(h.status == open_status::denied);
    check_one_record(local, net_verdict::denied, "loopback");
}

BOOST_AUTO_TEST_CASE(port_scoped_rule)
{
    egress_rig rig({allow("allowed.test", 443)});
    asio::io_context ctx;
    auto o = open_once(rig, ctx, "allowed.test", 22);
    BOOST_CHECK(o.status == open_status::denied);
    check_one_record(rig, net_verdict::denied, "no_rule");
    BOOST_CHECK_EQUAL(rig.dns->calls, 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(egress_failures)

// §11.19: each failure is its class, with exactly one record.
BOOST_AUTO_TEST_CASE(dial_refused)
{
    asio::io_context ctx;
    const auto port = free_port(ctx, "127.0.0.2");
    egress_rig rig({allow("allowed.test"), allow("127.0.0.2")});
    rig.dns->pin("allowed.test", {"127.0.0.2"});
    auto o = open_once(rig, ctx, "allowed.test", port);
    BOOST_CHECK(o.status == open_status::dial_refused);
    BOOST_CHECK(!o.socket.is_open());
    check_one_record(rig, net_verdict::failed, "dial_refused");
    BOOST_CHECK_EQUAL(rig.records->front().dialed, "127.0.0.2:" + std::to_string(port));
}

BOOST_AUTO_TEST_CASE(nxdomain_is_resolve_failed)
{
    egress_rig rig({allow("allowed.test")});
    asio::io_context ctx;
    auto o = open_once(rig, ctx, "nx.allowed.test", 443);
    BOOST_CHECK(o.status == open_status::resolve_failed);
    check_one_record(rig, net_verdict::failed, "resolve_failed");
}

BOOST_AUTO_TEST_CASE(resolver_timeout_is_resolve_timeout)
{
    egress_rig rig({allow("allowed.test")});
    rig.dns->script["slow.allowed.test"] = {resolve_result{asio::error::timed_out, {}}};
    asio::io_context ctx;
    auto o = open_once(rig, ctx, "slow.allowed.test", 443);
    BOOST_CHECK(o.status == open_status::resolve_timeout);
    check_one_record(rig, net_verdict::failed, "resolve_timeout");
}

// §11.18: a dial that never completes ends at the dial timeout. The listener's accept queue
// is full (backlog 0, one connection waiting), so Linux drops the next SYN.
BOOST_AUTO_TEST_CASE(blackholed_dial_ends_at_the_dial_timeout)
{
    asio::io_context ctx;
    tcp::acceptor full(ctx);
    const tcp::endpoint at(asio::ip::make_address("127.0.0.2"), 0);
    full.open(at.protocol());
    full.bind(at);
    full.listen(0);
    const auto port = full.local_endpoint().port();
    tcp::socket filler(ctx);
    filler.connect(full.local_endpoint());
    egress_rig rig({allow("127.0.0.2")});
    rig.cfg.limits.dial_timeout = std::chrono::milliseconds(300);
    auto o = open_once(rig, ctx, "127.0.0.2", port);
    BOOST_CHECK(o.status == open_status::dial_timeout);
    check_one_record(rig, net_verdict::failed, "dial_timeout");
}

BOOST_AUTO_TEST_CASE(refuse_records_once)
{
    egress_rig rig({});
    asio::io_context ctx;
    auto gate = rig.make(ctx.get_executor());
    auto o = gate->refuse(net_protocol::socks5, std::string("evil\0.test\r\n", 12),
                          open_status::bad_request, "bad host");
    BOOST_CHECK(o.status == open_status::bad_request);
    BOOST_CHECK_EQUAL(o.message, "bad host");
    check_one_record(rig, net_verdict::failed, "bad_request");
    // Not accepted by the parser: only its size is recorded (it may hold credentials).
    BOOST_CHECK_EQUAL(rig.records->front().requested_host, "(unparsed: 12 bytes)");
    auto secret = gate->refuse(net_protocol::connect, "user:hunter2@host/p?token=abc",
                               open_status::bad_request, "bad authority");
    BOOST_CHECK_EQUAL(secret.record.requested_host, "(unparsed: 29 bytes)");
    auto long_one = gate->refuse(net_protocol::connect, std::string(400, '\x01'),
                                 open_status::tunnel_cap, "cap");
    BOOST_CHECK_LE(long_one.record.requested_host.size(), 300u);
    BOOST_CHECK_EQUAL(long_one.record.reason, "tunnel_cap");
    BOOST_CHECK(long_one.record.connection != o.record.connection);
}

BOOST_AUTO_TEST_CASE(closed_record_follows_a_connection)
{
    asio::io_context ctx;
    auto l = listen_on(ctx, "127.0.0.1");
    egress_rig rig({allow("127.0.0.1")});
    auto gate = rig.make(ctx.get_executor());
    std::optional<opened> o;
    run_on(ctx, [&]() -> awaitable<void> {
        o.emplace(co_await gate->open(net_protocol::connect, "127.0.0.1",
                                      target("127.0.0.1", l.local_endpoint().port())));
    });
    BOOST_REQUIRE(o->status == open_status::connected);
    relay_totals moved;
    moved.up = 10;
    moved.down = 20;
    moved.reason = "eof";
    gate->closed(o->record, std::move(moved));
    BOOST_REQUIRE_EQUAL(rig.records->size(), 2u);
    const auto& c = rig.records->back();
    BOOST_CHECK(c.event == net_event::closed);
    BOOST_CHECK_EQUAL(c.connection, o->record.connection);
    BOOST_CHECK_EQUAL(c.bytes_up, 10u);
    BOOST_CHECK_EQUAL(c.bytes_down, 20u);
    BOOST_CHECK_EQUAL(c.reason, "eof");
    BOOST_CHECK_EQUAL(c.host, "127.0.0.1");
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// A fake upstream proxy: accepts one connection, runs `script` on it, then waits for the
/// egress side to close.
struct fake_upstream
{
    tcp::acceptor acceptor;
    std::function<awaitable<void>(tcp::socket&)> script;
    /// Waits for the egress side to close after the script (off: the script reads to EOF).
    bool wait_for_close = true;
    bool served = false;

    awaitable<void> serve()
    {
        auto [ec, s] = co_await acceptor.async_accept(asio::as_tuple(use_awaitable));
        acceptor.close();
        if (ec)
            co_return;
        served = true;
        co_await script(s);
        char c = 0;
        if (wait_for_close)
            co_await s.async_read_some(asio::buffer(&c, 1), asio::as_tuple(use_awaitable));
    }
};

/// An HTTP upstream that records the request head and answers `response`.
std::function<awaitable<void>(tcp::socket&)> http_script(std::string& head, std::string response)
{
    return [&head, response](tcp::socket& s) -> awaitable<void> {
        std::string buf;
        auto n = co_await asio::async_read_until(s, asio::dynamic_buffer(buf), "\r\n\r\n",
                                                 use_awaitable);
        head = buf.substr(0, n);
        co_await asio::async_write(s, asio::buffer(response), use_awaitable);
    };
}

/// A SOCKS5 upstream that wants user "u" / password "good" (RFC 1929), then CONNECTs and
/// sends "HELLO" as the destination's first bytes. Records the request's address bytes.
std::function<awaitable<void>(tcp::socket&)> socks_script(std::string& request)
{
    return [&request](tcp::socket& s) -> awaitable<void> {
        std::array<unsigned char, 2> vn{};
        co_await asio::async_read(s, asio::buffer(vn), use_awaitable);
        std::string methods(vn[1], '\0');
        co_await asio::async_read(s, asio::buffer(methods), use_awaitable);
        const bool offers_auth = methods.find('\x02') != std::string::npos;
        const std::array<unsigned char, 2> pick{0x05,
                                                offers_auth ? std::uint8_t{2} : std::uint8_t{0xff}};
        co_await asio::async_write(s, asio::buffer(pick), use_awaitable);
        if (!offers_auth)
            co_return;
        std::array<unsigned char, 2> ul{};
        co_await asio::async_read(s, asio::buffer(ul), use_awaitable);
        std::string user(ul[1], '\0');
        co_await asio::async_read(s, asio::buffer(user), use_awaitable);
        unsigned char pl = 0;
        co_await asio::async_read(s, asio::buffer(&pl, 1), use_awaitable);
        std::string pass(pl, '\0');
        co_await asio::async_read(s, asio::buffer(pass), use_awaitable);
        const bool ok = ul[0] == 1 && user == "u" && pass == "good";
        const std::array<unsigned char, 2> status{0x01, ok ? std::uint8_t{0} : std::uint8_t{1}};
        co_await asio::async_write(s, asio::buffer(status), use_awaitable);
        if (!ok)
            co_return;
        std::array<unsigned char, 5> head{};
        co_await asio::async_read(s, asio::buffer(head), use_awaitable);
        std::string rest(head[4] + 2, '\0');
        co_await asio::async_read(s, asio::buffer(rest), use_awaitable);
        request.assign(reinterpret_cast<const char*>(head.data()), head.size());
        request += rest;
        const std::string reply("\x05\x00\x00\x01\x7f\x00\x00\x01\x01\x02HELLO", 15);
        co_await asio::async_write(s, asio::buffer(reply), use_awaitable);
    };
}

egress_rig proxy_rig(const std::string& url, std::vector<net_rule> rules = {})
{
    egress_rig rig(std::move(rules), net_mode::proxy);
    rig.cfg.upstream = parse_upstream(url).value();
    return rig;
}

/// Opens `host:port` through the rig's upstream `up` and hands the result to `check` while
/// the connection is still open.
void open_through(egress_rig& rig, asio::io_context& ctx, fake_upstream& up, std::string host,
                  std::uint16_t port, std::function<void(opened&)> check,
                  net_protocol protocol = net_protocol::connect)
{
    auto gate = rig.make(ctx.get_executor());
    asio::co_spawn(ctx, up.serve(), asio::detached);
    run_on(ctx, [&]() -> awaitable<void> {
        auto o = co_await gate->open(protocol, host, target(host, port));
        if (o.status == open_status::connected && o.early_bytes.empty() && !o.via_http_upstream)
        {
            std::array<char, 5> got{};
            auto [ec, n] = co_await asio::async_read(o.socket, asio::buffer(got),
                                                     asio::as_tuple(use_awaitable));
            o.early_bytes.assign(got.data(), n);
        }
        check(o);
        o.socket.close();
        up.acceptor.close();
    });
}

} // namespace

BOOST_AUTO_TEST_SUITE(egress_upstream)

// §11.15 / W22: bytes after the upstream's 200 reach the client; the CONNECT carries Basic.
BOOST_AUTO_TEST_CASE(http_upstream_connect_with_credentials_and_early_bytes)
{
    asio::io_context ctx;
    std::string head;
    fake_upstream up{listen_on(ctx, "127.0.0.1"),
                     http_script(head, "HTTP/1.1 200 Connection established\r\n\r\nEARLY")};
    const auto uport = up.acceptor.local_endpoint().port();
    auto rig = proxy_rig("http://user:pa%3Ass@127.0.0.1:" + std::to_string(uport));
    open_through(rig, ctx, up, "example.test", 443, [](opened& o) {
        BOOST_REQUIRE(o.status == open_status::connected);
        BOOST_CHECK_EQUAL(o.early_bytes, "EARLY");
    });
    BOOST_CHECK_EQUAL(head, "CONNECT example.test:443 HTTP/1.1\r\nHost: example.test:443\r\n"
                            "Proxy-Authorization: Basic dXNlcjpwYTpzcw==\r\n\r\n");
    BOOST_CHECK_EQUAL(rig.dns->calls, 0u);
    check_one_record(rig, net_verdict::allowed, "mode");
    BOOST_CHECK_EQUAL(rig.records->front().dialed, "127.0.0.1:" + std::to_string(uport));
    BOOST_CHECK(rig.records->front().resolved.empty());
}

BOOST_AUTO_TEST_CASE(http_upstream_407_is_upstream_refused)
{
    asio::io_context ctx;
    std::string head;
    fake_upstream up{listen_on(ctx, "127.0.0.1"),
                     http_script(head, "HTTP/1.1 407 Proxy Authentication Required\r\n"
                                       "Proxy-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n")};
    auto rig = proxy_rig("http://127.0.0.1:" + std::to_string(up.acceptor.local_endpoint().port()));
    open_through(rig, ctx, up, "example.test", 443, [](opened& o) {
        BOOST_CHECK(o.status == open_status::upstream_refused);
        BOOST_CHECK_EQUAL(o.message, "upstream proxy requires authentication (407)");
        BOOST_CHECK(!o.socket.is_open());
    });
    BOOST_CHECK(head.find("Proxy-Authorization") == std::string::npos);
    check_one_record(rig, net_verdict::failed, "upstream_refused");
}

BOOST_AUTO_TEST_CASE(http_upstream_other_status_names_the_code)
{
    asio::io_context ctx;
    std::string head;
    fake_upstream up{listen_on(ctx, "127.0.0.1"),
                     http_script(head, "HTTP/1.1 403 Forbidden\r\n\r\n")};
    auto rig = proxy_rig("http://127.0.0.1:" + std::to_string(up.acceptor.local_endpoint().port()));
    open_through(rig, ctx, up, "example.test", 443, [](opened& o) {
        BOOST_CHECK(o.status == open_status::upstream_refused);
        BOOST_CHECK(o.message.find("403") != std::string::npos);
    });
}

BOOST_AUTO_TEST_CASE(http_upstream_silent_or_oversized_reply)
{
    {
        asio::io_context ctx;
        // Reads the CONNECT and everything after it, and never answers.
        fake_upstream up{listen_on(ctx, "127.0.0.1"), [](tcp::socket& s) -> awaitable<void> {
                             std::string all;
                             co_await asio::async_read(s, asio::dynamic_buffer(all),
                                                       asio::as_tuple(use_awaitable));
                         }};
        up.wait_for_close = false;
        auto rig =
            proxy_rig("http://127.0.0.1:" + std::to_string(up.acceptor.local_endpoint().port()));
        rig.cfg.limits.dial_timeout = std::chrono::milliseconds(300);
        open_through(rig, ctx, up, "example.test", 443,
                     [](opened& o) { BOOST_CHECK(o.status == open_status::dial_timeout); });
        BOOST_CHECK(up.served);
        check_one_record(rig, net_verdict::failed, "dial_timeout");
    }
    asio::io_context ctx;
    fake_upstream up{
        listen_on(ctx, "127.0.0.1"), [](tcp::socket& s) -> awaitable<void> {
            const std::string huge = "HTTP/1.1 200 OK\r\nX: " + std::string(70 * 1024, 'a');
            co_await asio::async_write(s, asio::buffer(huge), asio::as_tuple(use_awaitable));
        }};
    auto rig = proxy_rig("http://127.0.0.1:" + std::to_string(up.acceptor.local_endpoint().port()));
    open_through(rig, ctx, up, "example.test", 443,
                 [](opened& o) { BOOST_CHECK(o.status == open_status::upstream_failed); });
    check_one_record(rig, net_verdict::failed, "upstream_failed");
}

BOOST_AUTO_TEST_CASE(plain_http_through_http_upstream_needs_no_connect)
{
    asio::io_context ctx;
    std::string head;
    fake_upstream up{listen_on(ctx, "127.0.0.1"),
                     [](tcp::socket&) -> awaitable<void> { co_return; }};
    auto rig =
        proxy_rig("http://u:p@127.0.0.1:" + std::to_string(up.acceptor.local_endpoint().port()));
    open_through(
        rig, ctx, up, "example.test", 80,
        [](opened& o) {
            BOOST_REQUIRE(o.status == open_status::connected);
            BOOST_CHECK(o.via_http_upstream);
            BOOST_CHECK_EQUAL(o.upstream_authorization, "Basic dTpw");
        },
        net_protocol::http);
    BOOST_CHECK(up.served);
}

BOOST_AUTO_TEST_CASE(socks5_upstream_with_good_and_wrong_password)
{
    for (const char* pass : {"good", "bad"})
    {
        BOOST_TEST_CONTEXT(pass)
        {
            asio::io_context ctx;
            std::string request;
            fake_upstream up{listen_on(ctx, "127.0.0.1"), socks_script(request)};
            auto rig = proxy_rig("socks5://u:" + std::string(pass) + "@127.0.0.1:" +
                                 std::to_string(up.acceptor.local_endpoint().port()));
            const bool good = std::string(pass) == "good";
            open_through(rig, ctx, up, "example.test", 443, [good](opened& o) {
                if (good)
                {
                    BOOST_REQUIRE(o.status == open_status::connected);
                    BOOST_CHECK_EQUAL(o.early_bytes, "HELLO");
                }
                else
                    BOOST_CHECK(o.status == open_status::upstream_refused);
            });
            if (good)
                BOOST_CHECK_EQUAL(request, std::string("\x05\x01\x00\x03\x0c"
                                                       "example.test\x01\xbb",
                                                       19));
            check_one_record(rig, good ? net_verdict::allowed : net_verdict::failed,
                             good ? "mode" : "upstream_refused");
            BOOST_CHECK_EQUAL(rig.dns->calls, 0u);
        }
    }
}

// Under an upstream the rules and the guard still judge what the client asked for.
BOOST_AUTO_TEST_CASE(proxy_mode_still_applies_rules_and_guards_literals)
{
    struct refusal
    {
        const char* host;
        const char* reason;
    };
    for (const refusal& c : {refusal{"127.0.0.1", "loopback"}, refusal{"2852039166", "link_local"},
                             refusal{"denied.test", "rule"}, refusal{"localhost", "loopback"}})
    {
        BOOST_TEST_CONTEXT(c.host)
        {
            asio::io_context ctx;
            std::string head;
            fake_upstream up{listen_on(ctx, "127.0.0.1"),
                             http_script(head, "HTTP/1.1 200 OK\r\n\r\n")};
            auto rig =
                proxy_rig("http://127.0.0.1:" + std::to_string(up.acceptor.local_endpoint().port()),
                          {deny("denied.test")});
            open_through(rig, ctx, up, c.host, 443,
                         [](opened& o) { BOOST_CHECK(o.status == open_status::denied); });
            BOOST_CHECK(!up.served);
            check_one_record(rig, net_verdict::denied, c.reason);
        }
    }
}

BOOST_AUTO_TEST_CASE(proxy_mode_with_allow_rules_restricts)
{
    asio::io_context ctx;
    std::string head;
    fake_upstream up{listen_on(ctx, "127.0.0.1"), http_script(head, "HTTP/1.1 200 OK\r\n\r\n")};
    auto rig = proxy_rig("http://127.0.0.1:" + std::to_string(up.acceptor.local_endpoint().port()),
                         {allow("allowed.test")});
    open_through(rig, ctx, up, "other.test", 443,
                 [](opened& o) { BOOST_CHECK(o.status == open_status::denied); });
    BOOST_CHECK(!up.served);
    check_one_record(rig, net_verdict::denied, "no_rule");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace sandbox::net::test
