// helper/run_as.hpp: `sandbox-supervisor --as UID GID -- PROGRAM [ARG...]`, which a
// root caller's worker runs in place of a sandbox program (bwrap) so that the sandbox never
// maps host root (backend::run_as_user):
//
//   - supplementary groups become GID alone, then the real, effective and saved gids GID
//     and uids UID (in that order: setgroups and setresgid need the privilege setresuid
//     drops);
//   - it checks that nothing of root is left: every uid UID, every gid GID, the groups
//     exactly GID, no effective, permitted or ambient capability (inherited securebits such
//     as SECBIT_NO_SETUID_FIXUP would keep them);
//   - it executes PROGRAM (a path, not looked up) with argv[0] PROGRAM and the rest of the
//     arguments, the environment and the open descriptors as they are.
//
// PROGRAM and everything it starts then run as UID on the host. UID or GID 0 is refused. On
// any failure: one line on stderr and exit 125, before PROGRAM runs.
//
//   sandbox-supervisor --access-as UID GID [MODE PATH]...
//
// switches the same way, then prints for each pair the result of access(PATH, MODE) (MODE
// a number: R_OK, W_OK, X_OK or'd, or F_OK), 0 or the errno, one per line on stdout: what
// the sandbox's user can reach (backend::access_as).
#ifndef SANDBOX_HELPER_RUN_AS_HPP
#define SANDBOX_HELPER_RUN_AS_HPP

namespace sandbox::detail {

/// The `--as` program; never returns.
[[noreturn]] void run_as_user(int argc, char** argv);

/// The `--access-as` program; never returns.
[[noreturn]] void run_access_as(int argc, char** argv);

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_RUN_AS_HPP
