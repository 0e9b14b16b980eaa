// lib/proxy_url.hpp: the one parser of `net_policy::proxy` (an upstream proxy's URL). The
// policy's validation and the egress proxy's upstream both read the URL through it, so a URL
// the one accepts the other does not refuse for its shape.
#ifndef SANDBOX_LIB_PROXY_URL_HPP
#define SANDBOX_LIB_PROXY_URL_HPP

#include <sandbox/config.hpp>
#include <sandbox/failure.hpp>

#include "host/canonical.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandbox::detail {

/// \brief `net_policy::proxy` taken apart: `http://[user[:pass]@]host[:port]` (HTTP CONNECT,
/// Basic credentials) or `socks5://[user[:pass]@]host[:port]` (RFC 1929 credentials).
/// `socks5h` is read as `socks5`: through an upstream the proxy never resolves a name itself,
/// so the upstream always gets the name, which is what `socks5h` asks for.
struct proxy_url
{
    enum class kind
    {
        http,
        socks5,
    };
    kind scheme = kind::http;
    /// The host, percent-decoded and canonical (host/canonical.hpp: IDNA, every IPv4
    /// spelling, IPv6 without brackets), as the egress proxy dials it.
    net::canonical_host host{};
    /// The port given, or the scheme's (80 for http, 1080 for socks5).
    std::uint16_t port = 0;
    /// Percent-decoded; empty optional when the URL has no user information.
    std::optional<std::string> user{};
    std::string password{};
};

/// \brief Parses a proxy URL. Fails with `errc::validation`, limit "net.proxy" and a one-line
/// message naming the part at fault: scheme, host (also a name IDNA refuses or a number that
/// is no IPv4 address), user, port (1-65535), path, query, fragment. No message repeats the
/// URL, which may hold a password.
SANDBOX_DECL outcome<proxy_url> parse_proxy_url(std::string_view text);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_PROXY_URL_HPP
