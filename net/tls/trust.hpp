// net/tls/trust.hpp: how the commands in a sandbox come to trust its inspection CA: one
// bundle (the system's roots, then the CA; certificates only, never a key) that the backend
// binds read-only into the sandbox, and the environment variables common tools read it from.
#ifndef SANDBOX_NET_TLS_TRUST_HPP
#define SANDBOX_NET_TLS_TRUST_HPP

#include <sandbox/config.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/unique_fd.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandbox::net::tls {

/// Debian's bundle of the system's roots.
inline constexpr std::string_view system_bundle_path = "/etc/ssl/certs/ca-certificates.crt";

/// \brief The certificates of the system's bundle `path` (PEM; anything else in the file, a
/// key someone left there say, is left out; empty when the file is missing). Read once and
/// again only when the file changes (its inode, size or modification time): every call of a
/// process shares the text. Thread-safe.
std::shared_ptr<const std::string>
system_roots(const std::string& path = std::string(system_bundle_path));

/// \brief The trust bundle: `roots` (PEM certificates, as `system_roots` gives them) followed
/// by the certificates of `ca_pem`. `errc::validation` when `ca_pem` holds no certificate.
outcome<std::string> trust_bundle(std::string_view roots, const std::string& ca_pem);

/// Where the backends put the bundle inside a sandbox (under /run, the sandbox's own tmpfs).
inline constexpr std::string_view bundle_path_inside = "/run/sandbox/ca-certificates.crt";

/// \brief A sealed memory file (memfd) holding `bundle`, read from its start, for a backend
/// to copy into the sandbox (bwrap's `--ro-bind-data`): nothing on disk, nothing to remove,
/// and no one can change it once made. OS errors as they come.
outcome<unique_fd> bundle_file(std::string_view bundle);

class inspector;

/// What a backend hands a sandbox whose calls `inspection` inspects: the bundle's sealed file
/// (to copy to `bundle_path_inside`) and the variables that name that path.
struct sandbox_trust
{
    unique_fd bundle;
    std::vector<std::pair<std::string, std::string>> environment;
};

/// \brief The system's roots and `inspection`'s CA in a sealed file, with the variables.
/// Exported for the bwrap backend (the one entry it uses of net/tls).
SANDBOX_DECL outcome<sandbox_trust> sandbox_trust_for(inspector& inspection);

/// \brief The variables that point common tools at `bundle_path` (the bundle's path inside
/// the sandbox): OpenSSL and Python (`SSL_CERT_FILE`), requests, curl, Node (extra CAs),
/// git, pip, the AWS CLI, cargo, Deno, gcloud, Nix.
std::vector<std::pair<std::string, std::string>> trust_environment(const std::string& bundle_path);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_TRUST_HPP
