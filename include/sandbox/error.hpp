// sandbox/error.hpp: the error model: one category, grouping conditions, one exception type.
#ifndef SANDBOX_ERROR_HPP
#define SANDBOX_ERROR_HPP

#include <sandbox/config.hpp>
#include <sandbox/diagnostics.hpp>

#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <iosfwd>
#include <memory>
#include <type_traits>

namespace sandbox {

/// \brief Errors the library detects itself (category "sandbox").
///
/// OS and Asio errors are passed through in their own categories. Caller cancellation is
/// reported as `boost::asio::error::operation_aborted` (Asio's own vocabulary), with
/// `exec_result::status == exec_status::cancelled`; there is no separate `aborted` code.
enum class errc : int
{
    /// The backend cannot enforce or provide what was asked on this host (never downgraded).
    not_available = 1,
    /// The operating system or a path rule refused (permission denied, work dir escape).
    forbidden,
    /// A policy layer of this library refused (allow-list, approval, egress rule).
    policy_denied,
    /// The request is malformed or out of range; retrying the same request cannot help.
    validation,
    /// The request conflicts with current state (duplicate id, operation already running).
    conflict,
    /// Something named by the request does not exist (command, work dir, session).
    not_found,
    /// A resource cap (memory, cpu time, processes) was exceeded and the process tree killed.
    budget_exceeded,
    /// The time limit elapsed and the process tree was killed.
    timeout,
    /// An unexpected failure; the attached OS error or message says more.
    internal,
    /// Output at the requested offset was already dropped by the bounded log; `diag.observed`
    /// is the oldest offset still held, where reading can resume.
    sequence_gap,
    /// The session was closed (by `close()` or after its retention); only `wait()` and
    /// `info()` still answer.
    session_closed,
    /// The instance was closed, or its sandbox ended: nothing more runs in it, and what
    /// ran in it was killed with it.
    instance_closed,
};

/// \brief Groups of `errc` values, for `ec == sandbox::condition::x` tests.
enum class condition : int
{
    /// forbidden or policy_denied: someone said no.
    denied = 1,
    /// budget_exceeded or timeout: the command ran and was stopped by a limit.
    limit_reached,
    /// validation or not_found: fix the request.
    bad_request,
    /// not_available: this backend or host cannot do it.
    unavailable,
};

SANDBOX_DECL const boost::system::error_category& error_category() noexcept;
SANDBOX_DECL const boost::system::error_category& condition_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept
{
    return {static_cast<int>(e), error_category()};
}

inline boost::system::error_condition make_error_condition(condition c) noexcept
{
    return {static_cast<int>(c), condition_category()};
}

/// \brief The one mapping from an OS error number to `errc`, used wherever the library
/// classifies what the OS refused (spawn, work dir, input files, sandbox-run).
///
/// | errno                                          | errc            |
/// |------------------------------------------------|-----------------|
/// | ENOENT, ENOTDIR                                | `not_found`     |
/// | EACCES, EPERM, EROFS, ENOEXEC                  | `forbidden`     |
/// | EINVAL, E2BIG, ENAMETOOLONG, ELOOP, EISDIR, ENXIO | `validation` |
/// | ETXTBSY, EBUSY, EEXIST                         | `conflict`      |
/// | ENOSYS, ENOTSUP/EOPNOTSUPP                     | `not_available` |
/// | anything else (EMFILE, ENOMEM, EAGAIN, EIO...) | `internal`      |
///
/// ENOTDIR is a path component that is not a directory, so the thing named does not exist
/// (as a directory); ENOEXEC is a file the kernel refuses to execute (no `#!` line, no ELF
/// header): it exists and cannot run, like a file without execute permission.
SANDBOX_DECL errc errc_from_errno(int err) noexcept;

/// The enumerator's name ("not_available", ...); "unknown" for other values.
SANDBOX_DECL const char* to_string(errc e) noexcept;
SANDBOX_DECL const char* to_string(condition c) noexcept;

SANDBOX_DECL std::ostream& operator<<(std::ostream& os, errc e);
SANDBOX_DECL std::ostream& operator<<(std::ostream& os, condition c);

/// The errc name for a code of our category, otherwise the category name and value
/// ("system:2"). Used for the `error.code` field of JSON output.
SANDBOX_DECL std::string error_name(const boost::system::error_code& ec);

struct exec_result;

/// \brief The exception thrown by the coroutine interface (`runner::exec`).
///
/// Derives from `boost::system::system_error` (not `std::system_error`: in Boost 1.81 the two
/// are unrelated). Carries the diagnostics and, for exec, the partial result: the output
/// captured up to a timeout, a budget kill or a cancellation is never lost.
class SANDBOX_DECL error : public boost::system::system_error
{
public:
    error(boost::system::error_code ec, diagnostics diag);
    error(boost::system::error_code ec, diagnostics diag, exec_result partial);

    const diagnostics& diag() const noexcept { return *diag_; }

    /// The result up to the failure, or null when the command never started.
    const exec_result* partial_result() const noexcept { return partial_.get(); }

private:
    std::shared_ptr<const diagnostics> diag_;
    std::shared_ptr<const exec_result> partial_;
};

} // namespace sandbox

template <>
struct boost::system::is_error_code_enum<sandbox::errc> : std::true_type
{
};
template <>
struct boost::system::is_error_condition_enum<sandbox::condition> : std::true_type
{
};

#endif // SANDBOX_ERROR_HPP
