// helper/subtree.hpp: the processes below the calling subreaper — listing them for
// the cap sampler, signalling them, and killing and reaping all of them. Used by the helper
// and its workers (single-threaded processes with PR_SET_CHILD_SUBREAPER).
//
// Every orphan of the subtree is re-parented to the calling process, whatever it did
// (setsid, setpgid, double fork), so "no child left" (ECHILD) means the subtree is empty.
#ifndef SANDBOX_HELPER_SUBTREE_HPP
#define SANDBOX_HELPER_SUBTREE_HPP

#include "helper/proc.hpp"

#include <functional>
#include <vector>

#include <sys/resource.h>
#include <sys/types.h>

namespace sandbox::detail {

/// One live or zombie process below the caller, with its /proc stat.
struct subtree_member
{
    proc_stat stat;
    /// For a member whose main thread has ended while others run (proc_stat::main_thread_ended):
    /// a running thread, whose record gave `stat.rss_pages` and whose smaps_rollup shows the
    /// member's memory; 0 otherwise.
    pid_t memory_thread = 0;
};

/// Opens the caller's own children file and keeps it. Call once in each process that uses
/// this file (after a fork, in the child, once its inherited descriptors are closed).
void prepare_subtree_access();

/// The caller's own children (living or zombie); 0 or errno.
int own_children(std::vector<pid_t>& out);

/// Called for each reaped child: pid, raw wait status, its rusage.
using reap_fn = std::function<void(pid_t, int, const struct rusage&)>;

/// \brief Lists every descendant of the calling process (breadth first: a parent before its
/// children). A pid read from a children file is taken only when its stat names the parent
/// it was listed under, so a recycled pid is never taken for a member. A member whose main
/// thread has ended is walked like any live one (its children hang below its other threads).
///
/// Returns 0, or the errno of a /proc read that failed for another reason than the process
/// being gone (ENOENT/ESRCH); then `out` holds what could be read.
int list_subtree(std::vector<subtree_member>& out);

/// \brief Lists `root` and its descendants, for a tree the caller did not start (a cap
/// watch, cap_watch.hpp): `root` is taken when it is alive, whatever its parent, and below
/// it the same checks as list_subtree. A member that leaves the tree (a double fork hands it
/// to another reaper) is not listed. Returns 0 or the errno of a failed /proc read.
int list_tree_of(pid_t root, std::vector<subtree_member>& out);

/// Sends `sig` to `root` (through `root_pidfd`, which pins it) and to its descendants as
/// list_tree_of finds them, then to `root`'s process group while `root` lives. Returns how
/// many members were signalled.
std::size_t signal_tree_of(pid_t root, int root_pidfd, int sig);

/// Sends `sig` to every descendant (each checked as in list_subtree, and signalled through
/// a pidfd unless it is our own child); for a signal other than SIGKILL, SIGCONT follows so
/// that stopped members act on it. Returns how many were signalled.
std::size_t signal_subtree(int sig);

/// Reaps every exited child without blocking. Returns false when the caller has no child
/// left at all (ECHILD).
bool reap_exited(const reap_fn& on_reap);

/// \brief SIGKILLs the whole subtree and reaps it, round after round, until the caller has no
/// child left. Members forking during the kill are caught in a later round (their children
/// fall to us). Returns the number of processes killed.
std::size_t kill_subtree(const reap_fn& on_reap);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_SUBTREE_HPP
