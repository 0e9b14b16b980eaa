// helper/channel.hpp: the two loops every supervisor process runs on its own
// io_context: reading messages from a SEQPACKET socket, and reaping on SIGCHLD.
#ifndef SANDBOX_HELPER_CHANNEL_HPP
#define SANDBOX_HELPER_CHANNEL_HPP

#include "protocol/protocol.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cerrno>
#include <csignal>

#include <sys/signalfd.h>
#include <unistd.h>

namespace sandbox::detail {

/// Calls `on_message(proto::message&)` for each message on `sock`; returns when the peer
/// closed it or it failed.
template <class F>
boost::asio::awaitable<void> read_messages(boost::asio::posix::stream_descriptor& sock,
                                           F on_message)
{
    namespace asio = boost::asio;
    for (;;)
    {
        boost::system::error_code ec;
        co_await sock.async_wait(asio::posix::stream_descriptor::wait_read,
                                 asio::redirect_error(asio::use_awaitable, ec));
        if (ec)
            co_return;
        for (;;)
        {
            proto::message m;
            bool eof = false;
            int rc = proto::receive_message(sock.native_handle(), m, eof);
            if (rc == EAGAIN)
                break;
            if (eof || rc != 0)
                co_return;
            on_message(m);
        }
    }
}

/// Blocks SIGCHLD in the calling thread and returns a non-blocking, close-on-exec signalfd
/// for it (-1 on failure). Children spawned later get an empty mask from posix_spawn.
inline int open_sigchld_fd() noexcept
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    return ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/// Calls `on_sigchld()` each time SIGCHLD arrives on `sigfd` (a non-blocking signalfd; the
/// pending signals are drained first: they coalesce, so the callee reaps in a loop).
template <class F>
boost::asio::awaitable<void> on_each_sigchld(boost::asio::posix::stream_descriptor& sigfd,
                                             F on_sigchld)
{
    namespace asio = boost::asio;
    for (;;)
    {
        boost::system::error_code ec;
        co_await sigfd.async_wait(asio::posix::stream_descriptor::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
        if (ec)
            co_return;
        signalfd_siginfo si;
        while (::read(sigfd.native_handle(), &si, sizeof si) > 0)
        {
        }
        on_sigchld();
    }
}

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_CHANNEL_HPP
