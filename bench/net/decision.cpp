// bench/net/decision.cpp: the cost of one rule decision (no DNS) with 1,000 mixed rules
// (exact names, wildcards, IPv4 and IPv6 CIDRs; allows and denies; some port-scoped), for a
// mix of hits and misses, against a straightforward linear scan over the same rules in the
// same run (the baseline). Target (network.md §10 T7): at most 5 µs per decision.
#include "cases.hpp"

#include "bench/common.hpp"
#include "host/canonical.hpp"
#include "net/rule_set.hpp"

#include <boost/asio/ip/address.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace net_bench {
namespace {

namespace ip = boost::asio::ip;
using sandbox::net_action;

constexpr int rule_count = 1000;

// One rule as the linear baseline sees it.
struct flat_rule
{
    enum { domain, wildcard, cidr } kind;
    std::string name;
    ip::address network;
    int length = 0;
    net_action action = net_action::allow;
    std::uint16_t port = 0;
};

// A destination as the egress would hand it over: a canonical name or an address.
struct query
{
    std::string name;
    ip::address addr;
    bool is_ip = false;
    std::uint16_t port = 443;
};

std::pair<sandbox::net_policy, std::vector<flat_rule>> make_rules()
{
    sandbox::net_policy p;
    p.mode = sandbox::net_mode::allow_list;
    std::vector<flat_rule> flat;
    for (int i = 0; i < rule_count; ++i)
    {
        flat_rule r;
        r.action = i % 10 == 7 ? net_action::deny : net_action::allow;
        r.port = i % 4 == 0 ? 443 : 0;
        std::string pattern;
        if (i % 10 < 4)
        {
            r.kind = flat_rule::domain;
            r.name = "svc" + std::to_string(i) + ".corp" + std::to_string(i % 17) + ".example";
            pattern = r.name;
        }
        else if (i % 10 < 7)
        {
            r.kind = flat_rule::wildcard;
            r.name = "zone" + std::to_string(i) + ".example";
            pattern = "*." + r.name;
        }
        else if (i % 2 == 0)
        {
            r.kind = flat_rule::cidr;
            r.length = 16 + i % 17;
            const std::uint32_t base = (11u << 24) | (static_cast<std::uint32_t>(i) << 12);
            r.network = ip::address_v4(base & (~std::uint32_t{0} << (32 - r.length)));
            pattern = r.network.to_string() + "/" + std::to_string(r.length);
        }
        else
        {
            r.kind = flat_rule::cidr;
            r.length = 48;
            auto b = ip::make_address_v6("2001:db8::").to_bytes();
            b[4] = static_cast<unsigned char>(i >> 8);
            b[5] = static_cast<unsigned char>(i);
            r.network = ip::address_v6(b);
            pattern = r.network.to_string() + "/48";
        }
        p.rules.push_back({r.action, pattern, r.port});
        flat.push_back(std::move(r));
    }
    return {std::move(p), std::move(flat)};
}

// Half hits (exact, subdomain, wildcard, inside a CIDR), half misses (unknown names,
// look-alike suffixes, addresses outside every rule).
std::vector<query> make_queries()
{
    std::vector<query> q;
    for (int i = 0; i < 64; ++i)
    {
        const int k = i * 37 % rule_count;
        const auto name = [&](std::string s) { q.push_back({std::move(s), {}, false, 443}); };
        const auto addr = [&](ip::address a) {
            q.push_back({{}, a, true, static_cast<std::uint16_t>(80 + i % 2)});
        };
        name("svc" + std::to_string(k - k % 10) + ".corp" + std::to_string((k - k % 10) % 17) +
             ".example");
        name("www.svc" + std::to_string(k - k % 10 + 1) + ".corp" +
             std::to_string((k - k % 10 + 1) % 17) + ".example");
        name("a.b.zone" + std::to_string(k - k % 10 + 5) + ".example");
        name("unknown" + std::to_string(i) + ".elsewhere.test");
        name("notsvc" + std::to_string(k) + ".corp1.example");
        const std::uint32_t v4 = (11u << 24) | (static_cast<std::uint32_t>(k - k % 10 + 8) << 12) | 5u;
        addr(ip::address_v4(v4));
        auto b = ip::make_address_v6("2001:db8::1").to_bytes();
        b[4] = static_cast<unsigned char>((k - k % 10 + 9) >> 8);
        b[5] = static_cast<unsigned char>(k - k % 10 + 9);
        addr(ip::address_v6(b));
        addr(ip::make_address("8.8.4.4"));
    }
    return q;
}

bool name_hit(const flat_rule& r, const std::string& name)
{
    const bool sub = name.size() > r.name.size() && name.ends_with(r.name) &&
                     name[name.size() - r.name.size() - 1] == '.';
    return r.kind == flat_rule::domain ? (sub || name == r.name) : sub;
}

bool cidr_hit(const flat_rule& r, const ip::address& a)
{
    if (a.is_v4() != r.network.is_v4())
        return false;
    if (a.is_v4())
    {
        const std::uint32_t mask = r.length == 0 ? 0 : ~std::uint32_t{0} << (32 - r.length);
        return (a.to_v4().to_uint() & mask) == r.network.to_v4().to_uint();
    }
    const auto x = a.to_v6().to_bytes();
    const auto n = r.network.to_v6().to_bytes();
    for (int bit = 0; bit < r.length; bit += 8)
    {
        const int left = r.length - bit;
        const unsigned mask = left >= 8 ? 0xFFu : (0xFF00u >> left) & 0xFFu;
        if ((x[static_cast<std::size_t>(bit / 8)] & mask) != n[static_cast<std::size_t>(bit / 8)])
            return false;
    }
    return true;
}

// The baseline: every rule in order, deny wins, the first deny or first allow decides.
int linear_decide(const std::vector<flat_rule>& rules, const query& q)
{
    int allow = -1;
    for (std::size_t i = 0; i < rules.size(); ++i)
    {
        const auto& r = rules[i];
        if (r.port != 0 && r.port != q.port)
            continue;
        const bool hit = (r.kind == flat_rule::cidr) == q.is_ip &&
                         (q.is_ip ? cidr_hit(r, q.addr) : name_hit(r, q.name));
        if (!hit)
            continue;
        if (r.action == net_action::deny)
            return -2 - static_cast<int>(i);
        if (allow < 0)
            allow = static_cast<int>(i);
    }
    return allow;
}

int ours_decide(const sandbox::net::rule_set& s, const query& q)
{
    const auto m = q.is_ip ? s.match_ip(q.addr, q.port) : s.match_name(q.name, q.port);
    return m.matched ? (m.action == net_action::deny ? 2 : 1) : 0;
}

template <class F>
double ns_per_decision(const std::vector<query>& queries, int passes, F decide)
{
    volatile long sink = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int p = 0; p < passes; ++p)
        for (const auto& q : queries)
            sink = sink + decide(q);
    const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start);
    return ns.count() / (static_cast<double>(passes) * static_cast<double>(queries.size()));
}

} // namespace

