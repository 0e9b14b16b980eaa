// backends/bwrap/bwrap_args.hpp: the bubblewrap command line for one command, from a
// resolved view of the sandbox. Pure (no I/O): unit-tested line by line.
#ifndef SANDBOX_BACKENDS_BWRAP_BWRAP_ARGS_HPP
#define SANDBOX_BACKENDS_BWRAP_BWRAP_ARGS_HPP

#include <sandbox/failure.hpp>

#include <string>
#include <vector>

namespace sandbox::bwrap {

/// A host path hidden from the command: a directory becomes an empty read-only tmpfs, a
/// file reads as /dev/null.
struct masked_path
{
    std::string path;
    bool directory = true;
};

/// What the command sees, every path absolute and symlink-resolved by the caller.
struct sandbox_view
{
    /// Bound read-write at the same path (the runner's root).
    std::string root;
    /// Also bound read-write at the same paths (existing directories).
    std::vector<std::string> writable{};
    /// Hidden (existing paths only: a mount needs its target).
    std::vector<masked_path> read_deny{};
    /// A private network namespace with only loopback, and /run masked.
    bool isolate_network = false;
    /// The command leads a new session (false on a terminal: it keeps its controlling
    /// terminal).
    bool new_session = true;
    /// The directory the command starts in (inside the root).
    std::string work_dir;
};

/// \brief `bwrap` flags, `--`, then `command` and `args` (bwrap looks the command up on the
/// PATH of its own environment, which is the command's).
///
/// Always: a user namespace with every capability dropped and nested user namespaces
/// disabled; private pid, IPC, UTS and (when possible) cgroup namespaces; death with the
/// parent; host `/` read-only; a private `/tmp`; a fresh `/proc` and a minimal `/dev`. No
/// variable is put on the command line: the environment is bwrap's own.
std::vector<std::string> build_args(const sandbox_view& v, const std::string& command,
                                    const std::vector<std::string>& args);

/// \brief Checks a path that would be bound writable: not `/`, not `home`, not an ancestor
/// of (or equal to) a masked path. `errc::validation` naming `field`.
outcome<void> check_writable(const std::string& path, const std::string& home,
                             const std::vector<masked_path>& masked, const char* field);

/// The built-in read-deny list under `home` (credentials and keys), whether they exist or not.
std::vector<std::string> default_read_deny(const std::string& home);

} // namespace sandbox::bwrap

#endif // SANDBOX_BACKENDS_BWRAP_BWRAP_ARGS_HPP
