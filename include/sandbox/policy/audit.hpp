// sandbox/policy/audit.hpp: the audit trail of the policy chain.
#ifndef SANDBOX_POLICY_AUDIT_HPP
#define SANDBOX_POLICY_AUDIT_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/net_proxy.hpp>
#include <sandbox/policy/call.hpp>

#include <boost/json/object.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

namespace sandbox {

/// What happened to a call at one step of the chain.
enum class audit_event : int
{
    denied,   ///< refused by the command gate or by approval (with the reason)
    approved, ///< a predicate matched and the approver allowed it (with the reason)
    allowed,  ///< passed every layer of the chain and handed to the backend
    refused,  ///< the backend refused it before anything ran (validation, not_found, ...)
    started,  ///< a session is running (its id)
    finished, ///< it ran and ended (status, exit code, usage; the error if one was reported)
    /// The egress proxy decided on one connection of the call (`net`: the verdict, rule,
    /// reason class, resolved and dialed addresses).
    connection,
    /// A connection the egress proxy allowed ended (`net`: bytes each way, duration).
    connection_closed,
    /// One HTTP request inside an inspected tunnel (`net`, with `net->http`: method, the
    /// request rule, status, injected header names; never a path, a query or a value).
    http_request,
    /// An instance was opened (`instance`: its id) or could not be (`error`, `reason`).
    instance_opened,
    /// An instance was closed (or dropped): everything in it was killed.
    instance_closed,
};

SANDBOX_DECL const char* to_string(audit_event e) noexcept;
SANDBOX_DECL std::ostream& operator<<(std::ostream& os, audit_event e);

/// \brief One decision of the chain. The environment's values and the input are never
/// recorded (they may hold secrets); injected variable names are.
struct audit_record
{
    std::chrono::system_clock::time_point time{};
    /// Numbers the calls of one chain from 1 (or from the counter the chain shares:
    /// `config::build_options::call_numbers`): every record of a call has the same number.
    std::uint64_t call = 0;
    /// The chain's name when it has one: a config document's sandbox.
    std::string sandbox{};
    audit_event event = audit_event::allowed;
    /// The step: "gate", "approval", "chain", "backend".
    std::string layer{};
    call_kind kind = call_kind::exec;
    std::string command{};
    std::vector<std::string> args{};
    std::string work_dir{};
    bool tty = false;
    std::string session_id{};
    /// The instance the call ran in (`runner::try_open`), or the instance opened or closed.
    std::string instance_id{};
    /// Who asked for the call, when it was asked on someone's behalf
    /// (`exec_request::requested_by`): written as `requested_by: {uid, gid, pid}`.
    std::optional<requester> requested_by{};
    /// Why: the predicate's and approver's reasons, or the error message.
    std::string reason{};
    /// `error_name` of the error reported, if any ("policy_denied", "timeout", ...).
    std::string error{};
    /// For `finished`.
    std::optional<exec_status> status{};
    int exit_code = -1;
    int signal = 0;
    std::chrono::nanoseconds wall_time{0};
    std::chrono::nanoseconds cpu_time{0};
    std::uint64_t peak_memory_bytes = 0;
    /// For `connection`, `connection_closed` and `http_request`: the egress proxy's record.
    std::optional<net_record> net{};
};

/// `{"uid": ..., "gid": ..., "pid": ...}`.
SANDBOX_DECL boost::json::object to_json(const requester& r);

/// The record as a JSON object (Boost.JSON): fields that do not apply are left out.
SANDBOX_DECL boost::json::object to_json(const audit_record& r);

/// \brief A time as audit records write it: RFC 3339, UTC, milliseconds
/// (`2026-12-01T03:37:01.123Z`).
SANDBOX_DECL std::string to_rfc3339(std::chrono::system_clock::time_point t);

/// \brief Where audit records go. Called on the runner's executor, once per record; it
/// should be quick and never block (it runs on the caller's loop).
///
/// `write` returns an empty code once the record is recorded, else why it is not. The chain
/// fails closed: a call whose `approved` or `allowed` record (written before anything runs)
/// cannot be recorded fails with `errc::internal` and its command does not run. Records
/// written after the run (`finished`, `refused`) or with a refusal (`denied`) cannot stop
/// anything: their failures are the sink's to count.
class SANDBOX_DECL audit_sink
{
public:
    virtual ~audit_sink();
    virtual boost::system::error_code write(const audit_record& r) noexcept = 0;
};

/// \brief A sink that appends one JSON object per line to `path` (created 0600 if missing,
/// never truncated).
///
/// Each line is written with one `write(2)` on a descriptor opened with `O_APPEND`, so
/// several processes appending to the same file on a local filesystem do not tear or lose
/// each other's lines (on NFS `O_APPEND` is not atomic). A record that cannot be written
/// completely (disk full, `/dev/full`, EAGAIN on a terminal) is reported by `write` (a short
/// write as `no_space_on_device`) and counted in `failures()`; what was written of it stays.
/// Keep the file where the commands cannot write: under the local backend they run as the
/// same user.
///
/// The open never blocks (`O_NONBLOCK`): only a regular file or a character device (a
/// terminal, `/dev/null`) is accepted; a FIFO (which would wait for a reader, or block the
/// caller's loop once full), a socket or a directory is refused.
///
/// \throws sandbox::error when the file cannot be opened (`errc_from_errno`, `diag.path`),
/// or is of a refused type (`errc::validation`).
class SANDBOX_DECL audit_file final : public audit_sink
{
public:
    explicit audit_file(const std::filesystem::path& path);
    ~audit_file() override;
    audit_file(const audit_file&) = delete;
    audit_file& operator=(const audit_file&) = delete;
    boost::system::error_code write(const audit_record& r) noexcept override;
    std::uint64_t failures() const noexcept { return failures_.load(std::memory_order_relaxed); }

private:
    int fd_ = -1;
    std::atomic<std::uint64_t> failures_{0};
};

} // namespace sandbox

#endif // SANDBOX_POLICY_AUDIT_HPP
