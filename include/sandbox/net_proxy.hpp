// sandbox/net_proxy.hpp: the host-side egress proxy behind `net_mode::allow_list` and
// `net_mode::proxy`: its limits, its resolver settings, and the record it gives for every
// connection a sandboxed command makes through it.
#ifndef SANDBOX_NET_PROXY_HPP
#define SANDBOX_NET_PROXY_HPP

#include <sandbox/config.hpp>

#include <boost/json/object.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sandbox {

/// \brief Timeouts and limits of the egress proxy (per exec or session). Zero is refused.
struct net_limits
{
    /// From a connection's first byte until its request head (HTTP) is complete.
    std::chrono::milliseconds head_timeout{30'000};
    /// One outbound connect, over every vetted address tried.
    std::chrono::milliseconds dial_timeout{10'000};
    /// One name lookup.
    std::chrono::milliseconds dns_timeout{5'000};
    /// A SOCKS5 greeting, authentication and request.
    std::chrono::milliseconds socks_handshake_timeout{10'000};
    /// A tunnel with no byte in either direction for this long is closed.
    std::chrono::milliseconds tunnel_idle_timeout{600'000};
    /// A tunnel's ClientHello, whole, when its server name is read (`net_policy::sni_check`;
    /// under `deny` the tunnel is then closed, "no_client_hello").
    std::chrono::milliseconds client_hello_timeout{10'000};
    /// Largest HTTP request head (request line and headers); larger is answered 431.
    std::size_t max_head_bytes = 64 * 1024;
    /// Connections open at once through the proxy of one exec or session; more are answered
    /// 503 (SOCKS5: reply 01) with a `tunnel_cap` record, and the open ones keep working.
    std::size_t max_tunnels = 512;
    /// Connections open at once through the proxies of every exec and session of one runner
    /// (one sandbox): its `tunnel_budget`. 0: a quarter of the process's budget (see
    /// `process_tunnel_budget`), at least 64.
    std::size_t max_sandbox_tunnels = 0;
};

/// \brief A count of open proxy connections shared by many execs and sessions: one per
/// runner (a sandbox), and the process's own behind every runner. Each connection through a
/// proxy holds two descriptors (the client's and the destination's) for its whole life, so
/// a budget is what keeps one sandbox's command from spending the descriptors every other
/// client of the process needs. Thread-safe.
class tunnel_budget
{
public:
    /// At most `limit` connections at once (0 is taken as 1).
    SANDBOX_DECL explicit tunnel_budget(std::size_t limit) noexcept;
    tunnel_budget(const tunnel_budget&) = delete;
    tunnel_budget& operator=(const tunnel_budget&) = delete;

    /// \brief Takes one connection's share; false (nothing taken) when the budget is spent.
    SANDBOX_DECL bool try_acquire() noexcept;
    /// Gives back one share taken by `try_acquire`.
    SANDBOX_DECL void release() noexcept;
    std::size_t limit() const noexcept { return limit_; }
    std::size_t in_use() const noexcept { return used_.load(std::memory_order_relaxed); }

private:
    std::size_t limit_;
    std::atomic<std::size_t> used_{0};
};

/// \brief The process's budget, fixed at first use from the soft RLIMIT_NOFILE (raise it
/// before the first connection, as sandboxd does at start): half of what is left after a
/// reserve of an eighth of the limit (at least 64 descriptors) for everything else the
/// process does. 448 connections under the common 1,024; 28,672 under 65,536.
SANDBOX_DECL tunnel_budget& process_tunnel_budget();

/// The budget `process_tunnel_budget` gives for a descriptor limit of `nofile`.
SANDBOX_DECL std::size_t tunnel_budget_for_descriptors(std::uint64_t nofile) noexcept;

/// \brief How the egress proxy resolves names and how long it waits.
struct proxy_options
{
    net_limits limits{};
    /// Names pinned to addresses, like curl's `--resolve`: (name, IP literal) pairs, a name
    /// may repeat. A pinned name is never looked up; the SSRF guard still judges its address.
    std::vector<std::pair<std::string, std::string>> resolve{};
    /// DNS servers as "ADDRESS" or "ADDRESS:PORT" ("[V6]:PORT"); empty: /etc/resolv.conf.
    std::vector<std::string> dns_servers{};
    /// The sandbox's budget, shared by every exec and session this proxy serves. A runner
    /// that is given none makes its own of `limits.max_sandbox_tunnels`.
    std::shared_ptr<tunnel_budget> sandbox_budget{};
};

/// How a sandboxed client asked for a destination.
enum class net_protocol : int
{
    http,    ///< an absolute-form HTTP request (`GET http://host/...`)
    connect, ///< an HTTP `CONNECT host:port` tunnel
    socks5,  ///< a SOCKS5 CONNECT
};

/// What the proxy did with a request.
enum class net_verdict : int
{
    allowed, ///< connected (the connection's `closed` record follows when it ends)
    denied,  ///< refused by a rule, the mode's default or the address guard
    failed,  ///< allowed, or not decidable, but it failed (bad request, DNS, dial, upstream, cap)
};

/// Which record.
enum class net_event : int
{
    decision, ///< one per request: its verdict (for an allowed one, once it is connected)
    closed,   ///< one per allowed connection, when it ends: bytes and duration
    request,  ///< one per HTTP request in an inspected tunnel (`net_record::http`)
};

SANDBOX_DECL const char* to_string(net_protocol p) noexcept;
SANDBOX_DECL const char* to_string(net_verdict v) noexcept;
SANDBOX_DECL const char* to_string(net_event e) noexcept;

/// \brief What TLS inspection saw of one tunnel (`net.mitm` selected its CONNECT host).
struct net_tls_record
{
    /// The client's server name (control bytes escaped; empty: none, or no handshake).
    std::string sni{};
    /// Each leg's handshake (0: it did not happen).
    std::chrono::microseconds client_handshake{0};
    std::chrono::microseconds origin_handshake{0};
    /// The client got a leaf from the cache (no mint).
    bool leaf_from_cache = false;
    /// Why a handshake failed, in OpenSSL's words ("certificate verify failed: unable to get
    /// local issuer certificate"); empty otherwise.
    std::string detail{};
};

/// \brief One HTTP request inside an inspected tunnel (a `request` record). Its path, query,
/// cookies, credentials and the values of injected headers are never recorded.
struct net_http_record
{
    /// The request's number in its tunnel, from 1. The proxy's own answers (403, 421, 502,
    /// ...) name the request as "connection.number" (`X-Sandbox-Request` and the body's end),
    /// so what a command reports can be matched to this record.
    std::uint64_t number = 0;
    /// The method as sent (control bytes escaped, at most 32 bytes).
    std::string method{};
    /// The request rule that decided ("allow GET api.example.com/repos/acme/**"); empty when
    /// none did.
    std::string rule{};
    /// The status the client got: the origin's, or the proxy's own (403 refused by the rules,
    /// 421 a Host that is not the CONNECT host, 400 a request that does not parse). 0: the
    /// tunnel ended before a response.
    int status = 0;
    /// The headers the proxy added, by name.
    std::vector<std::string> injected{};
    /// What the hooks of each direction answered (`http_hooks`): the head hook's word, or
    /// the body hook's when it refused or when the direction has no head hook. Empty when
    /// none ran, else "allowed", "modified" (allowed with headers changed), "denied",
    /// "error" (it threw, or its answer could not be applied), "timeout" (refused),
    /// "timeout_allowed", "cancelled" (a head hook whose client left while it ran).
    std::string request_hook{};
    std::string response_hook{};
    /// Body bytes each way (after the heads).
    std::uint64_t request_body_bytes = 0;
    std::uint64_t response_body_bytes = 0;
};

/// \brief One connection through the egress proxy. No query string, path or credential is
/// ever recorded.
struct net_record
{
    net_event event = net_event::decision;
    /// Numbers the connections of one exec or session from 1 (both records of one share it).
    std::uint64_t connection = 0;
    net_protocol protocol = net_protocol::connect;
    /// The host as the client sent it (control bytes escaped, at most 300 bytes).
    std::string requested_host{};
    /// The host the rules judged: lower-case A-labels, or the address in its canonical text.
    /// Empty when the request could not be parsed.
    std::string host{};
    std::uint16_t port = 0;
    /// The rule that decided ("allow github.com:443"); empty for the mode's default.
    std::string rule{};
    net_verdict verdict = net_verdict::denied;
    /// Why, as a class: "rule", "no_rule", "mode", "loopback", "private", "link_local",
    /// "bad_request", "resolve_failed", "dial_timeout", "tunnel_cap" (a cap on connections, or
    /// on a call's inspected tunnels: the rule names it, "max_inspected_tunnels 256"), ...
    /// (docs/security.md lists them).
    /// For `closed`: "eof", "idle_timeout", "reset", "stopped"; under `sni_mode::deny`
    /// "sni_mismatch", "bad_client_hello", "no_client_hello".
    std::string reason{};
    /// Every address the name resolved to, in the resolver's order.
    std::vector<std::string> resolved{};
    /// The address and port actually connected to ("203.0.113.7:443", "[2001:db8::1]:443");
    /// the upstream proxy's under `net_mode::proxy`.
    std::string dialed{};
    /// `closed` only: bytes from the client to the destination, and back.
    std::uint64_t bytes_up = 0;
    std::uint64_t bytes_down = 0;
    /// `closed` only: from the decision to the close.
    std::chrono::nanoseconds duration{0};
    /// `closed` of an inspected tunnel only (its `reason` is then one of TLS inspection's:
    /// "closed", "origin_untrusted", "client_handshake", "not_tls", ... docs/network.md).
    std::optional<net_tls_record> tls{};
    /// `closed` of a tunnel that was not inspected, under `net_policy::sni_check` record or
    /// deny: the server name of its ClientHello (control bytes escaped; empty: it named
    /// none). Nothing when it was not read or the tunnel did not start with a whole
    /// ClientHello (bytes that are not TLS, for one).
    std::optional<std::string> sni{};
    /// With `sni`: the name is not the host the tunnel was opened to (compared canonically).
    /// Under `sni_mode::deny` the tunnel was then closed, `reason` "sni_mismatch".
    bool sni_mismatch = false;
    /// `request` records only. Their `verdict` is allowed or denied, their `reason` says why:
    /// "rule", "no_rule" (no request rule names the host), "no_allow_rule",
    /// "host_mismatch", "header_present" (the request carries a header the proxy sets),
    /// "bad_request", "head_too_large" (431), "hook_deny", "hook_error", "hook_timeout",
    /// "client_gone" (the client
    /// left while the request hook ran or its body was read), "body_too_large" (a body over
    /// `mitm_policy::max_body_bytes` for a hook that sees bodies) (`http_hooks`).
    std::optional<net_http_record> http{};
};

/// The record as a JSON object (Boost.JSON); fields that do not apply are left out.
SANDBOX_DECL boost::json::object to_json(const net_record& r);

/// \brief Receives the proxy's records of one exec or session, on the runner's executor.
/// It should be quick and never block.
using net_record_handler = std::function<void(const net_record&)>;

} // namespace sandbox

#endif // SANDBOX_NET_PROXY_HPP
