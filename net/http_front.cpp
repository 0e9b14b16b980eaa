// net/http_front.cpp: the HTTP front of the egress proxy (see http_front.hpp).
//
// One request per client connection. The head is read whole (bounded by max_head_bytes and
// the head deadline), checked on its raw bytes, then parsed by Beast. CONNECT dials first
// and answers 200 only once connected; an absolute-form request is parsed with Boost.URL
// (the parser that judges is the parser that forwards), its Host is rebuilt from the
// checked authority, and exactly its declared body is forwarded: bytes beyond it (a
// pipelined second request) never reach the origin. https:// in absolute form is judged
// as port 443 and answered 501: this proxy does not originate TLS (clients use CONNECT).
#include "http_front.hpp"

#include "relay.hpp"
#include "tunnel.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/url/parse.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <variant>
#include <vector>

namespace sandbox::net {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;
using head_parser = http::request_parser<http::empty_body>;

namespace {

constexpr std::size_t io_chunk = 16 * 1024;

const char* status_phrase(int status) noexcept
{
    switch (status)
    {
    case 200: return "Connection Established";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    }
    return "Error";
}

std::string reply_text(int status, std::string_view message)
{
    std::string body(message);
    body += '\n';
    std::string r = "HTTP/1.1 " + std::to_string(status) + ' ' + status_phrase(status) + "\r\n";
    r += "Content-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    r += "Connection: close\r\n\r\n";
    return r + body;
}

/// Closes after our last byte: shut down sending, then discard what the client still sends
/// (briefly, bounded) so that the close does not reset the reply away.
asio::awaitable<void> linger_close(tcp::socket& s)
{
    boost::system::error_code ec;
    s.shutdown(tcp::socket::shutdown_send, ec);
    const auto deadline = clock_type::now() + std::chrono::seconds(1);
    std::array<char, 4096> sink;
    std::size_t drained = 0;
    while (!ec && drained < 256 * 1024)
        drained += co_await read_before(s, asio::buffer(sink), deadline, ec);
    s.close(ec);
}

/// Sends `text`, a whole answer, then closes.
asio::awaitable<void> send_and_close(tcp::socket& s, std::string_view text)
{
    auto [ec, n] =
        co_await asio::async_write(s, asio::buffer(text), asio::as_tuple(asio::use_awaitable));
    if (ec)
    {
        s.close(ec);
        co_return;
    }
    co_await linger_close(s);
}

/// Answers `status` with `message` as text/plain, then closes.
asio::awaitable<void> answer(tcp::socket& s, int status, std::string_view message)
{
    const std::string r = reply_text(status, message);
    co_await send_and_close(s, r);
}

/// Records `why` (no destination) and answers it.
asio::awaitable<void> refuse(egress& gate, tcp::socket& s, net_protocol protocol,
                             std::string requested, open_status why, std::string message,
                             int status = 0)
{
    const opened r = gate.refuse(protocol, std::move(requested), why, std::move(message));
    co_await answer(s, status ? status : http_status(r.status), r.message);
}

struct head_result
{
    std::string head{};
    std::string rest{};
    std::optional<http_refusal> refusal{};
    bool closed = false; ///< the client left before a head: nothing to answer
};

/// Reads until the blank line that ends the head.
asio::awaitable<head_result> read_head(tcp::socket& s, std::string buf, std::size_t limit,
                                       clock_type::time_point deadline)
{
    head_result r;
    std::array<char, 4096> chunk;
    for (;;)
    {
        const auto end = buf.find("\r\n\r\n");
        if (end != std::string::npos && end + 4 <= limit)
        {
            r.rest = buf.substr(end + 4);
            buf.resize(end + 4);
            r.head = std::move(buf);
            co_return r;
        }
        if (end != std::string::npos || buf.size() >= limit)
        {
            r.refusal = http_refusal{431, "request head larger than the limit"};
            co_return r;
        }
        if (buf.find("\n\n") != std::string::npos)
        {
            r.refusal = http_refusal{400, "bare LF in the request head"};
            co_return r;
        }
        boost::system::error_code ec;
        const std::size_t n = co_await read_before(s, asio::buffer(chunk), deadline, ec);
        if (ec == asio::error::timed_out)
        {
            r.refusal = http_refusal{408, "request head not complete in time"};
            co_return r;
        }
        if (ec)
        {
            r.closed = true;
            co_return r;
        }
        buf.append(chunk.data(), n);
    }
}

/// Parses a head that passed `check_raw_head`.
std::optional<http_refusal> parse_head(head_parser& p, const std::string& head, std::size_t limit)
{
    p.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limit, UINT32_MAX)));
    p.body_limit(boost::none);
    p.eager(false);
    boost::system::error_code ec;
    p.put(asio::buffer(head), ec);
    if (ec == http::error::header_limit)
        return http_refusal{431, "request head larger than the limit"};
    if (ec && ec != http::error::need_more)
        return http_refusal{400, "malformed request head: " + ec.message()};
    if (!p.is_header_done())
        return http_refusal{400, "malformed request head"};
    return check_fields(p.get().base());
}

