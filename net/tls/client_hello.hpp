// net/tls/client_hello.hpp: the first bytes of a tunnel, read before any TLS object exists:
// is it TLS, and which name and application protocols does its ClientHello ask for. The
// inspect-or-relay decision and the refusal of non-TLS bytes to an inspected host are made
// from this; OpenSSL then gets the same bytes. Pure parsing of untrusted input, bounded.
#ifndef SANDBOX_NET_TLS_CLIENT_HELLO_HPP
#define SANDBOX_NET_TLS_CLIENT_HELLO_HPP

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace sandbox::net::tls {

/// What the start of a client's stream is.
struct hello_peek
{
    enum class verdict
    {
        need_more, ///< consistent so far: read more (the caller's deadline bounds the wait)
        tls,       ///< a whole ClientHello: the fields below are set
        not_tls,   ///< not a TLS handshake record (HTTP, SSH, anything else)
        malformed, ///< a TLS record whose ClientHello does not parse
        too_large, ///< the ClientHello goes past the cap
    };
    verdict what = verdict::need_more;
    /// The server_name extension's host_name, as sent (empty: the extension is absent).
    std::string sni{};
    /// The protocols of the ALPN extension, in the client's order (empty: none offered).
    std::vector<std::string> alpn{};
    /// Bytes of the records that carried the ClientHello.
    std::size_t bytes = 0;
};

/// The default cap of a ClientHello (its handshake message, over as many records as it
/// takes): 16 KiB, room for post-quantum key shares.
inline constexpr std::size_t client_hello_cap = 16 * 1024;

/// \brief Reads the ClientHello at the start of `bytes` (the first bytes of the stream).
/// TLS records of type handshake (22) with a 3.x version; the message may span records. A
/// server_name or ALPN extension that does not parse, a duplicate extension, bytes left over
/// inside the message, an empty protocol name: `malformed`.
hello_peek peek_client_hello(std::span<const unsigned char> bytes,
                             std::size_t cap = client_hello_cap);

/// \brief The host_name of a server_name extension's body (RFC 6066 3), or nothing when it
/// does not parse or names no host: empty, or a byte that is not printable ASCII (a NUL, a
/// space, a control byte, a U-label's UTF-8). Pure parsing.
std::optional<std::string> parse_server_name(const unsigned char* body, std::size_t size);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_CLIENT_HELLO_HPP
