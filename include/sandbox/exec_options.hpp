// sandbox/exec_options.hpp: the policy surface of one execution.
#ifndef SANDBOX_EXEC_OPTIONS_HPP
#define SANDBOX_EXEC_OPTIONS_HPP

#include <sandbox/config.hpp>
#include <sandbox/env_policy.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/net_policy.hpp>
#include <sandbox/resource_limits.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace sandbox {

/// \brief Options of one execution: where, with what input, for how long, under which policy.
struct exec_options
{
    /// Work directory. Empty: the runner root. Relative: joined onto the root. Absolute: must
    /// lie inside the root after symlinks are resolved.
    std::string work_dir{};
    /// Bytes fed to the child's stdin. Unset: stdin is /dev/null. Set but empty: a pipe that
    /// is closed at once (the child reads end-of-file).
    std::optional<std::string> input{};
    /// Wall-clock limit; zero: none. On expiry the whole tree is killed (`errc::timeout`).
    std::chrono::nanoseconds timeout{0};
    /// Grace between SIGTERM and SIGKILL when the tree is stopped for a timeout or a partial
    /// cancellation. Zero (the default): SIGKILL at once.
    std::chrono::nanoseconds kill_grace{0};
    env_policy env{};
    net_policy net{};
    resource_limits limits{};
};

/// \brief The backend-independent checks made before anything runs.
///
/// In order: negative sizes or durations → `errc::validation`; `disk_bytes` ≠ 0 →
/// `errc::not_available` (no backend has a quota); `cpu_millicores` without a timeout →
/// `errc::not_available`; sampled caps (memory, cpu, processes, tasks) while `sampler_usable` is
/// false → `errc::not_available`. The net policy is validated by `net_policy::validate`.
SANDBOX_DECL outcome<> validate_exec_policy(const exec_options& opts, bool sampler_usable);

/// The cpu-time budget implied by `limits.cpu_millicores` and `timeout` (zero: none).
/// Rounded up to whole nanoseconds, so a positive share of a positive timeout is at least
/// 1 ns, never "no budget"; saturates instead of overflowing.
SANDBOX_DECL std::chrono::nanoseconds cpu_budget(const exec_options& opts) noexcept;

} // namespace sandbox

#endif // SANDBOX_EXEC_OPTIONS_HPP
