// tools/sandbox-run/main.cpp: sandbox-run: run one command under policy from the shell.
#include "cli.hpp"

#include <sandbox/enforcement.hpp>
#include <sandbox/error.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <exception>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace cli = sandbox::cli;

// Writes all of `data` to `fd` (binary-safe), waiting when the descriptor is non-blocking
// and full; false (errno set) on another error, EPIPE included (SIGPIPE is ignored).
bool write_all(int fd, std::string_view data)
{
    while (!data.empty())
    {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0)
        {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
            {
                pollfd p{fd, POLLOUT, 0};
                ::poll(&p, 1, -1);
                continue;
            }
            return false;
        }
        data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

void print_error(std::string_view text)
{
    std::string line = "sandbox-run: ";
    line += text;
    line += '\n';
    write_all(STDERR_FILENO, line);
}

// Watches SIGINT and SIGTERM until `done`; each one asks for terminal cancellation, which
// makes the library kill the whole tree and complete with operation_aborted.
void watch_signals(asio::signal_set& signals, asio::cancellation_signal& cancel, const bool& done)
{
    signals.async_wait([&signals, &cancel, &done](boost::system::error_code ec, int) {
        if (ec || done)
            return;
        cancel.emit(asio::cancellation_type::terminal);
        watch_signals(signals, cancel, done);
    });
}

// The outcome of waiting for a FIFO's writer: ready, or a result that ends the run.
struct fifo_wait
{
    bool ready = false;
    boost::system::error_code ec;
    sandbox::exec_result result;
};

// Waits until the --stdin-file FIFO has data or a writer that came and went, as a shell's
// `< fifo` waits for a writer, but under the timeout and SIGINT/SIGTERM; the time spent is
// taken from the timeout, which covers the whole run.
fifo_wait wait_for_writer(asio::io_context& ioc, sandbox::exec_request& req)
{
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    asio::posix::stream_descriptor fifo(ioc, ::dup(req.stdin_fd->get()));
    asio::steady_timer timer(ioc);
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    fifo_wait w;
    auto finish = [&] {
        boost::system::error_code ignored;
        fifo.cancel(ignored);
        timer.cancel();
        signals.cancel(ignored);
    };
    fifo.async_wait(asio::posix::stream_descriptor::wait_read, [&](boost::system::error_code e) {
        if (!e)
            w.ready = true;
        else if (e != asio::error::operation_aborted)
            w.ec = e;
        finish();
    });
    if (req.options.timeout > std::chrono::nanoseconds::zero())
    {
        timer.expires_after(req.options.timeout);
        timer.async_wait([&](boost::system::error_code e) {
            if (e || w.ready)
                return;
            w.ec = sandbox::errc::timeout;
            w.result.diag.message = "timed out waiting for a writer on the --stdin-file FIFO";
            w.result.diag.limit = "timeout";
            finish();
        });
    }
    signals.async_wait([&](boost::system::error_code e, int) {
        if (e || w.ready)
            return;
        w.ec = asio::error::operation_aborted;
        w.result.diag.message = "interrupted while waiting for a writer on the --stdin-file FIFO";
        finish();
    });
    ioc.run();
    ioc.restart();
    // Asio made the descriptor non-blocking to wait on it, and the dup shares that flag with
    // the command's stdin: make it blocking again, or the command would read EAGAIN.
    boost::system::error_code ignored;
    fifo.close(ignored);
    const int fd = req.stdin_fd->get();
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    {
        w.ready = false;
        w.ec = boost::system::error_code(errno, boost::system::system_category());
        w.result.diag.message = "cannot make the --stdin-file FIFO blocking again";
    }
    if (w.ready && req.options.timeout > std::chrono::nanoseconds::zero())
    {
        auto left = req.options.timeout - (clock::now() - start);
        req.options.timeout = std::max<std::chrono::nanoseconds>(left, std::chrono::nanoseconds(1));
    }
    return w;
}

// Prints the outcome (JSON, or the output passed through plus a line on failure and on
// truncation) and returns the exit status.
int report(const cli::run_config& cfg, const boost::system::error_code& ec,
           const sandbox::exec_result& result)
{
    if (cfg.json)
    {
        write_all(STDOUT_FILENO, cli::result_to_json(ec, result) + "\n");
        return cli::exit_status_for(ec, result);
    }
    // The output was streamed as it came (on_output); nothing captured is left to print.
    if (ec)
    {
        std::string why = sandbox::to_string(result.diag);
        if (why.empty())
            why = ec.message();
        print_error(sandbox::error_name(ec) + ": " + why);
    }
    return cli::exit_status_for(ec, result);
}

int run(cli::run_config& cfg)
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(), cfg.runner);

    if (cfg.enforcement)
    {
        write_all(STDOUT_FILENO, sandbox::to_json(runner.enforcement()) + "\n");
        return 0;
    }

    boost::system::error_code result_ec;
    sandbox::exec_result result;
    if (cfg.stdin_fifo)
    {
        auto w = wait_for_writer(ioc, cfg.request);
        if (!w.ready)
            return report(cfg, w.ec, w.result);
    }

    asio::cancellation_signal cancel;
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    bool done = false;
    bool reader_gone = false;
    if (!cfg.json)
        cfg.request.on_output = [&reader_gone](sandbox::output_stream s, std::string_view data) {
            // Blocking writes: a slow reader slows the command (its pipe fills), as in a shell
            // pipeline. A reader that went away ends the run.
            if (write_all(s == sandbox::output_stream::out ? STDOUT_FILENO : STDERR_FILENO, data))
                return true;
            reader_gone = reader_gone || errno == EPIPE;
            return false;
        };

    watch_signals(signals, cancel, done);
    sandbox::async_exec(runner, std::move(cfg.request),
                        asio::bind_cancellation_slot(
                            cancel.slot(), [&](boost::system::error_code ec,
                                               sandbox::exec_result r) {
                                done = true;
                                result_ec = ec;
                                result = std::move(r);
                                boost::system::error_code ignored;
                                signals.cancel(ignored);
                            }));
    ioc.run();
    if (reader_gone)
    {
        print_error("the reader of the output went away; process tree killed");
        return cli::exit_output_closed;
    }
    return report(cfg, result_ec, result);
}

// Bad usage: one line and a pointer to --help, as command-line tools do.
int usage_error(const sandbox::failure& f)
{
    const sandbox::diagnostics& d = f.diag;
    print_error(d.message.empty() ? f.code.message() : d.message);
    if (f.code == sandbox::errc::validation)
        write_all(STDERR_FILENO, "Try 'sandbox-run --help'.\n");
    return cli::exit_sandbox_failure;
}

int main_checked(int argc, char** argv)
{
    auto cfg = cli::parse_command_line(argc, argv);
    if (!cfg)
        return usage_error(cfg.error());
    if (cfg->help)
    {
        write_all(STDOUT_FILENO, cli::usage());
        return 0;
    }
    return run(*cfg);
}

} // namespace

int main(int argc, char** argv)
{
    // A closed stdout or stderr must end the run (EPIPE), not kill us: the helper would then
    // kill the tree without a word. Commands start with default dispositions regardless.
    ::signal(SIGPIPE, SIG_IGN);
    try
    {
        return main_checked(argc, argv);
    }
    catch (const std::exception& e)
    {
        print_error(std::string("internal: ") + e.what());
    }
    catch (...)
    {
        print_error("internal: unknown exception");
    }
    return cli::exit_sandbox_failure;
}