/// The host part of a CONNECT target, as the client wrote it (for the record).
std::string requested_of_target(std::string_view target)
{
    if (!target.empty() && target.front() == '[')
    {
        const auto close = target.find(']');
        return std::string(target.substr(0, close == std::string_view::npos ? target.size() : close + 1));
    }
    return std::string(target.substr(0, target.rfind(':')));
}

std::string failure_text(const failure& f)
{
    return f.diag.message.empty() ? std::string("bad request") : f.diag.message;
}

// ---- CONNECT --------------------------------------------------------------------------

/// The answer to a CONNECT that would be inspected while the call's inspected tunnels are
/// all taken: the client may come back soon (a tunnel ends), unlike a cap on connections.
constexpr std::string_view inspect_busy =
    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n"
    "Content-Length: 44\r\nConnection: close\r\n\r\ntoo many inspected tunnels open; retry soon\n";

/// Answers 200 on a connected destination, carries the tunnel (inspected when `inspected`:
/// the caller holds its slot), and records the close.
asio::awaitable<void> run_tunnel(egress& gate, tcp::socket& client, opened& op,
                                 const authority& target, std::string rest, bool inspected)
{
    static constexpr std::string_view ok = "HTTP/1.1 200 Connection Established\r\n\r\n";
    relay_totals t;
    try
    {
        auto [ec, n] = co_await asio::async_write(client, asio::buffer(ok),
                                                  asio::as_tuple(asio::use_awaitable));
        if (ec)
            t.reason = "reset";
        else
            t = co_await carry_tunnel(gate, client, op, target, std::move(rest), inspected);
    }
    catch (const boost::system::system_error&)
    {
        t.reason = "stopped";
    }
    gate.closed(op.record, std::move(t));
}

asio::awaitable<void> serve_connect(egress& gate, tcp::socket& client, const head_parser& p,
                                    std::string rest)
{
    const std::string_view target = p.get().target();
    std::string requested = requested_of_target(target);
    auto a = parse_authority(target, std::nullopt);
    if (!a)
    {
        co_await refuse(gate, client, net_protocol::connect, std::move(requested),
                        open_status::bad_request, failure_text(a.error()));
        co_return;
    }
    // An inspected tunnel takes its place first: past the call's cap, nothing is dialled.
    const tunnel_choice choice = choose_tunnel(gate, net_protocol::connect, requested, *a);
    if (choice.over_cap)
    {
        co_await send_and_close(client, inspect_busy);
        co_return;
    }
    opened op = co_await gate.open(net_protocol::connect, std::move(requested), *a);
    if (op.status != open_status::connected)
    {
        co_await answer(client, http_status(op.status), op.message);
        co_return;
    }
    co_await run_tunnel(gate, client, op, *a, std::move(rest), choice.inspected);
}

// ---- absolute-form forwarding -----------------------------------------------------------

struct forward_target
{
    authority dest{};
    std::uint16_t default_port = 80;
    bool https = false;
    std::string requested{};
    std::string path{}; ///< origin-form: path and query
    std::string scheme{};
};

/// Parses an absolute-form target; a refusal for anything else.
std::variant<forward_target, std::pair<open_status, std::string>> parse_target(std::string_view target)
{
    using refusal = std::pair<open_status, std::string>;
    if (target.empty() || target.front() == '/' || target == "*")
        return refusal{open_status::bad_request,
                       "origin-form request: a proxy needs an absolute URI (http://host/...)"};
    auto u = boost::urls::parse_absolute_uri(target);
    if (!u)
        return refusal{open_status::bad_request, "request target is not a valid absolute URI"};
    forward_target t;
    t.requested = std::string(u->encoded_host());
    if (u->scheme_id() == boost::urls::scheme::https)
        t.https = true, t.default_port = 443, t.scheme = "https";
    else if (u->scheme_id() == boost::urls::scheme::http)
        t.scheme = "http";
    else
        return refusal{open_status::unsupported, "scheme not supported (http only; https via CONNECT)"};
    auto host = canonicalize_host(u->encoded_host());
    if (!host)
        return refusal{open_status::bad_request, failure_text(host.error())};
    t.dest.host = std::move(*host);
    t.dest.port = t.default_port;
    if (u->has_port() && !u->port().empty())
    {
        auto port = parse_port(u->port());
        if (!port)
            return refusal{open_status::bad_request, failure_text(port.error())};
        t.dest.port = *port;
    }
    t.path = u->encoded_path().empty() ? std::string("/") : std::string(u->encoded_path());
    if (u->has_query())
        t.path += "?" + std::string(u->encoded_query());
    return t;
}

