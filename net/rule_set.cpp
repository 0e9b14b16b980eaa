// net/rule_set.cpp: see rule_set.hpp.
//
// Names: one hash map from a canonical name to the rules written for it, split into
// "domain" rules (the name and every subdomain) and "wildcard" rules (subdomains only). A
// query walks its own label-aligned suffixes (the name, then after each dot) and looks each
// one up: cost = labels x one hash lookup, whatever the number of rules.
// Addresses: per family, one hash map per prefix length in use, keyed by the masked address;
// a query masks itself once per length in use (at most 33 or 129 lookups).
// In both, every matching rule is seen; the lowest-numbered deny wins, else the
// lowest-numbered allow.
#include "rule_set.hpp"

#include "host/canonical.hpp"
#include "host/pattern.hpp"
#include "net_rule_list.hpp"

#include <boost/asio/ip/address_v4.hpp>
#include <boost/asio/ip/address_v6.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sandbox::net {
namespace {

namespace ip = boost::asio::ip;

constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

// One compiled rule as seen from a lookup bucket.
struct entry
{
    std::size_t index; // into impl::texts, in compile order
    net_action action;
    std::uint16_t port; // 0 = any
};

// The best match seen so far: the lowest-numbered deny, else the lowest-numbered allow.
struct verdict
{
    std::size_t deny = none;
    std::size_t allow = none;

    void see(const std::vector<entry>& entries, std::uint16_t port) noexcept
    {
        for (const auto& e : entries)
        {
            if (e.port != 0 && e.port != port)
                continue;
            std::size_t& best = e.action == net_action::deny ? deny : allow;
            best = std::min(best, e.index);
        }
    }
};

struct name_rules
{
    std::vector<entry> domain{};   // the name itself and its subdomains
    std::vector<entry> wildcard{}; // subdomains only
};

struct string_hash
{
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept
    {
        return std::hash<std::string_view>{}(s);
    }
};

struct v6_key
{
    std::uint64_t hi;
    std::uint64_t lo;
    bool operator==(const v6_key&) const = default;
};

struct v6_hash
{
    std::size_t operator()(const v6_key& k) const noexcept
    {
        return std::hash<std::uint64_t>{}(k.hi * 0x9E3779B97F4A7C15ull ^ k.lo);
    }
};

// Prefix tables of one family: one map per prefix length, and the lengths in use.
template <class Key, class Hash, int Bits>
struct prefix_table
{
    std::array<std::unordered_map<Key, std::vector<entry>, Hash>, Bits + 1> by_length{};
    std::vector<int> lengths{};

    void add(const Key& network, int length, const entry& e)
    {
        by_length[static_cast<std::size_t>(length)][network].push_back(e);
        if (std::find(lengths.begin(), lengths.end(), length) == lengths.end())
            lengths.push_back(length);
    }
};

std::uint32_t mask_v4(std::uint32_t a, int length) noexcept
{
    return length == 0 ? 0 : a & (~std::uint32_t{0} << (32 - length));
}

v6_key mask_v6(v6_key k, int length) noexcept
{
    const auto keep = [](std::uint64_t v, int bits) -> std::uint64_t {
        if (bits <= 0)
            return 0;
        if (bits >= 64)
            return v;
        return v & (~std::uint64_t{0} << (64 - bits));
    };
    return {keep(k.hi, length), keep(k.lo, length - 64)};
}

v6_key key_of(const ip::address_v6& a) noexcept
{
    const auto b = a.to_bytes();
    v6_key k{0, 0};
    for (std::size_t i = 0; i < 8; ++i)
    {
        k.hi = (k.hi << 8) | b[i];
        k.lo = (k.lo << 8) | b[i + 8];
    }
    return k;
}

} // namespace

struct rule_set::impl
{
    std::vector<std::string> texts{};
    std::unordered_map<std::string, name_rules, string_hash, std::equal_to<>> names{};
    prefix_table<std::uint32_t, std::hash<std::uint32_t>, 32> v4{};
    prefix_table<v6_key, v6_hash, 128> v6{};
    std::vector<std::uint16_t> host_loopback_ports{};

    // Adds one parsed pattern (its names already in canonical form: nothing left to refuse).
    void add(const detail::host_pattern& p, net_action action, int port, std::string text);
    void add_ip(ip::address a, int length, const entry& e);

