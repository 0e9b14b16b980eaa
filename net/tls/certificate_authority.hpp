// net/tls/certificate_authority.hpp: the per-sandbox certificate authority of TLS inspection.
// An ECDSA P-256 CA made in memory (its key is never written anywhere), one P-256 key shared by
// every leaf (never the CA's own), and leaves minted per canonical host with the leaf key's
// public half pre-encoded once (so a mint is one signature, not a key encoding), kept in a
// bounded LRU cache. docs/network.md ("TLS inspection") has the model and its limits.
#ifndef SANDBOX_NET_TLS_CERTIFICATE_AUTHORITY_HPP
#define SANDBOX_NET_TLS_CERTIFICATE_AUTHORITY_HPP

#include "host/canonical.hpp"

#include <sandbox/failure.hpp>

#include <openssl/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace sandbox::net::tls {

using clock = std::chrono::system_clock;

/// What the CA and its leaves look like.
struct authority_options
{
    /// The CA's common name (its subject also says O=sandbox).
    std::string name = "sandbox TLS inspection CA";
    /// The CA is valid from `now - backdate` to `now + lifetime`: give it the sandbox's life
    /// and a margin.
    std::chrono::seconds lifetime = std::chrono::hours(24);
    /// A leaf is valid from `now - backdate` for this long, never past the CA's end.
    std::chrono::seconds leaf_lifetime = std::chrono::hours(24 * 7);
    /// How far validity starts in the past (clocks inside and outside may differ a little).
    std::chrono::seconds backdate = std::chrono::hours(1);
    /// A cached leaf with less than this left is minted again.
    std::chrono::seconds renew_before = std::chrono::hours(1);
    /// Leaves kept (least recently used out first).
    std::size_t cache_capacity = 1024;
};

/// \brief One minted leaf: owns its certificate.
struct leaf_certificate
{
    leaf_certificate(X509* c, clock::time_point end) noexcept : cert(c), not_after(end) {}
    ~leaf_certificate();
    leaf_certificate(const leaf_certificate&) = delete;
    leaf_certificate& operator=(const leaf_certificate&) = delete;

    X509* cert;
    clock::time_point not_after;
};

/// \brief The CA of one sandbox (or one runner: the caller decides how far one reaches).
///
/// Not thread-safe: one proxy, on one executor, uses it. The private keys stay in this
/// object's memory; only `certificate_pem()` (the CA certificate, no key) is meant to leave
/// it, for the trust bundle the sandbox sees.
class certificate_authority
{
public:
    /// Makes the CA key, the CA certificate and the leaf key. `errc::internal` with
    /// OpenSSL's reason when a step fails; `errc::validation` for an empty name or a
    /// lifetime that is not positive.
    static outcome<std::unique_ptr<certificate_authority>>
    create(authority_options opts = {}, clock::time_point now = clock::now());
    ~certificate_authority();

    /// The CA certificate (owned by this object).
    X509* certificate() const noexcept;
    /// The key every leaf certifies (owned by this object).
    EVP_PKEY* leaf_key() const noexcept;
    /// The CA certificate in PEM, the one thing to put in the sandbox's trust bundle.
    std::string certificate_pem() const;
    clock::time_point not_after() const noexcept;
    const authority_options& options() const noexcept;

    /// \brief The leaf for `host`: the cached one unless it is missing or ends within
    /// `renew_before`, else a fresh mint, cached. `hit` (when given) says which.
    /// The leaf has `host` as its only subjectAltName (DNS, or IP for an address).
    outcome<std::shared_ptr<const leaf_certificate>>
    leaf_for(const canonical_host& host, clock::time_point now = clock::now(), bool* hit = nullptr);

    /// \brief A fresh leaf for `host`, not cached (what a miss costs).
    outcome<std::shared_ptr<const leaf_certificate>> mint(const canonical_host& host,
                                                          clock::time_point now) const;

    /// Leaves in the cache.
    std::size_t cached() const noexcept;

    struct impl;

private:
    explicit certificate_authority(std::unique_ptr<impl> p) noexcept;
    std::unique_ptr<impl> p_;
};

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_CERTIFICATE_AUTHORITY_HPP
