// protocol/protocol.hpp: the messages between the library and the supervisor helper
// (`sandbox-supervisor`), over SOCK_SEQPACKET socketpairs. Both sides come from one build, so
// fixed-layout structs go over the wire as they are; the helper refuses another version.
//
//   library ── control socket ──► helper           spawn_worker (+1 fd: a worker channel)
//   library ◄── worker channel ──► worker           plan_chunk (+fds) / kill / signal ► ;
//                                                   ◄ spawned / spawn_failed / exit_report
#ifndef SANDBOX_PROTOCOL_PROTOCOL_HPP
#define SANDBOX_PROTOCOL_PROTOCOL_HPP

#include <sandbox/backend/caps.hpp>
#include <sandbox/config.hpp>
#include <sandbox/unique_fd.hpp>

#include <array>
#include <cstring>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sandbox::detail::proto {

/// Bumped whenever a message changes; passed to the helper as `--protocol N`.
inline constexpr std::uint32_t version = 12; // 2: cap_limits::max_tasks; 3: terminals; 4: sessions;
                                             // 5: extra descriptors, ignored job signals;
                                             // 6: the worker keeps the deadline;
                                             // 7: the cgroup path; 8: set-up, then timeout;
                                             // 9: idle workers retire, cap watches;
                                             // 10: the connect broker;
                                             // 11: allowed sockets name their path
                                             // 12: instances (ready, paths inside)

/// The helper's exit status when it was started with another protocol version.
inline constexpr int exit_protocol_mismatch = 3;

/// Largest payload of one message; longer plans go in several chunks.
inline constexpr std::size_t max_payload = 32 * 1024;

/// Descriptors that can travel with one message (SCM_MAX_FD is 253; we need 5 plus the
/// extra descriptors of a wrapped command).
inline constexpr std::size_t max_fds = 10;
/// Extra descriptors a plan can hand to the command (as fds 3, 4, ...): a bwrap instance
/// passes five (the status pipe, the init's program, the bridge, the trust bundle, the
/// instance's control socket).
inline constexpr std::size_t max_extra_fds = 5;

enum class msg_type : std::uint32_t
{
    spawn_worker = 1, // library → helper; fd: the worker's end of a fresh channel
    plan_chunk,       // library → worker; first chunk carries the fds; flag `last`
    kill,             // library → worker
    spawn_failed,     // worker → library
    exit_report,      // worker → library
    spawned,          // worker → library, with opt_report_spawn: the command's pid
    signal,           // library → worker: a signal for the command's process group
    retire,           // library → idle worker: retire_msg; fd: its idle_claim's memfd
    ready,            // an instance's init → library: it serves spawn_worker (see
                      // helper/status_init.hpp, --serve)
};

inline constexpr std::uint32_t flag_last = 1;

struct header
{
    msg_type type;
    std::uint32_t flags;
};

/// Why a worker stopped a tree. The first cause claimed wins.
enum class end_reason : std::uint32_t
{
    none = 0,
    natural,       // the command exited by itself first
    timed_out,     // the plan's timeout ran out (the worker keeps it)
    cancelled,     // the caller cancelled
    budget,        // a cap tripped
    unenforceable, // a cap could not be kept: sampling failed too often, or the fork gate broke
    abandoned,     // the library closed the channel without a result (caller gone)
    supervisor_lost, // the helper died
};

/// Which descriptors follow a plan's first chunk, in this order.
enum plan_fd : std::uint32_t
{
    fd_stdin = 1,    // else /dev/null
    fd_work_dir = 2, // else the worker's directory
    /// A read end of a wrapped command's status pipe (status_init.hpp): the timeout counts
    /// from when it turns readable (the init said "started": the sandbox is set up), and
    /// the set-up before that is bounded by `plan_fixed::setup_timeout_ns`. The worker
    /// never reads it (the library reads the pipe once the tree is gone).
    fd_started = 4
};

