// sandbox/session.hpp: a long-running command on pipes or a pseudo-terminal, with its output
// kept in a bounded log that clients read by byte offset and can replay after reconnecting.
#ifndef SANDBOX_SESSION_HPP
#define SANDBOX_SESSION_HPP

#include <sandbox/config.hpp>
#include <sandbox/error.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/net_proxy.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/with_diagnostics.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandbox {

/// \brief What to start as a session.
struct session_spec
{
    /// Empty: a fresh id (20 characters of `0-9a-v`, ordered by start time). Otherwise 1 to
    /// 128 characters, letters, digits and `-_.:@`.
    std::string id{};
    /// As in `exec_request`: a bare name looked up on the child's PATH, or a path.
    std::string command{};
    std::vector<std::string> args{};
    /// The same policy surface as exec, fixed at start: timeout, caps, env, work dir, and
    /// `limits.max_output_bytes` as the bound of the output log (the runner's default when
    /// unset). `input` is refused: a session takes input through `write()`.
    exec_options options{};
    /// Run on a pseudo-terminal of this size (stdout and stderr merged, tagged
    /// `output_stream::tty`); unset: pipes.
    std::optional<terminal_size> tty{};
    /// As `exec_request::on_net_record`, for the session's whole life.
    net_record_handler on_net_record{};
    /// As `exec_request::http`, for the session's whole life.
    http_hooks http{};
    /// As `exec_request::requested_by`.
    std::optional<requester> requested_by{};
};

/// Signals a session can send. `interrupt` is Ctrl-C: on a terminal it is typed (the
/// terminal's VINTR character, so the line discipline signals the foreground group, or the
/// program reads it as a key in raw mode); on pipes SIGINT goes to the command's process
/// group. The others go to the command's process group as SIGTERM, SIGKILL, SIGHUP,
/// SIGUSR1 and SIGUSR2.
enum class session_signal
{
    interrupt,
    terminate,
    kill,
    hangup,
    user1,
    user2,
};

/// One stretch of output of one stream.
struct output_chunk
{
    output_stream stream = output_stream::out;
    /// Offset of the first byte in the session's output (both streams, in arrival order).
    std::uint64_t offset = 0;
    std::string data{};
};

/// What `session::read` returns.
struct session_output
{
    std::vector<output_chunk> chunks{};
    /// Where to read next: the offset after the last byte returned. With a `sequence_gap`
    /// error (through a front end's `(error_code, session_output)`), where reading resumes.
    std::uint64_t next = 0;
    /// The command has ended and everything it wrote has been returned.
    bool eof = false;
};

/// One event of `session_watcher::next()`.
struct session_event
{
    enum class kind
    {
        output, ///< `data` from `stream`, starting at `offset`
        exited, ///< the command ended; `exit` holds how, `offset` is the output's end
        closed, ///< the session was closed; nothing follows
        /// Only from a `session_channel`: its reader fell behind; bytes `[missed_from,
        /// offset)` were not delivered (`session::read` has them while the log holds them).
        /// Under `lag_policy::close` nothing follows.
        lag,
    };
    kind what = kind::output;
    output_stream stream = output_stream::out;
    std::uint64_t offset = 0;
    /// Only with a `sequence_gap` error (through a front end's `(error_code, session_event)`):
    /// bytes `[missed_from, offset)` were dropped before this watcher got them; output
    /// resumes at `offset`.
    std::uint64_t missed_from = 0;
    std::string data{};
    std::optional<exec_result> exit{};
};

/// A snapshot of a session, as `process_manager::list()` shows it.
struct session_info
{
    std::string id{};
    std::vector<std::string> argv{};
    bool tty = false;
    int pid = 0;
    std::chrono::system_clock::time_point started_at{};
    bool running = false;
    /// Set once the command has ended.
    std::optional<exec_result> exit{};
};

/// What a `session_channel` does once its reader fell behind and got the `lag` event.
enum class lag_policy : int
{
    close = 0,  ///< nothing follows the lag event: the channel ends (as Go's ProcessWatcher)
    resume = 1, ///< events go on from the first byte there was room for again
};

/// \brief How `session::watch_channel` makes a channel.
struct channel_options
{
    /// Events the queue holds (0 counts as 1). An event that finds it full is dropped and a
    /// `lag` event owed; the session never waits for the reader.
    std::size_t capacity = 64;
    lag_policy on_lag = lag_policy::close;
    /// The first output byte to deliver (0: everything the log retains).
    std::uint64_t from = 0;
};

