// net/upstream.cpp: see upstream.hpp.
#include "upstream.hpp"

#include "deadline.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/detail/base64.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

namespace sandbox::net {

namespace asio = boost::asio;
using asio::awaitable;

std::string basic_authorization(const upstream_proxy& u)
{
    if (!u.user)
        return {};
    const std::string plain = *u.user + ":" + u.password;
    std::string out(boost::beast::detail::base64::encoded_size(plain.size()), '\0');
    out.resize(boost::beast::detail::base64::encode(out.data(), plain.data(), plain.size()));
    return "Basic " + out;
}

namespace {

/// (A function, not a braced temporary, for every `co_return`: GCC 12 mishandles the latter.)
upstream_reply fail(open_status s, std::string message)
{
    return upstream_reply{s, std::move(message), {}};
}

/// The status code of "HTTP/1.x SSS reason", or 0.
int status_code(std::string_view head)
{
    if (head.size() < 12 || head.substr(0, 7) != "HTTP/1." || head[8] != ' ')
        return 0;
    int code = 0;
    for (std::size_t i = 9; i < 12; ++i)
    {
        if (head[i] < '0' || head[i] > '9')
            return 0;
        code = code * 10 + (head[i] - '0');
    }
    if (head.size() > 12 && head[12] != ' ' && head[12] != '\r')
        return 0;
    return code;
}

upstream_reply judge_head(std::string_view head, std::string rest)
{
    const int code = status_code(head);
    if (code == 0)
        return fail(open_status::upstream_failed, "upstream proxy sent a malformed reply");
    if (code == 407)
        return fail(open_status::upstream_refused, "upstream proxy requires authentication (407)");
    if (code != 200)
        return fail(open_status::upstream_refused,
                    "upstream proxy refused CONNECT (" + std::to_string(code) + ")");
    return upstream_reply{open_status::connected, {}, std::move(rest)};
}

} // namespace

awaitable<upstream_reply> http_connect(asio::ip::tcp::socket& s, const upstream_proxy& u,
                                       const authority& target)
{
    const std::string where = format_authority(target.host, target.port);
    std::string req = "CONNECT " + where + " HTTP/1.1\r\nHost: " + where + "\r\n";
    if (u.user)
        req += "Proxy-Authorization: " + basic_authorization(u) + "\r\n";
    req += "\r\n";
    auto [wec, wn] = co_await asio::async_write(s, asio::buffer(req), use_tuple);
    if (wec)
        co_return fail(open_status::upstream_failed, "upstream proxy: " + wec.message());
    std::string in;
    std::size_t head_end = 0;
    while (head_end == 0)
    {
        if (in.size() >= max_upstream_head)
            co_return fail(open_status::upstream_failed, "upstream proxy reply head too large");
        std::array<char, 4096> chunk{};
        const std::size_t room = std::min(chunk.size(), max_upstream_head - in.size());
        auto [rec, n] = co_await s.async_read_some(asio::buffer(chunk.data(), room), use_tuple);
        if (rec)
            co_return fail(open_status::upstream_failed,
                           "upstream proxy closed before replying (" + rec.message() + ")");
        const std::size_t from = in.size() < 3 ? 0 : in.size() - 3;
        in.append(chunk.data(), n);
        if (auto at = in.find("\r\n\r\n", from); at != std::string::npos)
            head_end = at + 4;
    }
    co_return judge_head(std::string_view(in).substr(0, head_end), in.substr(head_end));
}

namespace {

awaitable<boost::system::error_code> send(asio::ip::tcp::socket& s, const std::string& bytes)
{
    auto [ec, n] = co_await asio::async_write(s, asio::buffer(bytes), use_tuple);
    co_return ec;
}

template <std::size_t N>
awaitable<boost::system::error_code> receive(asio::ip::tcp::socket& s,
                                             std::array<std::uint8_t, N>& out, std::size_t n)
{
    auto [ec, got] = co_await asio::async_read(s, asio::buffer(out, n), use_tuple);
    co_return ec;
}

/// Method negotiation and, when the upstream picks it, RFC 1929. Empty message: done.
awaitable<upstream_reply> socks5_auth(asio::ip::tcp::socket& s, const upstream_proxy& u)
{
    const bool creds = u.user.has_value();
    std::string hello = creds ? std::string("\x05\x02\x00\x02", 4) : std::string("\x05\x01\x00", 3);
    std::array<std::uint8_t, 2> rep{};
    if (co_await send(s, hello) || co_await receive(s, rep, 2) || rep[0] != 5)
        co_return fail(open_status::upstream_failed, "upstream SOCKS5 proxy broke the greeting");
    if (rep[1] == 0x00)
        co_return fail(open_status::connected, {});
    if (rep[1] != 0x02 || !creds)
        co_return fail(open_status::upstream_refused,
                       "upstream SOCKS5 proxy accepts none of the offered methods");
    std::string sub("\x01", 1);
    sub += static_cast<char>(u.user->size());
    sub += *u.user;
    sub += static_cast<char>(u.password.size());
    sub += u.password;
    if (co_await send(s, sub) || co_await receive(s, rep, 2) || rep[0] != 1)
        co_return fail(open_status::upstream_failed,
                       "upstream SOCKS5 proxy broke the authentication");
    if (rep[1] != 0)
        co_return fail(open_status::upstream_refused,
                       "upstream SOCKS5 proxy refused the credentials");
    co_return fail(open_status::connected, {});
}

std::string socks5_request(const authority& target)
{
    std::string r("\x05\x01\x00", 3);
    const auto& h = target.host;
    if (!h.is_ip())
    {
        r += '\x03';
        r += static_cast<char>(h.name.size());
        r += h.name;
    }
    else if (h.ip->is_v4())
    {
        r += '\x01';
        const auto b = h.ip->to_v4().to_bytes();
        r.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
    else
    {
        r += '\x04';
        const auto b = h.ip->to_v6().to_bytes();
        r.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
    r += static_cast<char>(target.port >> 8);
    r += static_cast<char>(target.port & 0xff);
    return r;
}

upstream_reply judge_rep(std::uint8_t rep)
{
    const std::string code = "upstream SOCKS5 proxy replied " + std::to_string(rep);
    switch (rep)
    {
    case 0x00: return upstream_reply{open_status::connected, {}, {}};
    case 0x05: return fail(open_status::dial_refused, code + " (connection refused)");
    case 0x03:
    case 0x04: return fail(open_status::dial_failed, code + " (unreachable)");
    case 0x06: return fail(open_status::dial_timeout, code + " (TTL expired)");
    case 0x02: return fail(open_status::upstream_refused, code + " (not allowed)");
    default: return fail(open_status::upstream_refused, code);
    }
}

/// Reads the bound address that ends a reply, so that no reply byte reaches the client.
awaitable<bool> skip_bound_address(asio::ip::tcp::socket& s, std::uint8_t atyp)
{
    std::array<std::uint8_t, 258> buf{};
    std::size_t n = 0;
    if (atyp == 0x01)
        n = 4;
    else if (atyp == 0x04)
        n = 16;
    else if (atyp == 0x03)
    {
        if (co_await receive(s, buf, 1))
            co_return false;
        n = buf[0];
    }
    else
        co_return false;
    co_return !(co_await receive(s, buf, n + 2));
}

} // namespace

awaitable<upstream_reply> socks5_connect(asio::ip::tcp::socket& s, const upstream_proxy& u,
                                         const authority& target)
{
    if (u.user && (u.user->empty() || u.user->size() > 255 || u.password.size() > 255))
        co_return fail(open_status::upstream_failed, "upstream SOCKS5 credentials too long");
    if (!target.host.is_ip() && target.host.name.size() > 255)
        co_return fail(open_status::bad_request, "host name too long for SOCKS5");
    auto auth = co_await socks5_auth(s, u);
    if (auth.status != open_status::connected)
        co_return auth;
    std::array<std::uint8_t, 4> head{};
    if (co_await send(s, socks5_request(target)) || co_await receive(s, head, 4) || head[0] != 5)
        co_return fail(open_status::upstream_failed, "upstream SOCKS5 proxy broke the request");
    auto verdict = judge_rep(head[1]);
    if (verdict.status == open_status::connected && !co_await skip_bound_address(s, head[3]))
        co_return fail(open_status::upstream_failed, "upstream SOCKS5 proxy broke its reply");
    co_return verdict;
}

} // namespace sandbox::net
