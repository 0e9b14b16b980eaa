// tools/sandboxd/api.hpp: the HTTP API under /v1 (docs/sandboxd.md): one request in, one
// response out.
#ifndef SANDBOXD_API_HPP
#define SANDBOXD_API_HPP

#include "daemon.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <functional>
#include <optional>

namespace sandboxd {

using request = boost::beast::http::request<boost::beast::http::string_body>;
using response = boost::beast::http::response<boost::beast::http::string_body>;

/// The HTTP status for a library error code (400 validation, 403 refusals, 404, 409, 413,
/// 501 not_available, 500 otherwise).
boost::beast::http::status status_for(const boost::system::error_code& ec);

/// A JSON error body: {"error": {"code": "<errc name>", "message": ..., and from the
/// diagnostics when set: "limit" (the field or resource concerned), "errno" (the OS error)}}.
response error_response(const request& req, const boost::system::error_code& ec,
                        const std::string& message, const sandbox::diagnostics& diag = {});

/// Completes when the client that sent the request has gone (its end of the connection
/// closed); cancellable (terminal), and then completes without error too.
using client_watch = std::function<boost::asio::awaitable<void>()>;

/// Thrown by `handle` when the client went away during a call that `gone` watched (an exec):
/// the call was cancelled (its tree killed, audited `client_gone`); there is nobody to answer.
struct client_went_away
{
};

boost::asio::awaitable<response> handle(daemon& d, const request& req, const peer& who,
                                        client_watch gone = {});

/// The session whose output `req` asks to follow (`GET /v1/sessions/{id}/output?follow=1`),
/// or null when it is not such a request (or names no session `who` may use: `handle`
/// answers it).
std::shared_ptr<sandbox::session> follow_target(daemon& d, const request& req, const peer& who,
                                                std::uint64_t& offset);

/// The session signal a request names (interrupt, terminate, kill, hangup, user1, user2).
std::optional<sandbox::session_signal> signal_named(std::string_view s);

/// Is `req` a `GET /v1/sessions/{id}/attach` (a WebSocket attach)? Then returns true with
/// the session and the offset to replay from (`?offset=`, 0 by default), or with `refusal`
/// set: no such session (404), another uid's session (403), not a terminal session (409), no WebSocket upgrade (400).
bool attach_target(daemon& d, const request& req, const peer& who,
                   std::shared_ptr<sandbox::session>& s, std::uint64_t& offset,
                   std::optional<response>& refusal);

/// One NDJSON line of a followed session's event: `{"type": "output", stream, offset, data
/// or data_base64}`, `{"type": "gap", "from", "resume_at"}`, `{"type": "exit", "result"}`.
std::string event_line(const sandbox::session_event& e);
std::string gap_line(std::uint64_t from, std::uint64_t resume_at);

} // namespace sandboxd

#endif
