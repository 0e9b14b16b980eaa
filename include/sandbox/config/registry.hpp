// sandbox/config/registry.hpp: the runners a config document names, built once, each its
// backend under the composed policy chain (compose_local).
#ifndef SANDBOX_CONFIG_REGISTRY_HPP
#define SANDBOX_CONFIG_REGISTRY_HPP

#include <sandbox/config.hpp>
#include <sandbox/config/document.hpp>
#include <sandbox/enforcement.hpp>
#include <sandbox/policy/audit.hpp>
#include <sandbox/policy/call.hpp>
#include <sandbox/runner.hpp>

#include <boost/json/value.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::config {

/// \brief What a backend factory gets for one entry.
struct backend_context
{
    /// The executor every runner of the registry runs on.
    runner::executor_type executor;
    /// The entry's root: absolute, symlinks resolved, an existing directory.
    std::string root;
    /// The entry's `settings` (null when absent), to decode strictly: an unknown key is a
    /// `errc::validation` naming it.
    const boost::json::value& settings;
    /// `sandboxes["name"].settings`, to prefix messages with.
    std::string path;
    /// `build_options::hidden_paths`: a backend that can hide paths from its commands hides
    /// these (the bwrap backend adds them to its read-deny list).
    std::vector<std::string> hidden_paths{};
    /// `build_options::warm_pools`: a backend keeps the warm sandboxes its settings ask for
    /// (`warm`) only when set.
    bool warm_pools = false;
    /// The entry's `defaults.net`: what its calls' network is unless they narrow it (the
    /// network a backend's warm sandboxes are opened with).
    net_policy default_net{};
};

/// \brief Makes the backend runner of an entry. Throws `sandbox::error` to refuse (its code
/// is kept: `not_available` for a backend that cannot run here, `validation` for bad
/// settings); any other exception is reported as `errc::validation`. Never returns null.
using backend_factory = std::function<std::unique_ptr<runner>(const backend_context&)>;

/// \brief What the application brings to a build.
struct build_options
{
    /// Workspace names an entry's `workspace:` may use, each to its root directory.
    std::map<std::string, std::string, std::less<>> workspaces{};
    /// The approver of every entry with an approval predicate; such an entry is
    /// `errc::validation` without one.
    approver ask{};
    /// Every call of every sandbox is recorded here; null: no audit trail.
    std::shared_ptr<audit_sink> audit{};
    /// Paths no command may see where the backend can hide them (sandboxd's own sockets):
    /// absolute; passed to each factory as `backend_context::hidden_paths`.
    std::vector<std::string> hidden_paths{};
    /// Numbers the calls of every sandbox from this counter (each record also names its
    /// sandbox); null: each sandbox numbers its own from 1. sandboxd keeps one across
    /// reloads, started from the clock, so that a call number is unique in its audit file.
    std::shared_ptr<std::atomic<std::uint64_t>> call_numbers{};
    /// Keep the warm sandboxes of the entries whose settings ask for them (bwrap's `warm`):
    /// for a long-lived program (sandboxd). Off, `warm` is read and checked but no sandbox
    /// is opened ahead (a one-shot program such as sandbox-run would only wait for them:
    /// they are work on its loop until the registry goes).
    bool warm_pools = false;
};

class builder;

/// \brief The runners of a document, by name; immutable once built. Destroying it destroys
/// the runners in the reverse order of their building (each ends its work as a runner's
/// destructor does: sessions closed, trees killed).
class SANDBOX_DECL registry
{
public:
    registry(registry&&) noexcept;
    registry& operator=(registry&&) noexcept;
    ~registry();

    /// The sandbox names, sorted.
    std::vector<std::string> names() const;
    /// The runner of that name (the composed chain), or null.
    runner* find(std::string_view name) const noexcept;
    /// The runner of that name. \throws sandbox::error `errc::not_found` for an unknown one.
    runner& get(std::string_view name) const;
    /// The backend under the chain of that name (for its own interface, such as
    /// `bwrap_runner::check()`), or null. Calls through it skip the entry's policy.
    runner* backend(std::string_view name) const noexcept;
    /// The root of that entry (absolute, symlinks resolved); empty for an unknown name.
    std::string root(std::string_view name) const;
    /// The entry a runner was built from, or null.
    const sandbox_entry* entry(std::string_view name) const noexcept;
    /// The document the registry was built from.
    const document& source() const noexcept;

private:
    friend class builder;
    struct impl;
    explicit registry(std::unique_ptr<impl> p);
    std::unique_ptr<impl> p_;
};

/// \brief Builds registries: a catalog of backend factories ("local" and "bwrap" built in)
/// and the building itself.
class SANDBOX_DECL builder
{
public:
    builder();
    builder(const builder&);
    builder& operator=(const builder&);
    ~builder();

    /// Adds (or, for a built-in name, replaces) a backend.
    /// \throws sandbox::error `errc::validation` for an empty name or an empty factory.
    void register_backend(std::string name, backend_factory factory);

    /// \brief The runners of `doc` on `ex`, in name order. For each entry: its root (a
    /// workspace that is not listed, a root that does not exist or is not a directory:
    /// `validation`), an approver when it has approval predicates (`validation`), the
    /// backend from its factory (an unknown backend: `validation`), the capability gate
    /// (what `defaults` ask of the backend that its `enforcement()` does not claim:
    /// `not_available` naming the field), then `compose_local` with the defaults, the gate,
    /// approval and the audit sink. Every problem of every entry is reported (as in
    /// `parse_document`, one per line; the code is the first problem's); on failure the
    /// runners built so far are destroyed in reverse order.
    outcome<registry> build(runner::executor_type ex, const document& doc,
                            build_options opts = {}) const;

    /// The problems `build` would report, without keeping what it built.
    std::vector<problem> check(runner::executor_type ex, const document& doc,
                               const build_options& opts = {}) const;

private:
    std::optional<registry> build_into(runner::executor_type ex, const document& doc,
                                       const build_options& opts,
                                       std::vector<problem>& problems) const;
    std::map<std::string, backend_factory, std::less<>> factories_;
};

/// \brief The capability gate alone: what `defaults` ask that `e` does not claim, as
/// problems (`not_available`) with paths under `entry_path` (`sandboxes["x"]`).
SANDBOX_DECL std::vector<problem> capability_gate(const exec_options& defaults,
                                                  const enforcement_report& e,
                                                  const std::string& entry_path);

} // namespace sandbox::config

#endif // SANDBOX_CONFIG_REGISTRY_HPP
