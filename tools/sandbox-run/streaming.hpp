// tools/sandbox-run/streaming.hpp: how sandbox-run writes: the command's output through an
// asynchronous sink on the run's loop (back-pressure reaches the command through the
// library, the loop never blocks), and its own few lines with one plain write.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_STREAMING_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_STREAMING_HPP

#include <sandbox/exec_request.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace sandbox::cli {

/// Writes all of `data` to `fd` (binary-safe): sandbox-run's own lines (errors, JSON, help),
/// written when no output is streaming. Waits for room when the descriptor is non-blocking;
/// false (errno set) on an error, EPIPE included (SIGPIPE is ignored).
bool write_fully(int fd, std::string_view data);

/// One line of ours on stderr, after "sandbox-run: ", escaped (it may quote the command's
/// name, a path or a daemon's answer).
void say(std::string_view text);

/// Why streaming the output stopped.
enum class write_end
{
    ok,
    reader_gone, ///< EPIPE: whoever read our stdout or stderr went away
    interrupted, ///< SIGINT or SIGTERM while a write waited for the reader
    timed_out,   ///< the deadline passed while the reader had no room for more
    failed,      ///< another write error (`error()` holds errno)
};

/// \brief Our stdout and stderr as asynchronous targets for the command's output.
///
/// One write at a time per stream (the library hands over the next chunk only when the last
/// one is done). A write waits for a slow reader on the loop; `interrupt()` and
/// `deadline_passed()` end a waiting one. Past the deadline, output still goes out as long
/// as the reader has room for it: only a reader that has none has stalled. Pipes, FIFOs and
/// terminals are reopened (`/proc/self/fd/N`) so that the non-blocking mode stays on our own
/// open file; where that fails the shared one is made non-blocking and restored afterwards.
class output_sink
{
public:
    using handler = std::function<void(bool)>; // as the library's `output_resume`

    explicit output_sink(const boost::asio::any_io_executor& ex);
    ~output_sink();
    output_sink(const output_sink&) = delete;
    output_sink& operator=(const output_sink&) = delete;

    /// Writes a copy of `data` to our stdout or stderr; `done(true)` once all of it is
    /// written, `done(false)` once streaming had to stop (see `why()`). `done` is posted.
    void write(output_stream s, std::string_view data, handler done);

    /// SIGINT or SIGTERM: a waiting write and every later one stop (`interrupted`).
    void interrupt();
    /// The run's deadline passed: a write that finds no room now stops (`timed_out`).
    void deadline_passed();

    write_end why() const noexcept { return why_; }
    int error() const noexcept { return error_; }
    /// One line for stderr about why streaming stopped ("" for `ok`).
    std::string describe() const;

private:
    struct target
    {
        explicit target(const boost::asio::any_io_executor& ex, int fd);
        int fd;
        int saved_flags;
        boost::asio::posix::stream_descriptor d;
        std::string pending{};
        handler done{};
    };

    target& of(output_stream s) { return s == output_stream::err ? err_ : out_; }
    void on_written(target& t, boost::system::error_code ec, std::size_t n);
    bool write_now(target& t, std::string_view data);
    void complete(target& t, bool ok);
    void cancel_waiting();
    bool stop(write_end why, int err = 0);

    boost::asio::any_io_executor ex_;
    target out_, err_;
    bool interrupted_ = false;
    bool past_deadline_ = false;
    write_end why_ = write_end::ok;
    int error_ = 0;
};

/// `sink.write` in a coroutine: true once all of `data` is written, false once streaming
/// had to stop (`sink.why()`). Only the coroutine waits; the loop goes on.
boost::asio::awaitable<bool> async_write_output(output_sink& sink, output_stream s,
                                                std::string_view data);

/// The exit status a run whose streaming stopped ends with: 141 (`reader_gone`), 130
/// (`interrupted`), 124 (`timed_out`), 125 otherwise.
int exit_status_for(write_end why);

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_STREAMING_HPP
