// helper/connect_filter.hpp: the seccomp program of the unix-socket policy (classic BPF),
// built without I/O so that a test can run it over made-up calls. The worker's connect
// broker (connect_broker.hpp) answers what it sends.
//
// For the host's architecture (x86_64 or aarch64) and its 32-bit one:
//   connect                    sent to the worker (SECCOMP_RET_USER_NOTIF), which makes the
//                              connection itself on a copy of the socket and answers with
//                              its result: the call never goes on unchecked
//   socket, socketpair of AF_UNIX with SOCK_DGRAM or SOCK_RAW (which AF_UNIX makes a
//                              datagram socket)   fail with EACCES: a datagram socket names
//                              its peer at each send, which no filter can read
//   io_uring_setup             fails with EPERM (a ring's connect passes no filter)
//   socketcall (i386)          fails with EPERM (its arguments lie in memory)
//   seccomp with SECCOMP_FILTER_FLAG_NEW_LISTENER   fails with EPERM (a listener of the
//                              tree's own would get the connects first)
//   x32 calls                  the same as their 64-bit twins
//   anything else              allowed
// A call of any other architecture kills the process.
//
// Under a process cap too, the program also holds the fork gate's rules (fork_filter.hpp:
// forks to the listener, clone3 ENOSYS): the kernel allows one listener per tree (a second
// filter with one fails with EBUSY), so the worker gets both kinds of call from one listener
// and tells them apart (is_fork_call).
#ifndef SANDBOX_HELPER_CONNECT_FILTER_HPP
#define SANDBOX_HELPER_CONNECT_FILTER_HPP

#include <vector>

#include <linux/filter.h>

namespace sandbox::detail {

std::vector<sock_filter> connect_filter_program(bool gate_forks = false);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_CONNECT_FILTER_HPP
