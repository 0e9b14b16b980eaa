// sandbox/config/document.hpp: a config document (JSON or YAML) that names sandboxes, each a
// backend over a root with daemon-owned defaults, a command gate and approval tripwires;
// parsed strictly, every problem reported with where it is (docs/config.md).
#ifndef SANDBOX_CONFIG_DOCUMENT_HPP
#define SANDBOX_CONFIG_DOCUMENT_HPP

#include <sandbox/config.hpp>
#include <sandbox/error.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/policy/decorators.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandbox::config {

/// The largest document `parse_document` reads (1 MiB): a bigger one is `errc::validation`.
inline constexpr std::size_t max_document_bytes = 1 << 20;

/// How deep lists and mappings may nest in a document or a call (the schema needs 7 levels;
/// the rest is room for a backend's `settings`): one level deeper is `errc::validation`.
inline constexpr std::size_t max_nesting_depth = 64;

/// \brief One problem found in a document.
struct problem
{
    /// `errc::validation` for everything the document says wrongly; `errc::not_available` for
    /// what a backend cannot enforce here (the registry's capability gate).
    errc code = errc::validation;
    /// Where, in the document's own terms: `sandboxes["build"].defaults.net.rules[2].host`;
    /// empty for the document as a whole.
    std::string path{};
    /// 1-based line and column of the offending value (or key) in the text; 0 when unknown
    /// (a value that is missing, or a problem found after parsing).
    int line = 0;
    int column = 0;
    std::string message{};
};

/// `path: message (line L, column C)`, as `failure` messages list problems.
SANDBOX_DECL std::string to_string(const problem& p);

/// \brief The approval tripwires of one sandbox (`approval:`); each enabled predicate sends a
/// matching call to the application's approver (`build_options::ask`).
struct approval_config
{
    /// A work directory outside the sandbox's root (`work_dir_outside_root`).
    bool outside_workdir = false;
    /// A network mode other than `inherit` (`net_non_default`).
    bool non_default_network = false;
    /// A terminal session (`interactive`).
    bool interactive = false;
    /// Commands matching these globs (`command_patterns`).
    std::vector<std::string> sensitive_commands{};
    /// How long the approver may take before the call is denied (`approval.deadline`).
    std::chrono::nanoseconds deadline = std::chrono::minutes(5);

    /// True when any predicate is enabled.
    bool any() const noexcept
    {
        return outside_workdir || non_default_network || interactive ||
               !sensitive_commands.empty();
    }
};

/// \brief Whose uid a `local` sandbox's commands may run as when `sandboxd` serves them.
enum class run_as_user : int
{
    /// The caller's own: only a caller whose uid is the daemon's may use the sandbox (the
    /// `local` backend cannot switch users, and must not run one uid's command as another).
    caller = 0,
    /// The daemon's user, whoever asked: every uid the daemon admits may use the sandbox.
    daemon = 1,
};

SANDBOX_DECL const char* to_string(run_as_user r) noexcept;

/// \brief One named sandbox of a document.
struct sandbox_entry
{
    std::string name{};
    /// "local", "bwrap", or a name the application registered (`builder::register_backend`).
    std::string backend{};
    /// Exactly one of the two is set: a workspace name looked up in
    /// `build_options::workspaces`, or the root directory itself.
    std::string workspace{};
    std::string root{};
    /// The backend's own settings, decoded strictly by its factory; null when absent.
    boost::json::value settings{};
    /// Merged into every call (`merge_defaults`): timeout, kill grace, env, net, resources.
    exec_options defaults{};
    /// Unset: no command gate; set but empty: nothing may run.
    std::optional<std::vector<std::string>> allowed_commands{};
    command_match match = command_match::exact;
    approval_config approval{};
    /// `run_as`: for the `local` backend only (bwrap runs commands as its
    /// `settings.sandbox_user`); see `run_as_user`.
    run_as_user run_as = run_as_user::caller;
    /// Where the entry is in the text (its key), for messages; 0 when unknown.
    int line = 0;
    int column = 0;
};

