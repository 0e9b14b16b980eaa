// net/http_front_head.cpp: the HTTP front's checks of a request head, without I/O
// (http_front.hpp): the raw bytes and the parsed fields judged, the head forwarded to the
// origin rebuilt (hop-by-hop fields dropped), a refusal's status.
#include "http_front.hpp"

#include <boost/beast/core/string.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace sandbox::net {

namespace http = boost::beast::http;

namespace {

bool iequals(std::string_view a, std::string_view b)
{
    return boost::beast::iequals(a, b);
}

std::string_view trim(std::string_view s)
{
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

/// The names the Connection fields list (hop-by-hop for this message only).
std::vector<std::string> connection_tokens(const http::fields& f)
{
    std::vector<std::string> out;
    for (auto it = f.find(http::field::connection);
         it != f.end() && it->name() == http::field::connection; ++it)
    {
        std::string_view v = it->value();
        while (!v.empty())
        {
            const auto comma = v.find(',');
            const auto token = trim(v.substr(0, comma));
            if (!token.empty())
                out.emplace_back(token);
            v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
        }
    }
    return out;
}

bool dropped_field(std::string_view name, const std::vector<std::string>& listed)
{
    static constexpr std::array<std::string_view, 13> fixed{
        "connection",    "proxy-connection", "keep-alive",          "te",
        "trailer",       "upgrade",          "proxy-authorization", "proxy-authenticate",
        "host",          "content-length",   "transfer-encoding",   "expect",
        "http2-settings"};
    for (auto f : fixed)
        if (iequals(name, f))
            return true;
    return std::any_of(listed.begin(), listed.end(),
                       [&](const std::string& t) { return iequals(name, t); });
}

} // namespace

bool expects_continue(const http::fields& f)
{
    auto it = f.find(http::field::expect);
    return it != f.end() && iequals(trim(it->value()), "100-continue");
}

int http_status(open_status s) noexcept
{
    switch (s)
    {
    case open_status::connected: return 200;
    case open_status::bad_request: return 400;
    case open_status::denied: return 403;
    case open_status::resolve_failed:
    case open_status::dial_refused:
    case open_status::dial_failed:
    case open_status::upstream_refused:
    case open_status::upstream_failed: return 502;
    case open_status::resolve_timeout:
    case open_status::dial_timeout: return 504;
    case open_status::tunnel_cap: return 503;
    case open_status::unsupported: return 501;
    }
    return 502;
}

std::optional<http_refusal> check_raw_head(std::string_view head)
{
    for (std::size_t i = 0; i < head.size(); ++i)
    {
        const auto c = static_cast<unsigned char>(head[i]);
        if (c == '\n')
        {
            if (i == 0 || head[i - 1] != '\r')
                return http_refusal{400, "bare LF in the request head"};
            if (i + 1 < head.size() && (head[i + 1] == ' ' || head[i + 1] == '\t'))
                return http_refusal{400, "obsolete line folding in the request head"};
        }
        else if (c == '\r')
        {
            if (i + 1 >= head.size() || head[i + 1] != '\n')
                return http_refusal{400, "bare CR in the request head"};
        }
        else if ((c < 0x20 && c != '\t') || c == 0x7f)
            return http_refusal{400, "control byte in the request head"};
    }
    return std::nullopt;
}

std::optional<http_refusal> check_fields(const http::fields& f)
{
    if (f.count(http::field::host) > 1)
        return http_refusal{400, "more than one Host field"};
    if (f.count(http::field::content_length) > 1)
        return http_refusal{400, "more than one Content-Length field"};
    const auto te = f.count(http::field::transfer_encoding);
    if (te == 0)
        return std::nullopt;
    if (f.count(http::field::content_length))
        return http_refusal{400, "Content-Length together with Transfer-Encoding"};
    if (te > 1 || !iequals(trim(f[http::field::transfer_encoding]), "chunked"))
        return http_refusal{501, "Transfer-Encoding other than chunked"};
    return std::nullopt;
}

std::string forward_head(const http::request_header<>& h, std::string_view target,
                         std::string_view host_field, std::string_view proxy_authorization)
{
    std::string out(h.method_string());
    out += ' ';
    out += target;
    out += h.version() == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n";
    out += "Host: ";
    out += host_field;
    out += "\r\n";
    const auto listed = connection_tokens(h);
    for (const auto& f : h)
    {
        if (dropped_field(f.name_string(), listed))
            continue;
        out += f.name_string();
        out += ": ";
        out += f.value();
        out += "\r\n";
    }
    if (auto cl = h.find(http::field::content_length); cl != h.end())
        out += "Content-Length: " + std::string(trim(cl->value())) + "\r\n";
    else if (h.count(http::field::transfer_encoding))
        out += "Transfer-Encoding: chunked\r\n";
    if (!proxy_authorization.empty())
    {
        out += "Proxy-Authorization: ";
        out += proxy_authorization;
        out += "\r\n";
    }
    out += "Connection: close\r\n\r\n";
    return out;
}

} // namespace sandbox::net
