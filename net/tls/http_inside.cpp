// net/tls/http_inside.cpp: the requests and responses of an inspected tunnel, in named steps:
// wait for a request, read its head, judge it, send its head, then its body and the response
// side by side, and loop while both ends keep the connection.
#include "http_inside.hpp"
#include "hook_call.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/url/parse.hpp>

#include <openssl/crypto.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>

namespace sandbox::net::tls {

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using steady = std::chrono::steady_clock;

// A head over 64 KiB is refused; what a leg may hold unparsed is bounded by it.
constexpr std::size_t head_limit = 64 * 1024;
constexpr std::size_t read_chunk = 16 * 1024;
constexpr std::size_t max_buffered = head_limit + read_chunk;

// A body the parser frames and counts: its bytes go on as they came. Only for a hook that
// sees bodies is it also kept, decoded (`kept`, set before the body is read).
struct counted_body
{
    struct value_type
    {
        std::uint64_t bytes = 0;
        std::string* kept = nullptr;
    };
    struct reader
    {
        value_type& v;
        template <bool is_request, class Fields>
        reader(http::header<is_request, Fields>&, value_type& b) : v(b)
        {}
        void init(const boost::optional<std::uint64_t>&, error_code& ec) { ec = {}; }
        template <class Buffers> std::size_t put(const Buffers& b, error_code& ec)
        {
            ec = {};
            const std::size_t size = asio::buffer_size(b);
            v.bytes += size;
            if (v.kept)
                for (auto piece : boost::beast::buffers_range_ref(b))
                    v.kept->append(static_cast<const char*>(piece.data()), piece.size());
            return size;
        }
        void finish(error_code& ec) { ec = {}; }
    };
};

using request_parser = http::request_parser<counted_body>;
using response_parser = http::response_parser<counted_body>;
using request = http::request<counted_body>;

template <class Parser> void strict_limits(Parser& p)
{
    p.header_limit(static_cast<std::uint32_t>(head_limit));
    p.body_limit(boost::none); // bodies stream through, never held
}

// Chunk extensions (`5;name=value`) carry bytes a hook never sees: where a hook sees the
// body, a message with any fails as one that does not parse.
struct no_chunk_extensions
{
    void operator()(std::uint64_t, boost::beast::string_view extensions, error_code& ec) const
    {
        if (!extensions.empty())
            ec = http::error::bad_chunk_extension;
    }
};
no_chunk_extensions refuse_extensions; // the parsers keep a reference to it

template <class Parser> void shown_to_hooks(Parser& p)
{
    p.on_chunk_header(refuse_extensions);
}

// One leg's plaintext read ahead of the parser. Holds no buffer while the leg is idle.
class inbox
{
public:
    explicit inbox(tls_leg& l) : leg_(l) {}
    tls_leg& leg() noexcept { return leg_; }
    std::size_t size() const noexcept { return buf_.size(); }
    asio::const_buffer data(std::size_t from = 0) const noexcept { return buf_.data() + from; }
    void consume(std::size_t n)
    {
        buf_.consume(n);
        if (buf_.size() == 0)
            buf_.shrink_to_fit();
    }
    // More bytes the leg has now, without waiting (`would_block`: none yet), or why not
    // (the leg's end, an error, a head past its cap).
    error_code more_now()
    {
        if (buf_.size() >= max_buffered)
            return http::error::header_limit;
        auto space = buf_.prepare(read_chunk);
        auto [ec, n] = leg_.try_read(static_cast<char*>(space.data()), space.size());
        if (ec != asio::error::would_block)
            buf_.commit(n);
        else if (buf_.size() == 0)
            buf_.shrink_to_fit();
        return ec;
    }
    // At least one more byte, or why not.
    asio::awaitable<error_code> more()
    {
        for (;;)
        {
            const error_code ec = more_now();
            if (ec != asio::error::would_block)
                co_return ec;
            if (auto e = co_await leg_.wait())
                co_return e;
        }
    }

private:
    tls_leg& leg_;
    boost::beast::flat_buffer buf_;
};

// How a leg's end or error ends the tunnel.
std::string end_of(const error_code& ec)
{
    if (ec == asio::error::eof)
        return "closed";
    if (ec == asio::ssl::error::stream_truncated)
        return "truncated";
    return "reset";
}

bool parse_error(const error_code& ec)
{
    return ec.category() == http::make_error_code(http::error::need_more).category();
}

asio::awaitable<bool> send(tls_leg& to, asio::const_buffer b, std::uint64_t& count,
                           steady::time_point& last)
{
    error_code ec;
    if (b.size() > 0)
        ec = co_await to.write(static_cast<const char*>(b.data()), b.size());
    if (!ec)
    {
        count += b.size();
        last = steady::now();
    }
    co_return !ec;
}

using head_read = std::pair<error_code, std::size_t>;

template <class Parser> asio::awaitable<head_read> read_head(inbox& in, Parser& p)
{
    std::size_t used = 0;
    for (;;)
    {
        error_code ec;
        if (in.size() > used)
            used += p.put(in.data(used), ec);
        else
            ec = http::error::need_more;
        // The parser's own limit bounds what it has not consumed yet, not the fields it took
        // line by line: the head as a whole is bounded here.
        if (!ec && p.is_header_done())
            co_return head_read(used > head_limit ? http::error::header_limit : error_code(), used);
        if (ec && ec != http::error::need_more)
            co_return head_read(ec, used);
        if (in.size() > head_limit) // all of it is this head so far
            co_return head_read(http::error::header_limit, used);
        if (auto e = co_await in.more())
        {
            if (e == asio::error::eof && in.size() > 0) // cut inside a head: a bad request
                e = http::error::partial_message;
            co_return head_read(e, used);
        }
    }
}

// ---- where a body goes -----------------------------------------------------------------------
// `frame_body` hands each piece of a body, as the parser framed it, to a sink (`put`, with the
// body's decoded total so far). A sink that holds something (`pending`) is flushed when it
// is `ready`, and always before the proxy waits for more bytes, so nothing it holds waits on
// the sender's next write.

constexpr std::size_t unbounded = std::numeric_limits<std::size_t>::max(); // a sink's room

// On to a leg, as the bytes came (the piece is sent before the inbox lets it go).
struct send_sink
{
    tls_leg& to;
    std::uint64_t& count;
    steady::time_point& last;
    asio::const_buffer piece{};