/// https in absolute form: judged by the rules as port 443, never forwarded.
asio::awaitable<void> refuse_https(egress& gate, tcp::socket& client, forward_target& t)
{
    const auto& cfg = gate.config();
    const rule_match m = t.dest.host.is_ip() ? cfg.rules.match_ip(*t.dest.host.ip, t.dest.port)
                                             : cfg.rules.match_name(t.dest.host.name, t.dest.port);
    const bool allowed = m.matched ? m.action == net_action::allow : cfg.mode == net_mode::proxy;
    if (allowed)
        co_await refuse(gate, client, net_protocol::http, std::move(t.requested),
                        open_status::unsupported, "https is not forwarded: use CONNECT");
    else
        co_await refuse(gate, client, net_protocol::http, std::move(t.requested),
                        open_status::denied, "destination not allowed");
}

asio::awaitable<bool> write_counted(tcp::socket& s, std::string_view bytes, std::uint64_t& count)
{
    auto [ec, n] = co_await asio::async_write(s, asio::buffer(bytes), asio::as_tuple(asio::use_awaitable));
    count += n;
    co_return !ec;
}

/// Forwards exactly Content-Length bytes: `rest` first, then from the client.
asio::awaitable<bool> forward_sized(tcp::socket& client, tcp::socket& server, std::uint64_t length,
                                    std::string_view rest, std::chrono::milliseconds idle,
                                    std::uint64_t& up)
{
    const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(rest.size(), length));
    if (take && !co_await write_counted(server, rest.substr(0, take), up))
        co_return false;
    std::uint64_t left = length - take;
    std::vector<char> buf(io_chunk);
    while (left > 0)
    {
        boost::system::error_code ec;
        const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(left, buf.size()));
        const std::size_t n = co_await read_before(client, asio::buffer(buf.data(), want),
                                                   clock_type::now() + idle, ec);
        if (ec)
            co_return false;
        if (!co_await write_counted(server, std::string_view(buf.data(), n), up))
            co_return false;
        left -= n;
    }
    co_return true;
}

/// Decodes a chunked body with Beast and sends it re-framed as chunked (no trailers):
/// exactly the body, never the bytes after it.
asio::awaitable<bool> forward_chunked(tcp::socket& client, tcp::socket& server, head_parser& p,
                                      std::string in, std::chrono::milliseconds idle,
                                      std::uint64_t& up)
{
    std::string out;
    // Beast keeps references to the callbacks: they live in this frame.
    auto on_header = [&out](std::uint64_t size, std::string_view, boost::system::error_code&) {
        if (size)
        {
            char hex[32];
            std::snprintf(hex, sizeof hex, "%llx\r\n", static_cast<unsigned long long>(size));
            out += hex;
        }
    };
    auto on_body = [&out](std::uint64_t remain, std::string_view body, boost::system::error_code&) {
        out.append(body);
        if (remain == body.size())
            out += "\r\n";
        return body.size();
    };
    p.on_chunk_header(on_header);
    p.on_chunk_body(on_body);
    p.eager(true);
    std::array<char, io_chunk> chunk;
    while (!p.is_done())
    {
        boost::system::error_code ec;
        const std::size_t used = in.empty() ? 0 : p.put(asio::buffer(in), ec);
        if (ec && ec != http::error::need_more)
            co_return false;
        in.erase(0, used);
        if (!out.empty() && !co_await write_counted(server, out, up))
            co_return false;
        out.clear();
        if (p.is_done())
            break;
        if (used == 0)
        {
            if (in.size() > io_chunk)
                co_return false;
            const std::size_t n = co_await read_before(client, asio::buffer(chunk),
                                                       clock_type::now() + idle, ec);
            if (ec)
                co_return false;
            in.append(chunk.data(), n);
        }
    }
    co_return co_await write_counted(server, "0\r\n\r\n", up);
}

/// Sends the head and the body, then relays the response until the origin closes.
asio::awaitable<void> run_forward(egress& gate, tcp::socket& client, opened& op, head_parser& p,
                                  std::string head, std::string rest)
{
    const auto idle = gate.limits().tunnel_idle_timeout;
    std::uint64_t up = 0;
    relay_totals t;
    try
    {
        const bool has_body = p.chunked() || p.content_length().value_or(0) > 0;
        bool ok = co_await write_counted(op.socket, head, up);
        if (ok && has_body && expects_continue(p.get().base()))
        {
            std::uint64_t ignored = 0;
            ok = co_await write_counted(client, "HTTP/1.1 100 Continue\r\n\r\n", ignored);
        }
        if (ok && has_body)
            ok = p.chunked() ? co_await forward_chunked(client, op.socket, p, std::move(rest), idle, up)
                             : co_await forward_sized(client, op.socket, *p.content_length(), rest, idle, up);
        t = co_await relay_one_way(op.socket, client, std::move(op.early_bytes), idle);
        if (!ok && t.reason == "eof")
            t.reason = "reset";
        co_await linger_close(client);
    }
    catch (const boost::system::system_error&)
    {
        t.reason = "stopped";
    }
    t.up = up;
    gate.closed(op.record, std::move(t));
}