    rule_match result(const verdict& v) const
    {
        rule_match m;
        const std::size_t i = v.deny != none ? v.deny : v.allow;
        if (i == none)
            return m;
        m.matched = true;
        m.action = v.deny != none ? net_action::deny : net_action::allow;
        m.rule = texts[i];
        return m;
    }
};

void rule_set::impl::add_ip(ip::address a, int length, const entry& e)
{
    // An IPv4-mapped rule (::ffff:a.b.c.d[/96+n]) is the IPv4 rule: queries are unmapped.
    if (a.is_v6() && a.to_v6().is_v4_mapped() && length >= 96)
    {
        a = ip::make_address_v4(ip::v4_mapped, a.to_v6());
        length -= 96;
    }
    if (a.is_v4())
        v4.add(mask_v4(a.to_v4().to_uint(), length), length, e);
    else
        v6.add(mask_v6(key_of(a.to_v6()), length), length, e);
}

void rule_set::impl::add(const detail::host_pattern& p, net_action action, int port,
                         std::string text)
{
    const entry e{texts.size(), action, static_cast<std::uint16_t>(port)};
    switch (p.kind)
    {
    case detail::host_kind::ip:
        add_ip(p.address, p.address.is_v4() ? 32 : 128, e);
        break;
    case detail::host_kind::cidr:
        add_ip(p.address, p.prefix_length, e);
        break;
    case detail::host_kind::domain:
    case detail::host_kind::wildcard_domain: { // already A-labels (host/pattern.hpp)
        auto& node = names[p.host];
        (p.kind == detail::host_kind::domain ? node.domain : node.wildcard).push_back(e);
        break;
    }
    }
    texts.push_back(std::move(text));
}

rule_set::rule_set() : impl_(std::make_shared<const impl>()) {}

outcome<rule_set> rule_set::compile(const net_policy& p)
{
    auto list = detail::check_rule_list(p);
    if (!list)
        return list.error();
    auto built = std::make_shared<impl>();
    for (auto& r : *list)
    {
        if (r.action == net_action::allow && r.pattern.kind == detail::host_kind::domain &&
            r.pattern.host == host_loopback_name)
            built->host_loopback_ports.push_back(r.port);
        built->add(r.pattern, r.action, r.port, std::move(r.text));
    }
    rule_set s;
    s.impl_ = std::move(built);
    return s;
}

rule_match rule_set::match_name(std::string_view name, std::uint16_t port) const
{
    verdict v;
    if (impl_->names.empty() || name.empty())
        return impl_->result(v);
    std::string_view suffix = name;
    for (bool whole = true;; whole = false)
    {
        if (const auto it = impl_->names.find(suffix); it != impl_->names.end())
        {
            v.see(it->second.domain, port);
            if (!whole)
                v.see(it->second.wildcard, port);
        }
        const std::size_t dot = suffix.find('.');
        if (dot == std::string_view::npos)
            break;
        suffix.remove_prefix(dot + 1);
    }
    return impl_->result(v);
}

rule_match rule_set::match_ip(const ip::address& a, std::uint16_t port) const
{
    verdict v;
    const ip::address u =
        a.is_v6() && a.to_v6().is_v4_mapped() ? ip::make_address_v4(ip::v4_mapped, a.to_v6()) : a;
    if (u.is_v4())
    {
        const std::uint32_t bits = u.to_v4().to_uint();
        for (const int length : impl_->v4.lengths)
        {
            const auto& map = impl_->v4.by_length[static_cast<std::size_t>(length)];
            if (const auto it = map.find(mask_v4(bits, length)); it != map.end())
                v.see(it->second, port);
        }
    }
    else
    {
        const v6_key key = key_of(u.to_v6());
        for (const int length : impl_->v6.lengths)
        {
            const auto& map = impl_->v6.by_length[static_cast<std::size_t>(length)];
            if (const auto it = map.find(mask_v6(key, length)); it != map.end())
                v.see(it->second, port);
        }
    }
    return impl_->result(v);
}

std::size_t rule_set::size() const noexcept { return impl_->texts.size(); }

const std::vector<std::uint16_t>& rule_set::host_loopback_ports() const noexcept
{
    return impl_->host_loopback_ports;
}

} // namespace sandbox::net
