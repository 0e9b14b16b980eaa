// net/egress.hpp: the part of the egress proxy that turns a requested destination into
// an open connection, or a refusal: rules, SSRF guard, one lookup, dial of vetted literals
// only (or through the configured upstream proxy), and exactly one decision record.
// The fronts (HTTP, SOCKS5) parse requests and map `open_status` to their replies.
#ifndef SANDBOX_LIB_NET_EGRESS_HPP
#define SANDBOX_LIB_NET_EGRESS_HPP

#include "address_guard.hpp"
#include "host/canonical.hpp"
#include "relay.hpp"
#include "resolver.hpp"
#include "rule_set.hpp"

#include <sandbox/failure.hpp>
#include <sandbox/http_hooks.hpp>
#include <sandbox/net_policy.hpp>
#include <sandbox/net_proxy.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sandbox::net::tls {
class inspector;
} // namespace sandbox::net::tls

namespace sandbox::net {

/// \brief `net_policy::proxy` parsed: `http://[user:pass@]host:port` (Basic) or
/// `socks5://[user[:pass]@]host:port` (RFC 1929).
struct upstream_proxy
{
    enum class kind
    {
        http,
        socks5,
    };
    kind scheme = kind::http;
    canonical_host host{};
    std::uint16_t port = 0;
    std::optional<std::string> user{};
    std::string password{};
};

/// `errc::validation`, limit "net.proxy", for a URL that is not one of the two forms.
outcome<upstream_proxy> parse_upstream(std::string_view url);

/// \brief Everything one sandbox's egress needs, built once per exec or session.
struct egress_config
{
    net_mode mode = net_mode::allow_list;
    rule_set rules{};
    std::optional<upstream_proxy> upstream{};
    std::shared_ptr<resolver> dns{};
    address_guard guard{};
    /// Under `net_mode::proxy`: the rules hold an allow rule, so that a destination no allow
    /// rule matches is refused ("no_rule") as under allow_list. Without one, proxy mode
    /// sends everything no deny rule or guard refuses to the upstream.
    bool has_allow_rules = false;
    net_limits limits{};
    /// The sandbox's connection budget (shared with its other execs and sessions); empty:
    /// only `limits.max_tunnels` and the process's budget count.
    std::shared_ptr<tunnel_budget> sandbox_budget{};
    /// Gets every record, on the egress's executor. May be empty.
    net_record_handler on_record{};
    /// TLS inspection of the CONNECT hosts it selects (null: none; every tunnel is relayed).
    std::shared_ptr<tls::inspector> inspection{};
    /// The server name of the tunnels inspection does not take (`net_policy::sni_check`).
    sni_mode sni = sni_mode::record;
};

/// \brief Builds the config of `p` (mode allow_list or proxy): compiles the rules, parses
/// the upstream, makes the resolver from `o`, reads the host's interface addresses; under
/// `p.mitm`, the call's inspection with its `hooks`. `errc::validation` with the field for
/// bad input.
SANDBOX_DECL outcome<egress_config> make_egress_config(boost::asio::any_io_executor ex,
                                                       const net_policy& p, const proxy_options& o,
                                                       net_record_handler on_record,
                                                       http_hooks hooks = {});

/// \brief What became of a request; the fronts map it to a reply (HTTP status / SOCKS REP).
enum class open_status
{
    connected,        ///< 200 / REP 00
    bad_request,      ///< 400 / REP 01 (bad host or port, zone id, ...)
    denied,           ///< 403 / REP 02 (rule, mode default, address guard)
    resolve_failed,   ///< 502 / REP 04 (NXDOMAIN, no address, server failure)
    resolve_timeout,  ///< 504 / REP 04
    dial_refused,     ///< 502 / REP 05
    dial_failed,      ///< 502 / REP 04 (unreachable, reset)
    dial_timeout,     ///< 504 / REP 04 (SOCKS has no better code)
    upstream_refused, ///< 502 / REP 02 or 05 (the upstream answered non-200, 407 included)
    upstream_failed,  ///< 502 / REP 01 (the upstream broke the protocol or closed)
    tunnel_cap,       ///< 503 / REP 01 (too many connections open)
    unsupported,      ///< 501 / REP 07 (a scheme or command this proxy does not forward)
};

/// "connected", "bad_request", ... (also the `reason` class of failures).
const char* to_string(open_status s) noexcept;

/// \brief An opened (or refused) destination.
struct opened
{
    open_status status = open_status::denied;
    /// For a refusal: a one-line reason for the reply body, naming the class and never the
    /// resolved address ("destination not allowed: loopback address").
    std::string message{};
    /// Connected when `status == connected`: to the destination, or to the upstream (whose
    /// CONNECT / SOCKS5 handshake is done, unless `via_http_upstream`).
    boost::asio::ip::tcp::socket socket;
    /// Bytes the upstream sent after its reply, to be given to the client first.
    std::string early_bytes{};
    /// Plain HTTP through an HTTP upstream: send the request in absolute form to `socket`
    /// with `upstream_authorization` (if not empty) as its Proxy-Authorization.
    bool via_http_upstream = false;
    std::string upstream_authorization{};
    /// The decision record as emitted; the base of the `closed` one.
    net_record record{};
};

/// \brief One sandbox's egress. Lives on one executor (the proxy's); not thread-safe.
class egress
{
public:
    /// Exported (SANDBOX_DECL) for the bwrap backend, which makes one per call.
    SANDBOX_DECL egress(boost::asio::any_io_executor ex, egress_config cfg);

