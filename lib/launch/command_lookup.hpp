// lib/launch/command_lookup.hpp: finding the executable the way the child would.
#ifndef SANDBOX_LIB_LAUNCH_COMMAND_LOOKUP_HPP
#define SANDBOX_LIB_LAUNCH_COMMAND_LOOKUP_HPP

#include <sandbox/failure.hpp>

#include <string>
#include <vector>

namespace sandbox::launch {

/// \brief The path to exec for `command`, looked up on the PATH of the child's environment
/// `env` (the system default path when it has none). Relative PATH entries and relative
/// command paths are taken from the work directory `work_dir_fd`.
///
/// A name with a '/' is returned as given (exec classifies it). Errors: nothing found →
/// `errc::not_found`; found but not executable (or not a regular file) → `errc::forbidden`.
SANDBOX_DECL outcome<std::string> find_command(const std::string& command,
                                               const std::vector<std::string>& env,
                                               int work_dir_fd);

} // namespace sandbox::launch

#endif // SANDBOX_LIB_LAUNCH_COMMAND_LOOKUP_HPP
