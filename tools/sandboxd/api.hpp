// tools/sandboxd/api.hpp: the HTTP API under /v1 (docs/sandboxd.md): one request in, one
// response out.
#ifndef SANDBOXD_API_HPP
#define SANDBOXD_API_HPP

#include "daemon.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

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

boost::asio::awaitable<response> handle(daemon& d, const request& req, const peer& who);

} // namespace sandboxd

#endif
