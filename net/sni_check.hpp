// net/sni_check.hpp: the server name of a tunnel the proxy does not inspect (tls.md T3, the
// Go package's W18). The client's ClientHello is read as it comes, held until it is whole
// (at most the handshake deadline), compared with the host the tunnel was opened to and
// recorded; under `sni_mode::deny` a tunnel that names another host is closed before a
// byte of it reaches the destination. Bytes that are not TLS are not this check's business
// (the rules judged the destination): they go on as they came. The judgement is pure.
#ifndef SANDBOX_NET_SNI_CHECK_HPP
#define SANDBOX_NET_SNI_CHECK_HPP

#include "host/canonical.hpp"
#include "tls/client_hello.hpp"

#include <sandbox/net_policy.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace sandbox::net {

/// What the ClientHello of an uninspected tunnel said, and what becomes of the tunnel.
struct sni_judgement
{
    /// The server name as sent, escaped for a record (empty: the ClientHello named none);
    /// nothing when the tunnel did not start with a whole ClientHello.
    std::optional<std::string> sni{};
    /// The name is not the tunnel's host (compared canonically: case, one trailing dot, an
    /// address's spelling) or is no host at all.
    bool mismatch = false;
    /// Empty: the bytes go on. Else the reason the tunnel ends with (`sni_mode::deny`
    /// only): "sni_mismatch"; "bad_client_hello" (a TLS record whose ClientHello does not
    /// parse, a server name that is not printable ASCII, a hello over 16 KiB);
    /// "no_client_hello" (not whole at the deadline or when the client ended).
    std::string refusal{};
};

/// \brief Judges `p`, the client's first bytes read as a ClientHello, for a tunnel opened to
/// `host` under `mode` (`off` judges nothing). Pure.
sni_judgement judge_sni(const tls::hello_peek& p, const canonical_host& host, sni_mode mode);

/// \brief Reads the client's ClientHello into `held` (after the bytes it holds already)
/// until it is whole or judged, the client ends, or `limit` passes, and judges it. The
/// limit starts at the client's first byte: a client that waits for the server to speak
/// first is never closed for its silence (the relay's idle timeout bounds that). A client
/// that ends having sent nothing passes. The bytes read stay in `held` for the
/// destination. `stopping` (may be null): the caller ends, no wait begins. Cancellation: as
/// the socket's waits.
boost::asio::awaitable<sni_judgement> check_sni(boost::asio::ip::tcp::socket& client,
                                                std::string& held, const canonical_host& host,
                                                sni_mode mode, std::chrono::milliseconds limit,
                                                const bool* stopping = nullptr);

} // namespace sandbox::net

#endif // SANDBOX_NET_SNI_CHECK_HPP
