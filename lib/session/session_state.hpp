// lib/session/session_state.hpp: the state behind a session handle, shared with its pending
// operations and with the callbacks of the supervised-child core.
#ifndef SANDBOX_LIB_SESSION_SESSION_STATE_HPP
#define SANDBOX_LIB_SESSION_SESSION_STATE_HPP

#include <sandbox/session.hpp>

#include "exec/child_control.hpp"
#include "session/output_log.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sandbox::detail {

struct session_state : std::enable_shared_from_this<session_state>
{
    session_state(boost::asio::any_io_executor ex, std::size_t log_capacity)
        : ex(ex), log(log_capacity), input(ex), changed(ex)
    {
        changed.expires_at(std::chrono::steady_clock::time_point::max());
    }

    /// Wakes every operation waiting for news (output, spawn, exit, close, a write done).
    void notify() { changed.cancel(); }
    /// Waits for `notify()`; throws `operation_aborted` when the awaiting coroutine is
    /// cancelled.
    boost::asio::awaitable<void> wait_change();
    /// The same, without throwing: `operation_aborted` once the waiter is cancelled.
    boost::asio::awaitable<boost::system::error_code> next_change();

    void on_output(output_stream s, std::string_view data);
    void on_done(boost::system::error_code ec, exec_result r);
    /// The end of every close (also a cancelled or abandoned one): closed, input released,
    /// waiters woken, the registry told once.
    void finish_close();

    boost::asio::any_io_executor ex;
    std::string id;
    std::vector<std::string> argv;
    bool tty = false;
    int pid = 0;
    std::chrono::system_clock::time_point started_at{};
    output_log log;
    std::shared_ptr<child_control> child;
    /// Our end of the command's stdin pipe, or our copy of the terminal's master.
    boost::asio::posix::stream_descriptor input;
    boost::asio::steady_timer changed;
    bool exited = false;
    bool closed = false;
    bool closing = false;
    bool writing = false;
    bool close_input_after_write = false;
    /// Set by a spawn failure: what start() reports.
    boost::system::error_code start_error{};
    exec_result exit{};
    /// Hooks of the registry that holds the session (weakly bound).
    std::function<void()> on_exit_hook, on_close_hook;
};

/// A failed read or next() keeps where to resume (the one gap rule): every file that
/// launches an operation with these values must see them (session.cpp defines them).
struct caught;
void fill_failed(session_output& o, const caught& c);
void fill_failed(session_event& e, const caught& c);

/// Throws `sandbox::error` with `code`, a message and the field or limit it concerns.
[[noreturn]] void throw_failure(errc code, std::string message, std::string limit = {});

/// The registry's way into a session's state (for its hooks).
struct session_access
{
    static const std::shared_ptr<session_state>& state(session& s) noexcept { return s.st_; }
};

/// Ids: generated ones are 20 characters of base32hex (a 4-byte second count, 5 random bytes
/// per process, a 3-byte counter), so they sort by start time; given ones are checked.
std::string generate_session_id();
bool valid_session_id(std::string_view id) noexcept;

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SESSION_SESSION_STATE_HPP
