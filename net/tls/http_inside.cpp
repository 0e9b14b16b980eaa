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
#include <optional>
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
    // At least one more byte, or why not (the leg's end, an error, a head past its cap).
    asio::awaitable<error_code> more()
    {
        if (buf_.size() >= max_buffered)
            co_return http::error::header_limit;
        for (;;)
        {
            auto space = buf_.prepare(read_chunk);
            auto [ec, n] = leg_.try_read(static_cast<char*>(space.data()), space.size());
            if (ec != asio::error::would_block)
            {
                buf_.commit(n);
                co_return ec;
            }
            if (buf_.size() == 0)
                buf_.shrink_to_fit();
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
        if (!ec && p.is_header_done())
            co_return head_read(error_code(), used);
        if (ec && ec != http::error::need_more)
            co_return head_read(ec, used);
        if (auto e = co_await in.more())
        {
            if (e == asio::error::eof && in.size() > 0) // cut inside a head: a bad request
                e = http::error::partial_message;
            co_return head_read(e, used);
        }
    }
}

// Where a body's bytes go as the parser frames them: on to a leg (as they came), or kept in
// `raw` for a hook to see first (at most `cap` decoded bytes, and framing bytes in
// proportion: `body_limit` past them).
struct body_sink
{
    tls_leg* to = nullptr;
    std::uint64_t* count = nullptr;
    steady::time_point* last = nullptr;
    std::string* raw = nullptr;
    std::size_t cap = 0;
};

asio::awaitable<error_code> take(body_sink& s, asio::const_buffer b, std::uint64_t decoded)
{
    if (s.raw)
    {
        s.raw->append(static_cast<const char*>(b.data()), b.size());
        *s.last = steady::now(); // bytes move: the tunnel is not idle
        const bool over = decoded > s.cap || s.raw->size() > 2 * s.cap + head_limit;
        co_return over ? error_code(http::error::body_limit) : error_code();
    }
    const bool sent = co_await send(*s.to, b, *s.count, *s.last);
    co_return sent ? error_code() : error_code(asio::error::connection_reset);
}

// Moves a body as the parser frames it into `sink`. The error of the leg's end when the
// message ended with it (a close-delimited body), the sink's, or a failure.
template <class Parser>
asio::awaitable<error_code> frame_body(inbox& from, Parser& p, body_sink sink)
{
    p.eager(true);
    while (!p.is_done())
    {
        error_code ec;
        std::size_t n = 0;
        if (from.size() > 0)
            n = p.put(from.data(), ec);
        else
            ec = http::error::need_more;
        if (n > 0)
        {
            const auto piece = asio::buffer(from.data().data(), n);
            if (const error_code e = co_await take(sink, piece, p.get().body().bytes))
                co_return e;
            from.consume(n);
        }
        if (ec && ec != http::error::need_more)
            co_return ec;
        if (!ec || n > 0)
            continue;
        if (auto e = co_await from.more())
        {
            if (e != asio::error::eof && e != asio::ssl::error::stream_truncated)
                co_return e;
            error_code eof_ec;
            p.put_eof(eof_ec); // a close-delimited body ends here; any other is cut short
            co_return eof_ec ? eof_ec : e;
        }
    }
    co_return error_code();
}

// A body copied to `to`, its bytes as they came.
template <class Parser>
asio::awaitable<error_code> copy_body(inbox& from, Parser& p, tls_leg& to, std::uint64_t& count,
                                      steady::time_point& last)
{
    body_sink sink;
    sink.to = &to;
    sink.count = &count;
    sink.last = &last;
    co_return co_await frame_body(from, p, sink);
}