namespace detail {
struct session_state;
struct session_access;
} // namespace detail

class session_watcher;
class session_channel;

/// \brief A running (or ended, not yet closed) command.
///
/// Made by `process_manager::start`. The awaitable members and the `async_*` front ends may
/// be called from any executor: their work runs on the session's executor (the runner's) and
/// the caller resumes on its own. The synchronous members (`resize`, `signal`,
/// `close_input`, `watch`, `info` and the getters other than `id()`) touch the state
/// directly: call them on the session's executor, or use `async_resize`, `async_signal`, `async_close_input` from
/// elsewhere. Operations keep the session's state alive while they run.
///
/// A session started through a `process_manager` is held by it until `close()`, the
/// retention after its exit, or the manager's destruction: dropping every handle of yours
/// does not end it (`find(id)` gives it back). One started by `start_session` alone is ended
/// when its last handle goes.
///
/// Every awaitable here throws `sandbox::error` (a `boost::system::system_error`, with the
/// diagnostics). Cancelling one (terminal or partial cancellation of the awaiting coroutine)
/// ends that operation only, never the command: a cancelled `read` consumes nothing, a
/// cancelled `write` stops writing at once (a prefix may have been written, never anything
/// later), a cancelled `wait` leaves the command running.
class SANDBOX_DECL session
{
public:
    using executor_type = boost::asio::any_io_executor;

    explicit session(std::shared_ptr<detail::session_state> st) noexcept;
    session(const session&) = delete;
    session& operator=(const session&) = delete;
    ~session();

    executor_type get_executor() const noexcept;
    const std::string& id() const noexcept;
    /// The command's pid (in the namespace of its backend's supervisor).
    int pid() const noexcept;
    bool is_tty() const noexcept;
    bool running() const noexcept;
    bool closed() const noexcept;
    session_info info() const;
    /// Offset one past the newest output byte (the total produced so far).
    std::uint64_t output_end() const noexcept;

    /// \brief Output from offset `from`, at most `max_bytes`; waits while there is none and
    /// the command runs.
    ///
    /// `errc::sequence_gap` when the log dropped that offset (`diag.observed` says where
    /// reading can resume; the same rule as `session_watcher::next`), `errc::validation` for `max_bytes == 0` or an offset past the
    /// end, `errc::session_closed` after `close()`. Output stays readable after the command
    /// ends until the session is closed; then `eof` is set once all of it was returned.
    boost::asio::awaitable<session_output> read(std::uint64_t from, std::size_t max_bytes);

    /// \brief Writes all of `data` to the command's stdin (or the terminal), after writes
    /// issued before it. Fails with the OS error (`broken_pipe`) once the command has
    /// ended or its input was closed, `errc::session_closed` after `close()`.
    boost::asio::awaitable<void> write(std::string data);

    /// End of input: closes the stdin pipe, or types the terminal's VEOF character (Ctrl-D).
    boost::system::error_code close_input();

    /// The terminal's new size (the command gets SIGWINCH). `errc::not_available` on pipes
    /// and once the command has ended; `errc::validation` for a zero dimension.
    boost::system::error_code resize(terminal_size size);

    /// Sends `sig` (see `session_signal`). `no_such_process` once the command has ended.
    boost::system::error_code signal(session_signal sig);

    /// \brief SIGTERM to the tree, SIGKILL after `grace` (zero: at once); returns the exit
    /// once the whole tree is gone (status `terminated`, or `exited` when the command caught
    /// SIGTERM and exited with its own code). Returns the exit at once if it has ended.
    boost::asio::awaitable<exec_result> terminate(
        std::chrono::nanoseconds grace = std::chrono::seconds(2));

    /// \brief How the command ended, once it has: status, exit code or signal, usage.
    ///
    /// A timeout or a cap is a result here (status `timed_out` or `budget_exceeded`, with
    /// `diag`), not an exception. Repeatable, and works after `close()`.
    boost::asio::awaitable<exec_result> wait();

    /// \brief Kills the tree if it still runs, waits for it (at most 5 s; the supervisor's
    /// worker finishes the kill regardless), releases the input and forgets the session in
    /// its manager. Idempotent. Blocked reads and watchers then end with
    /// `errc::session_closed` (watchers after a `closed` event).
    boost::asio::awaitable<void> close();

