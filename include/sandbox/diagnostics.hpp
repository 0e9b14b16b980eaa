// sandbox/diagnostics.hpp: structured detail that travels with every error.
#ifndef SANDBOX_DIAGNOSTICS_HPP
#define SANDBOX_DIAGNOSTICS_HPP

#include <sandbox/config.hpp>

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>

namespace sandbox {

/// \brief What caused an error, in fields a program can act on.
///
/// `message` is written by the library and safe to show or log (it never contains the
/// child's output). The other fields are empty when they do not apply.
struct diagnostics
{
    /// One line, safe to show: what was refused or what happened.
    std::string message{};
    /// The limit that fired or was refused: "memory", "cpu", "processes", "disk", "timeout",
    /// "output", or the name of an option field such as "net.proxy".
    std::string limit{};
    /// The policy rule involved, when a policy layer refused (later: allow-list entry, rule id).
    std::string rule{};
    /// The path involved (work dir, command path, unix socket).
    std::string path{};
    /// The backend that produced the error ("local", ...).
    std::string backend{};
    /// For limits: the observed value and the configured limit, in the limit's unit
    /// (bytes, nanoseconds of cpu, processes). Zero when not applicable.
    std::int64_t observed = 0;
    std::int64_t configured = 0;
    /// The underlying OS error, when one caused this (for example ENOEXEC behind
    /// `errc::internal` at spawn). Empty otherwise.
    boost::system::error_code cause{};

    bool empty() const noexcept { return message.empty() && limit.empty() && path.empty(); }
};

/// Human-readable one-line rendering, for logs and `what()` strings.
SANDBOX_DECL std::string to_string(const diagnostics& d);
SANDBOX_DECL std::ostream& operator<<(std::ostream& os, const diagnostics& d);

} // namespace sandbox

#endif // SANDBOX_DIAGNOSTICS_HPP
