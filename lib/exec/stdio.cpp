// lib/exec/stdio.cpp: see stdio.hpp.
#include "exec/stdio.hpp"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

namespace sandbox::backend {

// A pseudo-terminal of `size`: the master is ours (read as stdout), the slave goes to the
// worker, which holds it until the spawn; the command opens it by name as its controlling
// terminal. When the last process holding the slave is gone, reading the master ends (EIO).
namespace {

outcome<stdio_set> open_terminal(terminal_size size)
{
    stdio_set s;
    s.out.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!s.out || ::grantpt(s.out.get()) != 0 || ::unlockpt(s.out.get()) != 0)
        return make_os_failure(errc::internal, "cannot open a pseudo-terminal", errno);
    char name[128];
    if (int rc = ::ptsname_r(s.out.get(), name, sizeof name); rc != 0)
        return make_os_failure(errc::internal, "cannot name the pseudo-terminal", rc);
    winsize ws{};
    ws.ws_row = size.rows;
    ws.ws_col = size.cols;
    if (::ioctl(s.out.get(), TIOCSWINSZ, &ws) != 0)
        return make_os_failure(errc::internal, "cannot size the pseudo-terminal", errno);
    s.child_out.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!s.child_out)
        return make_os_failure(errc::internal, "cannot open the pseudo-terminal slave", errno);
    s.tty_path = name;
    return s;
}

} // namespace

outcome<stdio_set> open_stdio(const spawn_plan& plan)
{
    if (plan.tty)
        return open_terminal(*plan.tty);
    stdio_set s;
    pipe_pair out, err, in;
    if (!out.open() || !err.open() || (plan.input && !in.open()))
        return make_os_failure(errc::internal, "cannot create the command's pipes", errno);
    s.child_out = std::move(out.write);
    s.child_err = std::move(err.write);
    s.child_in = std::move(in.read);
    s.out = std::move(out.read);
    s.err = std::move(err.read);
    s.in = std::move(in.write);
    return s;
}

} // namespace sandbox::backend
