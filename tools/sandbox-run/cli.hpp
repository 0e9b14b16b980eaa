// tools/sandbox-run/cli.hpp: command-line parsing, default policy, exit status and JSON output
// of sandbox-run. Pure logic: nothing here spawns a process.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_CLI_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_CLI_HPP

#include <sandbox/config/document.hpp>
#include <sandbox/enforcement.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/net_proxy.hpp>
#include <sandbox/utf8.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::cli {

/// Exit status when sandbox-run itself fails (bad usage, refused policy, spawn failure).
inline constexpr int exit_sandbox_failure = 125;
/// Exit status when the command exists but cannot be executed.
inline constexpr int exit_not_executable = 126;
/// Exit status when the command does not exist.
inline constexpr int exit_not_found = 127;
/// Exit status when the timeout killed the command.
inline constexpr int exit_timeout = 124;
/// Exit status when a resource cap killed the command (128 + SIGKILL).
inline constexpr int exit_budget = 137;
/// Exit status when sandbox-run was interrupted (SIGINT/SIGTERM) and killed the command.
inline constexpr int exit_cancelled = 130;
/// Exit status when the reader of the streamed output went away (EPIPE) and the tree was
/// killed: 128 + SIGPIPE, what a shell pipeline member that died of it reports.
inline constexpr int exit_output_closed = 141;

/// \brief Parses a duration: a non-negative decimal number and an optional unit.
///
/// Units: `ns`, `us`, `ms`, `s`, `m` (minutes), `h`; no unit means seconds. A fraction is
/// allowed (`1.5s`, `0.25`) and rounded up to whole nanoseconds, so a positive duration
/// never becomes 0 ("disabled"): `0.4ns` is 1 ns. Empty text, signs, spaces,
/// unknown units and values beyond the range of `std::chrono::nanoseconds` are refused with
/// `errc::validation`.
outcome<std::chrono::nanoseconds> parse_duration(std::string_view text);

/// \brief Parses a byte size: a non-negative integer and an optional binary unit.
///
/// Units (case-insensitive): none or `B` (bytes), `K`/`KiB`, `M`/`MiB`, `G`/`GiB`, `T`/`TiB`,
/// all powers of 1024. Decimal-looking units (`KB`, `MB`, `GB`, `TB`) are refused as
/// ambiguous, as are fractions, signs, garbage and values that overflow `std::int64_t`
/// (`errc::validation`).
outcome<std::int64_t> parse_size(std::string_view text);

/// \brief Everything sandbox-run needs to do its job, as parsed from the command line.
struct run_config
{
    /// The command and its options, with the default policy applied under the flags.
    sandbox::exec_request request{};
    /// Options of the local runner (root, output cap default).
    sandbox::local_runner_options runner{};
    /// `--stdin-file` names a FIFO: wait (under the timeout) until a writer has written or
    /// closed before the command starts, as a shell's `< fifo` would.
    bool stdin_fifo = false;
    /// Print one JSON object instead of passing the output through.
    bool json = false;
    /// Run the command as a terminal session on our terminal (`--tty`).
    bool tty = false;
    /// Print the enforcement report and exit.
    bool enforcement = false;
    /// Print the usage text and exit.
    bool help = false;
    /// The backend name: "auto" (bwrap when it can run this command line here, else local:
    /// `choose_backend`), "local" or "bwrap".
    std::string backend = "auto";
    /// Filesystem view of the bwrap backend (`--writable`, `--read-deny`, `--write-deny`,
    /// `--unix-socket`) and its user (`--sandbox-user`); refused with `--backend local`,
    /// which cannot enforce them.
    struct bwrap_view
    {
        std::vector<std::string> writable{};
        std::vector<std::string> read_deny{};
        std::vector<std::string> write_deny{};
        std::vector<std::string> unix_sockets{};
        /// `--read-only PATH`: host paths bound read-only at the same place (through the
        /// private /tmp, say), as bwrap's `--ro-bind` extra flags.
        std::vector<std::string> read_only{};
        /// `--sandbox-user`: a root caller's sandbox user (`bwrap_runner_options`).
        std::string sandbox_user{};
        bool empty() const
        {
            return writable.empty() && read_deny.empty() && write_deny.empty() &&
                   unix_sockets.empty() && read_only.empty() && sandbox_user.empty();
        }
    } bwrap{};
    /// `--config FILE`: run through a named sandbox of this document (`--sandbox NAME`): its
    /// backend, root and policy; the flags only narrow it (`merge_defaults`). Empty: none.
    std::string config_file{};
    /// `--sandbox NAME`: the entry of `config_file` to run through.
    std::string sandbox_name{};
    /// `--check`: validate `config_file`, build every entry, print each one's effective
    /// policy and enforcement, exit 0 (all good) or 125.
    bool check = false;
    /// `--connect SOCKET`: run through the sandbox `--sandbox NAME` of the sandboxd listening
    /// there; the flags only narrow its policy (as with `--config`). Empty: none.
    std::string connect{};
    /// `--instance ID` (with `--connect`): run as one exec in that instance of the sandbox
    /// (opened with `POST /v1/sandboxes/NAME/instances`). Empty: none.
    std::string instance{};
    /// `--workspace NAME=DIR`: the workspaces entries of `config_file` may name.
    std::map<std::string, std::string, std::less<>> workspaces{};
    /// The egress proxy's resolver pins (`--resolve`) and limits, for the bwrap runner.
    sandbox::proxy_options net_proxy{};
    /// The policy chain in front of the backend (`--allow-command`, `--ask`,
    /// `--ask-timeout`, `--audit`); all unset: no chain.
    struct chain_flags
    {
        /// Unset: no command gate.
        std::optional<std::vector<std::string>> allowed_commands{};
        /// Patterns (checked when parsed) whose commands need a yes on the terminal.
        std::vector<std::string> ask{};
        std::chrono::nanoseconds ask_timeout = std::chrono::minutes(1);
        /// Append the audit trail to this file.
        std::string audit{};
        bool empty() const { return !allowed_commands && ask.empty() && audit.empty(); }
    } chain{};
};

