// tools/sandboxd/server.cpp: accept, check the peer, read requests with a size limit and an
// idle timeout, answer each, keep the connection while the client wants it.
#include "server.hpp"

#include "api.hpp"
#include "attach.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <cerrno>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sandboxd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using local = asio::local::stream_protocol;

namespace {

peer peer_of(local::socket& s)
{
    ucred c{};
    socklen_t len = sizeof c;
    if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &c, &len) != 0)
        return peer{0xFFFFFFFF, 0xFFFFFFFF, 0};
    return peer{c.uid, c.gid, c.pid};
}

boost::json::object request_line(const peer& who)
{
    return {{"event", "request"}, {"peer_uid", who.uid}, {"peer_gid", who.gid},
            {"peer_pid", who.pid}};
}

// The sandbox a request concerns: named in its path, or the one of the session it names.
std::string sandbox_of(daemon& d, std::string_view target)
{
    target = target.substr(0, target.find('?'));
    auto segment = [&](std::string_view prefix) {
        auto rest = target.substr(prefix.size());
        return std::string(rest.substr(0, rest.find('/')));
    };
    if (target.starts_with("/v1/sandboxes/"))
        return segment("/v1/sandboxes/");
    if (target.starts_with("/v1/sessions/"))
        if (auto it = d.sessions().find(segment("/v1/sessions/")); it != d.sessions().end())
            return it->second.sandbox;
    return {};
}

// One audit line for an answered request.
void audit_request(daemon& d, const peer& who, const request& req, int status)
{
    auto line = request_line(who);
    line["method"] = std::string(req.method_string());
    line["target"] = std::string(req.target());
    if (auto name = sandbox_of(d, req.target()); !name.empty())
        line["sandbox"] = std::move(name);
    line["status"] = status;
    d.audit(std::move(line));
}

std::chrono::steady_clock::duration idle(const daemon& d)
{
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        d.document().daemon.idle_timeout);
}

