// tools/sandboxd/wire.hpp: the API's shapes on the wire, shared by its handlers: JSON
// responses and error bodies, a session's JSON, output bytes, and reading a request's target.
// (status_for, error_response, event_line and gap_line, which the server uses too, are
// declared in api.hpp.)
#ifndef SANDBOXD_WIRE_HPP
#define SANDBOXD_WIRE_HPP

#include "api.hpp"

#include <sandbox/exec_result.hpp>
#include <sandbox/session.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandboxd {

/// A response with `body` as its JSON, keep-alive as the request's.
response json_response(const request& req, boost::beast::http::status s,
                       const boost::json::value& body);
/// The same for a body already serialized.
response text_json(const request& req, boost::beast::http::status s, std::string body);

/// The errc name of a library code ("internal" for any other).
const char* code_name(const boost::system::error_code& ec);
/// {"code", "message", "limit"?, "errno"?} of a failure.
boost::json::object error_json(const boost::system::error_code& ec,
                               const sandbox::diagnostics& diag);
/// The error of a session whose command never started (the OS refused it after the session
/// was answered): the errno's class, else internal. None for a command that ran.
boost::system::error_code end_error(const sandbox::exec_result& r);
/// A session as GET /v1/sessions lists it.
boost::json::object session_json(const std::string& sandbox_name, const sandbox::session_info& i,
                                 const std::string& instance = {});
/// Output bytes as JSON: "data" when they are valid UTF-8, else "data_base64".
void put_bytes(boost::json::object& o, const std::string& data);

/// The path's segments after "/v1".
std::vector<std::string> segments(std::string_view target);
/// A query parameter of the target, if present.
std::optional<std::string> query(std::string_view target, std::string_view key);
/// A decimal number, if `s` is one.
std::optional<std::uint64_t> number(const std::optional<std::string>& s);

} // namespace sandboxd

#endif
