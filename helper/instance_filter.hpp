// helper/instance_filter.hpp: the seccomp program an instance's init (status_init.hpp,
// --serve) puts on itself before it serves, which its workers and every command inherit.
// Inside an instance a command runs as the same user as the workers that keep the
// commands' deadlines and kill their trees; the kernel lets a process change the resource
// limits and priorities of any process of its user, whatever its dumpable flag. So:
//
//   prlimit64, sched_setparam, sched_setscheduler, sched_setaffinity,  fail with EPERM
//     sched_setattr with a pid other than 0 (another process or thread)
//   setpriority, ioprio_set but for the caller's own process (0)       fail with EPERM
//     (a process group could be the workers': a command can join it)
//   anything else (its own limits, priority, scheduling: pid 0)        allowed
//
// The cost: a program that names itself or its own threads by id instead of 0 (`renice -p
// $$`, pthread_setaffinity_np, pthread_setschedparam on another thread) gets EPERM inside an
// instance.
//
// For the host's architecture and its 32-bit one; x32 calls as their 64-bit twins; a call
// of any other architecture kills the process.
#ifndef SANDBOX_HELPER_INSTANCE_FILTER_HPP
#define SANDBOX_HELPER_INSTANCE_FILTER_HPP

#include <vector>

#include <linux/filter.h>

namespace sandbox::detail {

std::vector<sock_filter> instance_filter_program();

/// Puts the program on the calling thread (after no_new_privs, which the set-id filter
/// already set). 0, or the errno.
int install_instance_filter();

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_INSTANCE_FILTER_HPP