/// Plan options.
enum plan_option : std::uint32_t
{
    /// The command runs on a terminal: its own session, the pseudo-terminal slave named by
    /// `plan::tty_path` opened as stdin, stdout and stderr (so it becomes the controlling
    /// terminal). The stdout and stderr descriptors sent are the slave, held until the spawn.
    opt_tty = 1,
    /// Send `spawned` with the pid once the command runs (sessions report it at start).
    opt_report_spawn = 2,
    /// The command starts with the job signals (status_init.hpp) ignored: a wrapper that
    /// does not pass signals on (bwrap) survives them, the command inside gets them.
    opt_ignore_job_signals = 4,
    /// Run the tree in a cgroup of its own when the helper has a cgroup tree (the runner's
    /// `cgroup` is not "off"); without a tree the tree runs without one.
    opt_cgroup = 8,
    /// With opt_cgroup: a cgroup is required (the runner named a directory): without a tree,
    /// or when its cgroup cannot be made, the spawn fails (stage_cgroup).
    opt_cgroup_required = 16,
    /// A cap watch (sandbox/backend/cap_watch.hpp): nothing is spawned. The plan's one
    /// descriptor is a pidfd of a process the caller started; the worker holds the plan's
    /// caps on it and its descendants by sampling, kills them when a cap trips, and reports
    /// once a cap tripped or the process ended (argv, envp and the timeout are not used).
    opt_watch = 32,
    /// The unix-socket policy (helper/connect_broker.hpp): the tree's connect calls are made
    /// by the worker; a path-named unix socket is reached only when it is one of
    /// `plan::allowed_sockets` or one the tree serves itself.
    opt_connect_broker = 64,
    /// A plan for a worker inside an instance (helper/status_init.hpp, --serve): the work
    /// directory is `plan::work_dir_path`, opened by the worker inside the sandbox (a
    /// descriptor of the host's would reach past the sandbox's mounts), and an executable
    /// without a slash is looked up on the PATH of the plan's environment there.
    opt_inside = 128,
};

/// A socket file by its device (st_dev) and inode, and the host path it was found at (the
/// broker lets it through only while that path still names it).
struct socket_file
{
    std::uint64_t dev = 0;
    std::uint64_t ino = 0;
    std::string path;
    friend bool operator==(const socket_file&, const socket_file&) = default;
};

/// The fixed part of a plan; strings follow (executable, argv..., envp...), each as a
/// u32 length and its bytes.
struct plan_fixed
{
    std::uint32_t fds = 0; // plan_fd bits; stdout and stderr are always sent
    std::uint32_t argc = 0;
    std::uint32_t envc = 0;
    std::uint32_t sample_faults = 0; // test seam: fail this many samples (0xffffffff: all)
    std::uint32_t options = 0;       // plan_option bits
    std::uint32_t extra_fds = 0;     // sent after the plan_fd ones; the command's fds 3, 4, ...
    backend::cap_limits caps{};
    std::int64_t sample_interval_ns = 0;
    /// The timeout, counted by the worker from the spawn (0: none), and the grace its stop
    /// gives (SIGTERM first; 0: SIGKILL at once). The worker keeps the deadline itself, so a
    /// caller that is stuck or gone can neither hold nor stretch a run.
    std::int64_t timeout_ns = 0;
    std::int64_t kill_grace_ns = 0;
    /// With fd_started: the bound on the wrapper's set-up, from the spawn to "started"
    /// (0: none); past it the tree is stopped as by the timeout (end_reason::timed_out).
    std::int64_t setup_timeout_ns = 0;
};

static_assert(std::is_trivially_copyable_v<plan_fixed>, "plan_fixed goes over the wire as is");

/// What a worker runs: the decoded plan.
struct plan
{
    plan_fixed fixed{};
    std::string executable;
    std::vector<std::string> argv;
    std::vector<std::string> envp;
    std::string tty_path{}; // with opt_tty, after envp
    std::vector<socket_file> allowed_sockets{}; // with opt_connect_broker
    std::string work_dir_path{};                // with opt_inside, last (empty: keep ours)
};

std::string encode_plan(const plan& p);
std::optional<plan> decode_plan(std::string_view bytes);

