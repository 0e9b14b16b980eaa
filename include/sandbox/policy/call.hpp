// sandbox/policy/call.hpp: what the policy chain judges (an exec or a session start), the
// approver's question and answer, and predicates.
#ifndef SANDBOX_POLICY_CALL_HPP
#define SANDBOX_POLICY_CALL_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/exec_request.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace sandbox {

/// Which entry point a call came through.
enum class call_kind : int
{
    exec = 0,    ///< `runner::exec`
    session = 1, ///< `process_manager::start`
    /// `runner::try_open`: an instance opened (recorded; the gate and approval judge each
    /// command run in it, as execs, not the open).
    instance = 2,
};

SANDBOX_DECL const char* to_string(call_kind k) noexcept;
SANDBOX_DECL std::ostream& operator<<(std::ostream& os, call_kind k);

/// \brief A call as predicates and approvers see it: a value that shares nothing with the
/// call that runs, so whoever holds a copy cannot change what runs.
///
/// `options` are the effective options: the defaults of the chain already merged in.
struct call_snapshot
{
    call_kind kind = call_kind::exec;
    std::string command{};
    std::vector<std::string> args{};
    exec_options options{};
    /// Set when the command runs on a terminal (an exec with `tty`, or a terminal session).
    std::optional<terminal_size> tty{};
    /// The session id asked for (sessions only; empty: the manager picks one).
    std::string session_id{};
    /// Who asked for the call, when it was asked on someone's behalf
    /// (`exec_request::requested_by`); unset: the caller.
    std::optional<requester> requested_by{};

    /// A session started on a terminal: someone is going to type into it.
    bool interactive() const noexcept { return kind == call_kind::session && tty.has_value(); }
};

/// \brief What an approver is asked: the call, and why it needs approval (the reason of the
/// first predicate that matched).
struct approval_request
{
    call_snapshot call{};
    std::string reason{};
    /// The chain's name, when it has one: a config document's sandbox.
    std::string sandbox{};
};

/// \brief An approver's answer. The zero value denies.
struct approval_decision
{
    bool allow = false;
    /// Said with the answer; ends up in the denial message and the audit trail.
    std::string reason{};

    static approval_decision allowed(std::string why = {}) { return {true, std::move(why)}; }
    static approval_decision denied(std::string why = {}) { return {false, std::move(why)}; }
};

/// \brief Decides a call that needs approval. A coroutine on the runner's executor, so it can
/// ask a person or a remote service without blocking the loop.
///
/// It gets its own copy of the request. Throwing, not answering within the chain's
/// deadline, or answering anything but `allow` denies the call (`errc::policy_denied`).
/// When the deadline passes or the caller cancels, it receives a terminal cancellation;
/// the chain does not wait for it to finish.
using approver = std::function<boost::asio::awaitable<approval_decision>(approval_request)>;

/// \brief Says whether a call crosses a boundary that needs approval: the reason when it
/// does, nothing when it does not. Called on the runner's executor; it must not block.
///
/// An empty predicate, or one that throws, denies every call it is asked about (fail
/// closed). Any callable with this signature is a predicate.
using predicate = std::function<std::optional<std::string>(const call_snapshot&)>;

} // namespace sandbox

#endif // SANDBOX_POLICY_CALL_HPP
