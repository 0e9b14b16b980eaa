// sandbox/backend/runner_options.hpp: the construction options every backend on the
// supervisor shares (local_runner_options is it; bwrap_runner_options derives from it).
#ifndef SANDBOX_BACKEND_RUNNER_OPTIONS_HPP
#define SANDBOX_BACKEND_RUNNER_OPTIONS_HPP

#include <sandbox/config.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/resource_limits.hpp>
#include <sandbox/sampler.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace sandbox {

/// \brief What every supervised backend's options hold (`local_runner_options` is this
/// type). Set the fields by name (`o.root = ...`); a designated initializer of a derived
/// type names the base first: `bwrap_runner_options{{.root = "/srv"}, {"/data"}}`.
struct common_runner_options
{
    /// The root that work directories are confined to (and, under bwrap, the directory bound
    /// read-write). Made absolute and symlink-resolved.
    std::string root = ".";
    /// Per-stream output cap when the request sets none. Zero or negative: no cap.
    std::int64_t default_max_output_bytes = sandbox::default_max_output_bytes;
    /// How often the cap sampler reads the trees of this runner (see
    /// default_sample_interval for when it looks sooner or later).
    std::chrono::nanoseconds sample_interval = default_sample_interval;
    /// Retention and count bound of its sessions.
    session_registry_options sessions{};
    /// Where the kernel holds the trees (docs/architecture.md, "Two ways to hold a tree"):
    /// "auto" (this process's own cgroup v2, when it is writable: a delegated one, or root's),
    /// an absolute directory of the cgroup2 mount that this process may write (a delegated
    /// subtree), or "off" (the /proc sampler, the fork gate and the subreaper's kill only).
    /// Per execution context: the first runner to start the helper decides where its tree
    /// goes; a runner on the same context asking for another directory is refused
    /// (`not_available`). Where the cgroup path cannot be used, "auto" falls back to the
    /// sampler (`enforcement()` says why); an explicit directory is refused instead.
    std::string cgroup = "auto";
};

} // namespace sandbox

#endif // SANDBOX_BACKEND_RUNNER_OPTIONS_HPP