/// \brief The built-in policy that every run starts from (each flag overrides its field).
///
/// Environment allow-list PATH, HOME, USER, LOGNAME, LANG, LC_ALL, LC_CTYPE, TERM, TZ,
/// TMPDIR, SHELL; timeout 10 minutes; output cap 10 MiB per stream; at most 1024 processes;
/// no memory cap; no cpu cap; kill grace 0 (SIGKILL at once).
sandbox::exec_options default_policy();

/// \brief Parses `--allow-host` / `--deny-host` text, `PATTERN[:PORT]`, into a rule.
///
/// A bracketed IPv6 takes its port after the bracket (`[::1]:443`); text with two or more
/// colons and no brackets is an IPv6 pattern without a port. The port is 1 to 65535 (no
/// port: any). The pattern itself is checked by `net_policy::validate`.
outcome<sandbox::net_rule> parse_host_rule(std::string_view text, sandbox::net_action action);

/// \brief One note per allow rule that names a loopback address or a `localhost` name: the
/// sandbox has a loopback of its own (and `no_proxy` sends clients there), so the host's
/// services are reached by `sandbox::host_loopback_name` and a rule naming it.
std::vector<std::string> loopback_rule_notes(const sandbox::net_policy& net);

/// \brief One note per command argument that names an existing host path under /tmp (also
/// after a `=`, as in `--cacert=/tmp/ca.pem`) which the bwrap sandbox's private /tmp hides
/// (no root, `--writable` or `--read-only` path holds it). `exists` answers for a host path.
std::vector<std::string> private_tmp_notes(const run_config& cfg,
                                           const std::function<bool(const std::string&)>& exists);

/// \brief Parses `--resolve HOST=ADDRESS` into a (name, address) pin; both are checked
/// when the runner is built.
outcome<std::pair<std::string, std::string>> parse_resolve(std::string_view text);

/// \brief Parses `sandbox-run [options] [--] COMMAND [ARG...]`.
///
/// Options end at `--` or at the first argument that is neither an option nor the value of
/// one; everything from there on belongs to the command, including arguments that look like
/// options. Usage errors (unknown or malformed options, a missing command, conflicting
/// flags) are `errc::validation`; an unknown `--backend` is `errc::not_available`; a
/// `--stdin-file` that cannot be opened is classified by `errc_from_errno` (a directory is
/// `errc::validation`), with the path in the diagnostics. The file is opened, not read: the
/// command reads it as its stdin (`exec_request::stdin_fd`), so its size costs no memory.
outcome<run_config> parse_command_line(int argc, const char* const* argv);

/// True when the OS refused the command itself: nothing ran, the diagnostics name the
/// "command" and carry the OS error (not found on the PATH, no such file, not executable,
/// not an executable format, argument list too long).
bool command_refused(const sandbox::exec_result& r);

/// \brief The exit status of sandbox-run for a finished run.
///
/// The child's exit code when it exited; 128+N when a signal it did not get from us killed
/// it; 124 on timeout; 137 when a cap killed it; 130 when cancelled. 126 and 127 belong to
/// the command (`command_refused`): 127 it was not found, 126 it exists but cannot be
/// executed. 125 for every other failure: usage, policy, a work dir or root that is
/// missing, outside the root or not a directory, unavailable enforcement, internal errors.
int exit_status_for(const boost::system::error_code& ec, const sandbox::exec_result& r);

