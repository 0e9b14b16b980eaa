// lib/exec/output.cpp: the exec core's side of the command's streams (supervision.hpp):
// reading stdout and stderr (a few reads per wake-up), capture under the output cap (the rest
// spliced to /dev/null), streaming to on_output, back-pressure with on_output_async, writing
// the input, and giving up on pipes a process outside the tree still holds.
#include "exec/supervision.hpp"

#include <boost/asio/post.hpp>

#include <algorithm>

#include <fcntl.h>
#include <unistd.h>

namespace sandbox::backend {

namespace {

constexpr std::size_t read_chunk = 64 * 1024;

// Streamed output is read into one buffer per thread, only once a pipe is readable: an idle
// session holds no read buffer.
char* scratch_buffer()
{
    thread_local std::unique_ptr<char[]> buf(new char[read_chunk]);
    return buf.get();
}

// Reads handed to the output handler per wake-up, so one chatty stream cannot hold the loop.
constexpr int reads_per_wakeup = 16;

} // namespace

// Both sinks read the same way: wait until the pipe is readable, then read what is there
// into the thread's buffer (a few reads per wake-up) and hand each piece to the sink.
void supervision::read(stream& s)
{
    s.d.non_blocking(true);
    wait_readable(s);
}

void supervision::wait_readable(stream& s)
{
    s.d.async_wait(asio::posix::stream_descriptor::wait_read,
                   [self = shared_from_this(), &s](boost::system::error_code ec) {
                       self->on_readable(s, ec);
                   });
}

void supervision::on_readable(stream& s, boost::system::error_code ec)
{
    if (s.eof)
        return; // a posted round that arrived after the stream ended
    if (ec || phase() == detail::exec_phase::done || phase() == detail::exec_phase::abandoned)
        return end_stream(s);
    char* buf = scratch_buffer();
    for (int i = 0; i < reads_per_wakeup; ++i)
    {
        ssize_t n = ::read(s.d.native_handle(), buf, read_chunk);
        if (n > 0)
        {
            const std::string_view data(buf, static_cast<std::size_t>(n));
            if (plan_.on_output_async && output_stop_text_.empty())
                return hand_over(s, data);
            if (plan_.on_output || plan_.on_output_async)
                deliver(s, data);
            else if (capture(s, data))
                return drain(s);
            if (phase() == detail::exec_phase::done)
                return end_stream(s);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return wait_readable(s);
        return end_stream(s); // EOF, or EIO on a terminal whose last slave holder is gone
    }
    // Budget spent with data still there: come back after others had their turn (the
    // reactor is edge-triggered, so waiting could miss what is already buffered).
    asio::post(ex_, [self = shared_from_this(), &s] { self->on_readable(s, {}); });
}

// The tag of what `s` reads: a terminal's merged output is `tty`.
output_stream supervision::stream_of(const stream& s) const noexcept
{
    if (&s != &out_)
        return output_stream::err;
    return plan_.tty ? output_stream::tty : output_stream::out;
}

// Streaming: hand the chunk to the caller's handler; once it says stop, kill the tree and
// discard what is still read.
void supervision::deliver(stream& s, std::string_view data)
{
    if (!output_stop_text_.empty())
    {
        s.cap.dropped_bytes += data.size();
        s.cap.truncated = true;
        return;
    }
    std::string why;
    try
    {
        if (!plan_.on_output(stream_of(s), data))
            why = "the output handler stopped the run";
    }
    catch (const std::exception& e)
    {
        why = std::string("the output handler threw: ") + e.what();
    }
    catch (...)
    {
        why = "the output handler threw";
    }
    if (!why.empty())
        stop_output(std::move(why));
}

// `why` is never empty: its presence is what says the output handler stopped the run.
void supervision::stop_output(std::string why)
{
    output_stop_text_ = std::move(why);
    on_cancel(asio::cancellation_type::terminal);
}

// Streaming with back-pressure: the chunk goes to the caller, and this stream is read again
// only once the caller resumes it (always from a fresh handler: no recursion).
void supervision::hand_over(stream& s, std::string_view data)
{
    s.paused = true;
    output_resume r = [self = shared_from_this(), &s](bool keep) {
        asio::post(self->ex_, [self, &s, keep] { self->resume(s, keep); });
    };
    try
    {
        plan_.on_output_async(stream_of(s), data, std::move(r));
    }
    catch (const std::exception& e)
    {
        s.paused = false;
        stop_output(std::string("the output handler threw: ") + e.what());
        on_readable(s, {});
    }
    catch (...)
    {
        s.paused = false;
        stop_output("the output handler threw");
        on_readable(s, {});
    }
}

void supervision::resume(stream& s, bool keep)
{
    s.paused = false;
    if (!keep && output_stop_text_.empty())
        stop_output("the output handler stopped the run");
    on_readable(s, {});
}

// Capture: keep what fits under the cap, count the rest. True once the cap is reached and
// the rest can go to /dev/null inside the kernel (splice).
bool supervision::capture(stream& s, std::string_view data)
{
    const std::size_t room = plan_.max_output_bytes > s.cap.data.size()
                                 ? static_cast<std::size_t>(std::min<std::uint64_t>(
                                       plan_.max_output_bytes - s.cap.data.size(), data.size()))
                                 : 0;
    s.cap.data.append(data.data(), room);
    if (room < data.size())
    {
        s.cap.dropped_bytes += data.size() - room;
        s.cap.truncated = true;
    }
    if (s.cap.data.size() < plan_.max_output_bytes || s.no_splice)
        return false;
    if (!devnull_)
        devnull_.reset(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    return static_cast<bool>(devnull_);
}

void supervision::drain(stream& s)
{
    for (;;)
    {
        ssize_t n = ::splice(s.d.native_handle(), nullptr, devnull_.get(), nullptr, 1 << 20,
                             SPLICE_F_NONBLOCK);
        if (n > 0)
        {
            s.cap.dropped_bytes += static_cast<std::uint64_t>(n);
            s.cap.truncated = true;
            continue;
        }
        if (n == 0)
            return end_stream(s);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN)
        {
            s.d.async_wait(asio::posix::stream_descriptor::wait_read,
                           [self = shared_from_this(), &s](boost::system::error_code ec) {
                               if (ec || self->phase() == detail::exec_phase::done)
                                   self->end_stream(s);
                               else
                                   self->drain(s);
                           });
            return;
        }
        // splice is not possible here: drain by reading instead.
        s.no_splice = true;
        return wait_readable(s);
    }
}

void supervision::end_stream(stream& s)
{
    if (s.eof)
        return;
    if (&s == &out_)
        terminal_fd_ = -1;
    s.eof = true;
    boost::system::error_code ignored;
    s.d.close(ignored);
    feed({detail::exec_event::kind::stream_end});
}

void supervision::write_input()
{
    if (detail::write_input(in_.native_handle(), *plan_.input, input_off_) == EAGAIN)
        return in_.async_wait(asio::posix::stream_descriptor::wait_write,
                              [self = shared_from_this()](boost::system::error_code ec) {
                                  if (!ec && self->in_.is_open())
                                      self->write_input();
                              });
    // All written, or EPIPE: the child closed its stdin, the rest is not wanted.
    boost::system::error_code ignored;
    in_.close(ignored);
}

void supervision::close_input()
{
    boost::system::error_code ignored;
    in_.close(ignored);
}

void supervision::abandon_pipes()
{
    boost::system::error_code ignored;
    for (stream* s : {&out_, &err_})
        if (!s->eof)
            s->d.cancel(ignored);
}

} // namespace sandbox::backend