    error_code put(asio::const_buffer b, std::uint64_t)
    {
        piece = b;
        return {};
    }
    std::size_t room() const noexcept { return unbounded; }
    bool ready() const noexcept { return piece.size() > 0; }
    bool pending() const noexcept { return false; }
    asio::awaitable<error_code> flush(bool)
    {
        const bool sent = co_await send(to, piece, count, last);
        piece = asio::const_buffer();
        co_return sent ? error_code() : error_code(asio::error::connection_reset);
    }
};

// Kept whole for a head hook: the bytes as they came in `raw` (sent on once the hook allows;
// decoded in the body's `kept`); `body_limit` past `cap` decoded bytes, or framing bytes
// out of proportion.
struct keep_sink
{
    std::string& raw;
    std::size_t cap;
    steady::time_point& last;

    error_code put(asio::const_buffer b, std::uint64_t decoded)
    {
        raw.append(static_cast<const char*>(b.data()), b.size());
        last = steady::now(); // bytes move: the tunnel is not idle
        const bool over = decoded > cap || raw.size() > 2 * cap + head_limit;
        return over ? error_code(http::error::body_limit) : error_code();
    }
    std::size_t room() const noexcept { return unbounded; }
    bool ready() const noexcept { return false; }
    bool pending() const noexcept { return false; }
    asio::awaitable<error_code> flush(bool) { co_return error_code(); }
};

// A refused request's body, read and dropped so that the tunnel can serve the next request:
// at most `drain_limit` bytes of it (`body_limit` past them).
constexpr std::uint64_t drain_limit = 1024 * 1024;

struct drop_sink
{
    steady::time_point& last;
    std::uint64_t dropped = 0;

    error_code put(asio::const_buffer b, std::uint64_t)
    {
        dropped += b.size();
        last = steady::now();
        return dropped > drain_limit ? error_code(http::error::body_limit) : error_code();
    }
    std::size_t room() const noexcept { return unbounded; }
    bool ready() const noexcept { return false; }
    bool pending() const noexcept { return false; }
    asio::awaitable<error_code> flush(bool) { co_return error_code(); }
};

// Shown to a body hook window by window (decoded in `decoded`, which the body's `kept`
// points to), each window sent on as it came once the hook allows it. A refusal stops the
// body (`access_denied`, the decision in `refusal`).
struct stream_sink
{
    tls_leg& to;
    std::uint64_t& count;
    steady::time_point& last;
    const http_body_hook& hook;
    const http_hooks& hooks;
    http_body_chunk chunk{};
    std::string raw{};
    std::string decoded{};
    std::string word{}; ///< the record's word: "allowed", "timeout_allowed" or a refusal's
    hook_decision refusal{};
    std::ptrdiff_t fields = 0; ///< the head's field count (trailers would add to it)

