// sandbox/backend/launch.hpp: the launch steps every backend takes the same way: the root
// and the work directory confined and opened, the executable found as the child would find it.
#ifndef SANDBOX_BACKEND_LAUNCH_HPP
#define SANDBOX_BACKEND_LAUNCH_HPP

#include <sandbox/config.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/unique_fd.hpp>

#include <string>
#include <vector>

namespace sandbox::backend {

/// The root made absolute with symlinks resolved (kept absolute when it cannot be resolved).
SANDBOX_DECL std::string canonical_root(const std::string& root);

/// \brief Resolves `work_dir` against `root` and opens it (O_PATH directory descriptor).
///
/// Empty: the root. Relative: joined onto the root. Absolute: taken as is. The path is
/// checked twice: before opening (lexically cleaned, existing prefix symlink-resolved), so
/// that an escape is `errc::forbidden` even when the target does not exist; and after
/// opening, on the real path of the open descriptor, so that the directory the child enters
/// (with fchdir on this descriptor) is exactly the one that was checked: a symlink swapped in
/// between cannot redirect it. Missing → `errc::not_found`; not a directory →
/// `errc::validation`; permission → `errc::forbidden`. `diag.path` names the request.
SANDBOX_DECL outcome<unique_fd> open_work_dir(const std::string& root,
                                                      const std::string& work_dir);

/// \brief The path to exec for `command`, looked up on the PATH of the child's environment
/// `env` (the system default path when it has none). Relative PATH entries and relative
/// command paths are taken from the work directory `work_dir_fd`.
///
/// A name with a '/' is returned as given (exec classifies it). Errors: nothing found →
/// `errc::not_found`; found but not executable (or not a regular file) → `errc::forbidden`.
SANDBOX_DECL outcome<std::string> find_command(const std::string& command,
                                               const std::vector<std::string>& env,
                                               int work_dir_fd);

} // namespace sandbox::backend

#endif // SANDBOX_BACKEND_LAUNCH_HPP