// Lingering close, after an answer sent before the whole request was read (403, 413, 400):
// stop sending and discard what the client still writes (for up to 2 s), so that its write
// does not fail with EPIPE before it could read the answer.
asio::awaitable<void> linger(stream_type& stream)
{
    boost::system::error_code ignored;
    stream.socket().shutdown(local::socket::shutdown_send, ignored);
    stream.expires_after(std::chrono::seconds(2));
    char sink[8192];
    for (;;)
    {
        auto [ec, n] = co_await stream.async_read_some(asio::buffer(sink),
                                                       asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;
    }
}

asio::awaitable<void> refuse(daemon& d, stream_type& stream, const peer& who,
                             const char* reason, const std::string& message)
{
    auto line = request_line(who);
    line["event"] = "refused";
    line["reason"] = reason;
    d.audit(std::move(line));
    request req;
    req.version(11);
    req.keep_alive(false);
    auto res = error_response(req, sandbox::errc::forbidden, message);
    stream.expires_after(std::chrono::seconds(5));
    co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    co_await linger(stream);
}

// A uid that holds daemon.max_connections_per_uid already: 429, then closed.
asio::awaitable<void> refuse_busy(daemon& d, stream_type& stream, const peer& who)
{
    auto line = request_line(who);
    line["event"] = "refused";
    line["reason"] = "daemon.max_connections_per_uid";
    d.audit(std::move(line));
    request req;
    req.version(11);
    response res{http::status::too_many_requests, 11};
    res.set(http::field::content_type, "application/json");
    res.keep_alive(false);
    res.body() = boost::json::serialize(boost::json::object{
                     {"error", boost::json::object{
                                   {"code", "budget_exceeded"},
                                   {"limit", "daemon.max_connections_per_uid"},
                                   {"message", "uid " + std::to_string(who.uid) + " holds " +
                                                   std::to_string(d.document().daemon.max_connections_per_uid) +
                                                   " connections already, the most "
                                                   "daemon.max_connections_per_uid allows"}}}}) +
                 "\n";
    res.prepare_payload();
    stream.expires_after(std::chrono::seconds(5));
    co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    co_await linger(stream);
}

// GET /v1/sessions/{id}/output?follow=1: the session's events as NDJSON over chunked
// transfer until it exits (or is closed, or the client goes). A client that falls behind the
// log gets a "gap" line and goes on from where the log resumes. Ends the connection.
asio::awaitable<void> follow(stream_type& stream, const request& req,
                             std::shared_ptr<sandbox::session> s, std::uint64_t offset,
                             std::chrono::steady_clock::duration write_bound)
{
    http::response<http::empty_body> head{http::status::ok, req.version()};
    head.set(http::field::content_type, "application/x-ndjson");
    head.chunked(true);
    head.keep_alive(false);
    http::response_serializer<http::empty_body> sr{head};
    stream.expires_never();
    auto [hec, hn] = co_await http::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
    if (hec)
        co_return;
    auto w = s->watch(offset);
    for (;;)
    {
        std::string line;
        bool last = false;
        const auto before = w.position();
        try
        {
            auto e = co_await w.next();
            line = event_line(e);
            last = e.what != sandbox::session_event::kind::output;
        }
        catch (const sandbox::error& e)
        {
            if (e.code() == sandbox::errc::sequence_gap)
                line = gap_line(before, w.position());
            else
                last = true;
        }
        if (!line.empty())
        {
            // A follower that does not read is dropped once a line waits this long.
            stream.expires_after(write_bound);
            auto [ec, n] = co_await asio::async_write(stream, http::make_chunk(asio::buffer(line)),
                                                      asio::as_tuple(asio::use_awaitable));
            stream.expires_never();
            if (ec)
                co_return; // the client went or stalled: the session goes on
        }
        if (last)
            break;
    }
    // The end too: a client that stopped reading does not hold its connection past the bound.
    stream.expires_after(write_bound);
    co_await asio::async_write(stream, http::make_chunk_last(), asio::as_tuple(asio::use_awaitable));
    stream.expires_never();
}

// Completes when the client closes its end (EOF or a reset), or when cancelled. Bytes the
// client sends meanwhile (a pipelined request) are left unread: then nothing can be told
// until they are read, and this waits only for its cancellation.
asio::awaitable<void> client_gone(local::socket& s)
{
    for (;;)
    {
        auto [ec] = co_await s.async_wait(local::socket::wait_read,
                                          asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted)
            co_return;
        char c;
        const ssize_t n = ec ? 0 : ::recv(s.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            co_return; // gone
        if (n > 0)
        {
            asio::steady_timer forever(s.get_executor(), asio::steady_timer::time_point::max());
            co_await forever.async_wait(asio::as_tuple(asio::use_awaitable));
            co_return;
        }
    }
}

// The peer checks of a new connection, each refusal answered here: the hold is empty then.
asio::awaitable<std::shared_ptr<void>> admit_peer(daemon& d, stream_type& stream, const peer& who)
{
    if (!d.admits(who))
    {
        co_await refuse(d, stream, who, "peer not allowed (daemon.allow_uids / allow_gids)",
                        "uid " + std::to_string(who.uid) + " may not use this daemon");
        co_return nullptr;
    }
    if (d.in_own_tree(who))
    {
        co_await refuse(d, stream, who, "peer is a command of this daemon",
                        "a command started by this daemon may not use it");
        co_return nullptr;
    }
    auto held = d.hold_connection(who.uid);
    if (!held)
        co_await refuse_busy(d, stream, who);
    co_return held;
}

// Reads one request under the document's limits (read afresh each time: a reload may change
// them). A bad or oversized one is answered once and ends the connection (the stream is out
// of step), as does the client's end: nothing then.
asio::awaitable<std::optional<request>> read_request(daemon& d, stream_type& stream,
                                                     beast::flat_buffer& buffer, const peer& who)
{
    const auto limit = d.document().daemon.max_body_bytes;
    http::request_parser<http::string_body> parser;
    parser.body_limit(static_cast<std::uint64_t>(limit));
    parser.header_limit(64 * 1024);
    stream.expires_after(idle(d));
    auto [ec, n] =
        co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (!ec)
        co_return parser.release();
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::connection_reset || ec == asio::error::eof)
        co_return std::nullopt;
    request req;
    req.version(11);
    auto res = error_response(
        req,
        ec == http::error::body_limit ? ec : boost::system::error_code(sandbox::errc::validation),
        "bad request: " + ec.message());
    res.keep_alive(false);
    auto line = request_line(who);
    line["status"] = static_cast<int>(res.result_int());
    line["error"] = ec.message();
    d.audit(std::move(line));
    stream.expires_after(std::chrono::seconds(5));
    co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    co_await linger(stream);
    co_return std::nullopt;
}

// Answers one request: an attach or a follow takes the connection over, anything else is
// answered in one response. True when the connection may carry another request.
asio::awaitable<bool> serve(daemon& d, stream_type& stream, const request& req, const peer& who)
{
    stream.expires_never(); // an exec or a long-poll may take its time
    std::uint64_t offset = 0;
    std::shared_ptr<sandbox::session> attached;
    std::optional<response> refusal;
    if (attach_target(d, req, who, attached, offset, refusal) && !refusal)
    {
        audit_request(d, who, req, 101);
        co_await attach(stream, req, std::move(attached), offset);
        co_return false;
    }
    if (refusal)
    {
        refusal->keep_alive(false);
        audit_request(d, who, req, static_cast<int>(refusal->result_int()));
        stream.expires_after(std::chrono::seconds(5));
        co_await http::async_write(stream, *refusal, asio::as_tuple(asio::use_awaitable));
        co_return false;
    }
    if (auto s = follow_target(d, req, who, offset))
    {
        audit_request(d, who, req, 200);
        co_await follow(stream, req, std::move(s), offset, idle(d));
        co_return false;
    }
    response res;
    try
    {
        auto& raw = stream.socket();
        res = co_await handle(d, req, who, [&raw] { return client_gone(raw); });
    }
    catch (const client_went_away&)
    {
        co_return false;
    }
    audit_request(d, who, req, static_cast<int>(res.result_int()));
    stream.expires_after(idle(d));
    const bool keep = res.keep_alive();
    auto [wec, w] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    co_return !wec && keep;
}

asio::awaitable<void> connection(daemon& d, local::socket sock)
{
    const peer who = peer_of(sock);
    stream_type stream(std::move(sock));
    const auto held = co_await admit_peer(d, stream, who);
    if (!held)
        co_return;
    beast::flat_buffer buffer;
    for (;;)
    {
        auto req = co_await read_request(d, stream, buffer, who);
        if (!req || !co_await serve(d, stream, *req, who))
            co_return;
    }
}

} // namespace

