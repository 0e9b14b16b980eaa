// lib/process/tree.hpp: signalling a whole process tree, including members that left the
// process group (setsid / setpgid), found through /proc.
#ifndef SANDBOX_LIB_PROCESS_TREE_HPP
#define SANDBOX_LIB_PROCESS_TREE_HPP

#include <cstdint>
#include <span>
#include <vector>

#include <sys/types.h>

namespace sandbox::detail {

/// A process known to belong to a tree; `starttime` guards against pid reuse.
struct known_process
{
    pid_t pid = 0;
    std::uint64_t starttime = 0;
};

/// \brief Sends `sig` to the tree of `leader` (whose process group id is `pgid`).
///
/// @li Always: the process group (`kill(-pgid)`), and every `known` member still alive with
///     the same start time.
/// @li With `scan`: also every process whose parent chain leads to the leader or to a known
///     member, or whose process group is `pgid`, found by reading /proc. For SIGKILL the
///     tree is first frozen with SIGSTOP and re-scanned until no new member appears, so a
///     member forking during the kill cannot slip out.
///
/// The leader must not have been reaped yet (a zombie leader keeps the group id reserved).
/// Returns how many processes were found beyond the group signal.
std::size_t signal_tree(pid_t leader, pid_t pgid, std::span<const known_process> known, int sig,
                        bool scan);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_PROCESS_TREE_HPP
