// net/tls/origin_context.hpp: the client side of inspected TLS, towards the origin: the
// certificate must chain to the system's roots (or roots configured for origins) and name the
// CONNECT host; SNI and ALPN (http/1.1) as a browser would send them.
#ifndef SANDBOX_NET_TLS_ORIGIN_CONTEXT_HPP
#define SANDBOX_NET_TLS_ORIGIN_CONTEXT_HPP

#include "host/canonical.hpp"

#include <sandbox/failure.hpp>

#include <openssl/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

struct ssl_session_st; // SSL_SESSION (openssl/ssl.h), at global scope

namespace sandbox::net::tls {

/// What an origin's certificate may chain to.
struct origin_trust
{
    /// The system's roots: the certificates of Debian's bundle (`system_bundle_path`, the
    /// same the sandbox's trust bundle starts with), parsed once per process and change.
    bool system_roots = true;
    /// More roots, each one or more PEM certificates (a private CA of the caller's).
    std::vector<std::string> extra_roots_pem{};
};

/// \brief The sessions origins gave to one inspector (one call), by the server name sent, for
/// its next connections to resume (a resumed origin leg skips the certificate and its
/// verification, which the session passed). Never shared between calls: an origin could
/// otherwise link one call's connections to another's. At most 256 names. Not thread-safe:
/// the inspector's executor only.
class origin_sessions
{
public:
    origin_sessions() = default;
    origin_sessions(const origin_sessions&) = delete;
    origin_sessions& operator=(const origin_sessions&) = delete;
    ~origin_sessions();
    std::size_t size() const noexcept { return by_name_.size(); }

    struct access;

private:
    std::map<std::string, struct ssl_session_st*, std::less<>> by_name_; // SSL_SESSION
};

/// \brief One client-side SSL_CTX for every origin of a proxy: TLS 1.2 and 1.3, peer
/// verification on. Never an "insecure" mode: an origin that does not verify is refused.
class origin_context
{
public:
    /// `errc::validation` (limit "net.mitm.origin_ca") when an extra root does not parse.
    static outcome<std::unique_ptr<origin_context>> create(const origin_trust& trust);
    ~origin_context();

    /// \brief A new SSL in client mode for the origin `host` (the CONNECT host): SNI for a
    /// name (none for an address), the certificate checked against that name or address,
    /// ALPN `http/1.1`; with `sessions`, the last session that name's origin gave is offered,
    /// and the one this connection gets is kept there. The caller owns the SSL (and keeps
    /// `sessions` alive while it lives).
    outcome<SSL*> new_connection(const canonical_host& host, origin_sessions* sessions = nullptr);

    SSL_CTX* native_handle() const noexcept;

private:
    explicit origin_context(SSL_CTX* ctx) noexcept;
    SSL_CTX* ctx_;
};

/// \brief The origin context of `trust`, shared: one per distinct trust (and system bundle
/// text) in the process, made on first use (about 0.6 ms: a context and 140 roots); the
/// eight most recently used are kept. Thread-safe (an SSL_CTX serves SSL_new from any
/// thread).
outcome<std::shared_ptr<origin_context>> shared_origin_context(const origin_trust& trust);

/// Why the origin's certificate was refused, in words ("unable to get local issuer
/// certificate", "hostname mismatch"); empty when it was not.
std::string verify_failure(SSL* ssl);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_ORIGIN_CONTEXT_HPP
