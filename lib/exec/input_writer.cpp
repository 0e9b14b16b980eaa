// lib/exec/input_writer.cpp: non-blocking stdin writes without SIGPIPE.
#include "exec/input_writer.hpp"

#include <cerrno>
#include <csignal>

#include <pthread.h>
#include <unistd.h>

namespace sandbox::detail {

ssize_t write_no_sigpipe(int fd, const char* data, std::size_t len) noexcept
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t n = ::write(fd, data, len);
    int err = errno;
    if (n < 0 && err == EPIPE && !was_pending)
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