asio::awaitable<void> serve_forward(egress& gate, tcp::socket& client, head_parser& p,
                                    std::string rest)
{
    auto parsed = parse_target(p.get().target());
    if (auto* r = std::get_if<std::pair<open_status, std::string>>(&parsed))
    {
        co_await refuse(gate, client, net_protocol::http, {}, r->first, std::move(r->second));
        co_return;
    }
    auto& t = std::get<forward_target>(parsed);
    if (t.https)
    {
        co_await refuse_https(gate, client, t);
        co_return;
    }
    opened op = co_await gate.open(net_protocol::http, t.requested, t.dest);
    if (op.status != open_status::connected)
    {
        co_await answer(client, http_status(op.status), op.message);
        co_return;
    }
    const std::string host_field = format_authority(t.dest.host, t.dest.port, t.default_port);
    const std::string target = op.via_http_upstream ? t.scheme + "://" + host_field + t.path : t.path;
    std::string head = forward_head(p.get().base(), target, host_field,
                                    op.via_http_upstream ? op.upstream_authorization : std::string{});
    co_await run_forward(gate, client, op, p, std::move(head), std::move(rest));
}

// ---- one connection ---------------------------------------------------------------------

std::string requested_for_cap(const head_parser& p)
{
    const std::string_view target = p.get().target();
    if (p.get().method() == http::verb::connect)
        return requested_of_target(target);
    auto u = boost::urls::parse_absolute_uri(target);
    return u ? std::string(u->encoded_host()) : std::string{};
}

asio::awaitable<void> serve_one(egress& gate, tcp::socket& client, std::string first,
                                const std::string& over_cap, clock_type::time_point deadline)
{
    const auto limit = gate.limits().max_head_bytes;
    head_result h = co_await read_head(client, std::move(first), limit, deadline);
    if (h.closed)
        co_return;
    if (!h.refusal)
        h.refusal = check_raw_head(h.head);
    head_parser p;
    if (!h.refusal)
        h.refusal = parse_head(p, h.head, limit);
    if (h.refusal)
    {
        co_await refuse(gate, client, net_protocol::http, {}, open_status::bad_request,
                        std::move(h.refusal->message), h.refusal->status);
        co_return;
    }
    const bool is_connect = p.get().method() == http::verb::connect;
    if (!over_cap.empty())
    {
        const opened r = gate.refuse(is_connect ? net_protocol::connect : net_protocol::http,
                                     requested_for_cap(p), open_status::tunnel_cap,
                                     "too many connections through this proxy (" + over_cap + ")",
                                     over_cap);
        co_await answer(client, http_status(r.status), r.message);
        co_return;
    }
    if (is_connect)
        co_await serve_connect(gate, client, p, std::move(h.rest));
    else
        co_await serve_forward(gate, client, p, std::move(h.rest));
}

} // namespace

asio::awaitable<std::size_t> read_before(tcp::socket& s, asio::mutable_buffer b,
                                         clock_type::time_point deadline,
                                         boost::system::error_code& ec)
{
    using namespace asio::experimental::awaitable_operators;
    // Bytes already here (the common case right after accept): no timer, no race.
    if (const std::size_t ready = s.available(ec); !ec && ready > 0)
        co_return s.read_some(b, ec);
    ec = {};
    asio::steady_timer timer(s.get_executor());
    timer.expires_at(deadline);
    auto r = co_await (s.async_read_some(b, asio::as_tuple(asio::use_awaitable)) ||
                       timer.async_wait(asio::as_tuple(asio::use_awaitable)));
    if (r.index() == 1)
    {
        ec = asio::error::timed_out;
        co_return 0;
    }
    auto [e, n] = std::get<0>(r);
    ec = e;
    co_return n;
}

asio::awaitable<void> serve_http(std::shared_ptr<egress> gate, tcp::socket client,
                                 std::string first, std::string over_cap,
                                 clock_type::time_point head_deadline)
{
    try
    {
        co_await serve_one(*gate, client, std::move(first), over_cap, head_deadline);
    }
    catch (const boost::system::system_error&)
    {
    }
    boost::system::error_code ignored;
    client.close(ignored);
}

} // namespace sandbox::net
