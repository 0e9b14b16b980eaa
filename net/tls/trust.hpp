// net/tls/trust.hpp: how the commands in a sandbox come to trust its inspection CA: one
// bundle (the system's roots, then the CA; certificates only, never a key) that the backend
// binds read-only into the sandbox, and the environment variables common tools read it from.
#ifndef SANDBOX_NET_TLS_TRUST_HPP
#define SANDBOX_NET_TLS_TRUST_HPP

#include <sandbox/failure.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandbox::net::tls {

/// Debian's bundle of the system's roots.
inline constexpr std::string_view system_bundle_path = "/etc/ssl/certs/ca-certificates.crt";

/// \brief The trust bundle: the PEM certificates of `system_bundle` (a file; missing or empty:
/// none, so only the CA is trusted) followed by `ca_pem`. Anything in the system file that is
/// not a certificate (a key someone left there, say) is left out. `errc::validation` when
/// `ca_pem` holds no certificate.
outcome<std::string> trust_bundle(const std::string& system_bundle, const std::string& ca_pem);

/// \brief The variables that point common tools at `bundle_path` (the bundle's path inside
/// the sandbox): OpenSSL and Python (`SSL_CERT_FILE`), requests, curl, Node (extra CAs),
/// git, pip, the AWS CLI, cargo, Deno, gcloud, Nix.
std::vector<std::pair<std::string, std::string>> trust_environment(const std::string& bundle_path);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_TRUST_HPP
