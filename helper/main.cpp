// helper/main.cpp: `sandbox-supervisor`, the helper process the library
// starts once per execution context.
//
// It is a child subreaper in its own session. On the control socket (fd 3) the library
// hands it one end of a fresh channel per worker it wants; the helper forks a worker
// (worker.hpp) for it. Every worker holds the read end of the helper's lifeline pipe, so
// workers notice the helper's death. Orphans of a worker that died (killed by its own tree)
// fall to the helper, which kills them. When the control socket closes (the library's
// runner or io_context went away, or the library's process died) the helper kills every
// worker and every process below them, reaps them all, and exits. It does the same when the
// library's process dies, watched through a pidfd of it taken at start: a command can copy
// the control socket out of a dumpable caller (pidfd_getfd) and so keep the EOF from
// arriving, but it cannot keep a process that died alive. The helper is not dumpable, so a
// command of the same user can neither ptrace it nor copy its descriptors.
//
//   usage: sandbox-supervisor --protocol N --caller PID [--cgroup DIR]   (started by the
//                                library, control socket = fd 3; with DIR, its cgroup tree
//                                goes there: see cgroup.hpp)
//          sandbox-supervisor --probe-fork-gate   (installs the fork gate's filter on itself
//                                                  and exits: 0, or the errno it failed with)
//          sandbox-supervisor --init FD [--net-bridge FD2] -- COMMAND [ARG...]   (inside a sandbox;
//          status_init.hpp) sandbox-supervisor --init FD [--net-bridge FD2] --serve FD3   (an
//          instance's init) sandbox-supervisor --as UID GID -- PROGRAM [ARG...]   (root caller's
//          sandbox; run_as.hpp) sandbox-supervisor --access-as UID GID [MODE PATH]...   (what its
//          user can reach)
#include "helper/fork_gate.hpp"
#include "helper/run_as.hpp"
#include "helper/serve.hpp"
#include "helper/status_init.hpp"
#include "protocol/protocol.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

namespace proto = sandbox::detail::proto;

constexpr int control_fd = 3;

// The value after `name`; empty when missing.
std::string option_text(int argc, char** argv, std::string_view name)
{
    for (int i = 1; i + 1 < argc; ++i)
        if (name == argv[i])
            return argv[i + 1];
    return {};
}

// The value after `name`, as a number; -1 when missing.
long option_value(int argc, char** argv, std::string_view name)
{
    const std::string text = option_text(argc, argv, name);
    return text.empty() ? -1 : std::strtol(text.c_str(), nullptr, 10);
}

// A pidfd of the library's process, which started us: -1 when it is gone already (we were
// re-parented before we could look) or the kernel has no pidfds. Checked as our parent
// after the pidfd is open, so a recycled pid is never watched.
int open_caller(long caller)
{
    if (caller <= 0)
        return -1;
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(caller), 0));
    if (fd >= 0 && ::getppid() != caller)
    {
        ::close(fd);
        return -1;
    }
    return fd;
}

} // namespace

int main(int argc, char** argv)
{
    // Before anything else: a command of our user must not ptrace us or copy our control
    // socket and lifeline (pidfd_getfd) to outlive its caller. Workers inherit it; what a
    // mode below executes is dumpable again (execve resets it).
    ::prctl(PR_SET_DUMPABLE, 0);
    if (argc > 1 && std::string_view(argv[1]) == "--init")
        sandbox::detail::run_status_init(argc, argv); // inside a sandbox: see status_init.hpp
    // _exit: nothing may run after the filter is on (a leak checker's clone would hit it).
    if (argc == 2 && std::string_view(argv[1]) == "--probe-fork-gate")
        ::_exit(sandbox::detail::probe_fork_gate());
    if (argc > 1 && std::string_view(argv[1]) == "--as")
        sandbox::detail::run_as_user(argc, argv); // a root caller's sandbox: see run_as.hpp
    if (argc > 1 && std::string_view(argv[1]) == "--access-as")
        sandbox::detail::run_access_as(argc, argv); // what that user can reach: run_as.hpp
    if (option_value(argc, argv, "--protocol") != static_cast<long>(proto::version))
    {
        std::fprintf(stderr, "sandbox-supervisor: this helper speaks protocol %u; started "
                             "with another (a library from another build?)\n",
                     proto::version);
        return proto::exit_protocol_mismatch;
    }
    if (::fcntl(control_fd, F_GETFD) < 0)
    {
        std::fprintf(stderr, "sandbox-supervisor: no control socket on fd 3; it is started "
                             "by the sandbox library, not by hand\n");
        return 2;
    }
    ::fcntl(control_fd, F_SETFD, FD_CLOEXEC);
    const int caller = open_caller(option_value(argc, argv, "--caller"));
    if (caller < 0)
    {
        std::fprintf(stderr, "sandbox-supervisor: the calling process (--caller) is gone or "
                             "cannot be watched\n");
        return 2; // nothing has run yet; the library sees the control socket close
    }
    sandbox::detail::serve_workers(control_fd, caller, option_text(argc, argv, "--cgroup"));
}
