// tools/sandbox-run/terminal_session.cpp: `sandbox-run --tty` (see terminal_session.hpp).
#include "terminal_session.hpp"
#include "raw_terminal.hpp"
#include "streaming.hpp"

#include <sandbox/error.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cerrno>
#include <csignal>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

namespace sandbox::cli {

namespace {

namespace asio = boost::asio;

// Our keys to the command; end of our input becomes its VEOF.
asio::awaitable<void> pump_input(std::shared_ptr<session> s)
{
    auto ex = co_await asio::this_coro::executor;
    asio::posix::stream_descriptor in(ex, ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
    char buf[4096];
    while (s->running())
    {
        boost::system::error_code ec;
        co_await in.async_wait(asio::posix::stream_descriptor::wait_read,
                               asio::redirect_error(asio::use_awaitable, ec));
        if (ec)
            co_return;
        // Readable, so this read returns at once (raw mode: VMIN 1, VTIME 0).
        const ssize_t n = ::read(in.native_handle(), buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
        {
            s->close_input();
            co_return;
        }
        co_await s->write(std::string(buf, static_cast<std::size_t>(n)));
    }
}

// The run's signals: SIGWINCH resizes the command's terminal; SIGINT or SIGTERM sent to
// sandbox-run kill the whole tree (and end a write that waits for our terminal).
asio::awaitable<void> pump_signals(std::shared_ptr<session> s, asio::signal_set& signals,
                                   output_sink& sink, bool& hit)
{
    for (;;)
    {
        boost::system::error_code ec;
        const int sig = co_await signals.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !s->running())
            co_return;
        if (sig == SIGWINCH)
        {
            s->resize(size_of(STDIN_FILENO));
            continue;
        }
        hit = true;
        sink.interrupt();
        co_await s->terminate(std::chrono::nanoseconds(0));
        co_return;
    }
}

// SIGINT or SIGTERM while the session is being started (an --ask question may be
// pending): the start is cancelled. Shared: the watch can outlive a failed start.
struct start_watch
{
    asio::cancellation_signal cancel;
    bool active = true;
    bool hit = false;
};

asio::awaitable<void> watch_start(std::shared_ptr<start_watch> w, asio::signal_set& signals)
{
    for (;;)
    {
        boost::system::error_code ec;
        const int sig = co_await signals.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !w->active)
            co_return;
        if (sig == SIGWINCH)
            continue; // the terminal is sized when the session starts
        w->hit = true;
        w->cancel.emit(asio::cancellation_type::terminal);
        co_return;
    }
}

// Shows output on our terminal: true once written, false once the sink stopped.
asio::awaitable<bool> show(output_sink& sink, std::string_view data)
{
    co_return co_await asio::async_initiate<decltype(asio::use_awaitable), void(bool)>(
        [&sink, data](auto done) {
            auto h = std::make_shared<decltype(done)>(std::move(done)); // copyable for the sink
            sink.write(output_stream::out, data, [h](bool ok) { std::move (*h)(ok); });
        },
        asio::use_awaitable);
}

// The output from `at` on, or, where the log outran us (a small --max-output), a note of
// how much was dropped and where reading resumes.
asio::awaitable<session_output> next_output(session& s, std::uint64_t at)
{
    std::uint64_t resume = 0;
    try
    {
        co_return co_await s.read(at, 64 * 1024);
    }
    catch (const sandbox::error& e)
    {
        if (e.code() != errc::sequence_gap)
            throw;
        resume = static_cast<std::uint64_t>(e.diag().observed);
    }
    session_output o;
    o.next = resume;
    o.chunks.push_back({output_stream::out, at,
                        "\r\n[sandbox-run: " + std::to_string(resume - at) +
                            " bytes of output dropped]\r\n"});
    co_return o;
}

struct outcome_of_run
{
    boost::system::error_code start_error;
    exec_result result;
    bool interrupted = false;
};

asio::awaitable<void> run_session(sandbox::runner& r, run_config& cfg,
                                  asio::signal_set& signals, output_sink& sink,
                                  outcome_of_run& out)
{
    session_spec spec;
    spec.command = cfg.request.command;
    spec.args = cfg.request.args;
    spec.options = cfg.request.options;
    spec.tty = size_of(STDIN_FILENO);
    std::shared_ptr<session> s;
    auto ex = co_await asio::this_coro::executor;
    auto watch = std::make_shared<start_watch>();
    asio::co_spawn(ex, watch_start(watch, signals), asio::detached);
    outcome<std::shared_ptr<session>> started =
        make_failure(errc::not_available, "this backend has no sessions, so no --tty");
    if (r.sessions())
    {
        try
        {
            started = co_await asio::co_spawn(
                ex, r.sessions()->try_start(std::move(spec)),
                asio::bind_cancellation_slot(watch->cancel.slot(), asio::use_awaitable));
        }
        catch (const boost::system::system_error& e) // a wait refused after a cancellation
        {
            started = failure{e.code(), diagnostics{.message = e.what()}};
        }
    }
    if (started)
        s = std::move(*started);
    else
    {
        out.start_error = started.error().code;
        out.result.diag = std::move(started).error().diag;
    }
    watch->active = false;
    out.interrupted = watch->hit;
    boost::system::error_code not_watching;
    signals.cancel(not_watching); // the watch ends; pump_signals waits anew
    if (!s)
        co_return;
    if (out.interrupted) // the signal came as the start completed: it still wins
    {
        out.result = co_await s->terminate(std::chrono::nanoseconds(0));
        co_await s->close();
        co_return;
    }
    raw_mode raw(STDIN_FILENO);
    asio::co_spawn(ex, pump_input(s), asio::detached);
    asio::co_spawn(ex, pump_signals(s, signals, sink, out.interrupted), asio::detached);
    for (std::uint64_t at = 0;;)
    {
        auto o = co_await next_output(*s, at);
        at = o.next;
        for (const auto& c : o.chunks)
            co_await show(sink, c.data); // once our terminal is gone, nowhere to go
        if (o.eof)
            break;
    }
    out.result = co_await s->wait();
    co_await s->close();
    boost::system::error_code ignored;
    signals.cancel(ignored);
}

} // namespace

int run_terminal_session(asio::io_context& ioc, sandbox::runner& r, run_config& cfg,
                         asio::signal_set& signals)
{
    if (!::isatty(STDIN_FILENO))
    {
        say("--tty needs a terminal on stdin");
        return exit_sandbox_failure;
    }
    signals.add(SIGWINCH);
    output_sink sink(ioc.get_executor());
    outcome_of_run out;
    std::exception_ptr failure;
    asio::co_spawn(ioc, run_session(r, cfg, signals, sink, out), [&](std::exception_ptr e) {
        failure = e;
        ioc.stop(); // the input and resize pumps end with the io_context
    });
    ioc.run();
    if (failure)
        std::rethrow_exception(failure);
    if (out.interrupted && out.start_error)
    {
        say("interrupted before the session started; nothing ran");
        return exit_cancelled;
    }
    if (out.start_error)
    {
        say(sandbox::error_name(out.start_error) + ": " + sandbox::to_string(out.result.diag));
        return exit_status_for(out.start_error, out.result);
    }
    if (out.interrupted)
        return exit_cancelled;
    const auto& res = out.result;
    if (res.status != exec_status::exited && res.status != exec_status::signaled &&
        !res.diag.message.empty())
        say(sandbox::to_string(res.diag));
    return exit_status_for({}, res);
}

} // namespace sandbox::cli
