// sandbox/bwrap_runner.hpp: the "bwrap" backend: commands inside bubblewrap namespaces.
#ifndef SANDBOX_BWRAP_RUNNER_HPP
#define SANDBOX_BWRAP_RUNNER_HPP

#include <sandbox/backend/runner_options.hpp>
#include <sandbox/config.hpp>
#include <sandbox/net_proxy.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/sampler.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandbox {

namespace bwrap {
class warm_pool;
} // namespace bwrap

/// \brief Construction options of `bwrap_runner`: the shared ones (`root`: bound read-write,
/// and the directory work dirs are confined to; default output cap, sample interval,
/// sessions), and these.
struct bwrap_runner_options : common_runner_options
{
    /// More directories bound read-write at the same paths (must exist; not `/`, not a
    /// home directory, not an ancestor of a read-deny path).
    std::vector<std::string> writable_paths{};
    /// Paths hidden from the command, on top of the built-in list (credentials and keys
    /// under the caller's home, /etc/passwd's for its effective uid and `$HOME`'s when it
    /// differs; neither known: `errc::not_available`): `.ssh`, `.aws`, `.gnupg`, `.config/gcloud`, `.azure`, `.kube`,
    /// `.docker/config.json`, `.netrc`, `.git-credentials`, `.config/gh/hosts.yml`, `.npmrc`,
    /// `.pypirc`). Paths that do not exist are skipped.
    std::vector<std::string> read_deny{};
    /// Paths inside the writable directories that the command may read but not change, on
    /// top of the built-in list (`bwrap::default_write_deny`: git's hooks, config,
    /// config.worktree, commondir, worktrees, modules and `.gitmodules`, editor and tool
    /// files, shell rc files). Absolute, or relative to each writable directory (the root
    /// included); no `..`. All are kept even where they do not exist: an empty read-only
    /// directory takes the place of the first missing component while a command runs, and
    /// is removed after.
    std::vector<std::string> write_deny{};
    /// Host unix sockets the command may connect to (each must be a socket): bound at the
    /// same path, through the private /tmp and, under `net_mode::deny_all`, the masked /run.
    /// Under a network namespace of its own (every mode but `inherit`) and where
    /// `backend::unix_socket_policy_usable()`, they are the only host sockets it can
    /// connect to by path (see `hold_unix_socket_policy`).
    std::vector<std::string> unix_sockets{};
    /// Hold the unix-socket policy where it can be held (`enforcement().unix_socket_policy`):
    /// under `deny_all`, `allow_list` and `proxy`, every `connect()` of the command's tree is
    /// made by the supervisor's worker, which lets a path-named unix socket be reached only
    /// when it is one of `unix_sockets` or the call's `net.unix_sockets`, or is served by a
    /// process of the sandbox itself; any other fails with EACCES. AF_UNIX datagram sockets
    /// and io_uring cannot be made, and 32-bit x86 programs cannot use `socketcall`
    /// (docs/backends.md, "Unix-socket policy"). False: sockets outside the private /tmp
    /// and /run stay reachable, and the runner does not claim the policy.
    bool hold_unix_socket_policy = true;
    /// Extra bwrap flags from an allow-list of flags that cannot weaken the policy, each with
    /// its number of values (see `bwrap::check_extra_flags`); anything else is
    /// `errc::validation`. They apply after the binds and before the read-only and masked
    /// paths.
    std::vector<std::string> extra_flags{};
    /// The host user commands run as when the caller is root: `USER` or `USER:GROUP`, each a
    /// name or a number (without a group: the user's primary group). Empty: `nobody` and
    /// `nogroup` (65534 when the databases have no such entry). Never uid 0 nor gid 0
    /// (`errc::validation`). It must be able to write the root and the writable paths
    /// (`errc::validation` naming the path otherwise: give it access, or pick another
    /// user). A caller that is not root runs commands as itself; naming anyone else is
    /// `errc::not_available`.
    std::string sandbox_user{};
    /// The egress proxy's limits and resolver, for calls under `net_mode::allow_list` and
    /// `net_mode::proxy` (each call or session gets its own proxy, on the runner's executor).
    /// Every call and session of the runner counts its connections against one budget:
    /// `proxy.sandbox_budget`, or one the runner makes of `limits.max_sandbox_tunnels`.
    proxy_options proxy{};
    /// The bwrap program; empty: `bwrap` on the PATH (then /usr/bin/bwrap).
    std::string bwrap_path{};
    /// The bound on setting a sandbox up: from bwrap's start until the init inside says the
    /// sandbox is ready (namespaces, mounts, the proxy's listeners handed over). A call's
    /// `timeout` counts from then on, so a set-up slowed by a loaded host (200 sandboxes
    /// starting at once on 2 cores take seconds each) does not eat the command's time. Past
    /// this bound the tree is killed and the call ends `errc::timeout`, `diag.limit`
    /// "setup_timeout", nothing run. Zero: unbounded (a caller can still cancel).
    std::chrono::nanoseconds setup_timeout = std::chrono::seconds(60);
    /// Sandboxes kept set up for one-shot calls (`try_exec`): this many instances of the
    /// runner's own policy are opened ahead, in the background on the runner's executor,
    /// once bwrap is known to work here (a command ran, or `check()`), each primed with one
    /// `/bin/true`, and dropped after 30 s unused (what they resolved at their open stays
    /// as fresh as a cold exec's). A call that an instance runs exactly as a cold exec takes
    /// one: its `net` equal to `warm_net`, which must be without an egress proxy (`inherit`
    /// or `deny_all`; with another mode nothing is kept), no caps (`memory_bytes`,
    /// `cpu_millicores`, `max_processes`, `max_tasks`: a cold exec's also bound its /tmp and
    /// go in its cgroup), no hooks of inspected requests. It runs with everything a cold
    /// exec has of its own (its supervisor, timeout, classification, tree kill;
    /// docs/backends.md, "Warm sandboxes"), and the sandbox is killed as the call completes
    /// (the command's tree is gone by then; bwrap and the init end on the side): no sandbox
    /// serves two calls, so nothing a command leaves in its /tmp reaches another. A
    /// replacement opens once the call is done. Other calls, and all calls while none is
    /// ready, run cold. The pooled sandboxes are work on the executor until the runner is
    /// destroyed (which kills them): `io_context::run()` does not return before. Zero:
    /// none.
    std::size_t warm = 0;
    /// The network the warm sandboxes are set up with (`inherit` or `deny_all`): only calls
    /// with this `net` are served warm.
    net_policy warm_net{};
};

