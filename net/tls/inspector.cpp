// net/tls/inspector.cpp: the selection of inspected hosts and the read of a ClientHello.
#include "inspector.hpp"
#include "request_policy.hpp"
#include "trust.hpp"

#include "host/pattern.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <cerrno>
#include <map>
#include <span>
#include <vector>

#include <sys/socket.h>

namespace sandbox::net::tls {

namespace {

namespace asio = boost::asio;

constexpr std::size_t default_body_cap = 1024 * 1024;

outcome<std::vector<detail::host_pattern>> parse_all(const std::vector<std::string>& texts,
                                                     const char* field)
{
    std::vector<detail::host_pattern> out;
    for (const auto& t : texts)
    {
        auto p = detail::parse_host_pattern(t);
        if (!p)
        {
            failure f = p.error();
            f.diag.limit = field;
            return f;
        }
        out.push_back(std::move(*p));
    }
    return out;
}

// A host that request rules or injected headers name must be inspected: an exclusion that
// covers one would let its requests through unjudged (or without their header).
outcome<> check_not_excluded(const request_policy& requests,
                             const std::vector<detail::host_pattern>& excluded)
{
    for (const auto& [field, p] : requests.hosts())
    {
        canonical_host h;
        if (p->kind == detail::host_kind::ip)
            h.ip = p->address;
        else
            h.name = p->kind == detail::host_kind::wildcard_domain ? "a." + p->host : p->host;
        for (const auto& x : excluded)
            if (host_pattern_names(x, h))
                return make_failure(errc::validation,
                                    field + " names " + h.text() +
                                        ", which net.mitm.exclude_hosts leaves uninspected",
                                    field);
    }
    return {};
}

} // namespace

struct inspector::impl
{
    inspection_options opts;
    std::vector<detail::host_pattern> hosts, excluded;
    std::unique_ptr<certificate_authority> ca;
    std::unique_ptr<server_context> server;
    std::shared_ptr<origin_context> origins;        // shared with the process's other inspectors
    std::vector<detail::host_pattern> scoped_hosts; // opts.scoped_origins' hosts
    // By the scoped entries that name a host: the context trusting theirs too.
    std::map<std::vector<std::size_t>, std::shared_ptr<origin_context>> scoped_contexts;
    origin_sessions sessions; // this call's alone
    request_policy requests;
    std::size_t open_tunnels = 0; // holders of a tunnel_slot

    outcome<> add_scoped_origins(const inspection_options& o);
    // The scoped entries whose roots `host`'s origin may chain to.
    std::vector<std::size_t> entries_naming(const canonical_host& host) const
    {
        std::vector<std::size_t> out;
        for (std::size_t i = 0; i < scoped_hosts.size(); ++i)
            if (host_pattern_names(scoped_hosts[i], host))
                out.push_back(i);
        return out;
    }
    outcome<std::shared_ptr<origin_context>> context_for(std::vector<std::size_t> entries);

