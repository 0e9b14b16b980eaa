// sandbox/backend/supervise.hpp: the shared engine behind every backend's exec: hand one
// command to a worker of the supervisor helper (which spawns it under a per-execution
// subreaper, samples the caps, kills and reaps the whole tree), feed stdin, capture capped
// output, turn timeout and cancellation into kill requests, and report an exec_result.
#ifndef SANDBOX_BACKEND_SUPERVISE_HPP
#define SANDBOX_BACKEND_SUPERVISE_HPP

#include <sandbox/backend/caps.hpp>
#include <sandbox/unique_fd.hpp>
#include <sandbox/config.hpp>
#include <sandbox/enforcement.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/sampler.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandbox::backend {

/// A socket file by its device and inode, as stat() gives them, and the host path it was
/// found at: it is let through only while that path still names it (a socket removed
/// meanwhile does not pass, even when another one gets its inode number).
struct socket_file
{
    std::uint64_t dev = 0;
    std::uint64_t ino = 0;
    std::string path;
};

/// \brief Everything the supervisor needs; built by a backend from an exec_request after
/// its policy checks. Nothing in it is interpreted again.
struct spawn_plan
{
    /// Path handed to execve: absolute, or relative to the work directory.
    std::string executable{};
    /// Full argument vector (argv[0] included).
    std::vector<std::string> argv{};
    /// Full environment ("NAME=value").
    std::vector<std::string> envp{};
    /// Directory the child enters with fchdir before exec (checked by the backend).
    unique_fd work_dir{};
    /// Used instead when `work_dir` is empty: a descriptor the backend keeps open (for
    /// example its root), not closed by the supervisor. -1: the child keeps our directory.
    int borrowed_work_dir_fd = -1;
    /// Bytes fed to stdin through a pipe. Unset, and no `stdin_fd`: /dev/null.
    std::optional<std::string> input{};
    /// A descriptor the command reads as its stdin (instead of `input`); handed over as is.
    std::shared_ptr<const unique_fd> stdin_fd{};
    /// Run on a pseudo-terminal of this size (`exec_request::tty`).
    std::optional<terminal_size> tty{};
    /// Streams output instead of capturing it (`exec_request::on_output`).
    output_handler on_output{};
    /// Streams output with back-pressure (`exec_request::on_output_async`); wins over
    /// `on_output`.
    async_output_handler on_output_async{};
    /// Bytes kept per stream.
    std::uint64_t max_output_bytes = std::numeric_limits<std::uint64_t>::max();
    std::chrono::nanoseconds timeout{0};
    std::chrono::nanoseconds kill_grace{0};
    /// Caps enforced by the sampler (zero: none).
    cap_limits caps{};
    std::chrono::nanoseconds sample_interval = default_sample_interval;
    /// Test seam: the worker fails this many cap samples first (0xffffffff: every one).
    std::uint32_t test_sample_faults = 0;
    /// The runner's `cgroup` setting (common_runner_options::cgroup): "auto", a directory,
    /// or "" / "off" for none.
    std::string cgroup{};
    /// Configured values, echoed in diagnostics.
    std::string backend_name{};
    /// Handed to the spawned program as fds 3, 4, ... (at most 5).
    std::vector<std::shared_ptr<const unique_fd>> extra_fds{};
    /// Set by a backend that wraps the command (bwrap) under the helper's status init (see
    /// `make_status_init`): the read end of the status pipe. The command's own end (its wait
    /// status, or why it could not be executed) is classified instead of the wrapper's exit;
    /// a wrapper that ends before the init started failed to set up the sandbox. The
    /// wrapper starts with the job signals (SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2,
    /// SIGTERM) ignored, so only the command, which gets them back at their defaults, ends
    /// by them when they are sent to the group.
    unique_fd inner_status{};
    /// With `inner_status`: the bound on the wrapper's set-up (from the spawn to the init's
    /// "started"), which then does not count in `timeout`: the timeout counts from when the
    /// command starts inside. Past it the tree is killed and the run ends `errc::timeout`
    /// with nothing run. Zero: the set-up is not bounded (but by the caller cancelling).
    std::chrono::nanoseconds setup_timeout{0};
    /// The command as the caller named it (diagnostics of a wrapped run).
    std::string inner_command{};
    /// What the backend keeps on the host for this command's tree while it may run (bwrap:
    /// the lease on its write-deny stand-ins), released (by its destructor) once the worker
    /// reports the whole tree gone. When no report comes (the worker was lost, or the caller
    /// went away mid-run), once the helper that ran the tree has been reaped.
    std::shared_ptr<void> tree_resources{};
    /// Called once the worker has reported the tree gone (or nothing was spawned), before
    /// the result is delivered: the backend settles what the tree used and calls `done`
    /// (on the supervision's executor, at most once) when every record about it is out
    /// (bwrap: the egress proxy has stopped and each connection's `closed` record has
    /// reached `on_net_record`). Not called when the worker was lost. Empty: nothing to wait for.
    std::function<void(std::function<void()> done)> settle{};
    /// The unix-socket policy (see `unix_socket_policy_usable`): with a value, every
    /// `connect()` of the tree is made by the supervisor's worker on the caller's behalf,
    /// and a path-named unix socket is reached only when it is one of these files or is
    /// served by a listening socket of the caller's own network namespace; any other fails
    /// with EACCES. AF_UNIX datagram sockets and io_uring cannot be made. Use it only for a
    /// tree in a network namespace of its own (then IP and abstract addresses are its own
    /// too). Spawning fails `not_available` where the filter cannot be installed.
    std::optional<std::vector<socket_file>> unix_socket_policy{};
    /// Where the worker comes from when not from the supervisor service's pool (an
    /// instance's, inside its sandbox): called once, with the function to call (on the
    /// supervision's executor, once) with the channel or why there is none.
    std::function<void(std::function<void(outcome<unique_fd>)>)> acquire_channel{};
    /// With `acquire_channel`: takes the channel back once its worker has reported the tree
    /// gone (the worker may serve another command). Not called when the worker was lost.
    std::function<void(unique_fd)> release_channel{};
    /// With `acquire_channel`: called when the worker was lost (it never reported the tree
    /// gone), before the outcome is delivered, to say why when the backend knows (an
    /// instance that was closed). Empty: the loss is classified as the helper's.
    std::function<void(exec_outcome&)> explain_lost{};
    /// A command run by a worker inside a sandbox (an instance): the worker enters this
    /// directory (a path in the sandbox's view; empty: its own) and looks an executable
    /// without a slash up on the PATH of `envp` there. `work_dir` and
    /// `borrowed_work_dir_fd` are not used then.
    std::optional<std::string> inside_work_dir{};
};