/// \brief Runs commands inside bubblewrap: host `/` read-only, the root (and the writable
/// paths) read-write, a private `/tmp`, credentials masked, its own pid, IPC, UTS, cgroup and
/// user namespaces with no capabilities, optionally no network; no set-user-ID or
/// set-group-ID bit can be set from inside (seccomp: `chmod` and its kin fail with EPERM).
/// A root caller's commands run as an unprivileged host user (`sandbox_user`), switched
/// to before bwrap starts, so nothing inside is host root: files it creates belong to that
/// user, and it reads only what that user may. Paths that user cannot reach are not masked
/// (bwrap, as that user, could not mount over them; the command cannot read them either).
/// Timeouts, caps and the whole-tree kill as in the local backend (the supervisor worker
/// owns bwrap and everything below it). `TMPDIR` is `/tmp` (the private one) unless the request
/// injects its own.
///
/// Availability: an exec does not wait for a probe; its own run is one (a command that
/// started proves bwrap usable here). A run bwrap could not set up (user namespaces
/// disabled, bwrap missing) is `errc::not_available` with bwrap's reason, the command never
/// having run; it asks the probe (bwrap once, on `/bin/true`) whether the host cannot, and
/// when it cannot, that call and every later one get the probe's verdict at once. Sessions
/// wait for the probe before their first start unless a command already ran. `enforcement()`
/// says so (`unavailable`) once the probe has decided (`check()` runs it); before, it
/// reports what bwrap would enforce. A disk quota is `not_available`.
///
/// Network: `net_mode::deny_all` gives the command its own network namespace with only
/// loopback. `net_mode::allow_list` and `proxy` do too, and each call (or session, for its
/// whole life) gets its own egress proxy on the runner's executor: the sandbox's init creates
/// its listeners on 127.0.0.1 (and [::1]) inside that namespace and hands them over before
/// the command starts, and the command's environment names it (`HTTP_PROXY`, `HTTPS_PROXY`,
/// `ALL_PROXY`, `GRPC_PROXY` in both cases, `NO_PROXY`; the caller's are replaced). The proxy
/// stops when the command's tree is gone, or with the caller. Its records go to
/// `exec_request::on_net_record`. A call's `net.unix_sockets` are bound for that call (each
/// must be an existing socket outside the writable directories).
///
/// TLS inspection (`net.mitm`, under allow_list or proxy): the call's proxy gets a CA of its
/// own, made in memory for that call and gone with it; its key never leaves the caller's
/// process. The command trusts it through a read-only bundle (the system's roots, then the
/// CA; certificates only) at `/run/sandbox/ca-certificates.crt`, named by `SSL_CERT_FILE`,
/// `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, `NODE_EXTRA_CA_CERTS`, `GIT_SSL_CAINFO`, `PIP_CERT`
/// and the others of docs/network.md (a variable the request injects itself is kept).
class SANDBOX_DECL bwrap_runner final : public runner
{
public:
    bwrap_runner(executor_type ex, bwrap_runner_options opts = {});
    ~bwrap_runner() override;

