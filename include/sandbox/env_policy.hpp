// sandbox/env_policy.hpp: which environment variables the child sees.
#ifndef SANDBOX_ENV_POLICY_HPP
#define SANDBOX_ENV_POLICY_HPP

#include <sandbox/config.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sandbox {

/// \brief Environment policy: an allow-list over the host environment plus injected values.
///
/// @li `allow` unset (`std::nullopt`): the child inherits the whole host environment.
/// @li `allow` set but empty: the child inherits nothing.
/// @li `allow` non-empty: only host variables with exactly these (case-sensitive) names pass.
/// @li `inject` is applied on top and replaces an inherited variable of the same name.
///
/// With an empty allow-list and nothing injected the child gets an empty environment; it
/// never falls back to inheriting.
struct env_policy
{
    std::optional<std::vector<std::string>> allow{};
    std::map<std::string, std::string> inject{};

    /// Inherit nothing (equivalent to `allow = std::vector<std::string>{}`).
    static env_policy empty() { return env_policy{std::vector<std::string>{}, {}}; }
};

} // namespace sandbox

#endif // SANDBOX_ENV_POLICY_HPP