/// Whether the unix-socket policy can be held here: seccomp user notification with a
/// listener (probed once, in the helper), and a helper with CAP_SYS_ADMIN (it enters each
/// tree's network namespace and acts as its processes).
SANDBOX_DECL bool unix_socket_policy_usable();

/// What every backend on the supervisor enforces: the environment policy, the sampled caps
/// (memory, cpu, processes, tasks) where /proc can be read, and the whole-tree kill.
SANDBOX_DECL enforcement_report supervised_enforcement();
/// The same for a runner's `cgroup` setting: which mechanism holds each cap and the tree
/// kill ("cgroup" where the setting can be used here), and why the cgroup path is not used.
SANDBOX_DECL enforcement_report supervised_enforcement(const std::string& cgroup);

/// The helper's status init for a wrapped command (`spawn_plan::inner_status`).
struct status_init
{
    /// Goes before the command inside the wrapper: the init, run from the wrapper's fd 4.
    std::vector<std::string> argv;
    /// `spawn_plan::extra_fds`: the status pipe's write end (fd 3) and the helper program (4).
    std::vector<std::shared_ptr<const unique_fd>> fds;
    /// `spawn_plan::inner_status`.
    unique_fd status;
};

/// \brief A fresh status pipe and the helper program's descriptor (opened once per process).
/// `errc::not_available` when the helper is not found, `errc::internal` on an OS error.
SANDBOX_DECL outcome<status_init> make_status_init();