/// \brief The `daemon:` section: how `sandboxd` serves the document (ignored by the library
/// and by sandbox-run).
struct daemon_config
{
    /// The unix socket to listen on; empty: `--listen`, else `$XDG_RUNTIME_DIR/sandboxd.sock`,
    /// else `/run/sandboxd.sock`.
    std::string listen{};
    /// Peers (by `SO_PEERCRED`) that may connect besides the daemon's own uid: these uids,
    /// and any process whose primary gid is listed.
    std::vector<std::uint32_t> allow_uids{};
    std::vector<std::uint32_t> allow_gids{};
    /// Append every request and its outcome as JSON lines here; empty: no audit trail.
    std::string audit_file{};
    /// A request body over this many bytes is refused (413).
    std::int64_t max_body_bytes = 1 << 20;
    /// A connection silent this long (between requests, or while a request is being read) is
    /// closed.
    std::chrono::nanoseconds idle_timeout = std::chrono::seconds(60);
    /// A session whose command has ended and that no client closed is closed (its output
    /// log freed) this long after the end.
    std::chrono::nanoseconds session_linger = std::chrono::minutes(10);
    /// Connections one uid may hold open at once (followers, attaches and idle keep-alives
    /// included); past it a new one is answered 429 and closed.
    std::int64_t max_connections_per_uid = 64;
    /// Sessions (running or ended, until closed or swept) one uid may hold; past it 429.
    std::int64_t max_sessions_per_uid = 16;
    /// Sessions the daemon holds for everybody; past it 503.
    std::int64_t max_sessions = 128;
    /// The output logs of all held sessions together: each session reserves its log's cap
    /// (its `max_output_bytes`, 10 MiB when unset, and never more than this) until it is
    /// closed or swept; a session that would pass it is refused 503.
    std::int64_t session_output_budget = std::int64_t{512} << 20;
    /// An instance (`POST /v1/sandboxes/NAME/instances`) that runs no command this long is
    /// closed.
    std::chrono::nanoseconds instance_idle = std::chrono::minutes(10);
    /// Instances (opening or open) one uid may hold; past it 429.
    std::int64_t max_instances_per_uid = 4;
    /// Instances the daemon holds for everybody; past it 503.
    std::int64_t max_instances = 32;
};

/// \brief A parsed and validated document: version "v1", its sandboxes sorted by name, and
/// the daemon section.
struct document
{
    std::string version{};
    std::vector<sandbox_entry> sandboxes{};
    daemon_config daemon{};

    /// The entry of this name, or null.
    SANDBOX_DECL const sandbox_entry* find(std::string_view name) const noexcept;
};

/// \brief Parses and validates a document, collecting every problem.
///
/// JSON when the first byte that is not white space is `{`, YAML otherwise. Strict: unknown
/// keys at any level, duplicate keys, a second document (YAML `---`, a second JSON value),
/// YAML aliases and tags, a number where a duration or a string is due, a string where a
/// number or a boolean is due, and every rule of docs/config.md are problems. Returns the
/// problems in document order; empty when the document is good (then `parse_document`
/// succeeds with it).
SANDBOX_DECL std::vector<problem> check_document(std::string_view text);

/// \brief `check_document`, and in `clean` the document with only the entries that have no
/// problem of their own (whatever the rest of it says), so that a check can go on to build
/// those and report every problem in one pass.
SANDBOX_DECL std::vector<problem> check_document(std::string_view text, document& clean);

/// \brief A small text file's text (a document, an origin root): a file that cannot be read
/// is classified by its OS error (`errc_from_errno`), with the path in the diagnostics and
/// `what` ("the config document") in the message; over `max_bytes` is `errc::validation`.
SANDBOX_DECL outcome<std::string> read_text_file(const std::filesystem::path& file,
                                                 std::string_view what, std::size_t max_bytes);

/// \brief A secret held in a file (an injected header's value): `read_text_file` of at most
/// 64 KiB, one trailing line break ("\n" or "\r\n") dropped, as `echo` and editors leave one.
SANDBOX_DECL outcome<std::string> read_secret_file(const std::filesystem::path& file,
                                                   std::string_view what);

