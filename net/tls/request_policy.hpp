// net/tls/request_policy.hpp: the per-request part of TLS inspection, compiled once per call:
// which HTTP requests to an inspected host are let through (request rules, deny wins) and
// which headers the proxy adds to them. Text only, no I/O: tested as it is.
#ifndef SANDBOX_NET_TLS_REQUEST_POLICY_HPP
#define SANDBOX_NET_TLS_REQUEST_POLICY_HPP

#include "host/canonical.hpp"
#include "host/request_pattern.hpp"

#include <sandbox/failure.hpp>
#include <sandbox/net_policy.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandbox::net::tls {

/// Whether a rule host pattern names `h` (a domain and its subdomains, subdomains only, an
/// address, a block).
bool host_pattern_names(const detail::host_pattern& p, const canonical_host& h);

/// What the request rules say of one request.
struct request_verdict
{
    bool allowed = true;
    /// The deciding rule, "allow GET api.example.com/repos/**"; empty when no rule decided.
    std::string rule{};
    /// "rule" (a rule decided), "no_rule" (no request rule names the host: the host's
    /// allowance is enough), "no_allow_rule" (allow rules name the host, none this request).
    std::string reason{};
};

/// A header to add, as `header_injection` holds it.
struct injection
{
    std::string name{};
    std::string value{};
    bool replace = false;
};

/// \brief Compiled request rules and header injections. Copies share nothing; cheap to keep
/// per call.
class request_policy
{
public:
    /// `errc::validation` with `limit` `net.mitm.requests[i]` / `net.mitm.inject_headers[i]`.
    static outcome<request_policy> compile(const std::vector<http_request_rule>& rules,
                                           const std::vector<header_injection>& headers);

    /// Neither rules nor injections: requests pass as they are.
    bool empty() const noexcept { return rules_.empty() && headers_.empty(); }

    /// The rules' verdict on `method` (as sent) `path` (canonical forms) to `host`.
    request_verdict judge(const canonical_host& host, std::string_view method,
                          const detail::canonical_path& path) const;

    /// Whether a rule or an injection names `host` (such a host is always inspected).
    bool names(const canonical_host& host) const;

    /// The host patterns of the rules and injections, with their fields
    /// ("net.mitm.requests[2]"), for the checks against exclusions.
    std::vector<std::pair<std::string, const detail::host_pattern*>> hosts() const;

    /// The headers to add to a request to `host`, each name once (the first rule naming it).
    std::vector<const injection*> injections_for(const canonical_host& host) const;

private:
    struct rule
    {
        net_action action = net_action::allow;
        detail::request_pattern pattern{};
        std::string lower_path{}; ///< the glob lower-cased (deny rules match `loose` too)
        std::string text{};       ///< "allow GET host/path"
    };
    struct header
    {
        detail::host_pattern host{};
        injection what{};
    };
    /// A request in the forms the rules compare: its method upper-cased, its path, and the
    /// strict path lower-cased (what deny rules also match).
    struct request_forms
    {
        std::string method;
        const detail::canonical_path& path;
        std::string folded;
    };
    bool matches(const rule& r, const request_forms& q) const;

    std::vector<rule> rules_;
    std::vector<header> headers_;
};

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_REQUEST_POLICY_HPP
