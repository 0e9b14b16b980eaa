// backends/bwrap/sandbox_user.hpp: the host user a bwrap sandbox runs as. A root caller's
// commands must not run as host root (uid 0 inside bwrap's user namespace is the caller's
// uid outside: a set-user-ID file made inside would be root's on the host), so they run as
// an unprivileged user; everyone else's run as themselves.
#ifndef SANDBOX_BACKENDS_BWRAP_SANDBOX_USER_HPP
#define SANDBOX_BACKENDS_BWRAP_SANDBOX_USER_HPP

#include <sandbox/failure.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sandbox::bwrap {

/// A host uid and gid, and how to name them in messages.
struct host_user
{
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    std::string name; // "nobody (uid 65534, gid 65534)", "uid 1234, gid 1234"
};

/// The user and group databases (injected by the unit tests).
struct user_db
{
    /// A user's uid and primary gid, by name.
    std::function<std::optional<std::pair<std::uint32_t, std::uint32_t>>(const std::string&)>
        user_by_name;
    /// A uid's primary gid.
    std::function<std::optional<std::uint32_t>(std::uint32_t)> primary_gid;
    /// A group's gid, by name.
    std::function<std::optional<std::uint32_t>(const std::string&)> group_by_name;
};

/// /etc/passwd and /etc/group, read directly (sandbox-run is linked statically: no NSS).
const user_db& system_user_db();

/// \brief Whom a caller's commands run as; nullopt: the caller itself (no switch).
///
/// `spec` is empty, `USER` or `USER:GROUP`, each a name (looked up in `db`) or a number;
/// without a group, the user's primary group. Empty: `nobody` and `nogroup` for a root
/// caller (65534 for either when the database has no such entry), the caller itself for any
/// other. A root caller's user may not be uid 0 nor gid 0 (`errc::validation`); another
/// caller gets `errc::not_available` for anyone but itself (only root can switch). A name
/// not in the database, a number without an entry and without a group, or a malformed spec:
/// `errc::validation` naming `sandbox_user`.
outcome<std::optional<host_user>> choose_sandbox_user(const std::string& spec,
                                                      std::uint32_t caller_uid,
                                                      std::uint32_t caller_gid,
                                                      const user_db& db);

} // namespace sandbox::bwrap

#endif // SANDBOX_BACKENDS_BWRAP_SANDBOX_USER_HPP
