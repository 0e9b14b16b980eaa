// tools/sandboxd/calls.hpp: what the handlers of /v1 share (api.cpp, instances.cpp): failures
// thrown to the router, the sandbox a call is pinned to, the client as the library names it,
// an exec that ends when its client goes, and the answers for an exec and a refused bound.
#ifndef SANDBOXD_CALLS_HPP
#define SANDBOXD_CALLS_HPP

#include "api.hpp"

#include <sandbox/process_manager.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandboxd {

/// Thrown by a handler; `handle` answers it as an error body with the code's status.
struct route_error
{
    sandbox::failure f;
};

sandbox::failure failure_of(sandbox::errc c, std::string message);

/// The registry a call starts with, held by the call until it ends: a reload that removes,
/// renames or rebuilds the sandbox meanwhile destroys nothing the call uses, and nothing on a
/// completion path looks the sandbox up by name again.
struct pinned_sandbox
{
    std::shared_ptr<const sandbox::config::registry> registry;
    sandbox::runner* runner = nullptr;
    std::string backend;
};

/// A `local` sandbox runs commands as the daemon's user: for another uid only when the
/// document says so (`run_as: daemon`). Throws route_error (forbidden) otherwise.
void check_run_as(const sandbox::config::sandbox_entry& e, const peer& who);

/// The sandbox `name` for a call of `who` (throws route_error: not_found, or forbidden for
/// a `local` sandbox that runs commands as the daemon's user when `who` is another uid).
pinned_sandbox pin(daemon& d, const std::string& name, const peer& who);

/// The client, as approvers and the audit trail name it.
sandbox::requester requester_of(const peer& who);

/// `call`, cancelled (what it started killed) when the client goes away before it ends, as
/// an HTTP server cancels a request's work. Returns nothing then: nobody is left to answer.
/// `call` reports its failures as values (the policy chain's try_exec and try_open do), so
/// whichever ends first decides and the other is cancelled. Callers pass a named awaitable
/// (GCC 12 mishandles a temporary argument of a coroutine called in a co_await).
template <class T>
boost::asio::awaitable<std::optional<T>> while_connected(boost::asio::awaitable<T> call,
                                                         const client_watch& gone)
{
    if (!gone)
        co_return co_await std::move(call);
    using namespace boost::asio::experimental::awaitable_operators;
    auto first = co_await (std::move(call) || gone());
    if (first.index() == 0)
        co_return std::get<0>(std::move(first));
    co_return std::nullopt;
}

/// An exec's answer: 200 with the result for a command that ran (whatever its end), the
/// error's status for one that never ran.
response exec_answer(const request& req, const sandbox::exec_outcome& done,
                     const std::string& backend);

/// A bound of the daemon that a request would pass: 429 (this client's share) or 503 (the
/// daemon's), code budget_exceeded, the config key as the limit.
response refused(const request& req, const refusal& r);

/// Where a session starts: a sandbox's sessions, or an instance's, and what its record keeps
/// while it is open (an instance's handle and its busy mark: it does not expire meanwhile).
struct session_place
{
    sandbox::process_manager* manager = nullptr;
    std::shared_ptr<const sandbox::config::registry> registry;
    std::string instance{}; ///< empty: the sandbox's own sessions
    std::shared_ptr<void> held{};
};

/// `POST .../sessions`: a session of `where` for `who` (api.cpp), within the daemon's bounds
/// on sessions; 201 with the session, or the failure thrown as route_error.
boost::asio::awaitable<response> start_session(daemon& d, const request& req,
                                               const std::string& name, const peer& who,
                                               session_place where);

/// `/v1/sandboxes/NAME/instances[/ID[/exec|/sessions]]` (instances.cpp); `seg` from `segments`.
boost::asio::awaitable<response> route_instances(daemon& d, const request& req,
                                                 const std::vector<std::string>& seg,
                                                 const peer& who, const client_watch& gone);

} // namespace sandboxd

#endif
