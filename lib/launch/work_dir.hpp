// lib/launch/work_dir.hpp: confining and opening the work directory.
#ifndef SANDBOX_LIB_LAUNCH_WORK_DIR_HPP
#define SANDBOX_LIB_LAUNCH_WORK_DIR_HPP

#include <sandbox/unique_fd.hpp>
#include <sandbox/failure.hpp>

#include <string>

namespace sandbox::launch {

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
SANDBOX_DECL outcome<backend::unique_fd> open_work_dir(const std::string& root,
                                                      const std::string& work_dir);

} // namespace sandbox::launch

#endif // SANDBOX_LIB_LAUNCH_WORK_DIR_HPP
