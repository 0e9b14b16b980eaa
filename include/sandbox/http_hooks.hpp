// sandbox/http_hooks.hpp: the caller's own say over the HTTP requests inside inspected tunnels
// (`net.mitm`): coroutines that see each request's head and the response's (and their bodies,
// streamed or whole) on the runner's executor, and allow, refuse or change headers, under a
// deadline, failing closed.
#ifndef SANDBOX_HTTP_HOOKS_HPP
#define SANDBOX_HTTP_HOOKS_HPP

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
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
    /// The request's number in its tunnel, from 1 (`net_http_record::number`). With
    /// `connection` it is the request id ("3.2") the proxy's own answers name.
    std::uint64_t number = 0;
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
    /// With `net.mitm.inspect_bodies` and no `on_request_body`: the whole body, decoded (no
    /// chunk framing), read before the hook is called; empty otherwise. A body over
    /// `net.mitm.max_body_bytes` is refused (413) and never forwarded uninspected.
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
    /// then held whole before the client gets a byte of it. `request.body` is what the
    /// request hook was shown (empty when there is no request hook).
    std::string body{};
};

/// \brief What a body hook sees: one window of a message's body, decoded (no chunk framing),
/// before any byte of it goes on.
///
/// A body is shown as it streams, in order, in windows of what has arrived, at most
/// `http_body_window` bytes each (a server-sent event goes on as soon as its window is
/// judged, not when 64 KiB have gathered); its final window has `last` set (its data may be
/// empty), and no byte of that window goes on before the hook allowed it. A body cut short
/// (a side's end, broken framing, the exchange ended by the other side) gets no `last`
/// call. Within one tunnel the request hook comes first, then the request's windows; the
/// response hook and the response's windows follow the response as it arrives, which may
/// be before the request's body has all gone (an origin that answers early), so a request
/// window and a response window may be with their hooks at once. A body with chunk
/// extensions or trailers (bytes a hook would not see) fails as one that does not parse.
struct http_body_chunk
{
    /// The tunnel's number and the request's in it, as `http_request_info`'s.
    std::uint64_t connection = 0;
    std::uint64_t number = 0;
    /// The request's body (true) or the response's (false).
    bool request = true;
    /// Decoded bytes of this body shown before `data`.
    std::uint64_t offset = 0;
    /// This window's bytes; valid only during the call (copy what is kept).
    std::string_view data{};
    /// The body's end.
    bool last = false;
};

/// The most a body hook is shown at once (`http_body_chunk::data`).
inline constexpr std::size_t http_body_window = 64 * 1024;

/// \brief A hook's answer.
///
/// Allowed, `set_headers` replace the headers of those names (or add them) and
/// `remove_headers` take headers out, before the proxy's injected headers go in (an injected
/// header always has the proxy's value). Neither may name a header that frames or routes the
/// message (Host, Content-Length, Transfer-Encoding, Connection, Upgrade, ...) nor set a
/// value with a control byte: such an answer counts as the hook's failure (fail closed).
/// Refused, the client gets `status` (400-599; anything else is taken as 403) with `reason`
/// in a plain-text body; for a response, the origin's is discarded and the tunnel closes. A
/// refused request leaves the tunnel usable for the client's next request when the client
/// keeps its connection and did not ask for `100 Continue` with its body unsent: after the
/// answer, its body (at most 1 MiB) is read and dropped; a longer one closes the tunnel.
/// Otherwise the answer says `Connection: close`.
///
/// A body hook answers allow or refuse only (edits count as its failure). Refusing a window
/// stops the message there: a request not yet answered gets the refusal (the origin's leg is
/// closed, having seen only the windows allowed before; a client that has had a final answer
/// head already is cut off instead); a response is cut where it stands and the tunnel closed
/// without TLS's close_notify, so the client sees it end short, never whole. Refusing the
/// last window of a response is the only way a body hook can change what its client gets:
/// the head went before the body; to answer with a status, refuse in the response hook.
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
/// A body hook, as `http_request_hook`; the window waits until it answers.
using http_body_hook = std::function<boost::asio::awaitable<http_verdict>(const http_body_chunk&)>;

/// \brief Hooks over the HTTP requests of one call's inspected tunnels (`exec_request::http`,
/// `session_spec::http`). A call with a hook needs `net.mitm` (else `errc::validation`, limit
/// `http`); a backend that cannot inspect refuses it (`not_available`).
///
/// Failing closed: a hook that throws, or answers what cannot be applied, refuses the
/// request with 403 (record reason `hook_error`); one that misses `timeout` with 504 (reason
/// `hook_timeout`), unless `allow_on_timeout`. A refusal by the hook has reason `hook_deny`.
/// Values the hooks see are the caller's to keep safe: they are never recorded.
///
/// Bodies are shown two ways. Streamed: `on_request_body` / `on_response_body` see every
/// body of their direction in windows as it arrives (nothing is held beyond one window).
/// Whole: under `net.mitm.inspect_bodies`, `on_request` / `on_response` see the body in
/// their info, read before they are called, up to `net.mitm.max_body_bytes` (0: 1 MiB; at
/// most 64 MiB), for a direction that has no body hook (a body hook takes its direction's
/// bodies). The bytes after a 101 (an upgraded connection) are not shown.
struct http_hooks
{
    http_request_hook on_request{};
    http_response_hook on_response{};
    http_body_hook on_request_body{};
    http_body_hook on_response_body{};
    /// How long one hook call may take (more than zero).
    std::chrono::milliseconds timeout{5'000};
    /// A hook that misses its deadline lets the message through as it is (true), or refuses
    /// it (false: 504).
    bool allow_on_timeout = false;

    /// Whether any hook is set.
    bool empty() const noexcept
    {
        return !on_request && !on_response && !on_request_body && !on_response_body;
    }
};

} // namespace sandbox

#endif // SANDBOX_HTTP_HOOKS_HPP
