// tools/sandbox-run/streaming.cpp: interrupts as a self-pipe, and the bounded output writer.
#include "streaming.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::cli {

namespace {

volatile sig_atomic_t g_raised = 0;
int g_pipe[2] = {-1, -1};

extern "C" void on_interrupt(int)
{
    const int saved = errno;
    g_raised = 1;
    [[maybe_unused]] ssize_t n = ::write(g_pipe[1], "x", 1); // full pipe: already readable
    errno = saved;
}

} // namespace

bool interrupts::install()
{
    if (g_pipe[0] >= 0)
        return true;
    if (::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return false;
    struct sigaction sa = {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    return ::sigaction(SIGINT, &sa, nullptr) == 0 && ::sigaction(SIGTERM, &sa, nullptr) == 0;
}

int interrupts::fd() noexcept { return g_pipe[0]; }

bool interrupts::raised() noexcept { return g_raised != 0; }

void interrupts::drain() noexcept
{
    char buf[64];
    while (::read(g_pipe[0], buf, sizeof buf) > 0)
    {
    }
}

output_writer::output_writer(std::chrono::steady_clock::time_point deadline)
    : deadline_(deadline)
{
    for (int fd : {1, 2})
    {
        struct stat st;
        regular_[fd] = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    }
}

bool output_writer::stop(write_end why, int err)
{
    why_ = why;
    error_ = err;
    return false;
}

// How long a write may wait for the reader now: until the deadline, 0 once it passed (one
// last look), -1 without one.
int output_writer::wait_ms() const
{
    using clock = std::chrono::steady_clock;
    if (deadline_ == clock::time_point::max())
        return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - clock::now());
    return static_cast<int>(std::clamp<long long>(left.count(), 0, INT_MAX));
}

bool output_writer::write(int fd, std::string_view data)
{
    while (!data.empty())
    {
        if (interrupts::raised())
            return stop(write_end::interrupted);
        const int wait = wait_ms();
        pollfd p[2] = {{fd, POLLOUT, 0}, {interrupts::fd(), POLLIN, 0}};
        const int ready = ::poll(p, 2, wait);
        if (ready < 0 && errno != EINTR)
            return stop(write_end::failed, errno);
        if (ready <= 0 || p[0].revents == 0)
        {
            // Past the deadline only a reader that has no room even now has stalled: output
            // written during the kill grace, or read late by a reader that keeps up, still
            // goes out. Otherwise a signal (checked above), the deadline's poll, or EINTR.
            if (wait == 0 && ready == 0)
                return stop(write_end::timed_out);
            continue;
        }
        // POLLOUT promises PIPE_BUF bytes of room, so a write of at most that never blocks;
        // regular files never do.
        const std::size_t n =
            regular_[fd == 2 ? 2 : 1] ? data.size() : std::min<std::size_t>(data.size(), PIPE_BUF);
        const ssize_t w = ::write(fd, data.data(), n);
        if (w < 0)
        {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return stop(errno == EPIPE ? write_end::reader_gone : write_end::failed, errno);
        }
        data.remove_prefix(static_cast<std::size_t>(w));
    }
    return true;
}

std::string output_writer::describe() const
{
    switch (why_)
    {
    case write_end::ok: return "";
    case write_end::reader_gone:
        return "the reader of the output went away; process tree killed";
    case write_end::interrupted: return "interrupted; process tree killed";
    case write_end::timed_out:
        return "timed out while the reader of the output was stalled; process tree killed";
    case write_end::failed:
        return std::string("cannot write the output: ") + std::strerror(error_) +
               "; process tree killed";
    }
    return "";
}

} // namespace sandbox::cli