    asio::awaitable<relay_totals> tunnel(asio::ip::tcp::socket& client,
                                         asio::ip::tcp::socket& origin, std::string early,
                                         http_tunnel http, std::string rest,
                                         std::chrono::milliseconds idle_timeout);
};

inspector::inspector(std::unique_ptr<impl> p) noexcept : p_(std::move(p)) {}
inspector::~inspector() = default;

outcome<std::unique_ptr<inspector>> inspector::create(inspection_options opts)
{
    auto p = std::make_unique<impl>();
    auto hosts = parse_all(opts.hosts, "net.mitm.hosts");
    if (!hosts)
        return hosts.error();
    auto excluded = parse_all(opts.exclude_hosts, "net.mitm.exclude_hosts");
    if (!excluded)
        return excluded.error();
    auto requests = request_policy::compile(opts.requests, opts.inject_headers);
    if (!requests)
        return requests.error();
    if (auto r = check_not_excluded(*requests, *excluded); !r)
        return r.error();
    auto ca = certificate_authority::create(opts.ca);
    if (!ca)
        return ca.error();
    auto server = server_context::create(**ca);
    if (!server)
        return server.error();
    auto origins = shared_origin_context(opts.origins);
    if (!origins)
        return origins.error();
    p->requests = std::move(*requests);
    p->hosts = std::move(*hosts);
    p->excluded = std::move(*excluded);
    p->ca = std::move(*ca);
    p->server = std::move(*server);
    p->origins = std::move(*origins);
    p->opts = std::move(opts);
    if (auto r = p->add_scoped_origins(p->opts); !r)
        return r.error();
    return std::unique_ptr<inspector>(new inspector(std::move(p)));
}

// Each scoped entry's host pattern, and the context of each alone (which checks its PEM).
outcome<> inspector::impl::add_scoped_origins(const inspection_options& o)
{
    for (std::size_t i = 0; i < o.scoped_origins.size(); ++i)
    {
        const std::string field = "net.mitm.origin_ca_for[" + std::to_string(i) + "]";
        auto host = detail::parse_host_pattern(o.scoped_origins[i].host);
        if (!host)
        {
            failure f = host.error();
            f.diag.limit = field + ".host";
            return f;
        }
        scoped_hosts.push_back(std::move(*host));
        if (auto made = context_for({i}); !made)
        {
            failure f = made.error();
            if (f.code == errc::validation) // its PEM (else OpenSSL's own failure, as it is)
            {
                f.diag.message = "TLS inspection: " + field + " is not a PEM certificate list";
                f.diag.limit = field;
            }
            return f;
        }
    }
    return {};
}

outcome<std::shared_ptr<origin_context>>
inspector::impl::context_for(std::vector<std::size_t> entries)
{
    if (entries.empty())
        return origins;
    if (auto it = scoped_contexts.find(entries); it != scoped_contexts.end())
        return it->second;
    origin_trust trust = opts.origins;
    for (const std::size_t i : entries)
        trust.extra_roots_pem.push_back(opts.scoped_origins[i].pem);
    auto made = shared_origin_context(trust); // about 0.6 ms, once per set of entries
    if (made)
        scoped_contexts.emplace(std::move(entries), *made);
    return made;
}

std::string inspected_cap_rule(const inspector& in)
{
    return "max_inspected_tunnels " + std::to_string(in.options().limits.max_tunnels);
}

outcome<std::shared_ptr<inspector>> inspection_for(const mitm_policy& m, http_hooks hooks)
{
    if (!m.enabled)
        return std::shared_ptr<inspector>();
    if (m.origin_ca.empty() && m.origin_ca_for.empty() && system_roots()->empty())
        return make_failure(
            errc::not_available,
            "TLS inspection needs roots to verify origins: " + std::string(system_bundle_path) +
                " holds none (install ca-certificates, or give net.mitm.origin_ca)",
            "net.mitm");
    inspection_options o;
    o.hosts = m.hosts;
    o.exclude_hosts = m.exclude_hosts;
    o.relay_non_tls = m.relay_non_tls;
    o.requests = m.requests;
    o.inject_headers = m.inject_headers;
    o.hooks = std::move(hooks);
    if (m.inspect_bodies)
        o.body_cap =
            m.max_body_bytes > 0 ? static_cast<std::size_t>(m.max_body_bytes) : default_body_cap;
    o.origins.extra_roots_pem = m.origin_ca;
    o.scoped_origins = m.origin_ca_for;
    auto made = inspector::create(std::move(o));
    if (!made)
        return made.error();
    return std::shared_ptr<inspector>(std::move(*made));
}

bool inspector::selects(const canonical_host& host) const
{
    const auto named = [&](const std::vector<detail::host_pattern>& list) {
        for (const auto& p : list)
            if (host_pattern_names(p, host))
                return true;
        return false;
    };
    if (named(p_->excluded))
        return false;
    return p_->hosts.empty() || named(p_->hosts) || p_->requests.names(host);
}

tunnel_slot inspector::take_slot()
{
    if (p_->open_tunnels >= p_->opts.limits.max_tunnels)
        return {};
    return tunnel_slot(p_->open_tunnels);
}

certificate_authority& inspector::authority() noexcept
{
    return *p_->ca;
}
server_context& inspector::server() noexcept
{
    return *p_->server;
}
origin_context& inspector::origins() noexcept
{
    return *p_->origins;
}
const inspection_options& inspector::options() const noexcept
{
    return p_->opts;
}

// The tunnel's steps; an Asio wait refused after a cancellation (the proxy stopping) throws.
asio::awaitable<relay_totals> inspector::impl::tunnel(asio::ip::tcp::socket& client,
                                                      asio::ip::tcp::socket& origin,
                                                      std::string early, http_tunnel http,
                                                      std::string rest,
                                                      std::chrono::milliseconds idle_timeout)
{
    using verdict = hello_peek::verdict;
    const auto deadline = std::chrono::steady_clock::now() + opts.limits.handshake_timeout;
    const hello_peek hello = co_await read_client_hello(client, rest, deadline);
    relay_totals t;
    if (hello.what == verdict::not_tls && opts.relay_non_tls)
        co_return co_await relay(client, origin, std::move(rest), std::move(early), idle_timeout);
    t.tls.emplace();
    if (hello.what != verdict::tls)
    {
        t.reason = hello.what == verdict::not_tls     ? "not_tls"
                   : hello.what == verdict::too_large ? "client_hello_too_large"
                   : hello.what == verdict::malformed ? "bad_client_hello"
                                                      : "no_client_hello";
        boost::system::error_code ignored;
        client.close(ignored);
        origin.close(ignored);
        co_return t;
    }
    leg from_client{std::move(client), std::move(rest)};
    leg to_origin{std::move(origin), std::move(early)};
    inspect_limits limits = opts.limits;
    limits.idle_timeout = idle_timeout;
    auto trusted = context_for(entries_naming(http.host));
    if (!trusted)
    {
        t.reason = "internal";
        t.tls->detail = trusted.error().diag.message;
        co_return t;
    }
    const inspect_totals done =
        co_await inspect(std::move(from_client), std::move(to_origin), http.host, *server,
                         **trusted, limits, http, &sessions);
    t.up = done.up;
    t.down = done.down;
    t.reason = done.reason;
    t.tls->sni = escape_for_record(done.sni);
    t.tls->client_handshake = done.client_handshake;
    t.tls->origin_handshake = done.origin_handshake;
    t.tls->leaf_from_cache = done.leaf_from_cache;
    t.tls->detail = done.detail;
    co_return t;
}

asio::awaitable<relay_totals>
inspector::tunnel(asio::ip::tcp::socket& client, asio::ip::tcp::socket& origin, std::string early,
                  net::authority target, std::string rest, std::chrono::milliseconds idle_timeout,
                  std::uint64_t connection,
                  std::function<void(bool, std::string, net_http_record)> on_request)
{
    relay_totals t;
    http_tunnel http;
    http.policy = p_->requests.empty() ? nullptr : &p_->requests;
    http.host = std::move(target.host);
    http.port = target.port;
    http.on_request = std::move(on_request);
    http.hooks = p_->opts.hooks.empty() ? nullptr : &p_->opts.hooks;
    http.connection = connection;
    http.body_cap = p_->opts.body_cap;
    try
    {
        t = co_await p_->tunnel(client, origin, std::move(early), std::move(http), std::move(rest),
                                idle_timeout);
    }
    catch (const boost::system::system_error&)
    {
        t.reason = "stopped";
        t.tls.emplace();
    }
    boost::system::error_code ignored;
    client.close(ignored);
    origin.close(ignored);
    co_return t;
}

asio::awaitable<boost::system::error_code> readable(asio::ip::tcp::socket& s, const bool* stopping)
{
    if (stopping && *stopping)
        co_return asio::error::operation_aborted;
    auto [ec] = co_await s.async_wait(asio::ip::tcp::socket::wait_read,
                                      asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

asio::awaitable<hello_peek> read_client_hello(asio::ip::tcp::socket& s, std::string& first,
                                              std::chrono::steady_clock::time_point deadline,
                                              const bool* stopping)
{
    using namespace asio::experimental::awaitable_operators;
    const auto judge = [&] {
        return peek_client_hello(
            std::span(reinterpret_cast<const unsigned char*>(first.data()), first.size()));
    };
    hello_peek p = judge();
    asio::steady_timer timer(s.get_executor());
    timer.expires_at(deadline);
    std::array<char, 4096> buf;
    while (p.what == hello_peek::verdict::need_more)
    {
        // What has come already is taken without a wait (the common case: a whole hello in
        // one segment costs one read); else the next bytes or the deadline, whichever first.
        ssize_t n;
        while ((n = ::recv(s.native_handle(), buf.data(), buf.size(), MSG_DONTWAIT)) < 0 &&
               errno == EINTR)
        {}
        if (n > 0)
        {
            first.append(buf.data(), static_cast<std::size_t>(n));
            p = judge();
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            co_return p; // the client's end, or an error
        auto r = co_await (readable(s, stopping) ||
                           timer.async_wait(asio::as_tuple(asio::use_awaitable)));
        if (r.index() == 1 || std::get<0>(r))
            co_return p; // the deadline, the caller ending, or the socket failing
    }
    co_return p;
}

} // namespace sandbox::net::tls