    /// \brief An event stream from offset `from` (0: everything retained): replay, live
    /// output, exit and close. See `session_watcher`. `errc::session_closed` after close.
    session_watcher watch(std::uint64_t from = 0);

    /// \brief The same events pushed into a bounded queue, for a reader that wants a channel
    /// (the Go package's `ProcessWatcher`): see `session_channel`. `errc::session_closed`
    /// after close.
    session_channel watch_channel(channel_options o = {});

private:
    friend struct detail::session_access;
    std::shared_ptr<detail::session_state> st_;
};

/// \brief Events of one session, for one consumer.
///
/// A watcher holds no copy of the output, only its offset into the session's bounded log, so
/// the command is never slowed and no event is dropped silently: a consumer that falls
/// behind the log's bound gets `errc::sequence_gap` from `next()`, exactly as `read` does:
/// `diag.observed` (and `position()` afterwards) is where the stream resumes, the bytes from
/// its previous position up to there are gone; the next `next()` continues. Output, then
/// one `exited`, then one `closed`; after `closed`, `next()` fails with
/// `errc::session_closed`. Any number of watchers per session, each used by one consumer at
/// a time.
class SANDBOX_DECL session_watcher
{
public:
    session_watcher(std::shared_ptr<detail::session_state> st, std::uint64_t from,
                    std::size_t max_chunk);
    session_watcher(session_watcher&&) noexcept;
    session_watcher& operator=(session_watcher&&) noexcept;
    ~session_watcher();

    /// The next event; waits while there is none. Cancelling it loses nothing. Runs on the
    /// session's executor, whichever executor awaits it.
    boost::asio::awaitable<session_event> next();
    /// The offset of the next output byte this watcher will see (read it on the session's
    /// executor or between calls of `next()`).
    std::uint64_t position() const noexcept;

    using executor_type = boost::asio::any_io_executor;
    /// The session's executor, where `next()` runs (empty for a moved-from watcher).
    executor_type get_executor() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

/// \brief A session's events pushed into a bounded queue for one reader.
///
/// A producer on the session's executor reads the session's log (through a watcher) as
/// output arrives and pushes each event into the queue, never waiting for the reader: an
/// event that finds the queue full is dropped, and the reader gets, at the first free place
/// of the queue, a `session_event::kind::lag` event saying which bytes it missed
/// (`[missed_from, offset)`, still readable with `session::read` while the log holds them).
/// A gap of the log itself (`sequence_gap` of a watcher) is announced the same way. Under
/// `lag_policy::close` the channel ends after the lag event; under `lag_policy::resume` it
/// goes on (an `exited` or `closed` event dropped meanwhile comes right after the lag
/// event). Otherwise: output, one `exited`, one `closed`. Once the last event was received,
/// or after `close()`, `receive()` fails with `boost::asio::experimental::error::
/// channel_closed`. Use it on the session's executor (one reader at a time); destroying it
/// closes it. The queue holds at most `capacity` events (copies of their output).
class SANDBOX_DECL session_channel
{
public:
    session_channel(std::shared_ptr<detail::session_state> st, channel_options o);
    session_channel(session_channel&&) noexcept;
    session_channel& operator=(session_channel&&) noexcept;
    ~session_channel();

    /// The next event; waits while the queue is empty. Cancelling it loses nothing.
    boost::asio::awaitable<session_event> receive();
    /// Ends the channel: queued events are dropped, the producer stops, a waiting
    /// `receive()` fails with `channel_closed`. Idempotent.
    void close() noexcept;
    /// Events queued now.
    std::size_t size() const noexcept;

    using executor_type = boost::asio::any_io_executor;
    executor_type get_executor() const noexcept;

