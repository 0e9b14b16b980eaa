// lib/exec/input_writer.cpp: non-blocking stdin writes without SIGPIPE.
#include "exec/input_writer.hpp"

#include <cerrno>
#include <csignal>

#include <fcntl.h>

#include <pthread.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

/// Runs `call` (a system call that may write to a socket or pipe) with SIGPIPE blocked in this
/// thread; a SIGPIPE it raised is consumed. When the thread had SIGPIPE blocked already,
/// nothing is consumed (one pending then may be the caller's); when it had not, none can
/// have been pending for it, so the one found after an EPIPE is the call's.
template <class Call> ssize_t without_sigpipe(Call call) noexcept
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t n = call();
    int err = errno;
    if (n < 0 && err == EPIPE && !sigismember(&old, SIGPIPE))
    {
        timespec zero{0, 0};
        while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR)
        {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = err;
    return n;
}

} // namespace

ssize_t write_no_sigpipe(int fd, const char* data, std::size_t len) noexcept
{
    return without_sigpipe([&] { return ::write(fd, data, len); });
}

ssize_t splice_no_sigpipe(int in, int out, std::size_t len, unsigned int flags) noexcept
{
    ssize_t n;
    while ((n = without_sigpipe([&] { return ::splice(in, nullptr, out, nullptr, len, flags); })) <
               0 &&
           errno == EINTR)
    {}
    return n;
}

int write_input(int fd, std::string_view data, std::size_t& off) noexcept
{
    while (off < data.size())
    {
        const ssize_t n = write_no_sigpipe(fd, data.data() + off, data.size() - off);
        if (n > 0)
            off += static_cast<std::size_t>(n);
        else if (n < 0 && errno == EWOULDBLOCK)
            return EAGAIN;
        else if (n < 0 && errno != EINTR)
            return errno;
    }
    return 0;
}

} // namespace sandbox::detail
