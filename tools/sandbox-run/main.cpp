// tools/sandbox-run/main.cpp: sandbox-run: run one command under policy from the shell.
#include "cli.hpp"

#include <sandbox/enforcement.hpp>
#include <sandbox/error.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <cerrno>
#include <csignal>
#include <exception>
#include <string>
#include <string_view>

#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace cli = sandbox::cli;

// Writes all of `data` to `fd` (binary-safe); false on an error other than EINTR.
bool write_all(int fd, std::string_view data)
{
    while (!data.empty())
    {
        ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0)
        {
            if (errno == EINTR)
                continue;
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

int run(cli::run_config& cfg)
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(), cfg.runner);

    if (cfg.enforcement)
    {
        write_all(STDOUT_FILENO, sandbox::to_json(runner.enforcement()) + "\n");
        return 0;
    }

    asio::cancellation_signal cancel;
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    bool done = false;
    boost::system::error_code result_ec;
    sandbox::exec_result result;

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

    if (cfg.json)
    {
        write_all(STDOUT_FILENO, cli::result_to_json(result_ec, result) + "\n");
    }
    else
    {
        write_all(STDOUT_FILENO, result.out.data);
        write_all(STDERR_FILENO, result.err.data);
        if (result_ec)
        {
            std::string why = sandbox::to_string(result.diag);
            if (why.empty())
                why = result_ec.message();
            print_error(sandbox::error_name(result_ec) + ": " + why);
        }
    }
    return cli::exit_status_for(result_ec, result);
}

} // namespace

int main(int argc, char** argv)
{
    auto cfg = cli::parse_command_line(argc, argv);
    if (!cfg)
    {
        const sandbox::diagnostics& d = cfg.error().diag;
        print_error(d.message.empty() ? cfg.error().code.message() : d.message);
        if (cfg.error().code == sandbox::errc::validation)
        {
            // (appended, not `"\n" + usage()`: GCC 12 at -O3 reports a false -Wrestrict)
            std::string text(1, '\n');
            text += cli::usage();
            write_all(STDERR_FILENO, text);
        }
        return cli::exit_sandbox_failure;
    }
    if (cfg->help)
    {
        write_all(STDOUT_FILENO, cli::usage());
        return 0;
    }
    try
    {
        return run(*cfg);
    }
    catch (const std::exception& e)
    {
        print_error(std::string("internal: ") + e.what());
        return cli::exit_sandbox_failure;
    }
}
