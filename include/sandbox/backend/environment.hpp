// sandbox/backend/environment.hpp: turning an env_policy into the child's environment.
#ifndef SANDBOX_BACKEND_ENVIRONMENT_HPP
#define SANDBOX_BACKEND_ENVIRONMENT_HPP

#include <sandbox/config.hpp>
#include <sandbox/env_policy.hpp>
#include <sandbox/failure.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace sandbox::backend {

/// \brief Checks names and values: a name is non-empty and holds no '=' or NUL; a value
/// holds no NUL. Fails with `errc::validation` naming the variable.
SANDBOX_DECL outcome<> validate_env_policy(const env_policy& p);

/// \brief Applies `p` to `host` ("NAME=value" entries, in order) and returns the child's
/// environment. Host entries without '=' or with an empty name are dropped. Injected
/// entries replace inherited ones of the same name and are appended in name order.
SANDBOX_DECL std::vector<std::string> build_environment(const env_policy& p,
                                                        const std::vector<std::string>& host);

/// The calling process's environment as "NAME=value" entries.
SANDBOX_DECL std::vector<std::string> host_environment();

/// The value of `name` in `env`, or nullptr when absent.
SANDBOX_DECL const std::string* find_env(const std::vector<std::string>& env,
                                         std::string_view name) noexcept;

} // namespace sandbox::backend

#endif // SANDBOX_BACKEND_ENVIRONMENT_HPP
