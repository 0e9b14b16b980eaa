// net/egress.cpp: see egress.hpp.
//
// The decision, in order (every branch emits exactly one decision record):
// - an IP literal: an IP deny rule refuses ("rule"); an address the guard does not class as
//   global is refused with its class unless an IP/CIDR allow rule covers it; then allow_list
//   (and proxy mode with allow rules) needs an IP allow rule ("no_rule");
// - a name: a name deny rule refuses with no lookup; `localhost` and `*.localhost` are
//   loopback with no lookup; allow_list (and proxy mode with allow rules) needs a name allow
//   rule ("no_rule"), again with no lookup;
// - under an upstream proxy nothing is resolved here: the upstream's address is dialled (the
//   guard does not judge it) and asked for the host; otherwise the name is resolved once,
//   every answer is judged like a literal (IP deny rule, guard, IP allow rule), and only the
//   answers that passed are dialled, in order, within one dial timeout.
#include "egress.hpp"

#include "deadline.hpp"
#include "proxy_url.hpp"
#include "tls/inspector.hpp"
#include "upstream.hpp"

#include <sandbox/host_port.hpp>

#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <cstdio>

namespace sandbox::net {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;

const char* to_string(open_status s) noexcept
{
    switch (s)
    {
    case open_status::connected: return "connected";
    case open_status::bad_request: return "bad_request";
    case open_status::denied: return "denied";
    case open_status::resolve_failed: return "resolve_failed";
    case open_status::resolve_timeout: return "resolve_timeout";
    case open_status::dial_refused: return "dial_refused";
    case open_status::dial_failed: return "dial_failed";
    case open_status::dial_timeout: return "dial_timeout";
    case open_status::upstream_refused: return "upstream_refused";
    case open_status::upstream_failed: return "upstream_failed";
    case open_status::tunnel_cap: return "tunnel_cap";
    case open_status::unsupported: return "unsupported";
    }
    return "unknown";
}

// ---------------------------------------------------------------------------------------
// Configuration

outcome<upstream_proxy> parse_upstream(std::string_view url)
{
    auto parsed = detail::parse_proxy_url(url); // the policy's validation reads it alike
    if (!parsed)
        return parsed.error();
    upstream_proxy out;
    out.scheme = parsed->scheme == detail::proxy_url::kind::socks5 ? upstream_proxy::kind::socks5
                                                                   : upstream_proxy::kind::http;
    out.host = std::move(parsed->host);
    out.port = parsed->port;
    out.user = std::move(parsed->user);
    out.password = std::move(parsed->password);
    return out;
}

namespace {

outcome<> check_limits(const net_limits& l)
{
    using std::chrono::milliseconds;
    const std::pair<milliseconds, const char*> times[] = {
        {l.head_timeout, "limits.head_timeout"},
        {l.dial_timeout, "limits.dial_timeout"},
        {l.dns_timeout, "limits.dns_timeout"},
        {l.socks_handshake_timeout, "limits.socks_handshake_timeout"},
        {l.tunnel_idle_timeout, "limits.tunnel_idle_timeout"},
        {l.client_hello_timeout, "limits.client_hello_timeout"},
    };
    // At most 30 days: a deadline is `now + t`, which a larger one would overflow.
    constexpr milliseconds longest = std::chrono::hours(24 * 30);
    for (const auto& [t, name] : times)
        if (t <= milliseconds::zero() || t > longest)
            return make_failure(errc::validation,
                                std::string(name) + " must be positive and at most 30 days", name);
    if (l.max_head_bytes == 0)
        return make_failure(errc::validation, "limits.max_head_bytes must be positive",
                            "limits.max_head_bytes");
    if (l.max_tunnels == 0)
        return make_failure(errc::validation, "limits.max_tunnels must be positive",
                            "limits.max_tunnels");
    return {};
}

bool has_allow_rules(const net_policy& p)
{
    return !p.allow_hosts.empty() ||
           std::any_of(p.rules.begin(), p.rules.end(),
                       [](const net_rule& r) { return r.action == net_action::allow; });
}

} // namespace

outcome<egress_config> make_egress_config(asio::any_io_executor ex, const net_policy& p,
                                          const proxy_options& o, net_record_handler on_record,
                                          http_hooks hooks)
{
    if (p.mode != net_mode::allow_list && p.mode != net_mode::proxy)
        return make_failure(errc::validation,
                            "the egress proxy serves net modes allow_list and proxy only",
                            "net.mode");
    egress_config cfg;
    cfg.mode = p.mode;
    if (auto c = check_limits(o.limits); !c)
        return c.error();
    cfg.limits = o.limits;
    cfg.sandbox_budget = o.sandbox_budget;
    auto rules = rule_set::compile(p);
    if (!rules)
        return rules.error();
    cfg.rules = std::move(*rules);
    cfg.has_allow_rules = has_allow_rules(p);
    if (p.mode == net_mode::proxy && p.proxy.empty())
        return make_failure(errc::validation, "net mode proxy needs an upstream proxy URL",
                            "net.proxy");
    if (p.mode == net_mode::allow_list && !p.proxy.empty())
        return make_failure(errc::validation, "an upstream proxy needs net mode proxy",
                            "net.proxy");
    if (!p.proxy.empty())
    {
        auto up = parse_upstream(p.proxy);
        if (!up)
            return up.error();
        cfg.upstream = std::move(*up);
    }
    auto dns = make_resolver(ex, o, p.resolve);
    if (!dns)
        return dns.error();
    cfg.dns = std::move(*dns);
    cfg.guard = address_guard::with_host_interfaces();
    cfg.on_record = std::move(on_record);
    cfg.sni = p.sni_check;
    if (p.mitm)
    {
        auto inspection = tls::inspection_for(*p.mitm, std::move(hooks));
        if (!inspection)
            return inspection.error();
        cfg.inspection = std::move(*inspection);
    }
    return cfg;
}

// ---------------------------------------------------------------------------------------
// Records

namespace {} // namespace

std::string escape_for_record(std::string_view s, std::size_t cap)
{
    std::string out;
    for (unsigned char c : s)
    {
        char piece[5] = {static_cast<char>(c), 0, 0, 0, 0};
        if (c < 0x20 || c >= 0x7f || c == '\\')
            std::snprintf(piece, sizeof piece, "\\x%02x", c);
        const std::string_view p(piece);
        if (out.size() + p.size() > cap)
            break;
        out += p;
    }
    return out;
}

namespace {

std::string endpoint_text(const tcp::endpoint& ep)
{
    const auto a = ep.address();
    std::string out; // (appended, not '+': GCC 12's false -Wrestrict in Release)
    if (a.is_v6())
        out.append("[").append(a.to_string()).append("]");
    else
        out = a.to_string();
    return out.append(":").append(std::to_string(ep.port()));
}

std::string class_message(address_class c)
{
    return std::string("destination not allowed: ") + to_string(c) + " address";
}

} // namespace

egress::egress(asio::any_io_executor ex, egress_config cfg)
    : ex_(std::move(ex)), cfg_(std::move(cfg))
{}

net_record egress::begin(net_protocol protocol, std::string_view requested, std::string host,
                         std::uint16_t port)
{
    net_record r;
    r.event = net_event::decision;
    r.connection = next_connection_++;
    r.protocol = protocol;
    r.requested_host = escape_for_record(requested);
    r.host = std::move(host);
    r.port = port;
    return r;
}

void egress::emit(const net_record& r) const
{
    if (cfg_.on_record)
        cfg_.on_record(r);
}

opened egress::finish(net_record r, open_status s, std::string message, std::string reason,
                      tcp::socket socket)
{
    opened o{s, std::move(message), std::move(socket)};
    r.verdict = s == open_status::connected ? net_verdict::allowed
                : s == open_status::denied  ? net_verdict::denied
                                            : net_verdict::failed;
    r.reason =
        s == open_status::connected || s == open_status::denied ? std::move(reason) : to_string(s);
    if (s == open_status::connected)
        opened_at_[r.connection] = std::chrono::steady_clock::now();
    else
        o.socket.close();
    o.record = std::move(r);
    emit(o.record);
    return o;
}

opened egress::refuse(net_protocol protocol, std::string requested, open_status why,
                      std::string message, std::string rule)
{
    // What the parser did not accept is not recorded: it may carry credentials
    // (user:pass@host) or tokens (host/path?token=...). Only its size is.
    if (why == open_status::bad_request)
        requested = "(unparsed: " + std::to_string(requested.size()) + " bytes)";
    auto r = begin(protocol, requested, {}, 0);
    r.rule = std::move(rule);
    return finish(std::move(r), why, std::move(message), to_string(why), tcp::socket(ex_));
}

void egress::request(const net_record& decision, bool allowed, std::string reason,
                     net_http_record http)
{
    net_record r = decision;
    r.event = net_event::request;
    r.verdict = allowed ? net_verdict::allowed : net_verdict::denied;
    r.reason = std::move(reason);
    r.http = std::move(http);
    emit(r);
}

void egress::closed(const net_record& decision, relay_totals t)
{
    net_record r = decision;
    r.event = net_event::closed;
    r.bytes_up = t.up;
    r.bytes_down = t.down;
    r.reason = std::move(t.reason);
    r.tls = std::move(t.tls);
    r.sni = std::move(t.sni);
    r.sni_mismatch = t.sni_mismatch;
    r.duration = std::chrono::nanoseconds{0};
    if (auto it = opened_at_.find(decision.connection); it != opened_at_.end())
    {
        r.duration = std::chrono::steady_clock::now() - it->second;
        opened_at_.erase(it);
    }
    emit(r);
}

// ---------------------------------------------------------------------------------------
// The decision

egress::verdict egress::judge_address(const address& a, std::uint16_t port) const
{
    const auto m = cfg_.rules.match_ip(a, port);
    if (m.matched && m.action == net_action::deny)
        return verdict{false, "rule", "destination not allowed by rule", m.rule};
    const bool allowed_by_rule = m.matched && m.action == net_action::allow;
    const address_class c = cfg_.guard.classify(a);
    if (c != address_class::global && !allowed_by_rule)
        return verdict{false, to_string(c), class_message(c), {}};
    return verdict{true, allowed_by_rule ? "rule" : "mode", {}, allowed_by_rule ? m.rule : ""};
}

bool egress::needs_allow_rule() const noexcept
{
    return cfg_.mode == net_mode::allow_list || cfg_.has_allow_rules;
}

egress::verdict egress::decide(const authority& target) const
{
    const auto& h = target.host;
    if (h.is_ip())
    {
        auto v = judge_address(unmapped(*h.ip), target.port);
        if (v.allowed && needs_allow_rule() && v.rule.empty())
            return verdict{false, "no_rule", "destination not allowed: no rule allows it", {}};
        return v;
    }
    const auto m = cfg_.rules.match_name(h.name, target.port);
    if (m.matched && m.action == net_action::deny)
        return verdict{false, "rule", "destination not allowed by rule", m.rule};
    if (h.name == host_loopback_name)
        return decide_host_loopback(m, target.port);
    if (is_localhost_name(h.name))
        return verdict{false, "loopback", class_message(address_class::loopback), {}};
    const bool allowed_by_rule = m.matched && m.action == net_action::allow;
    if (!allowed_by_rule && needs_allow_rule())
        return verdict{false,
                       "no_rule",
                       "destination not allowed: no rule allows " +
                           format_authority(h, target.port),
                       {}};
    return verdict{true, allowed_by_rule ? "rule" : "mode", {}, allowed_by_rule ? m.rule : ""};
}

// The host's loopback by its reserved name: only an allow rule naming it, on this port or on
// every port, opens it (a rule for a parent domain does not, nor does proxy mode's default).
egress::verdict egress::decide_host_loopback(const rule_match& m, std::uint16_t port) const
{
    const auto& ports = cfg_.rules.host_loopback_ports();
    if (std::find(ports.begin(), ports.end(), port) == ports.end() &&
        std::find(ports.begin(), ports.end(), 0) == ports.end())
        return verdict{false,
                       "no_rule",
                       "destination not allowed: " + std::string(host_loopback_name) +
                           " (the host's loopback) needs an allow rule naming it, such as "
                           "allow_hosts " +
                           std::string(host_loopback_name) + ":" + std::to_string(port),
                       {}};
    std::string rule = m.matched ? m.rule : "allow " + std::string(host_loopback_name);
    return verdict{true, "rule", {}, std::move(rule)};
}

awaitable<opened> egress::open(net_protocol protocol, std::string requested, authority target)
{
    auto r = begin(protocol, requested, target.host.text(), target.port);
    if (target.port == 0)
        co_return finish(std::move(r), open_status::bad_request, "port 0 is not a destination", {},
                         tcp::socket(ex_));
    const auto v = decide(target);
    r.rule = v.rule;
    if (!v.allowed)
        co_return finish(std::move(r), open_status::denied, v.message, v.reason, tcp::socket(ex_));
    if (!target.host.is_ip() && target.host.name == host_loopback_name)
        co_return co_await dial_host_loopback(std::move(r), target.port);
    if (cfg_.mode == net_mode::proxy && cfg_.upstream)
        co_return co_await through_upstream(std::move(r), protocol, target, v.reason);
    if (target.host.is_ip())
    {
        std::vector<tcp::endpoint> literal(1,
                                           tcp::endpoint(unmapped(*target.host.ip), target.port));
        co_return co_await dial(std::move(r), std::move(literal), v.reason);
    }
    co_return co_await resolve_and_dial(std::move(r), target, v.reason);
}

// ---------------------------------------------------------------------------------------
// Lookup and dial

awaitable<opened> egress::resolve_and_dial(net_record r, const authority& target,
                                           std::string reason)
{
    if (!cfg_.dns)
        co_return finish(std::move(r), open_status::resolve_failed, "no resolver configured", {},
                         tcp::socket(ex_));
    const resolve_result res = co_await cfg_.dns->resolve(target.host.name);
    if (res.ec == asio::error::timed_out)
        co_return finish(std::move(r), open_status::resolve_timeout,
                         "lookup of " + target.host.name + " timed out", {}, tcp::socket(ex_));
    if (res.ec || res.addresses.empty())
        co_return finish(std::move(r), open_status::resolve_failed,
                         "could not resolve " + target.host.name, {}, tcp::socket(ex_));
    std::vector<tcp::endpoint> kept;
    std::optional<verdict> first_refusal;
    for (const auto& raw : res.addresses)
    {
        const address a = unmapped(raw);
        r.resolved.push_back(a.to_string());
        auto v = judge_address(a, target.port);
        if (v.allowed)
            kept.emplace_back(a, target.port);
        else if (!first_refusal)
            first_refusal = std::move(v);
    }
    if (kept.empty())
        co_return finish(std::move(r), open_status::denied,
                         "destination not allowed: " + target.host.name + " resolved only to " +
                             first_refusal->reason + " addresses",
                         first_refusal->reason, tcp::socket(ex_));
    co_return co_await dial(std::move(r), std::move(kept), std::move(reason));
}

// The host's 127.0.0.1 and ::1 at `port`, in that order: an explicit rule named them, so the
// guard does not judge them; an IP deny rule still refuses one.
awaitable<opened> egress::dial_host_loopback(net_record r, std::uint16_t port)
{
    std::vector<tcp::endpoint> eps;
    std::optional<verdict> refusal;
    for (const address& a :
         {address(asio::ip::address_v4::loopback()), address(asio::ip::address_v6::loopback())})
    {
        r.resolved.push_back(a.to_string());
        const auto m = cfg_.rules.match_ip(a, port);
        if (m.matched && m.action == net_action::deny)
            refusal = verdict{false, "rule", "destination not allowed by rule", m.rule};
        else
            eps.emplace_back(a, port);
    }
    if (eps.empty())
    {
        r.rule = refusal->rule;
        co_return finish(std::move(r), open_status::denied, refusal->message, refusal->reason,
                         tcp::socket(ex_));
    }
    co_return co_await dial(std::move(r), std::move(eps), "rule");
}

namespace {

struct dial_outcome
{
    boost::system::error_code ec{};
    std::size_t index = 0; ///< the endpoint connected to (or tried last)
};

/// Tries each endpoint in order until one connects.
awaitable<dial_outcome> connect_each(tcp::socket& s, const std::vector<tcp::endpoint>& eps,
                                     std::size_t& tried)
{
    dial_outcome out;
    for (std::size_t i = 0; i < eps.size(); ++i)
    {
        tried = i;
        boost::system::error_code ignored;
        s.close(ignored);
        auto [ec] = co_await s.async_connect(eps[i], use_tuple);
        out = dial_outcome{ec, i};
        if (!ec)
            break;
    }
    co_return out;
}

open_status dial_status(const boost::system::error_code& ec)
{
    return ec == asio::error::connection_refused ? open_status::dial_refused
                                                 : open_status::dial_failed;
}

} // namespace

awaitable<opened> egress::dial(net_record r, std::vector<tcp::endpoint> eps, std::string reason)
{
    tcp::socket s(ex_);
    std::size_t tried = 0;
    auto done = co_await within(connect_each(s, eps, tried), cfg_.limits.dial_timeout);
    r.dialed = endpoint_text(eps[done ? done->index : tried]);
    if (!done)
        co_return finish(std::move(r), open_status::dial_timeout,
                         "connect timed out after " +
                             std::to_string(cfg_.limits.dial_timeout.count()) + " ms",
                         {}, std::move(s));
    if (done->ec)
    {
        const auto st = dial_status(done->ec);
        co_return finish(std::move(r), st,
                         st == open_status::dial_refused
                             ? std::string("connection refused by the destination")
                             : "could not connect to the destination: " + done->ec.message(),
                         {}, std::move(s));
    }
    co_return finish(std::move(r), open_status::connected, {}, std::move(reason), std::move(s));
}

// ---------------------------------------------------------------------------------------
// Upstream proxy

namespace {

struct upstream_outcome
{
    upstream_reply reply{};
    std::string dialed{};
};

/// Finds the upstream's endpoints: its literal, or its name through the resolver (the
/// configured upstream is exempt from the guard).
awaitable<std::vector<tcp::endpoint>> upstream_endpoints(const upstream_proxy& up, resolver* dns)
{
    std::vector<tcp::endpoint> eps;
    if (up.host.is_ip())
        eps.emplace_back(unmapped(*up.host.ip), up.port);
    else if (dns)
    {
        const auto res = co_await dns->resolve(up.host.name);
        for (const auto& a : res.addresses)
            eps.emplace_back(unmapped(a), up.port);
    }
    co_return eps;
}

awaitable<upstream_outcome> reach_upstream(tcp::socket& s, const upstream_proxy& up, resolver* dns,
                                           net_protocol protocol, const authority& target)
{
    upstream_outcome out;
    const auto eps = co_await upstream_endpoints(up, dns);
    if (eps.empty())
    {
        out.reply = upstream_reply{
            open_status::upstream_failed, "could not resolve the upstream proxy", {}};
        co_return out;
    }
    std::size_t tried = 0;
    const auto d = co_await connect_each(s, eps, tried);
    out.dialed = endpoint_text(eps[d.index]);
    if (d.ec)
        out.reply = upstream_reply{open_status::upstream_failed,
                                   "could not connect to the upstream proxy: " + d.ec.message(),
                                   {}};
    else if (up.scheme == upstream_proxy::kind::socks5)
        out.reply = co_await socks5_connect(s, up, target);
    else if (protocol == net_protocol::http)
        out.reply = upstream_reply{open_status::connected, {}, {}};
    else
        out.reply = co_await http_connect(s, up, target);
    co_return out;
}

} // namespace

awaitable<opened> egress::through_upstream(net_record r, net_protocol protocol,
                                           const authority& target, std::string reason)
{
    const upstream_proxy& up = *cfg_.upstream;
    tcp::socket s(ex_);
    auto done = co_await within(reach_upstream(s, up, cfg_.dns.get(), protocol, target),
                                cfg_.limits.dial_timeout);
    if (!done)
    {
        r.dialed = format_authority(up.host, up.port);
        co_return finish(std::move(r), open_status::dial_timeout,
                         "upstream proxy did not answer within " +
                             std::to_string(cfg_.limits.dial_timeout.count()) + " ms",
                         {}, std::move(s));
    }
    r.dialed = std::move(done->dialed);
    auto& reply = done->reply;
    auto o = finish(std::move(r), reply.status, std::move(reply.message), std::move(reason),
                    std::move(s));
    o.early_bytes = std::move(reply.early_bytes);
    if (o.status == open_status::connected && up.scheme == upstream_proxy::kind::http &&
        protocol == net_protocol::http)
    {
        o.via_http_upstream = true;
        o.upstream_authorization = basic_authorization(up);
    }
    co_return o;
}

} // namespace sandbox::net