    /// \brief Decides on `target` (canonical) for `protocol`, then resolves (once, only an
    /// allowed name, never under an upstream), guards every answer, and dials the vetted
    /// literals in order within `dial_timeout` (or the upstream, and asks it for `target`).
    /// Emits the decision record (verdict allowed only once connected). `requested` is the
    /// host as the client wrote it (recorded, escaped).
    boost::asio::awaitable<opened> open(net_protocol protocol, std::string requested,
                                        authority target);
    /// \brief Records a request refused before it had a destination (unparsable, over the
    /// tunnel cap, an unsupported command) and returns the refusal to send. `rule` goes to
    /// the record (for a cap: which one, "max_tunnels 512").
    opened refuse(net_protocol protocol, std::string requested, open_status why,
                  std::string message, std::string rule = {});
    /// \brief Emits a `request` record: one HTTP request inside the inspected tunnel that
    /// `decision` opened.
    void request(const net_record& decision, bool allowed, std::string reason,
                 net_http_record http);
    /// \brief Emits the `closed` record of a connection `open` connected, from what its
    /// relay (or inspection) moved and why it ended.
    void closed(const net_record& decision, relay_totals t);

    const net_limits& limits() const noexcept { return cfg_.limits; }
    const egress_config& config() const noexcept { return cfg_; }
    boost::asio::any_io_executor get_executor() const noexcept { return ex_; }

private:
    /// The rules' and the guard's word on a destination, before any lookup.
    struct verdict
    {
        bool allowed = false;
        std::string reason{};  ///< "rule", "mode", "no_rule", an address class
        std::string message{}; ///< for a refusal
        std::string rule{};
    };

    bool needs_allow_rule() const noexcept;
    verdict judge_address(const address& a, std::uint16_t port) const;
    verdict decide(const authority& target) const;
    verdict decide_host_loopback(const rule_match& m, std::uint16_t port) const;
    boost::asio::awaitable<opened> dial_host_loopback(net_record r, std::uint16_t port);
    net_record begin(net_protocol protocol, std::string_view requested, std::string host,
                     std::uint16_t port);
    void emit(const net_record& r) const;
    opened finish(net_record r, open_status s, std::string message, std::string reason,
                  boost::asio::ip::tcp::socket socket);
    boost::asio::awaitable<opened> resolve_and_dial(net_record r, const authority& target,
                                                    std::string reason);
    boost::asio::awaitable<opened>
    dial(net_record r, std::vector<boost::asio::ip::tcp::endpoint> eps, std::string reason);
    boost::asio::awaitable<opened> through_upstream(net_record r, net_protocol protocol,
                                                    const authority& target, std::string reason);

    boost::asio::any_io_executor ex_;
    egress_config cfg_;
    std::uint64_t next_connection_ = 1;
    /// When each connected request was decided (for its `closed` record's duration).
    std::unordered_map<std::uint64_t, std::chrono::steady_clock::time_point> opened_at_{};
};

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_EGRESS_HPP
