// sandbox/failure.hpp: the error half of validation and parsing results.
#ifndef SANDBOX_FAILURE_HPP
#define SANDBOX_FAILURE_HPP

#include <sandbox/config.hpp>
#include <sandbox/diagnostics.hpp>
#include <sandbox/error.hpp>

#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

namespace sandbox {

/// \brief An error code plus the diagnostics that say which field, path or limit caused it.
struct failure
{
    boost::system::error_code code{};
    diagnostics diag{};
};

/// Makes a failure with `code` and a message, and optionally the field/limit it concerns.
SANDBOX_DECL failure make_failure(errc code, std::string message, std::string limit = {});

/// \brief A failure with an OS cause: the message is `what: strerror(err)` and
/// `diag.cause` holds `err` in the system category.
SANDBOX_DECL failure make_os_failure(errc code, const std::string& what, int err);

/// Used by `boost::system::result<T, failure>::value()`: throws `sandbox::error`.
[[noreturn]] SANDBOX_DECL void throw_exception_from_error(const failure& f,
                                                          const boost::source_location& loc);

/// The result of a validation or parse: a value, or a `failure`.
template <class T = void>
using outcome = boost::system::result<T, failure>;

} // namespace sandbox

#endif // SANDBOX_FAILURE_HPP
