// helper/inside_paths.hpp: what a worker inside an instance (proto::opt_inside) resolves
// itself, in the sandbox's view of the file system: the command on the PATH of its own
// environment, and its work directory by path. The host cannot do either: its view differs
// (masks, private /tmp), and a descriptor of a host directory would reach past the mounts.
#ifndef SANDBOX_HELPER_INSIDE_PATHS_HPP
#define SANDBOX_HELPER_INSIDE_PATHS_HPP

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::detail {

/// The PATH value of an environment ("NAME=value" entries); "/bin:/usr/bin" when it has
/// none (as execvp does).
std::string path_of(const std::vector<std::string>& envp);

/// \brief Looks `file` (no slash) up on `path` as the shell does: entries in order, an empty
/// one meaning `cwd`, a relative one taken from `cwd`. `probe(candidate)` says 0 for a file
/// that can be executed, or an errno: ENOENT, ENOTDIR (and the like) go on to the next entry,
/// EACCES goes on but is remembered, anything else stops the search with that error.
/// Returns the candidate, or empty with `err` ENOENT (nothing found), EACCES (found, not
/// executable) or the stopping error.
std::string find_on_path(std::string_view file, std::string_view path, const std::string& cwd,
                         const std::function<int(const std::string&)>& probe, int& err);

/// The real probe: a regular file this process may execute (EACCES for a directory).
int probe_executable(const std::string& candidate);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_INSIDE_PATHS_HPP