/// \brief Sets the timeout to `left` (at least 1 ns) and raises `cpu_millicores` so that the
/// cpu budget, a share of the timeout, stays what it was (rounded up). Used when waiting for
/// a FIFO's writer has taken part of the timeout.
void shrink_timeout(sandbox::exec_options& o, std::chrono::nanoseconds left);

/// \brief `text` safe to show on a terminal: C0 control bytes, DEL and every byte of a
/// non-ASCII character (C1 controls, bidirectional overrides) as `\xNN`, so that no command
/// name, argument or path can move the cursor, clear the screen or hide text. Used for the
/// `--ask` question and for every line sandbox-run writes to stderr.
std::string printable_text(std::string_view text);

/// Replaces ill-formed UTF-8 with U+FFFD (`<sandbox/utf8.hpp>`).
using sandbox::sanitize_utf8;

/// \brief The flags of the command line that only the bwrap backend enforces, as typed
/// (`--writable`, `--net deny`, ...), in a fixed order; empty when it asks for nothing that
/// only bwrap can do.
std::vector<std::string> bwrap_only_flags(const run_config& cfg);

/// \brief What `--backend auto` runs on, and why.
struct backend_choice
{
    /// "bwrap" or "local": the backend that runs the command, or ("bwrap") that refused it.
    std::string backend;
    /// Why, for `--enforcement`'s `backend_reason`.
    std::string reason;
    /// The one warning line for stderr when it falls back to the local backend (without the
    /// "sandbox-run: " prefix); empty otherwise.
    std::string warning;
    /// Set when nothing may run: the failure to report (exit status 125).
    std::optional<failure> refusal;
};

/// \brief What the host says, without starting a process, about whether bwrap may be
/// refused its namespaces here (`read_namespace_signs`).
struct namespace_signs
{
    /// This process runs under a seccomp filter (a container's profile may refuse new
    /// namespaces to everything below it): /proc/self/status `Seccomp: 2`.
    bool seccomp_filtered = false;
    /// `kernel.unprivileged_userns_clone` is 0 (Debian's and Ubuntu's older kernels).
    bool userns_clone_off = false;
    /// `user.max_user_namespaces` is 0.
    bool no_user_namespaces = false;
    /// `kernel.apparmor_restrict_unprivileged_userns` is 1 (Ubuntu 23.10 and later).
    bool apparmor_restricts = false;
};

/// The signs from the text of /proc/self/status and the three settings' values (-1: the
/// file is missing or holds no number, which is no sign). Pure.
namespace_signs namespace_signs_of(std::string_view self_status, long unprivileged_userns_clone,
                                   long max_user_namespaces,
                                   long apparmor_restrict_unprivileged_userns);

/// Reads the signs from /proc.
namespace_signs read_namespace_signs();

/// \brief Whether `--backend auto` asks bwrap's probe before the run (any sign that its
/// namespaces may be refused here) instead of letting the run itself find out. A run that
/// fails for it falls back late, after the notes printed for the bwrap sandbox; the probe
/// first keeps a host that cannot run bwrap at one warning line. Pure.
bool probe_before_run(const namespace_signs& s);

/// \brief `--backend auto`'s decision. `bwrap_check` is the bwrap runner's verdict on this
/// very command line (`bwrap_runner::check()`: its option checks, then its probe; empty
/// when it can run it here); `bwrap_only` are `bwrap_only_flags`.
///
/// - Usable: bwrap.
/// - `errc::not_available` (bwrap is missing, cannot create its namespaces here, cannot
///   mask the caller's credentials): the local backend with one warning that says why,
///   unless the command line asks for something only bwrap enforces (`bwrap_only`): then
///   the refusal `--backend bwrap` would give (its code and reason).
/// - Any other failure is bwrap refusing this command line (a root or `--writable`
///   directory it cannot make writable, such as `/` or a home directory, or that a root
///   caller's sandbox user cannot reach; a bad `--unix-socket`): refused as with
///   `--backend bwrap`, never run unconfined instead.
backend_choice choose_backend(const std::optional<failure>& bwrap_check,
                              const std::vector<std::string>& bwrap_only);

/// \brief `--enforcement`'s JSON: `backend` (the backend the report is for) and, when
/// `reason` is not empty (`--backend auto`), `backend_reason`, then the report's keys
/// (`to_json(enforcement_report)`). No trailing newline.
std::string enforcement_to_json(const sandbox::enforcement_report& e, std::string_view backend,
                                std::string_view reason);

/// \brief One entry of `--check`'s JSON (no trailing newline): `name`, `backend`, `root` (as
/// resolved), `policy` (the entry's defaults, command gate and approval, with durations in
/// milliseconds and a proxy URL's password hidden) and `enforcement` (the backend's report).
std::string entry_to_json(const sandbox::config::sandbox_entry& e, std::string_view root,
                          const sandbox::enforcement_report& enforcement);

/// The usage text, ending with a newline.
std::string usage();

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_CLI_HPP
