// tools/sandbox-run/main.cpp: sandbox-run: run one command under policy from the shell.
#include "cli.hpp"
#include "streaming.hpp"
#include "terminal_session.hpp"

#include <sandbox/enforcement.hpp>
#include <sandbox/error.hpp>
#include <sandbox/bwrap_runner.hpp>
#include <sandbox/local_runner.hpp>
#include <sandbox/policy.hpp>

#include "ask_terminal.hpp"
#include <sandbox/runner.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
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

// One line on stderr; the text is escaped (`printable_text`): it may quote the command's
// name, arguments or paths, which must not act on the caller's terminal.
void print_error(std::string_view text)
{
    std::string line = "sandbox-run: ";
    line += cli::printable_text(text);
    line += '\n';
    write_all(STDERR_FILENO, line);
}

// Watches the interrupt pipe until `done`: each SIGINT or SIGTERM asks for terminal
// cancellation, which makes the library kill the whole tree and complete with
// operation_aborted.
void watch_interrupts(asio::posix::stream_descriptor& pipe, asio::cancellation_signal& cancel,
                      const bool& done)
{
    pipe.async_wait(asio::posix::stream_descriptor::wait_read,
                    [&pipe, &cancel, &done](boost::system::error_code ec) {
                        if (ec || done)
                            return;
                        cli::interrupts::drain();
                        cancel.emit(asio::cancellation_type::terminal);
                        watch_interrupts(pipe, cancel, done);
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
fifo_wait wait_for_writer(asio::io_context& ioc, asio::posix::stream_descriptor& interrupt,
                          sandbox::exec_request& req)
{
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    asio::posix::stream_descriptor fifo(ioc, ::fcntl(req.stdin_fd->get(), F_DUPFD_CLOEXEC, 0));
    asio::steady_timer timer(ioc);
    fifo_wait w;
    bool done = false;
    auto finish = [&] {
        done = true;
        boost::system::error_code ignored;
        fifo.cancel(ignored);
        timer.cancel();
        interrupt.cancel(ignored);
    };
    fifo.async_wait(asio::posix::stream_descriptor::wait_read, [&](boost::system::error_code e) {
        if (done)
            return;
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
            if (e || done)
                return;
            w.ec = sandbox::errc::timeout;
            w.result.diag.message = "timed out waiting for a writer on the --stdin-file FIFO";
            w.result.diag.limit = "timeout";
            finish();
        });
    }
    interrupt.async_wait(asio::posix::stream_descriptor::wait_read,
                         [&](boost::system::error_code e) {
                             if (e || done)
                                 return;
                             finish();
                         });
    ioc.run();
    ioc.restart();
    if (cli::interrupts::raised()) // also when it came together with the writer
    {
        w.ready = false;
        w.ec = asio::error::operation_aborted;
        w.result.diag.message = "interrupted while waiting for a writer on the --stdin-file FIFO";
    }
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
        cli::shrink_timeout(req.options, req.options.timeout - (clock::now() - start));
    return w;
}

// Prints the outcome (JSON, or a line on failure: the output itself was streamed) and
// returns the exit status.
int report(const cli::run_config& cfg, const boost::system::error_code& ec,
           const sandbox::exec_result& result)
{
    if (cfg.json)
    {
        write_all(STDOUT_FILENO, cli::result_to_json(ec, result) + "\n");
        return cli::exit_status_for(ec, result);
    }
    if (ec)
    {
        std::string why = sandbox::to_string(result.diag);
        if (why.empty())
            why = ec.message();
        print_error(sandbox::error_name(ec) + ": " + why);
    }
    return cli::exit_status_for(ec, result);
}

// When streaming had to stop, that decides the exit status and the message.
int report_stream_end(const cli::output_writer& out)
{
    print_error(out.describe());
    switch (out.why())
    {
    case cli::write_end::reader_gone: return cli::exit_output_closed;
    case cli::write_end::interrupted: return cli::exit_cancelled;
    case cli::write_end::timed_out: return cli::exit_timeout;
    default: return cli::exit_sandbox_failure;
    }
}

std::unique_ptr<sandbox::runner> make_runner(asio::io_context& ioc, const cli::run_config& cfg)
{
    if (cfg.backend == "bwrap")
    {
        sandbox::bwrap_runner_options o;
        o.root = cfg.runner.root;
        o.writable_paths = cfg.bwrap.writable;
        o.read_deny = cfg.bwrap.read_deny;
        o.write_deny = cfg.bwrap.write_deny;
        o.unix_sockets = cfg.bwrap.unix_sockets;
        o.sandbox_user = cfg.bwrap.sandbox_user;
        o.default_max_output_bytes = cfg.runner.default_max_output_bytes;
        return std::make_unique<sandbox::bwrap_runner>(ioc.get_executor(), std::move(o));
    }
    return std::make_unique<sandbox::local_runner>(ioc.get_executor(), cfg.runner);
}

// The chain of --allow-command, --ask and --audit in front of the backend (none: the backend
// itself); `audit` gets the audit file. Throws sandbox::error when it cannot be opened.
std::unique_ptr<sandbox::runner> with_chain(std::unique_ptr<sandbox::runner> backend,
                                            const cli::run_config& cfg,
                                            std::shared_ptr<sandbox::audit_file>& audit)
{
    if (cfg.chain.empty())
        return backend;
    sandbox::local_policy p;
    p.allowed_commands = cfg.chain.allowed_commands;
    if (!cfg.chain.ask.empty())
    {
        p.approval.predicates.push_back(sandbox::command_patterns(cfg.chain.ask));
        p.approval.ask = cli::terminal_approver();
        p.approval.deadline = cfg.chain.ask_timeout;
    }
    if (!cfg.chain.audit.empty())
        p.audit = audit = std::make_shared<sandbox::audit_file>(cfg.chain.audit);
    return sandbox::compose_local(std::move(backend), std::move(p));
}

// Records the chain could not write after the run (the ones before it stop the call).
int warn_unrecorded(const sandbox::audit_file* audit, int status)
{
    if (audit && audit->failures() > 0)
        print_error("warning: " + std::to_string(audit->failures()) +
                    " audit record(s) could not be written");
    return status;
}

int run_chained(cli::run_config& cfg, asio::io_context& ioc, sandbox::runner& runner);

// A root caller's sandbox user that cannot write the root or a writable path: the run goes
// on (the command reads them; its writes there fail), and the caller is told why.
void note_unwritable(const sandbox::runner& runner)
{
    const auto e = runner.enforcement();
    for (const auto& p : e.unwritable_paths)
        print_error("note: the sandbox user (uid " +
                    std::to_string(e.command_uid.value_or(0)) + ") cannot write " + p +
                    ": the command can read it but not change it (give that user write "
                    "access, or choose it with --sandbox-user)");
}

int run(cli::run_config& cfg)
{
    asio::io_context ioc;
    auto owned = make_runner(ioc, cfg);

    if (cfg.enforcement)
    {
        // bwrap's report covers its availability probe (namespaces may be disabled here).
        if (auto* b = dynamic_cast<sandbox::bwrap_runner*>(owned.get()))
        {
            asio::co_spawn(ioc, b->check(), asio::detached);
            ioc.run();
            ioc.restart();
        }
        write_all(STDOUT_FILENO, sandbox::to_json(owned->enforcement()) + "\n");
        return 0;
    }
    note_unwritable(*owned);
    std::shared_ptr<sandbox::audit_file> audit;
    try
    {
        owned = with_chain(std::move(owned), cfg, audit);
    }
    catch (const sandbox::error& e)
    {
        sandbox::exec_result nothing;
        nothing.diag = e.diag();
        return report(cfg, e.code(), nothing);
    }
    return warn_unrecorded(audit.get(), run_chained(cfg, ioc, *owned));
}

// The run itself, once the chain (if any) is in front of the backend.
int run_chained(cli::run_config& cfg, asio::io_context& ioc, sandbox::runner& runner)
{
    if (!cli::interrupts::install())
        throw std::system_error(errno, std::generic_category(), "cannot watch SIGINT/SIGTERM");
    asio::posix::stream_descriptor interrupt(ioc, ::fcntl(cli::interrupts::fd(), F_DUPFD_CLOEXEC, 0));

    if (cfg.tty)
        return cli::run_terminal_session(ioc, runner, cfg, interrupt);
    if (cfg.stdin_fifo)
    {
        auto w = wait_for_writer(ioc, interrupt, cfg.request);
        if (!w.ready)
            return report(cfg, w.ec, w.result);
    }

    using clock = std::chrono::steady_clock;
    const auto timeout = cfg.request.options.timeout;
    // The run lasts until the timeout and then the kill grace: what the command writes after
    // its SIGTERM is part of it.
    cli::output_writer out(timeout > std::chrono::nanoseconds::zero()
                               ? clock::now() + timeout + cfg.request.options.kill_grace
                               : clock::time_point::max());
    if (!cfg.json)
        cfg.request.on_output = [&out](sandbox::output_stream s, std::string_view data) {
            return out.write(s == sandbox::output_stream::out ? STDOUT_FILENO : STDERR_FILENO,
                             data);
        };

    asio::cancellation_signal cancel;
    bool done = false;
    boost::system::error_code result_ec;
    sandbox::exec_result result;
    watch_interrupts(interrupt, cancel, done);
    sandbox::async_exec(runner, std::move(cfg.request),
                        asio::bind_cancellation_slot(
                            cancel.slot(), [&](boost::system::error_code ec,
                                               sandbox::exec_result r) {
                                done = true;
                                result_ec = ec;
                                result = std::move(r);
                                boost::system::error_code ignored;
                                interrupt.cancel(ignored);
                            }));
    // A signal that came before this point left its byte in the pipe: the watch sees it as
    // soon as the loop runs, after the exec has started and can be cancelled.
    ioc.run();
    if (out.why() != cli::write_end::ok)
        return report_stream_end(out);
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
    // Not dumpable: a command of the same uid can then neither open /proc/<us>/fd/* (our
    // terminal, the helper's control socket), nor ptrace us, nor copy our descriptors with
    // pidfd_getfd. Root commands of the local backend keep CAP_SYS_PTRACE and still can.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
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