void run_decision(const options& o)
{
    auto [policy, flat] = make_rules();
    const auto compiled = sandbox::net::rule_set::compile(policy);
    if (!compiled)
    {
        std::fprintf(stderr, "decision: compile failed: %s\n",
                     sandbox::to_string(compiled.error().diag).c_str());
        return;
    }
    const auto queries = make_queries();

    // Both must agree on every decision before either is timed.
    for (const auto& q : queries)
    {
        const int base = linear_decide(flat, q);
        const int expect = base == -1 ? 0 : (base < -1 ? 2 : 1);
        if (ours_decide(*compiled, q) != expect)
        {
            std::fprintf(stderr, "decision: rule_set and the linear scan disagree on %s\n",
                         q.is_ip ? q.addr.to_string().c_str() : q.name.c_str());
            return;
        }
    }

    const int passes = o.quick ? 2 : 40;
    const int round_count = o.quick ? 3 : 11;
    const auto r = bench::measure_rounds(round_count, [&] {
        const double base = ns_per_decision(queries, passes,
                                            [&](const query& q) { return linear_decide(flat, q); });
        const double ours = ns_per_decision(
            queries, passes, [&](const query& q) { return ours_decide(*compiled, q); });
        return std::pair{ours, base};
    });
    bench::print_json("net_bench", "decision_1000_rules", r.ours_median(), "ns", r.base_median());
}

} // namespace net_bench
