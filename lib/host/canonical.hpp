// lib/host/canonical.hpp: the one canonical form of a destination host, before any rule sees
// it. Pure parsing (no I/O); the proxy's HTTP and SOCKS5 fronts, the resolver's pins and the
// host patterns of rules (pattern.hpp, through `to_ascii_name`) share it.
#ifndef SANDBOX_LIB_HOST_CANONICAL_HPP
#define SANDBOX_LIB_HOST_CANONICAL_HPP

#include <sandbox/config.hpp>
#include <sandbox/failure.hpp>

#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandbox::net {

using address = boost::asio::ip::address;

/// \brief A destination host in canonical form: an address or a name, never both.
struct canonical_host
{
    /// The address of a literal host, IPv4-mapped IPv6 unmapped to IPv4.
    std::optional<address> ip{};
    /// A name: lower-case ASCII (IDNA A-labels, UTS-46 mapped), no trailing dot.
    std::string name{};

    bool is_ip() const noexcept { return ip.has_value(); }
    /// The name, or the address's canonical text (IPv6 without brackets).
    SANDBOX_DECL std::string text() const;
};

/// \brief Canonicalizes a host as a client sent it (an HTTP authority's host, a SOCKS5
/// domain name, a URL host).
///
/// Every IPv4 spelling glibc's `inet_aton` accepts (`2130706433`, `0x7f.1`, `127.1`,
/// `0177.0.0.1`, `0`) is that address, never a name. IPv6 may come in brackets; IPv4-mapped
/// IPv6 becomes IPv4. Names are mapped with UTS-46 (libidn2, non-transitional) to A-labels,
/// lower-cased, one trailing dot dropped. Refused with `errc::validation` and a one-line
/// message: empty, longer than 253, control bytes, NUL, space, `%` (zone ids, escapes), `@`,
/// `\`, a label that is empty or over 63, a name IDNA rejects, a bare `a:b` that is not IPv6.
SANDBOX_DECL outcome<canonical_host> canonicalize_host(std::string_view text);

/// \brief A port as text: decimal digits only, 1 to 65535, no sign, space or leading zero.
SANDBOX_DECL outcome<std::uint16_t> parse_port(std::string_view text);

/// \brief A host and a port.
struct authority
{
    canonical_host host{};
    std::uint16_t port = 0;
};

/// \brief Parses "host:port" or "[v6]:port" (CONNECT's request target). Without a port:
/// `default_port`, or `errc::validation` when there is none. An unbracketed IPv6 is refused.
SANDBOX_DECL outcome<authority> parse_authority(std::string_view text,
                                                std::optional<std::uint16_t> default_port);

/// \brief "host:port" ("[v6]:port"); the port is left out when it equals `default_port`
/// (a Host header).
SANDBOX_DECL std::string format_authority(const canonical_host& h, std::uint16_t port,
                                          std::uint16_t default_port = 0);

/// \brief Maps a name with UTS-46 to lower-case A-labels (libidn2), as `canonicalize_host`
/// does; also used on rule patterns, so that `münchen.test` and `xn--mnchen-3ya.test` are
/// one name. Plain ASCII is only lower-cased. `errc::validation` when IDNA refuses it.
SANDBOX_DECL outcome<std::string> to_ascii_name(std::string_view name);

} // namespace sandbox::net

#endif // SANDBOX_LIB_HOST_CANONICAL_HPP