struct kill_msg
{
    end_reason reason = end_reason::none; // timed_out or cancelled
    std::uint32_t pad = 0;
    std::int64_t grace_ns = 0;           // 0: SIGKILL now; else SIGTERM, then SIGKILL
};

/// A signal for the command's process group (its pgid is its pid: it leads a group or a
/// session). Ignored once the command has been reaped.
struct signal_msg
{
    std::int32_t signo = 0;
    std::uint32_t pad = 0;
};

/// An idle worker retires (exits) once it has waited `after_ns` for a plan, unless the
/// library takes it first (idle_claim.hpp decides which). Sent with the claim's memfd, only
/// to a worker between plans; a plan that comes first ends the arrangement.
struct retire_msg
{
    std::int64_t after_ns = 0;
};

struct spawned_msg
{
    std::int32_t pid = 0;
    std::uint32_t pad = 0;
};

struct spawn_failed_msg
{
    std::int32_t error = 0; // errno of posix_spawn (or of preparing it)
    std::uint32_t stage = 0; // spawn_stage
};

/// What a spawn_failed_msg's errno belongs to.
enum spawn_stage : std::uint32_t
{
    stage_command = 0,        // starting the command
    stage_fork_gate = 1,      // setting up the fork gate a process cap needs (fork_gate.hpp)
    stage_cgroup = 2,         // making the execution's cgroup (helper/cgroup.hpp)
    stage_connect_filter = 3, // the unix-socket policy's filter (helper/connect_filter.hpp)
    stage_work_dir = 4,       // opening plan::work_dir_path (opt_inside)
};

/// exit_report_msg::flags bits.
enum report_flag : std::uint32_t
{
    report_in_cgroup = 1, // the tree ran in a cgroup of its own
};

/// Sent once per plan, after every process of the tree has been killed and reaped.
struct exit_report_msg
{
    std::int32_t pid = 0;
    std::int32_t wait_status = 0; // raw status of the command (wait(2))
    end_reason reason = end_reason::none;
    std::uint32_t budget_which = 0; // sandbox::budget_kind
    std::int64_t observed = 0;
    std::int64_t configured = 0;
    std::int64_t cpu_ns = 0;          // the whole tree, reaped members included
    std::uint64_t peak_memory_bytes = 0;
    std::uint64_t samples = 0;
    std::uint64_t failed_samples = 0;
    std::uint64_t killed_after_exit = 0; // processes left by the command and killed
    std::uint32_t flags = 0;             // report_flag bits
    std::uint32_t pad = 0;
    std::int64_t longest_sample_gap_ns = 0; // cap_report::longest_sample_gap
    // followed by the text of the last sampling failure
};

/// A message read from a channel.
struct message
{
    header head{};
    std::string payload;
    std::vector<backend::unique_fd> fds;
};

/// Sends one message (MSG_NOSIGNAL | MSG_DONTWAIT). Returns 0 or an errno value (EAGAIN
/// when the socket is full).
/// Exported from libsandbox (SANDBOX_DECL), like the receive: the bwrap backend speaks to an
/// instance's init with them.
SANDBOX_DECL int send_message(int sock, msg_type type, std::uint32_t flags,
                              std::string_view payload, std::span<const int> fds = {});

/// Receives one message without blocking (received fds are close-on-exec). Returns 0, or
/// EAGAIN, or an errno value; `eof` is set when the peer closed the channel. A message
/// whose descriptors were cut (MSG_CTRUNC) or that is malformed is EPROTO.
SANDBOX_DECL int receive_message(int sock, message& out, bool& eof);

template <class T>
std::string_view as_bytes(const T& v)
{
    return {reinterpret_cast<const char*>(&v), sizeof(T)};
}

template <class T>
bool from_bytes(std::string_view s, T& v)
{
    if (s.size() < sizeof(T))
        return false;
    std::memcpy(&v, s.data(), sizeof(T));
    return true;
}

} // namespace sandbox::detail::proto

#endif // SANDBOX_PROTOCOL_PROTOCOL_HPP
