// net/tls/http_inside.cpp: the requests and responses of an inspected tunnel, in named steps:
// wait for a request, read its head, judge it, send its head, then its body and the response
// side by side, and loop while both ends keep the connection.
#include "http_inside.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/url/parse.hpp>

#include <openssl/crypto.h>

#include <algorithm>
#include <optional>

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

// A body the parser frames and counts, and nobody keeps: its bytes go on as they came.
struct counted_body
{
    struct value_type
    {
        std::uint64_t bytes = 0;
    };
    struct reader
    {
        std::uint64_t& n;
        template <bool is_request, class Fields>
        reader(http::header<is_request, Fields>&, value_type& b) : n(b.bytes)
        {}
        void init(const boost::optional<std::uint64_t>&, error_code& ec) { ec = {}; }
        template <class Buffers> std::size_t put(const Buffers& b, error_code& ec)
        {
            ec = {};
            const std::size_t size = asio::buffer_size(b);
            n += size;
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

// Copies a body as the parser frames it: its bytes go to `to` as they came. The error of the
// leg's end when the message ended with it (a close-delimited body), or of a failure.
template <class Parser>
asio::awaitable<error_code> copy_body(inbox& from, Parser& p, tls_leg& to, std::uint64_t& count,
                                      steady::time_point& last)
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
            if (!co_await send(to, asio::buffer(from.data().data(), n), count, last))
                co_return asio::error::connection_reset;
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

// ---- judging a request --------------------------------------------------------------------

struct judged
{
    bool allowed = true;
    int status = 0;
    std::string reason{}; ///< net_http_record's reasons
    std::string why{};    ///< the refusal's text for the client
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

judged judge(const request& req, const http_tunnel& t, net_http_record& rec)
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
    if (!t.policy)
        return {true, 0, "no_rule", {}};
    request_verdict v = t.policy->judge(t.host, req.method_string(), *path);
    rec.rule = v.rule;
    if (!v.allowed)
        return refused(403, v.reason,
                       v.rule.empty() ? "no request rule allows this request to this host"
                                      : "refused by request rule \"" + v.rule + "\"");
    for (const injection* i : t.policy->injections_for(t.host))
        if (!i->replace && req.count(i->name) > 0)
            return refused(403, "header_present",
                           "the request carries " + i->name + ", which the proxy sets itself");
    return {true, 0, v.reason, {}};
}

// The proxy's own answer, after which the tunnel closes. The rule text is the policy's
// (validated: no control byte), so it may go in a header.
std::string answer_text(int status, const judged& j, const std::string& rule)
{
    const char* phrase = status == 403   ? "Forbidden"
                         : status == 421 ? "Misdirected Request"
                         : status == 502 ? "Bad Gateway"
                                         : "Bad Request";
    const std::string body = "sandbox: " + j.why + "\n";
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + phrase +
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                      std::to_string(body.size()) + "\r\nConnection: close\r\n";
    if (!rule.empty())
        out.append("X-Sandbox-Rule: ").append(rule).append("\r\n");
    return out.append("\r\n").append(body);
}

// The head sent to the origin: the client's, parsed, with the proxy's headers in. The
// caller wipes it once sent (it may hold a secret).
std::string head_of(const request& req, const http_tunnel& t, net_http_record& rec)
{
    std::vector<const injection*> adds;
    if (t.policy)
        adds = t.policy->injections_for(t.host);
    std::string head;
    head.append(req.method_string()).append(" ").append(req.target());
    head.append(req.version() == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n");
    for (const auto& f : req)
    {
        const bool replaced = std::any_of(adds.begin(), adds.end(), [&](const injection* i) {
            return boost::beast::iequals(f.name_string(), i->name);
        });
        if (!replaced)
            head.append(f.name_string()).append(": ").append(f.value()).append("\r\n");
    }
    for (const injection* i : adds)
    {
        head.append(i->name).append(": ").append(i->value).append("\r\n");
        rec.injected.push_back(i->name);
    }
    return head.append("\r\n");
}

// ---- one exchange ---------------------------------------------------------------------------

struct response_end
{
    std::string end{}; ///< the tunnel's end, or empty
    bool keep_alive = false;
    bool upgraded = false;
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

// The request's body to the origin; then it watches the client until cancelled (the
// response decides): a client that goes away ends the tunnel, bytes it pipelines wait in
// its inbox (up to a head's cap, then it is read no more until the response is done).
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

// The origin's response (after any 1xx) to the client.
asio::awaitable<response_end> download(inbox& o, tls_leg& client, bool head_request,
                                       http_counters& n, net_http_record& rec)
{
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
            const judged j = refused(502, "", "the origin's response does not parse");
            const std::string text = answer_text(502, j, {});
            co_await send(client, asio::buffer(text), n.down, n.last);
            rec.status = 502;
            co_return ended("closed");
        }
        rec.status = p.get().result_int();
        if (!co_await send(client, asio::buffer(o.data().data(), used), n.down, n.last))
            co_return ended("reset");
        o.consume(used);
        if (rec.status == 101)
            co_return answered(false, true);
        if (rec.status / 100 == 1)
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
    if (!co_await send(o.leg(), c.data(), n.up, n.last) ||
        !co_await send(c.leg(), o.data(), n.down, n.last))
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

// One request and its response: empty to go on, or the tunnel's end.
asio::awaitable<std::string> exchange(inbox& c, inbox& o, const http_tunnel& t, http_counters& n)
{
    net_http_record rec;
    request_parser rp;
    strict_limits(rp);
    auto [ec, used] = co_await read_head(c, rp);
    if (ec && !parse_error(ec))
        co_return end_of(ec);
    judged j = ec ? refused(400, "bad_request", "the request does not parse: " + ec.message())
                  : judge(rp.get(), t, rec);
    rec.method = std::string(rp.get().method_string().substr(0, 32));
    if (!j.allowed)
    {
        rec.status = j.status;
        const std::string text = answer_text(j.status, j, rec.rule);
        co_await send(c.leg(), asio::buffer(text), n.down, n.last);
        record(t, false, j.reason, std::move(rec));
        co_return "closed";
    }
    c.consume(used);
    std::string head = head_of(rp.get(), t, rec);
    const bool sent = co_await send(o.leg(), asio::buffer(head), n.up, n.last);
    OPENSSL_cleanse(head.data(), head.size());
    if (!sent)
        co_return "reset";
    bool body_done = false;
    auto r = co_await (upload(c, rp, o.leg(), n, rec, body_done) ||
                       download(o, c.leg(), rp.get().method() == http::verb::head, n, rec));
    const bool keep = rp.get().keep_alive();
    record(t, true, j.reason, std::move(rec));
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
