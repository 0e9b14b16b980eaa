// tools/sandbox-run/streaming.cpp: the asynchronous output sink and the plain write.
#include "streaming.hpp"

#include "cli.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::cli {

namespace asio = boost::asio;

void say(std::string_view text)
{
    write_fully(STDERR_FILENO, "sandbox-run: " + printable_text(text) + "\n");
}

bool write_fully(int fd, std::string_view data)
{
    while (!data.empty())
    {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n >= 0)
        {
            data.remove_prefix(static_cast<std::size_t>(n));
            continue;
        }
        if (errno == EAGAIN)
        {
            pollfd p{fd, POLLOUT, 0};
            ::poll(&p, 1, -1);
        }
        else if (errno != EINTR)
            return false;
    }
    return true;
}

namespace {

// A descriptor for `fd` whose open file is ours alone where it can be (a pipe, FIFO or
// terminal reopened), so making it non-blocking does not change what others share with us;
// a regular file is shared (its offset must be), a socket cannot be reopened. Non-blocking,
// so that a FIFO whose reader is gone fails here (ENXIO) instead of waiting for one.
int own_descriptor(int fd)
{
    struct stat st;
    if (::fstat(fd, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)))
    {
        const std::string path = "/proc/self/fd/" + std::to_string(fd);
        const int r = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (r >= 0)
            return r;
    }
    return ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

} // namespace

output_sink::target::target(const asio::any_io_executor& ex, int fd_)
    : fd(fd_), saved_flags(::fcntl(fd_, F_GETFL)), d(ex)
{
    const int own = own_descriptor(fd);
    if (own < 0)
        return; // closed: writes fail with EBADF, as they would on the descriptor itself
    boost::system::error_code ignored;
    d.assign(own, ignored);
    d.non_blocking(true, ignored);
}

output_sink::output_sink(const asio::any_io_executor& ex)
    : ex_(ex), out_(ex, STDOUT_FILENO), err_(ex, STDERR_FILENO)
{
}

output_sink::~output_sink()
{
    boost::system::error_code ignored;
    for (target* t : {&out_, &err_})
    {
        t->d.close(ignored);
        if (t->saved_flags >= 0)
            ::fcntl(t->fd, F_SETFL, t->saved_flags); // when it had to be shared
    }
}

bool output_sink::stop(write_end why, int err)
{
    if (why_ == write_end::ok)
    {
        why_ = why;
        error_ = err;
    }
    return false;
}

void output_sink::write(output_stream s, std::string_view data, handler done)
{
    target& t = of(s);
    t.done = std::move(done);
    if (interrupted_)
        stop(write_end::interrupted);
    if (why_ != write_end::ok || past_deadline_)
        return complete(t, why_ == write_end::ok && write_now(t, data));
    t.pending.assign(data);
    asio::async_write(t.d, asio::buffer(t.pending),
                      [this, &t](boost::system::error_code ec, std::size_t n) {
                          on_written(t, ec, n);
                      });
}

void output_sink::on_written(target& t, boost::system::error_code ec, std::size_t n)
{
    if (ec == asio::error::operation_aborted && !interrupted_)
        // The deadline cut the wait: one last look for room.
        return complete(t, write_now(t, std::string_view(t.pending).substr(n)));
    if (ec == asio::error::operation_aborted)
        stop(write_end::interrupted);
    else if (ec)
        stop(ec == asio::error::broken_pipe ? write_end::reader_gone : write_end::failed,
             ec.value());
    complete(t, !ec);
}

// Past the deadline: what the reader has room for now, and no more waiting.
bool output_sink::write_now(target& t, std::string_view data)
{
    while (!data.empty())
    {
        const ssize_t n = ::write(t.d.native_handle(), data.data(), data.size());
        if (n >= 0)
            data.remove_prefix(static_cast<std::size_t>(n));
        else if (errno == EAGAIN)
            return stop(write_end::timed_out);
        else if (errno != EINTR)
            return stop(errno == EPIPE ? write_end::reader_gone : write_end::failed, errno);
    }
    return true;
}

void output_sink::complete(target& t, bool ok)
{
    std::string().swap(t.pending);
    asio::post(ex_, [h = std::move(t.done), ok]() mutable { std::move(h)(ok); });
}

void output_sink::interrupt()
{
    interrupted_ = true;
    cancel_waiting();
}

void output_sink::deadline_passed()
{
    past_deadline_ = true;
    cancel_waiting();
}

// A write waiting for the reader completes now (`on_written` sees why).
void output_sink::cancel_waiting()
{
    boost::system::error_code ignored;
    for (target* t : {&out_, &err_})
        if (t->done)
            t->d.cancel(ignored);
}

std::string output_sink::describe() const
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

asio::awaitable<bool> async_write_output(output_sink& sink, output_stream s, std::string_view data)
{
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(bool)>(
        [&sink, s, data](auto handler) {
            // The sink keeps a std::function, which must be copyable; the handler is not.
            auto h = std::make_shared<decltype(handler)>(std::move(handler));
            sink.write(s, data, [h](bool ok) { std::move (*h)(ok); });
        },
        asio::use_awaitable);
}

int exit_status_for(write_end why)
{
    switch (why)
    {
    case write_end::reader_gone: return exit_output_closed;
    case write_end::interrupted: return exit_cancelled;
    case write_end::timed_out: return exit_timeout;
    case write_end::ok:
    case write_end::failed: break;
    }
    return exit_sandbox_failure;
}

} // namespace sandbox::cli
