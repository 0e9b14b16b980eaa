// backends/bwrap/bwrap_args.hpp: the bubblewrap command line for one command, from a
// resolved view of the sandbox. Pure (no I/O): unit-tested line by line.
#ifndef SANDBOX_BACKENDS_BWRAP_BWRAP_ARGS_HPP
#define SANDBOX_BACKENDS_BWRAP_BWRAP_ARGS_HPP

#include <sandbox/failure.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace sandbox::bwrap {

/// A host path hidden from the command: a directory becomes an empty read-only tmpfs, a
/// file reads as /dev/null.
struct masked_path
{
    std::string path;
    bool directory = true;
};

/// A path inside a writable directory bound onto itself after the writable binds:
/// read-only, or read-write only to pin it (a directory on the way to a read-only path, made
/// a mount point so that it can be neither renamed nor removed).
struct bound_path
{
    std::string path;
    bool read_only = true;
};

/// What the command sees, every path absolute and symlink-resolved by the caller.
struct sandbox_view
{
    /// Bound read-write at the same path (the runner's root).
    std::string root;
    /// Also bound read-write at the same paths (existing directories).
    std::vector<std::string> writable{};
    /// Bound again after the writable binds, in this order: paths inside writable
    /// directories that the command may read but not change (`.git/hooks`, shell rc files,
    /// ...) and the directories leading to them, pinned. Each exists (the runner makes a
    /// stand-in for one that did not).
    std::vector<bound_path> protect{};
    /// Host unix sockets bound into the sandbox at the same paths (after the /tmp and /run
    /// tmpfs, so they show through them).
    std::vector<std::string> sockets{};
    /// Read-only files made inside from a descriptor's bytes (`--ro-bind-data`, mode 0444),
    /// after /run's tmpfs: (the descriptor's number in bwrap, the path inside, under /run
    /// when `isolate_network`). bwrap reads and closes each before anything else runs.
    std::vector<std::pair<int, std::string>> data_files{};
    /// Extra bwrap flags, already checked by `check_extra_flags`: they go after the binds and
    /// before `protect` and the masks, so neither can be undone by them.
    std::vector<std::string> extra_flags{};
    /// Hidden (existing paths only: a mount needs its target).
    std::vector<masked_path> read_deny{};
    /// A private network namespace with only loopback, and /run masked.
    bool isolate_network = false;
    /// The size of each private tmpfs the command can write (/tmp, /dev/shm), in bytes: files
    /// there hold memory no sampler counts. 0: the kernel's default (half the RAM).
    std::int64_t tmpfs_bytes = 0;
    /// Runs before the command inside, as the namespace's pid 1 (`--as-pid-1`): the helper's
    /// status init and its arguments. Empty: bwrap's own init, then the command.
    std::vector<std::string> init{};
    /// The directory the command starts in (inside the root).
    std::string work_dir;
};

/// \brief `bwrap` flags, `--`, then `init`, `command` and `args` (the command is looked up
/// on the PATH of bwrap's own environment, which is the command's, inside the sandbox).
///
/// Always: a user namespace with every capability dropped and nested user namespaces
/// disabled; private pid, IPC, UTS and (when possible) cgroup namespaces; death with the
/// parent (no new session: the supervisor's worker has no controlling terminal to begin
/// with, and the job signals it sends to the group must reach the command); host `/` read-only; a private `/tmp`; a fresh `/proc` and a minimal `/dev`. No
/// variable is put on the command line: the environment is bwrap's own.
std::vector<std::string> build_args(const sandbox_view& v, const std::string& command,
                                    const std::vector<std::string>& args);

/// \brief Checks a path that would be bound writable: not `/`, not `home`, not an ancestor
/// of (or equal to) a masked path. `errc::validation` naming `field`.
outcome<void> check_writable(const std::string& path, const std::string& home,
                             const std::vector<masked_path>& masked, const char* field);

/// How `check_extra_flags` looks at host paths (the I/O it needs, injected for tests).
struct path_probe
{
    /// An absolute path resolved as far as it exists (symbolic links followed).
    std::function<std::string(const std::string&)> resolve;
    std::function<bool(const std::string&)> exists;
};

/// \brief Checks extra bwrap flags against an allow-list of flags that cannot weaken the
/// policy, each with its number of values, so a value can never be read as a flag (nor a
/// flag swallowed as a value). Allowed: `--ro-bind[-try] SRC DEST`, `--symlink SRC DEST`,
/// `--dir DEST`, `--tmpfs DEST`, `--remount-ro DEST`, `--perms OCTAL`, `--size BYTES`,
/// `--hostname NAME`, `--unshare-net` (`--perms` only before `--tmpfs` or `--dir`, `--size`
/// only before `--tmpfs`). Everything else (`--new-session` too: the job signals the
/// supervisor sends to the group would no longer reach the command; writable or device
/// binds, capabilities, shared namespaces, descriptors, environment, work directory, ...) is
/// `errc::validation` naming the flag. Bind sources and the paths the flags create are
/// absolute and lie outside `writable` (a source there could be swapped by a command for a
/// link to anything; a path made there would appear on the host); a source that is, is
/// inside or contains a masked path is refused (it would show the path elsewhere), and
/// `--ro-bind`'s must exist.
outcome<void> check_extra_flags(const std::vector<std::string>& flags,
                                const std::vector<masked_path>& masked,
                                const std::vector<std::string>& writable,
                                const path_probe& probe);

/// What takes the place of a protected path that is missing, when its directory exists: an
/// empty directory (git ignores it, so it is never committed by mistake), an empty file (a
/// git config file: git cannot read a directory there), or a file holding `.` (a
/// `commondir`: git reads it as the repository itself; an empty one makes every git command
/// die). Where a directory on the way is missing, an empty directory takes its place.
enum class stand_in
{
    directory,
    empty_file,
    git_self,
};

/// \brief The built-in write-deny entries, relative to each writable directory, each kept
/// read-only whether it exists or not (see `resolve_write_deny`).
struct write_deny_entry
{
    std::string relative;
    stand_in missing = stand_in::directory;
};
const std::vector<write_deny_entry>& default_write_deny();

/// True when `path` is `dir` or below it (both absolute and clean).
bool within(const std::string& path, const std::string& dir);

/// True when `path` is within one of `dirs`.
bool inside_any(const std::string& path, const std::vector<std::string>& dirs);

/// The built-in read-deny list under `home` (credentials and keys), whether they exist or not.
std::vector<std::string> default_read_deny(const std::string& home);

/// \brief The home directories whose credentials are masked: the password database's for
/// the caller's uid (its file, /etc/passwd), and `$HOME` too when it differs (each resolved by the caller; one that is
/// not absolute counts as unknown). `errc::not_available` when neither is known: running
/// with nothing masked would not be the policy.
outcome<std::vector<std::string>> home_dirs(const std::string& passwd_home,
                                            const std::string& env_home);

} // namespace sandbox::bwrap

#endif // SANDBOX_BACKENDS_BWRAP_BWRAP_ARGS_HPP