    executor_type get_executor() const noexcept override { return ex_; }
    boost::asio::awaitable<exec_outcome> try_exec(exec_request req) override;
    enforcement_report enforcement() const override;
    process_manager* sessions() noexcept override { return sessions_.get(); }
    /// An instance (`<sandbox/instance.hpp>`); see the class comment.
    boost::asio::awaitable<outcome<std::shared_ptr<instance>>>
    try_open(instance_spec spec) override;

    const std::string& root() const noexcept { return opts_.root; }

    /// \brief Runs the availability probe now, unless a probe or a command that ran has
    /// settled it (then it returns at once): afterwards `enforcement()` reports the outcome.
    /// Null when bwrap is usable, else the `errc::not_available` (or `errc::validation`, for
    /// bad options) that every call gets. Calls that start together share one probe. A probe
    /// that could not run for want of resources (the host out of processes or memory, its
    /// 10 s timeout on a loaded host) decides nothing: this returns null and the next call
    /// probes again. Cancelled while another call's probe runs: throws
    /// `boost::system::system_error` (`operation_aborted`).
    boost::asio::awaitable<std::optional<failure>> check();

    /// A bad option found when the runner was made (`errc::validation`, or
    /// `errc::not_available` for a sandbox user the helper cannot become), with
    /// `diag.limit` naming the option; null when the options are good. Runs no probe.
    std::optional<failure> setup_error() const;

    /// What `enforcement()` reports in `unwritable_paths` and `command_uid` (the root and
    /// writable paths the commands' user cannot write, found when the runner was made; that
    /// user), without `enforcement()`'s once-per-process host checks (the fork gate's takes
    /// a process).
    std::vector<std::string> unwritable_paths() const;
    std::uint32_t command_uid() const;

    /// The bwrap program the runner found (`bwrap_path`, else on the PATH); empty when none.
    const std::string& program() const noexcept;

    /// How many warm sandboxes (`bwrap_runner_options::warm`) are ready now.
    std::size_t warm_ready() const noexcept;

    struct state;

private:
    boost::asio::awaitable<boost::system::error_code> ensure_usable();

    executor_type ex_;
    bwrap_runner_options opts_;
    std::shared_ptr<state> st_;
    std::unique_ptr<process_manager> sessions_; // the shared registry behind the probe
    std::shared_ptr<bwrap::warm_pool> pool_;    // null without `warm`
};

} // namespace sandbox

#endif // SANDBOX_BWRAP_RUNNER_HPP
