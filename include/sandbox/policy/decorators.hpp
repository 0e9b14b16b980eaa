// sandbox/policy/decorators.hpp: runners that wrap a runner and judge every call before it
// reaches it: the command gate, daemon-owned defaults, approval, the audit trail, and the
// composed local chain.
#ifndef SANDBOX_POLICY_DECORATORS_HPP
#define SANDBOX_POLICY_DECORATORS_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/policy/audit.hpp>
#include <sandbox/policy/call.hpp>
#include <sandbox/runner.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandbox {

/// \brief The effective options of a call under daemon-owned `defaults`.
///
/// Where and what to run with (`work_dir`, `input`) are the caller's, and injected
/// variables are a union in which the caller wins; every policy field is the stricter of the
/// two, and a field the defaults leave unset never widens what the caller asked for:
///
/// | field | merged value |
/// |---|---|
/// | `work_dir` | the caller's if not empty, else the defaults' (the runner confines it) |
/// | `input` | the caller's if set (even empty), else the defaults' |
/// | `timeout` | the smaller of the two that are set (0 = unset); 0 if neither is |
/// | `kill_grace` | the defaults' set (> 0): the smaller of the two, so a caller's 0 (SIGKILL at once) stands; unset: the caller's |
/// | `env.allow` | both set: the caller's names that the defaults also allow (caller's order); one set: that one; neither: unset |
/// | `env.inject` | union; the caller's value wins for a name in both |
/// | `net` | defaults `inherit`: the caller's; caller `deny_all`: the caller's, with only the unix sockets the defaults also list; otherwise the defaults' (whole), with the stricter `sni_check` of both |
/// | `limits.*` | per cap, the smaller of the two that are set; 0 if neither is |
///
/// `max_output_bytes` 0 means "the runner's default", so a caller's 0 takes the defaults'
/// value. The result shares nothing with the arguments.
SANDBOX_DECL exec_options merge_defaults(exec_options caller, const exec_options& defaults);

/// How the command gate compares a command with its list.
enum class command_match : int
{
    /// The command as passed equals a listed name: `rm` allows `rm` (looked up on the
    /// child's PATH), not `/bin/rm`; `/bin/rm` allows only that path.
    exact = 0,
    /// The base name of the command equals a listed name (which must not contain `/`):
    /// `rm` allows `rm`, `/bin/rm` and `./rm` alike. Choose it only when where the
    /// command comes from does not matter.
    base_name = 1,
};

/// \brief Options of the approval layer.
struct approval_options
{
    /// Asked in order; the first that matches sends the call to the approver, and no other
    /// is asked (one call, one decision). None matching: the call passes without asking.
    std::vector<predicate> predicates{};
    /// Empty: every call a predicate matches is denied.
    approver ask{};
    /// How long the approver may take; then the call is denied. Must be positive.
    std::chrono::nanoseconds deadline = std::chrono::minutes(5);
};

/// \brief The whole chain. Every layer is optional; for each call `compose_local` merges the
/// defaults, then consults the command gate, then approval: the approver sees the merged
/// options, is never asked about a command the gate refuses, and cannot pass one.
struct local_policy
{
    /// Merged into every call (`merge_defaults`). All unset (the default): no effect.
    exec_options defaults{};
    /// Unset: no gate. Set but empty: a gate that refuses every command.
    std::optional<std::vector<std::string>> allowed_commands{};
    command_match match = command_match::exact;
    /// No predicates: no approval layer.
    approval_options approval{};
    /// Unset: no records are built at all.
    std::shared_ptr<audit_sink> audit{};
    /// The chain's name in its audit records and approval requests (a config document's
    /// sandbox); may be empty.
    std::string name{};
    /// Calls are numbered from this counter when set (shared by several chains: a call's
    /// number is then unique among them all), else from the chain's own, from 1.
    std::shared_ptr<std::atomic<std::uint64_t>> call_numbers{};
};

/// \brief A chain for a host application that hands out a root directory: approval is
/// needed for a work directory outside `root`, a network mode other than `inherit`, and
/// (only when `sensitive` is not empty) commands matching the `sensitive` patterns. No
/// defaults, no gate, no audit. \throws sandbox::error for a malformed pattern.
SANDBOX_DECL local_policy default_local_policy(const std::filesystem::path& root, approver ask,
                                               std::vector<std::string> sensitive = {});

/// \name Decorators
///
/// Each returns a runner that owns `inner`, runs on its executor, reports exactly its
/// enforcement, and offers sessions exactly when `inner` does: a session start goes
/// through the same checks as an exec (the `tty` of the spec is visible to predicates),
/// and what happens inside a session afterwards (writes, signals) is not judged. Nothing
/// refused ever reaches `inner`. Refusals throw `sandbox::error` with `errc::policy_denied`
/// (`diag.rule` names the layer: "gate" or "approval"), an empty command `errc::validation`.
/// Cancelling a call (any type the caller's filter lets through) while its approver is
/// pending cancels the approver and runs nothing (`operation_aborted`, no partial result).
/// No threads are started. The runner must outlive its calls; an approver still running
/// after its call ended (late, or ignoring cancellation) holds its own copy of the
/// `approver` function object, not a reference into the runner.
/// \throws sandbox::error `errc::validation` when built from a null runner, an empty or
/// (for `base_name`) slashed command name, a non-positive deadline.
/// @{

/// The command gate: only listed commands run.
SANDBOX_DECL std::unique_ptr<runner> allow_commands(std::unique_ptr<runner> inner,
                                                    std::vector<std::string> names,
                                                    command_match match = command_match::exact);

/// Daemon-owned defaults merged into every call (`merge_defaults`).
SANDBOX_DECL std::unique_ptr<runner> with_defaults(std::unique_ptr<runner> inner,
                                                   exec_options defaults);

/// The approval tripwire.
SANDBOX_DECL std::unique_ptr<runner> with_approval(std::unique_ptr<runner> inner,
                                                   approval_options approval);

/// Records every call that passes through it and how it ended to `sink`. Fails closed: a
/// call whose `allowed` record (written before the inner runner is called) cannot be
/// recorded fails with `errc::internal` and never reaches the inner runner.
SANDBOX_DECL std::unique_ptr<runner> with_audit(std::unique_ptr<runner> inner,
                                                std::shared_ptr<audit_sink> sink);

/// The chain of `policy` over `backend`, as one runner (one call number per call in the
/// audit trail, across layers).
SANDBOX_DECL std::unique_ptr<runner> compose_local(std::unique_ptr<runner> backend,
                                                   local_policy policy);
/// @}

} // namespace sandbox

#endif // SANDBOX_POLICY_DECORATORS_HPP