// A whole body read for a hook to see: its bytes as they came in `raw` (sent on once the
// hook allows), decoded in the body's `kept`; `body_limit` past `cap`.
template <class Parser>
asio::awaitable<error_code> read_whole_body(inbox& from, Parser& p, std::string& raw,
                                            std::size_t cap, steady::time_point& last)
{
    body_sink sink;
    sink.raw = &raw;
    sink.cap = cap;
    sink.last = &last;
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

// The proxy's own answer, after which the tunnel closes. The rule text is the policy's
// (validated: no control byte), so it may go in a header.
std::string answer_text(int status, const std::string& why, const std::string& rule)
{
    const http::status known = http::int_to_status(static_cast<unsigned>(status));
    const std::string phrase = known == http::status::unknown
                                   ? std::string("Refused")
                                   : std::string(http::obsolete_reason(known));
    const std::string body = "sandbox: " + why + "\n";
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + phrase +
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\nConnection: close\r\n";
    if (!rule.empty())
        out.append("X-Sandbox-Rule: ").append(rule).append("\r\n");
    return out.append("\r\n").append(body);
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
    head.append(req.method_string()).append(" ").append(req.target());
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

http_request_info request_info(const request& req, const http_tunnel& t, std::string path,
                               const std::string& rule)
{
    http_request_info i;
    i.connection = t.connection;
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

// The request's body to the origin; then it watches the client until the response is done.
asio::awaitable<std::string> upload(inbox& c, request_parser& p, tls_leg& origin, http_counters& n,
                                    net_http_record& rec, bool& done)
{
    if (!p.is_done())
    {
        const error_code ec = co_await copy_body(c, p, origin, n.up, n.last);
        rec.request_body_bytes = p.get().body().bytes;
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
    http_response_info info;
    info.request = std::move(request); // asked once per exchange: no copy of its headers
    info.status = res.result_int();
    info.headers = headers_of(res);
    info.body = std::move(body);
    std::function<asio::awaitable<http_verdict>()> call = [&] { return hooks.on_response(info); };
    const hook_answer a = co_await call_hook(std::move(call), hooks.timeout);
    const hook_decision d = decide(a, hooks.allow_on_timeout, "response");
    rec.response_hook = d.word;
    response_say say;
    if (!d.pass)
    {
        rec.status = d.status;
        say.reason = d.reason;
        say.text = answer_text(d.status, d.why, {});
    }
    else if (d.edits)
        say.head = edited_head(res, *d.edits);
    co_return say;
}

// What the response hook needs to see.
struct response_watch
{
    const http_hooks* hooks = nullptr;
    http_request_info* request = nullptr;       ///< what the request hook was shown (moved on)
    std::size_t body_cap = 0;                   ///< bodies shown whole (0: heads only)
};

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
    response_say say;
    if (ec == http::error::body_limit)
    {
        say.reason = "body_too_large";
        say.text = answer_text(502, "the response body is larger than the hooks may see", {});
        rec.status = 502;
    }
    else if (parse_error(ec) || std::distance(p.get().begin(), p.get().end()) != fields)
    {
        // Not judged (as a response that does not parse): the client gets 502 and nothing
        // of it; trailers would reach the client unseen by the hook.
        const std::string text = answer_text(502, "the origin's response cannot be inspected", {});
        co_await send(client, asio::buffer(text), n.down, n.last);
        rec.status = 502;
        co_return ended("closed");
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
    bool sent = co_await send(client, asio::buffer(head), n.down, n.last);
    if (sent && !raw.empty())
        sent = co_await send(client, asio::buffer(raw), n.down, n.last);
    if (!sent)
        co_return ended("reset");
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
        p.skip(head_request);
        auto [ec, used] = co_await read_head(o, p);
        if (ec)
        {
            if (!parse_error(ec))
                co_return ended(end_of(ec));
            const std::string text = answer_text(502, "the origin's response does not parse", {});
            co_await send(client, asio::buffer(text), n.down, n.last);
            rec.status = 502;
            co_return ended("closed");
        }
        rec.status = p.get().result_int();
        const bool interim = rec.status / 100 == 1 && rec.status != 101;
        const bool hooked = !interim && hooks && hooks->on_response;
        if (hooked && w.body_cap > 0 && rec.status != 101 && !p.is_done())
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
        if (!co_await send(client, head, n.down, n.last))
            co_return ended("reset");
        o.consume(used);
        if (rec.status == 101)
            co_return answered(false, true);
        if (interim)
            continue; // 100 Continue, 103 Early Hints: the final answer follows
        ec = co_await copy_body(o, p, client, n.down, n.last);
        rec.response_body_bytes = p.get().body().bytes;
        if (!p.is_done())
            co_return ended(parse_error(ec) ? "bad_response" : end_of(ec));
        if (ec) // the body ended with the connection
            co_return ended(end_of(ec));
        co_return answered(p.get().keep_alive(), false);
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

// The proxy's own answer to a request it refuses, its record, and the tunnel's end. `rule`
// goes in X-Sandbox-Rule (a request rule's refusal).
asio::awaitable<std::string> refuse(inbox& c, const http_tunnel& t, int status,
                                    const std::string& why, const std::string& rule,
                                    std::string reason, http_counters& n, net_http_record& rec)
{
    rec.status = status;
    const std::string text = answer_text(status, why, rule);
    co_await send(c.leg(), asio::buffer(text), n.down, n.last);
    record(t, false, std::move(reason), std::move(rec));
    co_return "closed";
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

// One request and its response: empty to go on, or the tunnel's end.
asio::awaitable<std::string> exchange(inbox& c, inbox& o, const http_tunnel& t, http_counters& n)
{
    net_http_record rec;
    request_parser rp;
    strict_limits(rp);
    auto [ec, used] = co_await read_head(c, rp);
    if (ec && !parse_error(ec))
        co_return end_of(ec);
    const injections adds = t.policy && !ec ? t.policy->injections_for(t.host) : injections();
    judged j = ec ? refused(400, "bad_request", "the request does not parse: " + ec.message())
                  : judge(rp.get(), t, adds, rec);
    rec.method = std::string(rp.get().method_string().substr(0, 32));
    if (!j.allowed)
        co_return co_await refuse(c, t, j.status, j.why, rec.rule, j.reason, n, rec);
    c.consume(used);
    std::optional<http_request_info> info;
    if (t.hooks)
        info = request_info(rp.get(), t, std::move(j.path), rec.rule);
    hook_answer asked; // what `edits` points into
    const http_verdict* edits = nullptr;
    std::string raw_body; // a body read whole for the hook, sent on after the head
    if (t.hooks && t.hooks->on_request && t.body_cap > 0 && !rp.is_done())
    {
        const std::string end = co_await body_for_hook(c, rp, t, *info, raw_body, n, rec);
        if (!end.empty())
            co_return end;
    }
    if (t.hooks && t.hooks->on_request)
    {
        request_said said = co_await ask_request_hook(c, *t.hooks, *info);
        if (said.index() == 1)
        {
            rec.request_hook = "cancelled";
            record(t, false, "client_gone", std::move(rec));
            co_return std::get<1>(std::move(said));
        }
        asked = std::get<0>(std::move(said));
        const hook_decision d = decide(asked, t.hooks->allow_on_timeout, "request");
        rec.request_hook = d.word;
        if (!d.pass)
        {
            const std::string no_rule;
            co_return co_await refuse(c, t, d.status, d.why, no_rule, d.reason, n, rec);
        }
        edits = d.edits;
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
    bool body_done = false;
    const response_watch watch{t.hooks, info ? &*info : nullptr, t.body_cap};
    auto r = co_await (upload(c, rp, o.leg(), n, rec, body_done) ||
                       download(o, c.leg(), rp.get().method() == http::verb::head, n, rec, watch));
    const bool keep = rp.get().keep_alive();
    const bool refused_response = r.index() == 1 && !std::get<1>(r).refused.empty();
    record(t, !refused_response, refused_response ? std::get<1>(r).refused : j.reason,
           std::move(rec));
    if (r.index() == 0)
        co_return std::get<0>(std::move(r));
    response_end d = std::get<1>(std::move(r));
    if (d.upgraded)
        co_return co_await upgraded(c, o, n);
    if (!d.end.empty())
        co_return d.end;
    co_return body_done&& keep&& d.keep_alive ? std::string() : std::string("closed");
}

} // namespace

asio::awaitable<std::string> relay_http(tls_leg& client, tls_leg& origin, const http_tunnel& t,
                                        http_counters& n)
{
    inbox c(client), o(origin);
    for (;;)
    {
        std::string end = co_await next_request(c, o);
        if (end.empty())
            end = co_await exchange(c, o, t, n);
        if (!end.empty())
            co_return end;
    }
}

} // namespace sandbox::net::tls
