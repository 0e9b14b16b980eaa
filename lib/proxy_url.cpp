// lib/proxy_url.cpp: see proxy_url.hpp. Boost.URL does the RFC 3986 grammar; this file holds
// what a proxy URL may and may not carry beyond it.
#include "proxy_url.hpp"

#include "host/pattern.hpp"

#include <boost/url/grammar/ci_string.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <utility>

namespace sandbox::detail {
namespace {

constexpr std::size_t socks5_credential_max = 255; // RFC 1929: one length byte each

failure invalid(std::string message)
{
    return make_failure(errc::validation, std::move(message), "net.proxy");
}

outcome<proxy_url::kind> scheme_of(std::string_view scheme)
{
    if (boost::urls::grammar::ci_is_equal(scheme, "http"))
        return proxy_url::kind::http;
    if (boost::urls::grammar::ci_is_equal(scheme, "socks5") ||
        boost::urls::grammar::ci_is_equal(scheme, "socks5h"))
        return proxy_url::kind::socks5;
    return invalid("proxy URL scheme " + quote_for_message(scheme, 16) +
                   " is not supported; use http or socks5");
}

outcome<std::uint16_t> port_of(const boost::urls::url_view& url, proxy_url::kind scheme)
{
    if (!url.has_port())
        return std::uint16_t(scheme == proxy_url::kind::socks5 ? 1080 : 80);
    const std::string_view port = url.port();
    if (port.empty())
        return invalid("the proxy URL has an empty port after ':'");
    long value = 0;
    for (const char c : port)
    {
        value = value * 10 + (c - '0'); // the URL grammar allows digits only
        if (value > 65535)
            break;
    }
    if (value < 1 || value > 65535)
        return invalid("proxy port " + quote_for_message(port, 16) + " is out of range (1-65535)");
    return static_cast<std::uint16_t>(value);
}

outcome<> take_credentials(const boost::urls::url_view& url, proxy_url& out)
{
    if (!url.has_userinfo())
        return {};
    std::string user = url.user();
    if (user.empty())
        return invalid(url.has_password() ? "the proxy URL has a password but no user name"
                                          : "the proxy URL has an empty user name before '@'");
    if (user.find(':') != std::string::npos)
        return invalid("the proxy URL's user name holds ':' (an encoded %3A)");
    out.password = url.password();
    if (out.scheme == proxy_url::kind::socks5 &&
        (user.size() > socks5_credential_max || out.password.size() > socks5_credential_max))
        return invalid("a SOCKS5 proxy's user name and password are at most 255 bytes each");
    out.user = std::move(user);
    return {};
}

outcome<> check_shape(const boost::urls::url_view& url)
{
    if (!url.has_authority() || url.encoded_host().empty())
        return invalid("the proxy URL has no host");
    if (url.host_type() == boost::urls::host_type::ipvfuture)
        return invalid("the proxy URL's host is an IP literal of an unsupported version");
    const std::string_view path = url.encoded_path();
    if (!path.empty() && path != "/")
        return invalid("the proxy URL must not have a path");
    if (url.has_query())
        return invalid("the proxy URL must not have a query ('?...')");
    return {};
}

} // namespace

outcome<proxy_url> parse_proxy_url(std::string_view text)
{
    const auto parsed = boost::urls::parse_absolute_uri(text);
    if (!parsed)
    {
        // An absolute URI has no fragment; say so when that is the only problem.
        const auto any = boost::urls::parse_uri(text);
        if (any && any->has_fragment())
            return invalid("the proxy URL must not have a fragment ('#...')");
        return invalid("the proxy URL is not a valid absolute URL (expected "
                       "http://host:port or socks5://[user[:password]@]host:port)");
    }
    const boost::urls::url_view& url = *parsed;
    proxy_url out;
    auto scheme = scheme_of(url.scheme());
    if (!scheme)
        return scheme.error();
    out.scheme = *scheme;
    if (auto r = check_shape(url); !r)
        return r.error();
    auto port = port_of(url, out.scheme);
    if (!port)
        return port.error();
    out.port = *port;
    if (auto r = take_credentials(url, out); !r)
        return r.error();
    auto host = net::canonicalize_host(url.host_address());
    if (!host)
        return invalid("the proxy URL's host is not a valid name or address: " +
                       host.error().diag.message);
    out.host = std::move(*host);
    return out;
}

} // namespace sandbox::detail
