// helper/setid_filter.hpp: the seccomp program the status init (status_init.hpp)
// puts on a sandboxed command: no set-user-ID or set-group-ID bit can be set from inside.
//
// For the host's architecture (x86_64 or aarch64) and its 32-bit one:
//   chmod, fchmod, fchmodat, fchmodat2 with S_ISUID or S_ISGID in the mode
//                              fail with EPERM (without those bits they run as usual)
//   x32 calls                  the same as their 64-bit twins
//   anything else              allowed
// A call of any other architecture kills the process (its numbers are not judged).
//
// Those calls are the only way the command has to set the bits on a file with content: a
// file created with them (open, mknod) loses them at its first write, truncation or
// allocation, since the command holds no CAP_FSETID; chown clears them too.
#ifndef SANDBOX_HELPER_SETID_FILTER_HPP
#define SANDBOX_HELPER_SETID_FILTER_HPP

#include <vector>

#include <linux/filter.h>

namespace sandbox::detail {

std::vector<sock_filter> setid_filter_program();

/// Puts the program on the calling thread (no_new_privs first, which a filter without
/// CAP_SYS_ADMIN needs; everything it starts inherits both). 0, or the errno.
int install_setid_filter();

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_SETID_FILTER_HPP
