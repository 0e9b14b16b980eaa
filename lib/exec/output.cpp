// lib/exec/output.cpp: the exec core's side of the command's streams (supervision.hpp): one
// coroutine per output stream reads stdout or stderr (a few reads per wake-up), captures under
// the output cap (the rest spliced to /dev/null), streams to on_output, or hands chunks to
// on_output_async and waits for the caller's resume (back-pressure). Also the input, and
// giving up on pipes a process outside the tree still holds.
#include "exec/supervision.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

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

void supervision::read(stream& s)
{
    asio::co_spawn(ex_, pump(shared_from_this(), s), asio::detached);
}

// The stream's whole life: wait until the pipe is readable, read a round, and so on until it
// ends, the run is over, or its pipes are given up.
asio::awaitable<void> supervision::pump(std::shared_ptr<supervision> /*keep_alive*/, stream& s)
{
    s.d.non_blocking(true);
    try
    {
        for (round next = round::wait; next != round::end;)
        {
            if (next == round::wait)
            {
                auto [ec] =
                    co_await s.d.async_wait(asio::posix::stream_descriptor::wait_read, with_error);
                if (ec)
                    break;
            }
            else if (next == round::yield)
                co_await asio::post(ex_, with_error);
            else if (next == round::to_null)
                next = co_await drain(s);
            if (reading_stopped() || next == round::end)
                break;
            std::string_view chunk;
            next = read_round(s, chunk);
            if (next == round::hand_over)
                next = co_await hand_over(s, chunk);
        }
    }
    catch (const std::exception& e)
    {
        stop_output(std::string("reading the output failed: ") + e.what());
    }
    end_stream(s);
}

// Up to `reads_per_wakeup` reads of what is there, each handed to its sink. A chunk for
// on_output_async is left in `chunk` for the coroutine to hand over.
supervision::round supervision::read_round(stream& s, std::string_view& chunk)
{
    char* buf = scratch_buffer();
    for (int i = 0; i < reads_per_wakeup; ++i)
    {
        ssize_t n = ::read(s.d.native_handle(), buf, read_chunk);
        if (n > 0)
        {
            const std::string_view data(buf, static_cast<std::size_t>(n));
            if (plan_.on_output_async && output_stop_text_.empty())
            {
                chunk = data;
                return round::hand_over;
            }
            if (plan_.on_output || plan_.on_output_async)
                deliver(s, data);
            else if (capture(s, data))
                return round::to_null;
            if (phase() == detail::exec_phase::done)
                return round::end;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return round::wait;
        return round::end; // EOF, or EIO on a terminal whose last slave holder is gone
    }
    // Budget spent with data still there: come back after others had their turn (the
    // reactor is edge-triggered, so waiting could miss what is already buffered).
    return round::yield;
}

bool supervision::reading_stopped() const noexcept
{
    return phase() == detail::exec_phase::done || phase() == detail::exec_phase::abandoned;
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
    if (!output_stop_text_.empty())
        return;
    output_stop_text_ = std::move(why);
    on_cancel(asio::cancellation_type::terminal);
}

namespace {

// The caller's `output_resume`: copyable and callable from any thread, it resumes the stream's
// coroutine on the core's executor, once (a second call does nothing).
template <class Handler> output_resume resume_once(asio::any_io_executor ex, Handler h)
{
    auto held = std::make_shared<std::optional<Handler>>(std::move(h));
    return [ex = std::move(ex), held](bool keep) {
        asio::post(ex, [held, keep] {
            if (!*held)
                return;
            Handler h = std::move(**held);
            held->reset();
            std::move(h)(keep);
        });
    };
}

} // namespace

// Streaming with back-pressure: the chunk goes to the caller, and this stream is read again
// only once the caller resumes it (always from a fresh handler: no recursion).
asio::awaitable<supervision::round> supervision::hand_over(stream& s, std::string_view data)
{
    s.paused = true;
    std::string threw;
    auto [keep] = co_await asio::async_initiate<decltype(with_error), void(bool)>(
        [&](auto handler) {
            output_resume r = resume_once(ex_, std::move(handler));
            try
            {
                plan_.on_output_async(stream_of(s), data, r);
            }
            catch (const std::exception& e)
            {
                threw = std::string("the output handler threw: ") + e.what();
                r(false);
            }
            catch (...)
            {
                threw = "the output handler threw";
                r(false);
            }
        },
        with_error);
    s.paused = false;
    if (!threw.empty())
        stop_output(std::move(threw));
    else if (!keep)
        stop_output("the output handler stopped the run");
    co_return round::again;
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

// Over the cap: the rest goes to /dev/null inside the kernel, counted, until the stream ends;
// where splice is not possible, by reading instead (`wait`: back to the reading rounds).
asio::awaitable<supervision::round> supervision::drain(stream& s)
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
            co_return round::end;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
        {
            s.no_splice = true;
            co_return round::wait;
        }
        auto [ec] = co_await s.d.async_wait(asio::posix::stream_descriptor::wait_read, with_error);
        if (ec || phase() == detail::exec_phase::done)
            co_return round::end;
    }
}

void supervision::end_stream(stream& s)
{
    if (&s == &out_)
        terminal_fd_ = -1;
    boost::system::error_code ignored;
    s.d.close(ignored);
    feed({detail::exec_event::kind::stream_end});
}

// The command's stdin, written as the pipe takes it; it ends all written, or on EPIPE (the
// child closed its stdin: the rest is not wanted), or when the worker's end closed it.
asio::awaitable<void> supervision::feed_input(std::shared_ptr<supervision> /*keep_alive*/)
{
    while (detail::write_input(in_.native_handle(), *plan_.input, input_off_) == EAGAIN)
    {
        auto [ec] = co_await in_.async_wait(asio::posix::stream_descriptor::wait_write, with_error);
        if (ec || !in_.is_open())
            co_return;
    }
    close_input();
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
        if (s->d.is_open())
            s->d.cancel(ignored);
}

} // namespace sandbox::backend
