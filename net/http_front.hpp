// net/http_front.hpp: the HTTP side of the proxy's port: one request per client
// connection, either `CONNECT host:port` (a tunnel) or an absolute-form request
// (`GET http://host/path`, forwarded with `Connection: close`, then the response relayed
// until the origin closes). The head is read whole, checked strictly (no obs-fold, bare LF,
// control bytes, duplicate Host or Content-Length, CL with TE, TE other than `chunked`),
// then parsed with Beast. The checks are plain functions, tested without I/O.
#ifndef SANDBOX_LIB_NET_HTTP_FRONT_HPP
#define SANDBOX_LIB_NET_HTTP_FRONT_HPP

#include "egress.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace sandbox::net {

/// \brief A refusal the front answers itself: an HTTP status and a one-line reason.
struct http_refusal
{
    int status = 400;
    std::string message{};
};

/// The HTTP status of `s` (200, 400, 403, 502, 503, 504, 501).
int http_status(open_status s) noexcept;

/// The request asks for a 100 Continue before its body (`Expect: 100-continue`).
bool expects_continue(const boost::beast::http::fields& f);

/// \brief Checks the raw bytes of a complete head (request line and fields, up to and with
/// its blank line): 400 for a bare LF, obs-fold (a line starting with a space or tab), NUL
/// or another control byte outside CR LF HT.
std::optional<http_refusal> check_raw_head(std::string_view head);

/// \brief Checks the parsed fields: 400 for two Host fields, two Content-Length fields,
/// Content-Length with Transfer-Encoding; 501 for a Transfer-Encoding other than exactly
/// `chunked`.
std::optional<http_refusal> check_fields(const boost::beast::http::fields& f);

/// \brief The head sent to the origin (or the HTTP upstream) of an absolute-form request:
/// `target` as given (origin-form, or absolute-form for an upstream), `Host: host_field`,
/// the client's fields without hop-by-hop ones (Connection and the names it lists,
/// Proxy-Connection, Keep-Alive, TE, Trailer, Upgrade, Proxy-Authorization,
/// Proxy-Authenticate), without Host, framing and Expect; then the framing of the body
/// (`Content-Length`, or `Transfer-Encoding: chunked` re-framed by the front),
/// `Proxy-Authorization: proxy_authorization` when not empty, and `Connection: close`.
std::string forward_head(const boost::beast::http::request_header<>& h, std::string_view target,
                         std::string_view host_field, std::string_view proxy_authorization);

/// \brief Reads some bytes from `s` into `b` before `deadline`; `ec` is `timed_out` after it.
boost::asio::awaitable<std::size_t> read_before(boost::asio::ip::tcp::socket& s,
                                                boost::asio::mutable_buffer b,
                                                std::chrono::steady_clock::time_point deadline,
                                                boost::system::error_code& ec);

/// \brief Serves one HTTP client to its end: the head (complete before `head_deadline`,
/// at most `limits.max_head_bytes`), the checks, `egress::open` (or a refusal with its
/// record), the reply, the relay, the `closed` record. `first`: bytes the proxy already
/// read. `over_cap`: the connection cap that is reached ("max_tunnels 512"; empty: none),
/// so that a valid request is answered 503 and recorded as `tunnel_cap` with it as the rule. Terminal cancellation (the proxy's stop) closes it.
boost::asio::awaitable<void> serve_http(std::shared_ptr<egress> gate,
                                        boost::asio::ip::tcp::socket client, std::string first,
                                        std::string over_cap,
                                        std::chrono::steady_clock::time_point head_deadline);

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_HTTP_FRONT_HPP