/// \brief Makes `plan` run its program as host `uid` and `gid` (supplementary groups: `gid`
/// alone), through the helper's `--as` mode, which switches before it executes the program
/// and refuses 0 for either (the program then fails to start: exit 125 and a message on
/// stderr). For a root caller's wrapped sandbox (bwrap): the helper program becomes one of
/// `extra_fds` (the status init's, or one more) and the plan's executable runs it from
/// there, so neither it nor its directory need be reachable by `uid`. `errc::not_available`
/// when the helper cannot be opened.
SANDBOX_DECL outcome<void> run_as_user(spawn_plan& plan, std::uint32_t uid, std::uint32_t gid);

/// One access(2) check: a path and the mode (`R_OK`, `W_OK`, `X_OK` or'd, or `F_OK`).
struct access_check
{
    std::string path;
    int mode = 0;
};

/// \brief Each check as host `uid` and `gid` (supplementary groups: `gid` alone) would get
/// it: 0 or the errno. Through the helper's `--access-as` mode, which switches as `--as`
/// does (spawned, so the caller's process is never forked). Empty when it could not run or
/// switch (a caller that is not root, an id not mapped here). Blocks until it is done (a
/// spawned helper; a few milliseconds): for a backend's construction, not for an exec.
SANDBOX_DECL std::vector<int> access_as(std::uint32_t uid, std::uint32_t gid,
                                        const std::vector<access_check>& checks);

/// \brief Moves into `plan` what every backend passes through as it is: input, the stdin
/// descriptor, the output handler, the terminal, the output cap (the request's, else
/// `default_max_output_bytes`), timeout, kill grace and caps; and names the backend.
SANDBOX_DECL void take_pass_through(exec_request& req, std::int64_t default_max_output_bytes,
                                    std::string backend_name, spawn_plan& plan);

using supervise_handler =
    boost::asio::any_completion_handler<void(boost::system::error_code, exec_result)>;

} // namespace sandbox::backend

namespace sandbox::detail {

class child_control; // the library's own (sessions use it)
/// Called once with the command's pid when it runs.
using spawned_fn = std::function<void(int pid)>;

/// \brief What `backend::async_supervise` runs (and sessions, with `on_spawned` and the
/// returned control): starts `plan` on `ex`; `done` gets the result.
SANDBOX_DECL std::shared_ptr<child_control> start_supervised(boost::asio::any_io_executor ex,
                                                             backend::spawn_plan plan,
                                                             spawned_fn on_spawned,
                                                             backend::supervise_handler done);

} // namespace sandbox::detail

namespace sandbox::backend {

/// \brief Runs `plan` to completion.
///
/// \par Completion signature
/// `void(error_code, exec_result)`; see `sandbox::async_exec` for the error values.
///
/// \par Per-operation cancellation
/// `terminal`: SIGKILL to the tree. `partial`: SIGTERM, then SIGKILL after `kill_grace`
/// (2 s when zero). Completes with `operation_aborted` and the partial result.
template <class CompletionToken>
auto async_supervise(boost::asio::any_io_executor ex, spawn_plan plan, CompletionToken&& token)
{
    return boost::asio::async_initiate<CompletionToken,
                                       void(boost::system::error_code, exec_result)>(
        [](auto handler, boost::asio::any_io_executor ex, spawn_plan plan) {
            sandbox::detail::start_supervised(std::move(ex), std::move(plan), {},
                                              std::move(handler));
        },
        token, std::move(ex), std::move(plan));
}

/// A backend's plan, or its refusal with `diag.backend` set to `backend` (what session
/// starters return and `exec_plan` completes with).
SANDBOX_DECL outcome<spawn_plan> with_backend_name(outcome<spawn_plan> plan,
                                                  const char* backend);

/// \brief Runs a backend's plan as `runner::try_exec` does: a refusal (no plan) is an
/// outcome with status `not_started` whose diagnostics name `backend`; a failed run, its
/// code and the partial result. Throws nothing for a failure.
SANDBOX_DECL boost::asio::awaitable<exec_outcome>
exec_plan(boost::asio::any_io_executor ex, outcome<spawn_plan> plan, std::string backend);

} // namespace sandbox::backend

#endif // SANDBOX_BACKEND_SUPERVISE_HPP