    error_code put(asio::const_buffer b, std::uint64_t)
    {
        raw.append(static_cast<const char*>(b.data()), b.size());
        return {};
    }
    // The raw bytes the parser may take now: never more than a window's room, so that a
    // window's decoded bytes stay within `http_body_window`.
    std::size_t room() const noexcept
    {
        return decoded.size() < http_body_window ? http_body_window - decoded.size() : 0;
    }
    // A full window, or framing bytes out of proportion to it (one-byte chunks).
    bool ready() const noexcept
    {
        return decoded.size() >= http_body_window || raw.size() >= 2 * http_body_window;
    }
    // Framing alone (a chunk-size line) waits for its data.
    bool pending() const noexcept { return !decoded.empty(); }
    asio::awaitable<error_code> flush(bool end);
};

asio::awaitable<error_code> stream_sink::flush(bool end)
{
    chunk.data = decoded;
    chunk.last = end;
    std::function<asio::awaitable<http_verdict>()> call = [this] { return hook(chunk); };
    const hook_answer a = co_await call_hook(std::move(call), hooks.timeout);
    // Cancelled with the exchange (the other side ended it): no verdict to record.
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
        co_return error_code(asio::error::operation_aborted);
    hook_decision d =
        decide_body(a, hooks.allow_on_timeout, chunk.request ? "request body" : "response body");
    if (!d.pass)
    {
        word = d.word;
        refusal = std::move(d);
        co_return error_code(asio::error::access_denied);
    }
    if (word.empty() || d.word == "timeout_allowed")
        word = d.word;
    chunk.offset += decoded.size();
    decoded.clear();
    bool sent = true; // (an empty send is skipped)
    if (!raw.empty())
        sent = co_await send(to, asio::buffer(raw), count, last);
    raw.clear();
    co_return sent ? error_code() : error_code(asio::error::connection_reset);
}

// Moves a body as the parser frames it into `sink`. The error of the leg's end when the
// message ended with it (a close-delimited body), the sink's, or a failure. A stream sink
// shows the end to its hook.
template <class Parser, class Sink>
asio::awaitable<error_code> frame_body(inbox& from, Parser& p, Sink& sink)
{
    constexpr bool shows_end = std::is_same_v<Sink, stream_sink>;
    p.eager(true);
    while (!p.is_done())
    {
        error_code ec = http::error::need_more;
        std::size_t n = 0;
        const std::size_t give = std::min(from.size(), sink.room());
        if (give > 0)
            n = p.put(asio::buffer(from.data().data(), give), ec);
        if (n > 0)
        {
            if (const error_code e =
                    sink.put(asio::buffer(from.data().data(), n), p.get().body().bytes))
                co_return e;
            if (sink.ready() && !(shows_end && p.is_done())) // a last window waits for `last`
            {
                const error_code e = co_await sink.flush(false);
                if (e)
                    co_return e;
            }
            from.consume(n);
        }
        if (ec && ec != http::error::need_more)
            co_return ec;
        if (!ec || n > 0)
            continue;
        // The window is out of room, or nothing more has come yet: what is held goes on
        // before the proxy reads (or waits) for more.
        const bool out_of_room = give < from.size();
        error_code e = out_of_room ? error_code() : from.more_now();
        if ((out_of_room || e == asio::error::would_block) && sink.pending())
        {
            const error_code f = co_await sink.flush(false);
            if (f)
                co_return f;
            continue;
        }
        if (out_of_room) // a sink with no room holds nothing: room for no framing
            co_return http::error::header_limit;
        if (e == asio::error::would_block)
            e = co_await from.more();
        if (!e)
            continue;
        if (e != asio::error::eof && e != asio::ssl::error::stream_truncated)
            co_return e;
        error_code eof_ec;
        p.put_eof(eof_ec); // a close-delimited body ends here; any other is cut short
        if (eof_ec)
            co_return eof_ec;
        if constexpr (shows_end)
        {
            const error_code shown = co_await sink.flush(true);
            if (shown)
                co_return shown;
        }
        co_return e;
    }
    if constexpr (shows_end)
    {
        // Trailers went into the head's fields as the parser read them: the hook would
        // never see them, so the message fails as one that does not parse.
        if (std::distance(p.get().begin(), p.get().end()) != sink.fields)
            co_return http::error::bad_field;
        co_return co_await sink.flush(true);
    }
    co_return error_code();
}

// A body copied to `to`, its bytes as they came; shown to `hook` window by window when set.
// A body hook's refusal comes back in `refusal` (with `access_denied`), its word in `word`.
struct body_route
{
    const http_hooks* hooks = nullptr;
    const http_body_hook* hook = nullptr; ///< null: copied unseen
    std::uint64_t connection = 0;
    std::uint64_t number = 0; ///< the request's in its tunnel
    bool request = true;
    std::string word{};
    hook_decision refusal{};
    std::uint64_t passed = 0; ///< decoded bytes the hook allowed (and that went on)
};

template <class Parser>
asio::awaitable<error_code> copy_body(inbox& from, Parser& p, tls_leg& to, std::uint64_t& count,
                                      steady::time_point& last, body_route& route)
{
    if (!route.hook || p.is_done()) // a message without a body is not shown
    {
        send_sink sink{to, count, last};
        co_return co_await frame_body(from, p, sink);
    }
    stream_sink sink{to, count, last, *route.hook, *route.hooks};
    sink.chunk.connection = route.connection;
    sink.chunk.number = route.number;
    sink.chunk.request = route.request;
    sink.fields = std::distance(p.get().begin(), p.get().end());
    p.get().body().kept = &sink.decoded;
    const error_code ec = co_await frame_body(from, p, sink);
    p.get().body().kept = nullptr;
    route.word = std::move(sink.word);
    route.refusal = std::move(sink.refusal);
    route.passed = sink.chunk.offset;
    co_return ec;
}

// A whole body read for a hook to see: its bytes as they came in `raw` (sent on once the
// hook allows), decoded in the body's `kept`; `body_limit` past `cap`.
template <class Parser>
asio::awaitable<error_code> read_whole_body(inbox& from, Parser& p, std::string& raw,
                                            std::size_t cap, steady::time_point& last)
{
    keep_sink sink{raw, cap, last};
    co_return co_await frame_body(from, p, sink);
}

// ---- judging a request --------------------------------------------------------------------

struct judged
{
    bool allowed = true;
    int status = 0;
    std::string reason{}; ///< net_http_record's reasons
    std::string why{};    ///< the refusal's text for the client
    std::string path{};   ///< the canonical path (strict form), once known
};

judged refused(int status, std::string reason, std::string why)
{
    return {false, status, std::move(reason), std::move(why)};
}

// Whether an authority (a Host header, an absolute target's) names the CONNECT host.
bool same_authority(std::string_view text, const http_tunnel& t)
{
    auto a = parse_authority(text, t.port);
    return a && a->port == t.port && a->host.text() == t.host.text();
}

// The request's path in canonical forms, checking an absolute target's authority.
outcome<detail::canonical_path> path_of(const request& req, const http_tunnel& t, judged& j)
{
    const std::string_view target = req.target();
    if (target == "*" && req.method() == http::verb::options)
        return detail::canonical_path{"*", "*"};
    if (!target.empty() && target.front() == '/')
        return detail::canonicalize_request_path(target);
    auto url = boost::urls::parse_absolute_uri(target);
    if (!url || (url->scheme() != "https" && url->scheme() != "http") || !url->has_authority())
        return make_failure(errc::validation, "the request target is not a path or a URL");
    if (!same_authority(url->encoded_authority(), t))
    {
        j = refused(421, "host_mismatch", "the request's URL names another host than its tunnel");
        return make_failure(errc::validation, j.why);
    }
    std::string path(url->encoded_path());
    return detail::canonicalize_request_path(path.empty() ? "/" : path);
}

using injections = std::vector<const injection*>;

judged judge(const request& req, const http_tunnel& t, const injections& adds, net_http_record& rec)
{
    const std::size_t hosts = req.count(http::field::host);
    if (hosts > 1 || (hosts == 0 && req.version() >= 11))
        return refused(400, "bad_request", "a request needs one Host header");
    if (hosts == 1 && !same_authority(req[http::field::host], t))
        return refused(421, "host_mismatch", "the request's Host is not its tunnel's host");
    judged j;
    auto path = path_of(req, t, j);
    if (!path)
        return j.allowed ? refused(400, "bad_request", path.error().diag.message) : j;
    if (t.hooks) // what they are shown
        j.path = path->strict;
    if (!t.policy)
    {
        j.reason = "no_rule";
        return j;
    }
    request_verdict v = t.policy->judge(t.host, req.method_string(), *path);
    rec.rule = v.rule;
    if (!v.allowed)
        return refused(403, v.reason,
                       v.rule.empty() ? "no request rule allows this request to this host"
                                      : "refused by request rule \"" + v.rule + "\"");
    for (const injection* i : adds)
        if (!i->replace && req.count(i->name) > 0)
            return refused(403, "header_present",
                           "the request carries " + i->name + ", which the proxy sets itself");
    j.reason = v.reason;
    return j;
}

// A request's id in the proxy's own answers: its tunnel's number and its own in the tunnel
// ("3.2"), as the records have them (`net_record::connection`, `net_http_record::number`).
std::string request_id(std::uint64_t connection, const net_http_record& rec)
{
    return std::to_string(connection) + "." + std::to_string(rec.number);
}

// The proxy's own answer (`close`: the tunnel closes after it), naming the request by `id`
// (X-Sandbox-Request and the body's end) so a client's report can be matched to the audit. The
// rule text is the policy's (validated: no control byte), so it may go in a header.
std::string answer_text(int status, const std::string& why, const std::string& rule,
                        const std::string& id, bool close = true, bool head_only = false)
{
    const http::status known = http::int_to_status(static_cast<unsigned>(status));
    const std::string phrase = known == http::status::unknown
                                   ? std::string("Refused")
                                   : std::string(http::obsolete_reason(known));
    const std::string body = "sandbox: " + why + " (request " + id + ")\n";
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + phrase +
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\n";
    if (close)
        out.append("Connection: close\r\n");
    if (!rule.empty())
        out.append("X-Sandbox-Rule: ").append(rule).append("\r\n");
    out.append("X-Sandbox-Request: ").append(id).append("\r\n\r\n");
    return head_only ? out : out.append(body); // the answer to a HEAD has no body
}

// A head's header lines: the message's own but those `edits` set or remove and those named
// in `adds`, then the hook's, then the proxy's.
template <class Fields>
void append_fields(std::string& head, const Fields& fields, const http_verdict* edits,
                   const injections& adds)
{
    const auto line = [&](std::string_view name, std::string_view value) {
        head.append(name).append(": ").append(value).append("\r\n");
    };
    for (const auto& f : fields)
    {
        const bool injected = std::any_of(adds.begin(), adds.end(), [&](const injection* i) {
            return boost::beast::iequals(f.name_string(), i->name);
        });
        if (!injected && kept_by(edits, f.name_string()))
            line(f.name_string(), f.value());
    }
    if (edits)
        for (const auto& h : edits->set_headers)
            if (std::none_of(adds.begin(), adds.end(), [&](const injection* i) {
                    return boost::beast::iequals(h.name, i->name);
                }))
                line(h.name, h.value);
    for (const injection* i : adds)
        line(i->name, i->value);
    head.append("\r\n");
}

// The target the origin is sent: an absolute one (`https://host/path?q`, judged to name the
// tunnel's host) as a path and query, the form a server expects from a client (RFC 9112
// 3.2.1; an `OPTIONS` for the whole server, with neither, as `*`, 3.2.4); the others as
// they came.
std::string origin_form(std::string_view target, bool options)
{
    if (target.empty() || target.front() == '/' || target == "*")
        return std::string(target);
    auto url = boost::urls::parse_absolute_uri(target);
    if (!url)
        return std::string(target); // not reached: `judge` refused it
    std::string out(url->encoded_path());
    if (out.empty() && options && !url->has_query())
        return "*";
    if (out.empty())
        out = "/";
    if (url->has_query())
        out.append("?").append(url->encoded_query());
    return out;
}

// The head sent to the origin: the client's, parsed, with the hook's edits and the proxy's
// headers in. Sized first, so no copy of an injected value is left behind by a growth; the
// caller wipes it once sent.
std::string head_of(const request& req, const http_verdict* edits, const injections& adds,
                    net_http_record& rec)
{
    std::size_t size = req.method_string().size() + req.target().size() + 16;
    for (const auto& f : req)
        size += f.name_string().size() + f.value().size() + 4;
    if (edits)
        for (const auto& h : edits->set_headers)
            size += h.name.size() + h.value.size() + 4;
    for (const injection* i : adds)
    {
        size += i->name.size() + i->value.size() + 4;
        rec.injected.push_back(i->name);
    }
    std::string head;
    head.reserve(size);
    head.append(req.method_string())
        .append(" ")
        .append(origin_form(req.target(), req.method() == http::verb::options));
    head.append(req.version() == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
    append_fields(head, req, edits, adds);
    return head;
}

// A response head with a hook's edits in.
template <class Header> std::string edited_head(const Header& res, const http_verdict& edits)
{
    std::string head = res.version() == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    head.append(std::to_string(res.result_int())).append(" ").append(res.reason());
    head.append("\r\n");
    append_fields(head, res, &edits, {});
    return head;
}

std::vector<http_header> headers_of(const http::fields& fields)
{
    std::vector<http_header> out;
    for (const auto& f : fields)
        out.push_back(http_header{std::string(f.name_string()), std::string(f.value())});
    return out;
}

http_request_info request_info(const request& req, const http_tunnel& t, std::uint64_t number,
                               std::string path, const std::string& rule)
{
    http_request_info i;
    i.connection = t.connection;
    i.number = number;
    i.host = t.host.text();
    i.port = t.port;
    i.method = std::string(req.method_string());
    i.path = std::move(path);
    i.target = std::string(req.target());
    i.headers = headers_of(req);
    i.rule = rule;
    return i;
}

// ---- one exchange ---------------------------------------------------------------------------

struct response_end
{
    std::string end{}; ///< the tunnel's end, or empty
    bool keep_alive = false;
    bool upgraded = false;
    std::string refused{}; ///< the response hook refused it: the record's reason
};

// Made by functions: GCC 12 mishandles braced temporaries in a co_return.
response_end ended(std::string why)
{
    response_end r;
    r.end = std::move(why);
    return r;
}
response_end answered(bool keep_alive, bool upgraded)
{
    response_end r;
    r.keep_alive = keep_alive;
    r.upgraded = upgraded;
    return r;
}
response_end refused_by_hook(std::string reason)
{
    response_end r = ended("closed");
    r.refused = std::move(reason);
    return r;
}

// Watches the client while the proxy waits for something else, until cancelled: a client
// that goes away ends the tunnel (its end), bytes it sends meanwhile wait in its inbox (up
// to a head's cap, then it is read no more until the wait is over).
asio::awaitable<std::string> watch_client(inbox& c)
{
    for (;;)
    {
        const error_code ec = co_await c.more();
        if (ec == http::error::header_limit)
            break;
        if (ec)
            co_return end_of(ec);
    }
    asio::steady_timer park(co_await asio::this_coro::executor, steady::time_point::max());
    co_await park.async_wait(asio::as_tuple(asio::use_awaitable));
    co_return std::string();
}

// Set by a body hook that refused its window: `upload`'s end.
constexpr std::string_view refused_in_body = "refused_in_body";

// The request's body to the origin (shown to the request body hook, when there is one);
// then it watches the client until the response is done.
asio::awaitable<std::string> upload(inbox& c, request_parser& p, tls_leg& origin, http_counters& n,
                                    net_http_record& rec, body_route& route, bool& done)
{
    if (!p.is_done())
    {
        const error_code ec = co_await copy_body(c, p, origin, n.up, n.last, route);
        rec.request_body_bytes = route.hook ? route.passed : p.get().body().bytes;
        if (ec == asio::error::access_denied)
            co_return std::string(refused_in_body);
        if (ec || !p.is_done())
            co_return parse_error(ec) ? "bad_request" : end_of(ec);
    }
    done = true;
    co_return co_await watch_client(c);
}

// What the response hook makes of a final response head: refused (`text` is the proxy's
// answer, `reason` the record's), or the head to send (empty: as it came).
struct response_say
{
    std::string reason{};
    std::string text{};
    std::string head{};
};

asio::awaitable<response_say> ask_response_hook(const http_hooks& hooks, http_request_info& request,
                                                const http::response_header<>& res,
                                                std::string body, net_http_record& rec)
{
    const std::string id = request_id(request.connection, rec);
    http_response_info info;
    info.request = std::move(request); // asked once per exchange: no copy of its headers
    info.status = res.result_int();
    info.headers = headers_of(res);
    info.body = std::move(body);
    std::function<asio::awaitable<http_verdict>()> call = [&] { return hooks.on_response(info); };
    const hook_answer a = co_await call_hook(std::move(call), hooks.timeout);
    response_say say;
    if ((co_await asio::this_coro::cancellation_state).cancelled() != asio::cancellation_type::none)
    {
        rec.response_hook = "cancelled"; // the client left meanwhile: nothing more is sent
        co_return say;
    }
    const hook_decision d = decide(a, hooks.allow_on_timeout, "response");
    rec.response_hook = d.word;
    if (!d.pass)
    {
        rec.status = d.status;
        say.reason = d.reason;
        say.text = answer_text(d.status, d.why, {}, id);
    }
    else if (d.edits)
        say.head = edited_head(res, *d.edits);
    co_return say;
}

// What the response's hooks need to see.
// What of the answer has gone to the client: whether the proxy may still answer it itself.
struct client_state
{
    bool answer_started = false; ///< a final head (the origin's or the proxy's) is on its way
    bool writing = false;        ///< a write to the client is under way (a 1xx's)
};

struct response_watch
{
    client_state* client = nullptr;
    const http_hooks* hooks = nullptr;
    http_request_info* request = nullptr; ///< what the request hook was shown (moved on)
    std::size_t body_cap = 0;             ///< bodies shown whole to `on_response` (0: none)
    std::uint64_t connection = 0;
};

// The proxy's 502 for a response it cannot pass on (nothing of it reached the client); the
// tunnel ends.
asio::awaitable<response_end> bad_gateway(tls_leg& client, const char* why,
                                          std::uint64_t connection, http_counters& n,
                                          net_http_record& rec)
{
    const std::string text = answer_text(502, why, {}, request_id(connection, rec));
    rec.status = 502;
    co_await send(client, asio::buffer(text), n.down, n.last);
    co_return ended("closed");
}

// The client gets `first` (a head), then `then` when there is any: whether both went.
asio::awaitable<bool> send_head_and(tls_leg& client, asio::const_buffer first,
                                    asio::const_buffer then, http_counters& n)
{
    bool sent = co_await send(client, first, n.down, n.last);
    if (sent && then.size() > 0)
        sent = co_await send(client, then, n.down, n.last);
    co_return sent;
}

// A response whose body the hook sees: read whole (the head waits), shown, then sent on
// with the head the hook left. Over the cap, the client gets 502 and nothing of it.
asio::awaitable<response_end> download_whole(inbox& o, tls_leg& client, response_parser& p,
                                             std::size_t used, const response_watch& w,
                                             http_counters& n, net_http_record& rec)
{
    std::string head(static_cast<const char*>(o.data().data()), used);
    o.consume(used);
    const auto fields = std::distance(p.get().begin(), p.get().end());
    std::string raw, body;
    p.get().body().kept = &body;
    const error_code ec = co_await read_whole_body(o, p, raw, w.body_cap, n.last);
    p.get().body().kept = nullptr;
    rec.response_body_bytes = p.get().body().bytes;
    if (ec && !p.is_done() && !parse_error(ec))
        co_return ended(end_of(ec));
    if (ec != http::error::body_limit &&
        (parse_error(ec) || std::distance(p.get().begin(), p.get().end()) != fields))
        // Not judged (as a response that does not parse): trailers would reach the client
        // unseen by the hook.
        co_return co_await bad_gateway(client, "the origin's response cannot be inspected",
                                       w.connection, n, rec);
    response_say say;
    if (ec == http::error::body_limit)
    {
        say.reason = "body_too_large";
        say.text = answer_text(502, "the response body is larger than the hooks may see", {},
                               request_id(w.connection, rec));
        rec.status = 502;
    }
    else
        say = co_await ask_response_hook(*w.hooks, *w.request, p.get(), std::move(body), rec);
    if (!say.text.empty())
    {
        co_await send(client, asio::buffer(say.text), n.down, n.last);
        co_return refused_by_hook(say.reason);
    }
    if (!say.head.empty())
        head = std::move(say.head);
    if (!co_await send_head_and(client, asio::buffer(head), asio::buffer(raw), n))
        co_return ended("reset");
    if (ec) // the body ended with the connection
        co_return ended(end_of(ec));
    co_return answered(p.get().keep_alive(), false);
}

// A final response's body to the client, shown to the response body hook when there is
// one (a refusal cuts it where it stands: the tunnel closes).
asio::awaitable<response_end> response_body(inbox& o, tls_leg& client, response_parser& p,
                                            const response_watch& w, http_counters& n,
                                            net_http_record& rec)
{
    body_route route;
    route.hooks = w.hooks;
    route.hook = w.hooks && w.hooks->on_response_body ? &w.hooks->on_response_body : nullptr;
    route.connection = w.connection;
    route.number = rec.number;
    route.request = false;
    const error_code ec = co_await copy_body(o, p, client, n.down, n.last, route);
    rec.response_body_bytes = route.hook ? route.passed : p.get().body().bytes;
    if (!route.word.empty() && (ec == asio::error::access_denied || rec.response_hook.empty()))
        rec.response_hook = route.word;
    if (ec == asio::error::access_denied)
    {
        // Cut where it stands, and the client's leg closed without close_notify: a
        // close-delimited body must not pass for whole.
        response_end cut = refused_by_hook(route.refusal.reason);
        cut.end = "cut";
        co_return cut;
    }
    if (!p.is_done())
        co_return ended(parse_error(ec) ? "bad_response" : end_of(ec));
    if (ec) // the body ended with the connection
        co_return ended(end_of(ec));
    co_return answered(p.get().keep_alive(), false);
}

// The origin's response (after any 1xx) to the client, shown first to the response hook
// when there is one.
asio::awaitable<response_end> download(inbox& o, tls_leg& client, bool head_request,
                                       http_counters& n, net_http_record& rec,
                                       const response_watch& w)
{
    const http_hooks* hooks = w.hooks;
    for (;;)
    {
        response_parser p;
        strict_limits(p);
        if (hooks && (hooks->on_response_body || (hooks->on_response && w.body_cap > 0)))
            shown_to_hooks(p);
        p.skip(head_request);
        auto [ec, used] = co_await read_head(o, p);
        if (ec && !parse_error(ec))
            co_return ended(end_of(ec));
        const bool interim = !ec && p.get().result_int() / 100 == 1 && p.get().result_int() != 101;
        w.client->answer_started = !interim;
        if (ec)
            co_return co_await bad_gateway(client, "the origin's response does not parse",
                                           w.connection, n, rec);
        rec.status = p.get().result_int();
        const bool hooked = !interim && hooks && hooks->on_response;
        if (hooked && w.body_cap > 0 && !hooks->on_response_body && rec.status != 101 &&
            !p.is_done())
            co_return co_await download_whole(o, client, p, used, w, n, rec);
        response_say say;
        if (hooked)
        {
            std::string no_body; // named: GCC 12 and braced temporaries in a co_await
            say = co_await ask_response_hook(*hooks, *w.request, p.get(), std::move(no_body), rec);
        }
        if (!say.text.empty())
        {
            co_await send(client, asio::buffer(say.text), n.down, n.last);
            co_return refused_by_hook(say.reason);
        }
        const asio::const_buffer head = say.head.empty()
                                            ? asio::const_buffer(o.data().data(), used)
                                            : asio::const_buffer(say.head.data(), say.head.size());
        w.client->writing = true;
        if (!co_await send(client, head, n.down, n.last))
            co_return ended("reset");
        w.client->writing = false;
        o.consume(used);
        if (rec.status == 101)
            co_return answered(false, true);
        if (!interim) // 100 Continue, 103 Early Hints: the final answer follows
            co_return co_await response_body(o, client, p, w, n, rec);
    }
}

// After a 101: what each inbox holds, then bytes as they are, both ways.
asio::awaitable<std::string> upgraded(inbox& c, inbox& o, http_counters& n)
{
    bool sent = true; // (an empty send is skipped: no coroutine that never suspends)
    if (c.size() > 0)
        sent = co_await send(o.leg(), c.data(), n.up, n.last);
    if (sent && o.size() > 0)
        sent = co_await send(c.leg(), o.data(), n.down, n.last);
    if (!sent)
        co_return "reset";
    c.consume(c.size());
    o.consume(o.size());
    auto r =
        co_await (pump(c.leg(), o.leg(), n.up, n.last) || pump(o.leg(), c.leg(), n.down, n.last));
    co_return std::visit([](std::string& s) { return std::move(s); }, r);
}

// The client's next request starts (empty), or the tunnel ends: either side's end between
// requests, or bytes from the origin that answer nothing.
asio::awaitable<std::string> next_request(inbox& c, inbox& o)
{
    if (c.size() > 0)
        co_return std::string();
    auto r = co_await (c.more() || o.more());
    if (r.index() == 0)
    {
        const error_code ec = std::get<0>(r);
        co_return ec ? end_of(ec) : std::string();
    }
    const error_code ec = std::get<1>(r);
    co_return ec ? end_of(ec) : "closed";
}

void record(const http_tunnel& t, bool allowed, std::string reason, net_http_record rec)
{
    if (t.on_request)
        t.on_request(allowed, std::move(reason), std::move(rec));
}

// Whether the tunnel may serve the client's next request after the proxy refused `p`: the
// client keeps its connection, and its body was read, or will be (a client waiting for
// `100 Continue` may or may not send it, so the tunnel closes).
bool may_keep(const request_parser& p)
{
    return p.get().keep_alive() &&
           (p.is_done() || !boost::beast::iequals(p.get()[http::field::expect], "100-continue"));
}

// A refused request's body read and dropped (at most `drain_limit`): whether it all came.
asio::awaitable<bool> drained(inbox& c, request_parser& p, http_counters& n)
{
    drop_sink sink{n.last};
    const error_code ec = co_await frame_body(c, p, sink);
    co_return !ec && p.is_done();
}

// The proxy's own answer to a request it refuses, and its record. With `p` (a refusal by a
// rule or a hook), the tunnel stays for the client's next request when `may_keep`: the
// answer goes first (as a server that discards a body does), then the body is drained, and
// the tunnel closes if it cannot be (over `drain_limit`, broken). Otherwise the answer says
// `Connection: close` and the tunnel ends ("closed"). `rule` goes in X-Sandbox-Rule.
asio::awaitable<std::string> refuse(inbox& c, const http_tunnel& t, int status,
                                    const std::string& why, const std::string& rule,
                                    std::string reason, http_counters& n, net_http_record& rec,
                                    request_parser* p = nullptr)
{
    rec.status = status;
    const bool keep = p && may_keep(*p);
    const bool head_only = p && p->get().method() == http::verb::head;
    const std::string text =
        answer_text(status, why, rule, request_id(t.connection, rec), !keep, head_only);
    const bool sent = co_await send(c.leg(), asio::buffer(text), n.down, n.last);
    record(t, false, std::move(reason), std::move(rec));
    if (!sent || !keep)
        co_return "closed";
    bool clean = true;
    if (!p->is_done())
        clean = co_await drained(c, *p, n);
    co_return clean ? std::string() : std::string("closed");
}

// The request hook, while the client is watched: its answer, or the client's end (it went
// away meanwhile: the hook is cancelled and the request never sent).
using request_said = std::variant<hook_answer, std::string>;

asio::awaitable<request_said> ask_request_hook(inbox& c, const http_hooks& hooks,
                                               const http_request_info& info)
{
    std::function<asio::awaitable<http_verdict>()> call = [&] { return hooks.on_request(info); };
    auto r = co_await (call_hook(std::move(call), hooks.timeout) || watch_client(c));
    co_return r;
}

// A request's body read whole for the request hook (`info.body`), its bytes as they came in
// `raw`: empty when read; else the tunnel's end (the client got 413 for a body over the cap,
// 400 for one that does not parse). A client waiting for `100 Continue` gets ours first.
asio::awaitable<std::string> body_for_hook(inbox& c, request_parser& p, const http_tunnel& t,
                                           http_request_info& info, std::string& raw,
                                           http_counters& n, net_http_record& rec)
{
    if (boost::beast::iequals(p.get()[http::field::expect], "100-continue"))
    {
        static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
        if (!co_await send(c.leg(), asio::buffer(go_on), n.down, n.last))
        {
            record(t, false, "client_gone", std::move(rec));
            co_return "reset";
        }
    }
    const auto fields = std::distance(p.get().begin(), p.get().end());
    p.get().body().kept = &info.body;
    const error_code ec = co_await read_whole_body(c, p, raw, t.body_cap, n.last);
    p.get().body().kept = nullptr;
    rec.request_body_bytes = p.get().body().bytes;
    if (ec && (!parse_error(ec) || ec == http::error::partial_message))
    {
        record(t, false, "client_gone", std::move(rec)); // it left inside its body
        co_return end_of(ec == http::error::partial_message ? asio::error::eof : ec);
    }
    const std::string no_rule;
    std::string why;
    int status = 400;
    if (ec == http::error::body_limit)
        status = 413, why = "the request body is larger than the hooks may see";
    else if (ec)
        why = "the request body does not parse: " + ec.message();
    else if (std::distance(p.get().begin(), p.get().end()) != fields) // the parser added them
        why = "a request with trailers is refused when its body is inspected";
    if (why.empty())
        co_return std::string();
    std::string reason = status == 413 ? "body_too_large" : "bad_request";
    co_return co_await refuse(c, t, status, why, no_rule, std::move(reason), n, rec);
}

// The request hook's say, asked while the client is watched: edits to apply (in `asked`),
// or the tunnel's answer (`end` set: refused, or the client left).
struct request_hook_say
{
    const http_verdict* edits = nullptr;
    std::optional<std::string> end{};
};

asio::awaitable<request_hook_say> request_hook(inbox& c, const http_tunnel& t, request_parser& rp,
                                               const http_request_info& info, hook_answer& asked,
                                               http_counters& n, net_http_record& rec)
{
    request_hook_say say;
    request_said said = co_await ask_request_hook(c, *t.hooks, info);
    if (said.index() == 1)
    {
        rec.request_hook = "cancelled";
        record(t, false, "client_gone", std::move(rec));
        say.end = std::get<1>(std::move(said));
        co_return say;
    }
    asked = std::get<0>(std::move(said));
    const hook_decision d = decide(asked, t.hooks->allow_on_timeout, "request");
    rec.request_hook = d.word;
    if (!d.pass)
    {
        const std::string no_rule;
        say.end = co_await refuse(c, t, d.status, d.why, no_rule, d.reason, n, rec, &rp);
        co_return say;
    }
    say.edits = d.edits;
    co_return say;
}

// The request's body hook refused a window: the client gets the refusal unless the origin's
// answer had begun (then the tunnel just ends); the origin's leg closes with the tunnel.
asio::awaitable<std::string> refused_mid_request(inbox& c, const http_tunnel& t,
                                                 const body_route& route,
                                                 const client_state& client, http_counters& n,
                                                 net_http_record& rec)
{
    rec.request_hook = route.word;
    const bool answerable = !client.answer_started && !client.writing; // (a 1xx may have gone)
    if (answerable)
    {
        rec.status = route.refusal.status;
        const std::string text =
            answer_text(route.refusal.status, route.refusal.why, {}, request_id(t.connection, rec));
        co_await send(c.leg(), asio::buffer(text), n.down, n.last);
    }
    record(t, false, route.refusal.reason, std::move(rec));
    co_return answerable ? "closed" : "cut"; // an answer under way is cut, never completed
}

// The request's body and the origin's response, side by side, once the head went: empty
// to go on, or the tunnel's end.
asio::awaitable<std::string> relay_exchange(inbox& c, inbox& o, const http_tunnel& t,
                                            request_parser& rp, http_request_info* info,
                                            std::string allowed_reason, http_counters& n,
                                            net_http_record& rec)
{
    bool body_done = false;
    body_route route;
    route.hooks = t.hooks;
    route.hook = t.hooks && t.hooks->on_request_body ? &t.hooks->on_request_body : nullptr;
    route.connection = t.connection;
    route.number = rec.number;
    client_state client;
    const response_watch watch{&client, t.hooks, info, t.body_cap, t.connection};
    auto r = co_await (upload(c, rp, o.leg(), n, rec, route, body_done) ||
                       download(o, c.leg(), rp.get().method() == http::verb::head, n, rec, watch));
    if (r.index() == 0 && std::get<0>(r) == refused_in_body)
        co_return co_await refused_mid_request(c, t, route, client, n, rec);
    if (!route.word.empty() && rec.request_hook.empty()) // a head hook's word stands
        rec.request_hook = route.word;
    const bool keep = rp.get().keep_alive();
    const bool refused_response = r.index() == 1 && !std::get<1>(r).refused.empty();
    record(t, !refused_response,
           refused_response ? std::get<1>(r).refused : std::move(allowed_reason), std::move(rec));
    if (r.index() == 0)
        co_return std::get<0>(std::move(r));
    response_end d = std::get<1>(std::move(r));
    if (d.upgraded)
        co_return co_await upgraded(c, o, n);
    if (!d.end.empty())
        co_return d.end;
    co_return body_done&& keep&& d.keep_alive ? std::string() : std::string("closed");
}

// One request and its response: empty to go on, or the tunnel's end.
asio::awaitable<std::string> exchange(inbox& c, inbox& o, const http_tunnel& t,
                                      std::uint64_t number, http_counters& n)
{
    net_http_record rec;
    rec.number = number;
    request_parser rp;
    strict_limits(rp);
    if (t.hooks && (t.hooks->on_request_body || (t.hooks->on_request && t.body_cap > 0)))
        shown_to_hooks(rp);
    auto [ec, used] = co_await read_head(c, rp);
    if (ec && !parse_error(ec))
        co_return end_of(ec);
    if (!ec)
        c.consume(used);
    const injections adds = t.policy && !ec ? t.policy->injections_for(t.host) : injections();
    judged j = ec == http::error::header_limit
                   ? refused(431, "head_too_large", "the request head is over 64 KiB")
               : ec ? refused(400, "bad_request", "the request does not parse: " + ec.message())
                    : judge(rp.get(), t, adds, rec);
    rec.method = std::string(rp.get().method_string().substr(0, 32));
    if (!j.allowed) // a rule's 403 may keep the tunnel; a request it cannot trust ends it
        co_return co_await refuse(c, t, j.status, j.why, rec.rule, j.reason, n, rec,
                                  j.status == 403 ? &rp : nullptr);
    std::optional<http_request_info> info;
    if (t.hooks)
        info = request_info(rp.get(), t, number, std::move(j.path), rec.rule);
    const bool whole_body = t.hooks && t.hooks->on_request && !t.hooks->on_request_body;
    std::string raw_body; // a body read whole for the hook, sent on after the head
    if (whole_body && t.body_cap > 0 && !rp.is_done())
    {
        const std::string end = co_await body_for_hook(c, rp, t, *info, raw_body, n, rec);
        if (!end.empty())
            co_return end;
    }
    hook_answer asked; // what `edits` points into
    const http_verdict* edits = nullptr;
    if (t.hooks && t.hooks->on_request)
    {
        request_hook_say say = co_await request_hook(c, t, rp, *info, asked, n, rec);
        if (say.end)
            co_return std::move(*say.end);
        edits = say.edits;
    }
    std::string head = head_of(rp.get(), edits, adds, rec);
    bool sent = co_await send(o.leg(), asio::buffer(head), n.up, n.last);
    OPENSSL_cleanse(head.data(), head.size());
    if (sent && !raw_body.empty())
        sent = co_await send(o.leg(), asio::buffer(raw_body), n.up, n.last);
    if (!sent)
    {
        record(t, true, j.reason, std::move(rec)); // allowed; the origin went away (status 0)
        co_return "reset";
    }
    co_return co_await relay_exchange(c, o, t, rp, info ? &*info : nullptr, std::move(j.reason), n,
                                      rec);
}

} // namespace

asio::awaitable<std::string> relay_http(tls_leg& client, tls_leg& origin, const http_tunnel& t,
                                        http_counters& n)
{
    inbox c(client), o(origin);
    for (std::uint64_t number = 1;; ++number)
    {
        std::string end = co_await next_request(c, o);
        if (end.empty())
            end = co_await exchange(c, o, t, number, n);
        if (!end.empty())
            co_return end;
    }
}

} // namespace sandbox::net::tls
