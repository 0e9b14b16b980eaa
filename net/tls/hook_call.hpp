// net/tls/hook_call.hpp: one call of a caller's HTTP hook (`http_hooks`) under its deadline,
// and what its answer means for the message: the decision is plain logic, tested without I/O.
#ifndef SANDBOX_NET_TLS_HOOK_CALL_HPP
#define SANDBOX_NET_TLS_HOOK_CALL_HPP

#include <sandbox/http_hooks.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sandbox::net::tls {

/// How a hook call ended.
struct hook_answer
{
    enum class kind
    {
        answered,  ///< `verdict` holds its answer
        threw,     ///< it threw (or its awaitable failed)
        timed_out, ///< the deadline passed first (it was cancelled)
    };
    kind what = kind::answered;
    http_verdict verdict{};
};

/// \brief Calls `hook` on the current executor and waits for its answer, at most `timeout`
/// (then it is cancelled: Asio's terminal cancellation, delivered to the operation it awaits).
/// Never throws for the hook's sake; a cancellation of the caller's own ends it too (as a
/// timeout).
boost::asio::awaitable<hook_answer>
call_hook(std::function<boost::asio::awaitable<http_verdict>()> hook,
          std::chrono::milliseconds timeout);

/// What a hook's answer does to the message.
struct hook_decision
{
    /// The message goes on (with `edits` applied, when set).
    bool pass = true;
    const http_verdict* edits = nullptr;
    /// Refused: the status the client gets, the record's reason ("hook_deny", "hook_error",
    /// "hook_timeout") and the text of the answer's body.
    int status = 0;
    std::string reason{};
    std::string why{};
    /// `net_http_record::request_hook` / `response_hook`: "allowed", "modified", "denied",
    /// "error", "timeout", "timeout_allowed".
    std::string word{};
};

/// \brief Decides on `a` (`which`: "request" or "response", for the texts): fail closed on a
/// throw, on edits that name a framing header or carry a bad value (403, "hook_error"), and
/// on a missed deadline unless `allow_on_timeout` (504, "hook_timeout"); a refusal keeps the
/// hook's status when it is 400-599 (else 403) and its reason, control bytes dropped and cut
/// to 200 bytes. `a` must outlive the decision (`edits` points into it).
hook_decision decide(const hook_answer& a, bool allow_on_timeout, std::string_view which);

/// \brief As `decide`, for a body hook (`which`: "request body", "response body"): an answer
/// with header edits cannot be applied to a body, so it is the hook's failure (403,
/// "hook_error").
hook_decision decide_body(const hook_answer& a, bool allow_on_timeout, std::string_view which);

/// Whether a header of `name` goes on as it is: neither removed nor set by `edits` (null: no
/// edits). Names compare without case.
bool kept_by(const http_verdict* edits, std::string_view name);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_HOOK_CALL_HPP
