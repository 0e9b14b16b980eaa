// tools/sandbox-run/streaming.hpp: what sandbox-run needs to stream a run to its own stdout
// and stderr: SIGINT/SIGTERM seen both by the io_context and by a write that waits for a
// stalled reader, and that write, bounded by the run's deadline.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_STREAMING_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_STREAMING_HPP

#include <sandbox/unique_fd.hpp>

#include <chrono>
#include <string>
#include <string_view>

namespace sandbox::cli {

/// \brief SIGINT and SIGTERM as a flag and a readable pipe, for the whole of the run.
///
/// The program (not the library) owns these two signals: the handler sets a flag and writes
/// a byte to a self-pipe, so the io_context (through the pipe) and a blocked output write
/// (through `poll`) both see them, and no window exists where they fall back to the default
/// action. Installed by `install()`, once.
class interrupts
{
public:
    /// Installs the handlers; false (errno set) when the pipe or sigaction fails.
    static bool install();
    /// The read end of the self-pipe (readable once a signal arrived).
    static int fd() noexcept;
    /// True once SIGINT or SIGTERM arrived.
    static bool raised() noexcept;
    /// Empties the pipe (the flag stays set).
    static void drain() noexcept;
};

/// Why streaming the output stopped.
enum class write_end
{
    ok,
    reader_gone, ///< EPIPE: whoever read our stdout or stderr went away
    interrupted, ///< SIGINT or SIGTERM while waiting for the reader
    timed_out,   ///< the deadline passed while the reader had no room for more
    failed,      ///< another write error (`error` holds errno)
};

/// \brief Writes streamed output to our stdout and stderr, waiting for a slow reader (its
/// backpressure reaches the command through the library) but never past the deadline or an
/// interrupt. Past the deadline, output still goes out as long as the reader has room for
/// it: only a reader that has none then has stalled.
class output_writer
{
public:
    /// `deadline`: when the run's timeout and its kill grace have expired (time_point::max()
    /// for none): what the command writes after SIGTERM belongs to the run.
    explicit output_writer(std::chrono::steady_clock::time_point deadline);

    /// Writes all of `data` to `fd`; false once it had to stop (see `why()`).
    bool write(int fd, std::string_view data);

    write_end why() const noexcept { return why_; }
    int error() const noexcept { return error_; }
    /// One line for stderr about why streaming stopped ("" for `ok`).
    std::string describe() const;

private:
    bool stop(write_end why, int err = 0);
    int wait_ms() const;

    std::chrono::steady_clock::time_point deadline_;
    bool regular_[3] = {false, false, false}; // fds 1 and 2: regular files never block
    write_end why_ = write_end::ok;
    int error_ = 0;
};

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_STREAMING_HPP