// A few descriptors held back for the moment the process runs out: given up to accept the
// client that waits and answer it 503, then taken again. Without them a full table leaves
// every client unanswered (accept fails with EMFILE, the client waits in the backlog).
class descriptor_reserve
{
public:
    descriptor_reserve() { take(); }
    ~descriptor_reserve() { give_up(); }
    descriptor_reserve(const descriptor_reserve&) = delete;
    descriptor_reserve& operator=(const descriptor_reserve&) = delete;

    void take()
    {
        for (int& fd : fds_)
            if (fd < 0)
                fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    void give_up()
    {
        for (int& fd : fds_)
            if (fd >= 0)
            {
                ::close(fd);
                fd = -1;
            }
    }

private:
    int fds_[4] = {-1, -1, -1, -1};
};

bool out_of_descriptors(const boost::system::error_code& ec)
{
    return ec == boost::system::errc::too_many_files_open ||
           ec == boost::system::errc::too_many_files_open_in_system;
}

// Out of descriptors: the client at the head of the backlog is answered 503 at once (with a
// reserve descriptor) and closed, so that it learns why instead of waiting.
asio::awaitable<void> shed_one(daemon& d, local::acceptor& acceptor, descriptor_reserve& reserve)
{
    reserve.give_up();
    boost::system::error_code ec;
    local::socket sock(acceptor.get_executor());
    acceptor.accept(sock, ec); // the listener is readable: this does not block
    if (!ec)
    {
        d.audit({{"event", "refused"}, {"reason", "out of descriptors"}});
        static const std::string body =
            R"({"error":{"code":"budget_exceeded","limit":"descriptors",)"
            R"("message":"the daemon is out of file descriptors"}})"
            "\n";
        static const std::string answer =
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            "Connection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body;
        sock.non_blocking(true, ec);
        sock.write_some(asio::buffer(answer), ec); // fits any socket buffer; never blocks
        sock.shutdown(local::socket::shutdown_send, ec);
        // What the client sent already is read and dropped: closing on unread bytes would
        // reset the connection, and the client could lose the answer.
        char sink[4096];
        for (int i = 0; i < 16 && sock.read_some(asio::buffer(sink), ec) > 0;)
            ++i;
        sock.close(ec);
    }
    reserve.take();
    // Give the connections that hold descriptors a moment to end before accepting again.
    asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(10));
    co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<void> serve(daemon& d, local::acceptor& acceptor)
{
    descriptor_reserve reserve;
    for (;;)
    {
        auto [ec, sock] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted || !acceptor.is_open())
            co_return;
        if (out_of_descriptors(ec))
        {
            co_await shed_one(d, acceptor, reserve);
            continue;
        }
        if (ec) // another failure: wait a little, the daemon goes on
        {
            asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(100));
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
            continue;
        }
        asio::co_spawn(acceptor.get_executor(), connection(d, std::move(sock)),
                       [](std::exception_ptr) {}); // a client's failure ends its connection only
    }
}

} // namespace sandboxd
