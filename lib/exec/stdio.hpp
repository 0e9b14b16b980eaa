// lib/exec/stdio.hpp: the command's standard descriptors for one supervised execution:
// pipes, or a pseudo-terminal; the child's ends go to the worker, ours stay with the core.
#ifndef SANDBOX_LIB_EXEC_STDIO_HPP
#define SANDBOX_LIB_EXEC_STDIO_HPP

#include <sandbox/backend/supervise.hpp>
#include <sandbox/failure.hpp>

#include <string>

namespace sandbox::backend {

struct pipe_pair
{
    unique_fd read, write;
    bool open()
    {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0)
            return false;
        read.reset(fds[0]);
        write.reset(fds[1]);
        return true;
    }
};

// The command's standard descriptors: the ends sent to the worker, and ours.
struct stdio_set
{
    unique_fd child_out, child_err, child_in; // child_err empty on a terminal (child_out twice)
    unique_fd out, err, in;                   // ours: read out/err, write in; err empty on a tty
    std::string tty_path;
};

/// The pipes of `plan` (stdin only when it has input), or its pseudo-terminal.
outcome<stdio_set> open_stdio(const spawn_plan& plan);

} // namespace sandbox::backend

#endif // SANDBOX_LIB_EXEC_STDIO_HPP
