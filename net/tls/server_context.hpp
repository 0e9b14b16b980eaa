// net/tls/server_context.hpp: the proxy's one server-side TLS context for inspected
// connections (an SSL_CTX costs ~111 microseconds to make, an SSL from it ~1): the leaf is
// chosen in the ClientHello callback, for the connection's CONNECT host only, before OpenSSL
// looks for a certificate.
#ifndef SANDBOX_NET_TLS_SERVER_CONTEXT_HPP
#define SANDBOX_NET_TLS_SERVER_CONTEXT_HPP

#include "certificate_authority.hpp"

#include <sandbox/failure.hpp>

#include <openssl/types.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace sandbox::net::tls {

/// \brief One client connection's side of the ClientHello callback: the host it may reach
/// (the CONNECT host, already checked by policy) in; what happened out.
struct client_hello_state
{
    canonical_host connect_host{};
    /// Why the callback refused the handshake: empty (it did not), "sni_mismatch" (the
    /// ClientHello names another host: unrecognized_name is sent), "bad_sni" (a server_name
    /// extension that does not parse), "no_leaf" (minting failed: internal_error).
    std::string refused{};
    /// The ClientHello's server name as sent (empty: none).
    std::string sni{};
    bool leaf_from_cache = false;
    /// The leaf in use, kept while the connection lives.
    std::shared_ptr<const leaf_certificate> leaf{};
};

/// \brief The server side of inspected TLS: TLS 1.2 and 1.3, `http/1.1` as the only
/// application protocol (a client offering ALPN without it gets no_application_protocol),
/// released buffers on idle connections, and a leaf for exactly the CONNECT host.
///
/// Not thread-safe (it mints through its CA): one proxy, one executor.
class server_context
{
public:
    /// `ca` must outlive the context.
    static outcome<std::unique_ptr<server_context>> create(certificate_authority& ca);
    ~server_context();

    /// \brief A new SSL for one accepted connection, in server mode, bound to `state`
    /// (which must outlive the SSL). The caller owns the SSL (Asio's `ssl::stream` takes it).
    outcome<SSL*> new_connection(client_hello_state& state);

    SSL_CTX* native_handle() const noexcept;

    struct impl;

private:
    explicit server_context(std::unique_ptr<impl> p) noexcept;
    std::unique_ptr<impl> p_;
};

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_SERVER_CONTEXT_HPP
