// sandbox/http_hooks.hpp: the caller's own say over the HTTP requests inside inspected tunnels
// (`net.mitm`): coroutines that see each request's head, and the response's, on the runner's
// executor, and allow it, refuse it or change its headers, under a deadline, failing closed.
#ifndef SANDBOX_HTTP_HOOKS_HPP
#define SANDBOX_HTTP_HOOKS_HPP

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sandbox {

/// One header of a request or a response, as sent.
struct http_header
{
    std::string name{};
    std::string value{};
};

/// \brief What a request hook sees of one HTTP request in an inspected tunnel, after the
/// request rules let it through and before any byte of it reached the origin.
struct http_request_info
{
    /// The tunnel's number (`net_record::connection` of its records).
    std::uint64_t connection = 0;
    /// The CONNECT host (lower-case A-labels or an address's canonical text) and port: the
    /// request's Host names the same, or it never got here (421).
    std::string host{};
    std::uint16_t port = 0;
    /// The method as sent.
    std::string method{};
    /// The path as the rules judged it: percent-decoded (but `%2F`, `%25`), dot segments
    /// removed, without the query.
    std::string path{};
    /// The request target as the client sent it, query included.
    std::string target{};
    /// The client's headers in order. The headers the proxy injects are not among them.
    std::vector<http_header> headers{};
    /// The request rule that let it through ("allow GET api.example.com/**"); empty: none.
    std::string rule{};
    /// With `net.mitm.inspect_bodies`: the whole body, decoded (no chunk framing), read
    /// before the hook is called; empty otherwise. A body over `net.mitm.max_body_bytes` is
    /// refused (413) and never forwarded uninspected.
    std::string body{};
};

/// \brief What a response hook sees: the origin's final response head (a 101 included, the
/// 1xx before it not), before any byte of it reached the client.
struct http_response_info
{
    http_request_info request{};
    int status = 0;
    std::vector<http_header> headers{};
    /// As `http_request_info::body`, for the response (over the cap: 502). The response is
    /// then held whole before the client gets a byte of it.
    std::string body{};
};

/// \brief A hook's answer.
///
/// Allowed, `set_headers` replace the headers of those names (or add them) and
/// `remove_headers` take headers out, before the proxy's injected headers go in (an injected
/// header always has the proxy's value). Neither may name a header that frames or routes the
/// message (Host, Content-Length, Transfer-Encoding, Connection, Upgrade, ...) nor set a
/// value with a control byte: such an answer counts as the hook's failure (fail closed).
/// Refused, the client gets `status` (400-599; anything else is taken as 403) with `reason`
/// in a plain-text body, and the tunnel closes; for a response, the origin's is discarded.
struct http_verdict
{
    bool allow = true;
    int status = 403;
    std::string reason{};
    std::vector<http_header> set_headers{};
    std::vector<std::string> remove_headers{};

    static http_verdict allowed() { return http_verdict{}; }
    static http_verdict denied(int status, std::string reason)
    {
        http_verdict v;
        v.allow = false;
        v.status = status;
        v.reason = std::move(reason);
        return v;
    }
};

/// \brief A request hook: a coroutine run on the runner's executor (never on a thread of
/// ours). It is cancelled (Asio's per-operation cancellation, terminal) when its deadline
/// passes or the client goes away meanwhile; the request is then never sent.
using http_request_hook =
    std::function<boost::asio::awaitable<http_verdict>(const http_request_info&)>;
/// A response hook, as `http_request_hook`; the response is held until it answers.
using http_response_hook =
    std::function<boost::asio::awaitable<http_verdict>(const http_response_info&)>;

/// \brief Hooks over the HTTP requests of one call's inspected tunnels (`exec_request::http`,
/// `session_spec::http`). A call with a hook needs `net.mitm` (else `errc::validation`, limit
/// `http`); a backend that cannot inspect refuses it (`not_available`).
///
/// Failing closed: a hook that throws, or answers what cannot be applied, refuses the
/// request with 403 (record reason `hook_error`); one that misses `timeout` with 504 (reason
/// `hook_timeout`), unless `allow_on_timeout`. A refusal by the hook has reason `hook_deny`.
/// Values the hooks see are the caller's to keep safe: they are never recorded. Bodies are
/// shown only under `net.mitm.inspect_bodies` (which needs a hook), up to
/// `net.mitm.max_body_bytes` (0: 1 MiB; at most 64 MiB).
struct http_hooks
{
    http_request_hook on_request{};
    http_response_hook on_response{};
    /// How long one hook call may take (more than zero).
    std::chrono::milliseconds timeout{5'000};
    /// A hook that misses its deadline lets the message through as it is (true), or refuses
    /// it (false: 504).
    bool allow_on_timeout = false;

    /// Whether any hook is set.
    bool empty() const noexcept { return !on_request && !on_response; }
};

} // namespace sandbox

#endif // SANDBOX_HTTP_HOOKS_HPP
