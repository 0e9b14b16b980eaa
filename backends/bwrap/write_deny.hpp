// backends/bwrap/write_deny.hpp: which paths inside the writable directories are bound
// read-only for one command, and the stand-ins that take missing ones' places.
#ifndef SANDBOX_BACKENDS_BWRAP_WRITE_DENY_HPP
#define SANDBOX_BACKENDS_BWRAP_WRITE_DENY_HPP

#include "bwrap_args.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sandbox::bwrap {

/// One protected path: `relative` below the writable directory `dir`.
struct write_deny_target
{
    std::string dir;
    write_deny_entry entry;
};

/// \brief The targets for `dirs` (absolute, resolved): every built-in entry in every
/// directory, and `extra` (absolute and resolved by the caller: in each directory that holds
/// it; relative: in every directory), which is kept even where missing. `errc::validation`
/// for an extra path that is empty, climbs with `..`, or (absolute) lies in no directory.
outcome<std::vector<write_deny_target>> write_deny_targets(const std::vector<std::string>& dirs,
                                                           const std::vector<std::string>& extra);

/// What one command gets: the paths to bind (sorted, so a directory is bound before what lies
/// below it) and the stand-in directories it holds (removed when the last command holding
/// them lets go, each only while as made: by `release_in_turns`, or at once when the lease
/// is destroyed holding them).
struct write_deny_view
{
    std::vector<bound_path> paths;
    std::shared_ptr<void> lease;
};

/// \brief Looks at the file system now (a path can appear between two commands). For each
/// target, walking from its directory: the path is bound read-only and every directory on
/// the way is pinned (bound onto itself, so it cannot be renamed away with what lies below
/// it); a missing component becomes a stand-in of ours, bound read-only (see `stand_in`; an
/// empty `.git` on the way is kept read-only whole instead); a component
/// that is a file (a `.git` gitfile) is bound read-only, and the rest of the entry is kept
/// below the git directory it names too when that lies in a writable directory; a symbolic link keeps what it
/// resolves to inside the writable directories read-only and, below the writable directory
/// itself, the directory holding the link. Fails closed: a component that cannot be
/// examined or made keeps the last directory reached read-only whole; at the writable
/// directory itself, and for an entry that is a symbolic link there, the command
/// is refused (`errc::internal`, `errc::validation`).
outcome<write_deny_view> resolve_write_deny(const std::vector<write_deny_target>& targets,
                                            const std::vector<std::string>& writable_dirs);

/// \brief Lets go of the stand-ins `lease` (a `write_deny_view::lease`, or null) holds, one
/// per turn of `ex`'s loop (a removal can take a quarter of a millisecond: twenty in one
/// handler held the caller's loop 5 ms), then calls `done` there; the first goes at once.
/// The lease then holds nothing. Queued turns destroyed unrun (the execution context shut
/// down) let go of the rest at once and never call `done`.
void release_in_turns(const std::shared_ptr<void>& lease, const boost::asio::any_io_executor& ex,
                      std::function<void()> done);

} // namespace sandbox::bwrap

#endif // SANDBOX_BACKENDS_BWRAP_WRITE_DENY_HPP