    struct impl; // the library's

private:
    std::shared_ptr<impl> impl_;
};

namespace detail {
template <>
inline constexpr bool resumes_with_exception<session_output> = true;
template <>
inline constexpr bool resumes_with_exception<session_event> = true;

template <class T>
using value_handler = boost::asio::any_completion_handler<void(boost::system::error_code, T)>;
using void_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

SANDBOX_DECL void async_read_impl(session* s, std::uint64_t from, std::size_t max_bytes,
                                  diagnostics_sink sink, value_handler<session_output> h);
SANDBOX_DECL void async_write_impl(session* s, std::string data, diagnostics_sink sink,
                                   void_handler h);
SANDBOX_DECL void async_wait_impl(session* s, diagnostics_sink sink, value_handler<exec_result> h);
SANDBOX_DECL void async_terminate_impl(session* s, std::chrono::nanoseconds grace,
                                       diagnostics_sink sink, value_handler<exec_result> h);
SANDBOX_DECL void async_close_impl(session* s, diagnostics_sink sink, void_handler h);
SANDBOX_DECL void async_close_input_impl(session* s, diagnostics_sink sink, void_handler h);
SANDBOX_DECL void async_resize_impl(session* s, terminal_size size, diagnostics_sink sink,
                                    void_handler h);
SANDBOX_DECL void async_signal_impl(session* s, session_signal sig, diagnostics_sink sink,
                                    void_handler h);
SANDBOX_DECL void async_next_impl(session_watcher* w, diagnostics_sink sink,
                                  value_handler<session_event> h);
SANDBOX_DECL void async_receive_impl(session_channel* c, diagnostics_sink sink,
                                     value_handler<session_event> h);
} // namespace detail

/// \name Completion-token front ends of the session members
///
/// \par Completion signature
/// `void(boost::system::error_code, T)`, T being what the member returns (`session_output`,
/// `exec_result`, `session_event`), or `void(boost::system::error_code)` for the members
/// that return nothing (`async_write`, `async_close`, `async_close_input`, `async_resize`,
/// `async_signal`). A failure's value is `T{}`, except that a `sequence_gap` keeps the
/// position to resume at: `session_output::next`, `session_event::offset` (with
/// `missed_from`).
///
/// \par Default token
/// `with_diagnostics(boost::asio::deferred)`, as `async_exec`: `co_await async_read(s, 0,
/// 4096)` returns the value or throws `sandbox::error` with the diagnostics the member would
/// throw (`diag.observed` of a gap, for instance). Plain tokens (a callback, `as_tuple(...)`,
/// `deferred`) get the pair; wrap them in `with_diagnostics(...)` to get the exception with its
/// diagnostics.
///
/// \par Errors
/// Those of the member: `errc::sequence_gap`, `errc::validation`, `errc::session_closed`,
/// `errc::not_available` (resize), OS errors (`broken_pipe` from a write once the command
/// ended, `no_such_process` from a signal), `operation_aborted` (cancelled).
///
/// \par Per-operation cancellation
/// `terminal` and `partial` both reach the operation (and end it only, never the command; see
/// the members). `total` is not supported.
///
/// \par Executor and threads
/// The work runs on the session's executor whatever executor initiates it; the handler runs
/// on its associated executor and never inside the initiating function.
///
/// \par Object lifetimes
/// The session (the watcher for `async_next`) must outlive the initiation: with `deferred`,
/// until the operation is started. Once started, the operation keeps the session's state
/// (the watcher's) alive itself. Arguments are copied or moved into the operation.
/// @{
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_read(session& s, std::uint64_t from, std::size_t max_bytes,
                              CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, session_output)>(
        &detail::async_read_impl, std::forward<CompletionToken>(token), &s, from, max_bytes);
}

template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_write(session& s, std::string data, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code)>(
        &detail::async_write_impl, std::forward<CompletionToken>(token), &s, std::move(data));
}

template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_wait(session& s, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, exec_result)>(
        &detail::async_wait_impl, std::forward<CompletionToken>(token), &s);
}

template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_terminate(session& s, std::chrono::nanoseconds grace,
                                   CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, exec_result)>(
        &detail::async_terminate_impl, std::forward<CompletionToken>(token), &s, grace);
}

template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_close(session& s, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code)>(
        &detail::async_close_impl, std::forward<CompletionToken>(token), &s);
}

template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_close_input(session& s, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code)>(
        &detail::async_close_input_impl, std::forward<CompletionToken>(token), &s);
}

template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_resize(session& s, terminal_size size, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code)>(
        &detail::async_resize_impl, std::forward<CompletionToken>(token), &s, size);
}

template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_signal(session& s, session_signal sig, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code)>(
        &detail::async_signal_impl, std::forward<CompletionToken>(token), &s, sig);
}

/// The next event of `w` (see `session_watcher`); runs on the session's executor.
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_next(session_watcher& w, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, session_event)>(
        &detail::async_next_impl, std::forward<CompletionToken>(token), &w);
}

/// The next event of `c` (see `session_channel`); runs on the session's executor.
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_receive(session_channel& c, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, session_event)>(
        &detail::async_receive_impl, std::forward<CompletionToken>(token), &c);
}
/// @}

} // namespace sandbox

#endif // SANDBOX_SESSION_HPP
