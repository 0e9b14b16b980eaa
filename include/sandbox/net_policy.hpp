// sandbox/net_policy.hpp: what network access the child gets.
#ifndef SANDBOX_NET_POLICY_HPP
#define SANDBOX_NET_POLICY_HPP

#include <sandbox/config.hpp>
#include <sandbox/failure.hpp>

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandbox {

/// \brief The name by which a sandboxed command reaches the host's own loopback services
/// (127.0.0.1 and ::1 on the host) through the egress proxy, as container tools name the host
/// (`host.docker.internal`). Only an allow rule naming it exactly opens it, port by port or
/// on every port (`allow_hosts: [host.sandbox.internal:8080]`); no broader rule, no proxy
/// mode without allow rules. The sandbox's own loopback (`127.0.0.1` inside) stays its own.
inline constexpr std::string_view host_loopback_name = "host.sandbox.internal";

/// \brief Network mode. Every mode but `inherit` needs an isolating backend.
enum class net_mode : int
{
    /// No network policy: the child uses the host's networking ("default" in text form).
    inherit = 0,
    /// No network at all.
    deny_all = 1,
    /// Only destinations allowed by `rules` / `allow_hosts`, through the host-side proxy.
    allow_list = 2,
    /// All traffic through the given upstream `proxy` URL.
    proxy = 3,
};

/// "default", "deny_all", "allow_list", "proxy"; "unknown" otherwise.
SANDBOX_DECL const char* to_string(net_mode m) noexcept;
/// Parses the text form; also accepts "inherit" for `net_mode::inherit`.
SANDBOX_DECL std::optional<net_mode> parse_net_mode(std::string_view s) noexcept;
SANDBOX_DECL std::ostream& operator<<(std::ostream& os, net_mode m);

/// \brief What a rule does when it matches. The zero value denies.
enum class net_action : int
{
    deny = 0,
    allow = 1,
};

SANDBOX_DECL const char* to_string(net_action a) noexcept;

/// \brief What the egress proxy does with the TLS server name (SNI) of a tunnel it does not
/// inspect (CONNECT or SOCKS5): the client's ClientHello is read as it comes, held until it
/// is whole (`net_limits::client_hello_timeout` at most), and its name compared with the
/// host the tunnel was opened to, canonically (docs/network.md). Bytes that are not TLS go
/// on under every mode. The zero value records.
enum class sni_mode : int
{
    /// The name is recorded (`net_record::sni`, `sni_mismatch`); the tunnel goes on.
    record = 0,
    /// As `record`, and a tunnel that names another host is closed before a byte of it
    /// reaches its destination ("sni_mismatch"), as is one whose TLS record holds no sound
    /// ClientHello ("bad_client_hello", "no_client_hello").
    deny = 1,
    /// Not read: the bytes go on as they come, nothing is recorded.
    off = 2,
};

/// "record", "deny", "off"; "unknown" otherwise.
SANDBOX_DECL const char* to_string(sni_mode m) noexcept;
/// Parses the text form.
SANDBOX_DECL std::optional<sni_mode> parse_sni_mode(std::string_view s) noexcept;

/// \brief One egress rule. Deny rules win over allow rules.
///
/// Host forms: `example.com` (the domain and all its subdomains), `*.example.com`
/// (subdomains only), an IPv4/IPv6 literal, or a CIDR block such as `10.0.0.0/8`.
/// `port` 0 matches any port.
struct net_rule
{
    net_action action = net_action::deny;
    std::string host{};
    int port = 0;

    friend bool operator==(const net_rule&, const net_rule&) = default;
};

/// \brief A rule for the HTTP requests inside inspected tunnels (`mitm_policy::requests`).
///
/// `pattern` is `METHODS HOST/PATH_GLOB`: `GET api.example.com/repos/acme/**`,
/// `GET,HEAD files.example.com/*.tar.gz`, `* api.example.com/**`. METHODS is `*` or tokens
/// joined by commas (compared without case); HOST a host pattern of the rules' forms (no
/// port, no block); in PATH_GLOB `*` matches within one segment, `**` across segments, and a
/// trailing `/**` the path without it too. The path is judged percent-decoded with dot
/// segments removed; a deny rule also matches it with every escape decoded, slashes merged
/// and case folded. Deny wins; once any allow rule names a host, a request to it that no
/// allow rule matches is refused too (403).
struct http_request_rule
{
    net_action action = net_action::allow;
    std::string pattern{};

    friend bool operator==(const http_request_rule&, const http_request_rule&) = default;
};

/// \brief A header the proxy adds to the requests it inspects for chosen hosts, from a value
/// the caller holds (a token the command never sees). Records and messages name the header,
/// never the value.
struct header_injection
{
    /// A host pattern of the rules' forms.
    std::string host{};
    /// A token; not one of the headers that frame or route a request (Host,
    /// Content-Length, Transfer-Encoding, Connection, Upgrade, TE, Trailer, ...).
    std::string name{};
    /// The value sent: no control byte but tab, at most 8 KiB.
    std::string value{};
    /// A request that carries the header already: its value replaced (true), or the request
    /// refused with 403 (false).
    bool replace = false;

    friend bool operator==(const header_injection&, const header_injection&) = default;
};

/// \brief Roots the egress proxy trusts for the origins of some hosts only: a private CA
/// that vouches for `git.corp.example` must not vouch for `github.com` too.
struct scoped_origin_ca
{
    /// A host pattern of the rules' forms (`corp.example` with its subdomains,
    /// `*.corp.example`, ...): the CONNECT hosts whose origins may chain to `pem`.
    std::string host{};
    /// One or more PEM certificates.
    std::string pem{};

    friend bool operator==(const scoped_origin_ca&, const scoped_origin_ca&) = default;
};

/// \brief TLS inspection by the egress proxy (modes allow_list and proxy; the bwrap backend):
/// the CONNECTs it selects are terminated with a certificate from a CA made for the call,
/// which the command trusts through a bundle bound into the sandbox (docs/network.md).
struct mitm_policy
{
    bool enabled = false;
    /// The caller's request and response hooks (`exec_request::http`) see bodies whole,
    /// read before the hook is called, at most `max_body_bytes` (0: 1 MiB; at most 64 MiB);
    /// a larger one is refused (413 for a request, 502 for a response) and never forwarded
    /// uninspected. It needs such a hook for a direction that has no body hook (which sees
    /// its bodies streamed instead): else `errc::validation`.
    bool inspect_bodies = false;
    std::int64_t max_body_bytes = 0;
    /// Empty: inspect every CONNECT; otherwise only these hosts (the rules' host forms).
    std::vector<std::string> hosts{};
    /// Never inspected (tunnelled raw); wins over `hosts`.
    std::vector<std::string> exclude_hosts{};
    /// Bytes that are not TLS sent to an inspected host: relayed as they are (true), or the
    /// tunnel is closed (false: an inspected host is reached through TLS only).
    bool relay_non_tls = false;
    /// Roots the proxy trusts for origins on top of the system's: PEM text of one or more
    /// certificates each (a private CA of the caller's). Never an "insecure" switch.
    std::vector<std::string> origin_ca{};
    /// Roots trusted for the origins of the hosts each entry names, on top of the system's
    /// and `origin_ca` (a host several entries name trusts all of theirs).
    std::vector<scoped_origin_ca> origin_ca_for{};
    /// Rules for the HTTP requests of inspected tunnels, in order (deny wins).
    std::vector<http_request_rule> requests{};
    /// Headers added to the requests of inspected tunnels.
    std::vector<header_injection> inject_headers{};

    friend bool operator==(const mitm_policy&, const mitm_policy&) = default;
};

/// \brief Network policy for one execution.
struct net_policy
{
    net_mode mode = net_mode::inherit;
    /// Allow list: each entry `HOST` (any port) or `HOST:PORT` (`[V6]:PORT`), as
    /// `sandbox-run --allow-host` takes them; an allow rule each, after `rules`.
    std::vector<std::string> allow_hosts{};
    std::vector<net_rule> rules{};
    /// Upstream proxy URL for `net_mode::proxy`: `http://` or `socks5://` (`socks5h://` is the
    /// same: the upstream always gets the name), optional user[:pass]@, no path, query or
    /// fragment. Validation and the egress proxy read it with one parser.
    std::string proxy{};
    /// Absolute host paths of unix sockets the child may connect to.
    std::vector<std::string> unix_sockets{};
    std::optional<mitm_policy> mitm{};
    /// Names pinned to addresses for the egress proxy (modes allow_list and proxy), like
    /// curl's `--resolve`: (name, IP literal) pairs, a name may repeat. They go in front of
    /// the runner's own pins (`proxy_options::resolve`); a pinned name is never looked up. The
    /// SSRF guard still judges a pinned address: a loopback or private one needs an IP allow
    /// rule too (`allow_hosts: [git.test:8080, 127.0.0.2:8080]`).
    std::vector<std::pair<std::string, std::string>> resolve{};
    /// The server name of the tunnels TLS inspection does not take (modes allow_list and
    /// proxy; another value than the default under the other modes is refused).
    sni_mode sni_check = sni_mode::record;

    /// \brief Checks the policy on its own, independent of any backend.
    ///
    /// Fails with `errc::validation` and a diagnostics `limit` naming the field ("net.proxy",
    /// "net.rules[2].host", ...). Beyond the syntax checks it refuses inconsistent
    /// combinations: fields that have no effect under the chosen mode (rules under
    /// `inherit`, a proxy URL outside `proxy` mode, MITM without the host proxy) and a `proxy`
    /// mode without a proxy URL.
    SANDBOX_DECL outcome<> validate() const;

    friend bool operator==(const net_policy&, const net_policy&) = default;
};

} // namespace sandbox

#endif // SANDBOX_NET_POLICY_HPP
