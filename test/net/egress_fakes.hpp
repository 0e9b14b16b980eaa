// test/net/egress_fakes.hpp: pieces the egress and SOCKS5 tests share: a scripted resolver
// that counts its calls and can change its answers, an egress config builder, records
// collected, and loopback listeners.
#ifndef SANDBOX_TEST_NET_EGRESS_FAKES_HPP
#define SANDBOX_TEST_NET_EGRESS_FAKES_HPP

#include "net/egress.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandbox::net::test {

namespace asio = boost::asio;
using asio::ip::tcp;

/// Answers from a script: per name, one answer per call (the last one repeats).
class scripted_resolver final : public resolver
{
public:
    asio::awaitable<resolve_result> resolve(std::string name) override
    {
        ++calls;
        auto it = script.find(name);
        if (it == script.end() || it->second.empty())
        {
            resolve_result none;
            none.ec = asio::error::host_not_found;
            co_return none;
        }
        std::size_t& n = per_name[name];
        const std::size_t i = std::min(n, it->second.size() - 1);
        ++n;
        co_return it->second[i];
    }
    /// Every call for `name` answers `addresses`.
    void pin(const std::string& name, const std::vector<std::string>& addresses)
    {
        script[name] = {answer(addresses)};
    }
    static resolve_result answer(const std::vector<std::string>& addresses)
    {
        resolve_result r;
        for (const auto& a : addresses)
            r.addresses.push_back(asio::ip::make_address(a));
        return r;
    }

    std::map<std::string, std::vector<resolve_result>> script;
    std::map<std::string, std::size_t> per_name;
    std::size_t calls = 0;
};

inline net_rule allow(std::string host, int port = 0)
{
    return net_rule{net_action::allow, std::move(host), port};
}
inline net_rule deny(std::string host, int port = 0)
{
    return net_rule{net_action::deny, std::move(host), port};
}

/// An egress config with `rules`, the scripted resolver, the real guard (this host's
/// interfaces) and every record collected.
struct egress_rig
{
    std::shared_ptr<scripted_resolver> dns = std::make_shared<scripted_resolver>();
    std::shared_ptr<std::vector<net_record>> records = std::make_shared<std::vector<net_record>>();
    egress_config cfg;

    explicit egress_rig(std::vector<net_rule> rules, net_mode mode = net_mode::allow_list)
    {
        net_policy p;
        p.mode = mode;
        p.rules = std::move(rules);
        cfg.mode = mode;
        cfg.rules = rule_set::compile(p).value();
        cfg.has_allow_rules = false;
        for (const auto& r : p.rules)
            cfg.has_allow_rules = cfg.has_allow_rules || r.action == net_action::allow;
        cfg.dns = dns;
        cfg.guard = address_guard::with_host_interfaces();
        cfg.on_record = [recs = records](const net_record& r) { recs->push_back(r); };
    }
    std::shared_ptr<egress> make(asio::any_io_executor ex) const
    {
        return std::make_shared<egress>(std::move(ex), cfg);
    }
};

/// A destination as a client would name it.
inline authority target(std::string_view host, std::uint16_t port)
{
    return authority{canonicalize_host(host).value(), port};
}

/// Runs `body` on a fresh io_context to its end (and everything it left running).
template <class F> void run_on(asio::io_context& ctx, F body)
{
    std::exception_ptr failed;
    asio::co_spawn(ctx, std::move(body), [&](std::exception_ptr e) { failed = e; });
    ctx.run();
    if (failed)
        std::rethrow_exception(failed);
}

/// A listener on `ip` (port 0: any).
inline tcp::acceptor listen_on(asio::io_context& ctx, const std::string& ip, std::uint16_t port = 0)
{
    tcp::acceptor a(ctx);
    const tcp::endpoint ep(asio::ip::make_address(ip), port);
    a.open(ep.protocol());
    a.bind(ep);
    a.listen();
    return a;
}

/// Two listeners on one port, at `first` and `second` (tries a few ports).
inline std::pair<tcp::acceptor, tcp::acceptor>
listen_pair(asio::io_context& ctx, const std::string& first, const std::string& second)
{
    for (int i = 0;; ++i)
    {
        auto a = listen_on(ctx, first);
        try
        {
            auto b = listen_on(ctx, second, a.local_endpoint().port());
            return {std::move(a), std::move(b)};
        }
        catch (const boost::system::system_error&)
        {
            if (i == 20)
                throw;
        }
    }
}

/// True when a connection is waiting on `a` (accepted and dropped).
inline bool saw_connection(tcp::acceptor& a)
{
    a.non_blocking(true);
    boost::system::error_code ec;
    tcp::socket s = a.accept(ec);
    return !ec;
}

/// A port on 127.0.0.1 where nothing listens.
inline std::uint16_t free_port(asio::io_context& ctx, const std::string& ip)
{
    auto a = listen_on(ctx, ip);
    return a.local_endpoint().port();
}

} // namespace sandbox::net::test

#endif // SANDBOX_TEST_NET_EGRESS_FAKES_HPP