/// \brief `read_text_file` of a document, at most `max_document_bytes`.
SANDBOX_DECL outcome<std::string> read_document_file(const std::filesystem::path& file);

/// \brief Parses and validates a document (`check_document`). A bad one is
/// `errc::validation`; the message lists every problem, one per line (`to_string(problem)`),
/// `diag.rule` is the first problem's path (`load_document` puts the file in `diag.path`).
SANDBOX_DECL outcome<document> parse_document(std::string_view text);

/// \brief `parse_document` of a file's text. A file that cannot be read is classified by its
/// OS error (`errc_from_errno`), with the path in the diagnostics; over
/// `max_document_bytes` is `errc::validation`.
SANDBOX_DECL outcome<document> load_document(const std::filesystem::path& file);

/// \brief A call as `sandboxd`'s clients write it (JSON): `command`, `args`, `work_dir`,
/// `stdin` (text), `timeout`, `kill_grace`, `env`, `net`, `resources` (the fields of an
/// entry's `defaults`, with the same syntax and rules), and for a session `tty` (true, or
/// `{"rows": R, "cols": C}`) and `id` (the session's id, chosen by the client). Unknown keys
/// are refused. Problems are reported as by `parse_document` (paths such as
/// `net.rules[0].host`).
struct call_document
{
    /// A session's id chosen by the client (checked when the session starts: 1 to 128
    /// letters, digits or `-_.:@`); empty: a fresh one.
    std::string id{};
    std::string command{};
    std::vector<std::string> args{};
    exec_options options{};
    /// Set when a terminal is asked for (24x80 unless given).
    std::optional<std::pair<int, int>> tty{};
};

SANDBOX_DECL outcome<call_document> parse_call(std::string_view json);

/// \brief What `sandboxd`'s clients open an instance with (JSON): `parse_call`'s options
/// (`work_dir`, `timeout`, `kill_grace`, `env`, `net`, `resources`) and nothing else; an
/// empty text is `{}` (the sandbox's defaults).
SANDBOX_DECL outcome<exec_options> parse_instance_call(std::string_view json);

/// \brief `r` as the body of a call (`parse_call`'s syntax): the command, its arguments,
/// and of the options the work dir, timeout, kill grace, env, net and the memory, cpu,
/// output, process and task caps, where they differ from their defaults (durations in
/// nanoseconds, `"1500000000ns"`; the proxy URL whole, password included). Not written:
/// `input`, a terminal, `disk_bytes`. What `sandbox-run --connect` sends to sandboxd, and
/// what sandboxd shows its approver.
SANDBOX_DECL std::string call_to_json(const exec_request& r);

/// \brief A net policy in a document's syntax (`mode`, `allow_hosts`, `rules`, `proxy`,
/// `unix_sockets`, `resolve`, `mitm`), with the proxy URL's password shown as `***`.
SANDBOX_DECL boost::json::object net_policy_to_json(const net_policy& n);

/// \brief A duration as documents write it: one or more decimal numbers each with a unit,
/// `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h` (`"30s"`, `"1h30m"`, `"1.5s"`, `"250ms"`), or
/// `"0"`. No sign, no spaces; rounded up to whole nanoseconds; beyond the range of
/// `std::chrono::nanoseconds` is refused. Errors are `errc::validation`.
SANDBOX_DECL outcome<std::chrono::nanoseconds> parse_duration(std::string_view text);

/// \brief A byte count as documents may write it: a non-negative integer, or a string of one
/// with a binary unit (`"64MiB"`, `"1G"`, `"512K"`, `"100B"`; K, M, G, T with or without `iB`,
/// powers of 1024). Decimal units (`"1MB"`) are refused as ambiguous.
SANDBOX_DECL outcome<std::int64_t> parse_size(std::string_view text);

} // namespace sandbox::config

#endif // SANDBOX_CONFIG_DOCUMENT_HPP
