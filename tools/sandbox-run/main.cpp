// tools/sandbox-run/main.cpp: sandbox-run: run one command under policy from the shell.
#include "auto_backend.hpp"
#include "cli.hpp"
#include "config_run.hpp"
#include "connect.hpp"
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
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace cli = sandbox::cli;

// One line on stderr; the text is escaped (`printable_text`): it may quote the command's
// name, arguments or paths, which must not act on the caller's terminal.
void print_error(std::string_view text)
{
    std::string line = "sandbox-run: ";
    line += cli::printable_text(text);
    line += '\n';
    cli::write_fully(STDERR_FILENO, line);
}

// The outcome of waiting for a FIFO's writer: ready, or a result that ends the run.
struct fifo_wait
{
    bool ready = false;
    boost::system::error_code ec;
    sandbox::exec_result result;
};

// Waits until the --stdin-file FIFO has data or a writer that came and went, as a shell's
// `< fifo` waits for a writer, but under the run's deadline (`deadline`, set to the end of
// the timeout) and its signals; the time spent is taken from the timeout, which covers the
// whole run.
fifo_wait wait_for_writer(asio::io_context& ioc, asio::signal_set& signals,
                          asio::steady_timer& deadline, sandbox::exec_request& req)
{
    using clock = std::chrono::steady_clock;
    asio::posix::stream_descriptor fifo(ioc, ::fcntl(req.stdin_fd->get(), F_DUPFD_CLOEXEC, 0));
    fifo_wait w;
    bool done = false;
    auto finish = [&](boost::system::error_code ec, const char* why) {
        if (std::exchange(done, true))
            return; // another one's completion was already queued: the first wins
        w.ready = !ec;
        w.ec = ec;
        w.result.diag.message = why;
        boost::system::error_code ignored;
        fifo.cancel(ignored);
        deadline.cancel();
        signals.cancel(ignored);
    };
    fifo.async_wait(asio::posix::stream_descriptor::wait_read, [&](boost::system::error_code e) {
        if (e != asio::error::operation_aborted)
            finish(e, "");
    });
    deadline.async_wait([&](boost::system::error_code e) {
        if (e || done)
            return;
        finish(sandbox::errc::timeout, "timed out waiting for a writer on the --stdin-file FIFO");
        w.result.diag.limit = "timeout";
    });
    signals.async_wait([&](boost::system::error_code e, int) {
        if (!e)
            finish(asio::error::operation_aborted,
                   "interrupted while waiting for a writer on the --stdin-file FIFO");
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
        cli::shrink_timeout(req.options, deadline.expiry() - clock::now());
    return w;
}

// Prints the outcome (JSON, or a line on failure: the output itself was streamed) and
// returns the exit status.
int report(const cli::run_config& cfg, const boost::system::error_code& ec,
           const sandbox::exec_result& result)
{
    if (cfg.json)
    {
        cli::write_fully(STDOUT_FILENO, sandbox::to_json(result, ec, cfg.backend) + "\n");
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
int report_stream_end(const cli::output_sink& out)
{
    print_error(out.describe());
    return cli::exit_status_for(out.why());
}

std::unique_ptr<sandbox::bwrap_runner> make_bwrap(asio::io_context& ioc,
                                                  const cli::run_config& cfg)
{
    sandbox::bwrap_runner_options o;
    static_cast<sandbox::common_runner_options&>(o) = cfg.runner; // root, cgroup, output cap
    o.writable_paths = cfg.bwrap.writable;
    o.read_deny = cfg.bwrap.read_deny;
    o.write_deny = cfg.bwrap.write_deny;
    o.unix_sockets = cfg.bwrap.unix_sockets;
    for (const auto& p : cfg.bwrap.read_only) // after the /tmp tmpfs: shows through it
        o.extra_flags.insert(o.extra_flags.end(), {"--ro-bind", p, p});
    o.sandbox_user = cfg.bwrap.sandbox_user;
    o.proxy = cfg.net_proxy;
    return std::make_unique<sandbox::bwrap_runner>(ioc.get_executor(), std::move(o));
}

// The backend that runs the command: the one --backend names, or auto's choice.
struct backend_pick
{
    std::unique_ptr<sandbox::runner> runner; // on a refusal: the bwrap runner, for its report
    cli::backend_choice choice;
};

// `chosen` hears --backend auto's late fallback, made after bwrap's own run failed.
backend_pick pick_backend(asio::io_context& ioc, const cli::run_config& cfg,
                          std::function<void(const cli::backend_choice&)> chosen)
{
    backend_pick p;
    p.choice.backend = cfg.backend;
    if (cfg.backend == "local")
    {
        p.runner = std::make_unique<sandbox::local_runner>(ioc.get_executor(), cfg.runner);
        return p;
    }
    auto bwrap = make_bwrap(ioc, cfg);
    if (cfg.backend == "bwrap")
    {
        if (cfg.enforcement) // its report covers the probe (namespaces may be disabled here)
            cli::check_bwrap(ioc, *bwrap);
        p.runner = std::move(bwrap);
        return p;
    }
    // auto. A bad option needs no probe. --enforcement and a terminal session decide first
    // (a session's set-up failure is no value to fall back from), and so does a host with a
    // sign that bwrap may be refused its namespaces; elsewhere the run itself finds out.
    // A missing bwrap is known without a process: the probe says so at once.
    const auto bad = bwrap->setup_error();
    if (!bad && !cfg.enforcement && !cfg.tty && !bwrap->program().empty() &&
        !cli::probe_before_run(cli::read_namespace_signs()))
    {
        p.choice.backend = "bwrap";
        p.choice.reason = "bubblewrap runs the command; the local backend only if bubblewrap "
                          "then shows it cannot work here";
        p.runner = std::make_unique<cli::auto_runner>(
            std::move(bwrap),
            [&ioc, &cfg] {
                return std::make_unique<sandbox::local_runner>(ioc.get_executor(), cfg.runner);
            },
            cli::bwrap_only_flags(cfg), std::move(chosen));
        return p;
    }
    p.choice =
        cli::choose_backend(bad ? bad : cli::check_bwrap(ioc, *bwrap), cli::bwrap_only_flags(cfg));
    if (p.choice.backend == "local")
        p.runner = std::make_unique<sandbox::local_runner>(ioc.get_executor(), cfg.runner);
    else
        p.runner = std::move(bwrap);
    return p;
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
// Asked of a bwrap runner directly: `enforcement()` would spawn the fork gate's probe, a
// process on every run of this tool. Local commands run as the caller: nothing to say.
void note_unwritable(const sandbox::runner& runner)
{
    if (dynamic_cast<const sandbox::local_runner*>(&runner))
        return;
    std::vector<std::string> paths;
    std::uint32_t uid = 0;
    if (const auto* b = cli::bwrap_behind(runner))
        paths = b->unwritable_paths(), uid = b->command_uid();
    else // a config entry's runner: whatever it wraps
    {
        auto e = runner.enforcement();
        paths = std::move(e.unwritable_paths);
        uid = e.command_uid.value_or(0);
    }
    for (const auto& p : paths)
        print_error("note: the sandbox user (uid " + std::to_string(uid) + ") cannot write " + p +
                    ": the command can read it but not change it (give that user write "
                    "access, or choose it with --sandbox-user)");
}

// Through an entry of --config: its chain, then the same run.
int run_from_config(cli::run_config& cfg, asio::io_context& ioc)
{
    if (cfg.check)
        return cli::check_config(ioc, cfg);
    auto pick = cli::pick_from_config(ioc, cfg);
    cfg.backend = pick.backend;
    if (pick.refusal)
    {
        sandbox::exec_result nothing;
        nothing.diag = pick.refusal->diag;
        return report(cfg, pick.refusal->code, nothing);
    }
    if (cfg.enforcement)
    {
        cli::write_fully(STDOUT_FILENO,
                         cli::enforcement_to_json(pick.runner->enforcement(), pick.backend,
                                                  "config entry " + cfg.sandbox_name) +
                             "\n");
        return 0;
    }
    std::shared_ptr<sandbox::audit_file> audit = pick.audit;
    std::unique_ptr<sandbox::runner> owned = std::move(pick.runner);
    note_unwritable(*owned);
    try
    {
        std::shared_ptr<sandbox::audit_file> none;
        owned = with_chain(std::move(owned), cfg, none);
    }
    catch (const sandbox::error& e)
    {
        sandbox::exec_result nothing;
        nothing.diag = e.diag();
        return report(cfg, e.code(), nothing);
    }
    return warn_unrecorded(audit.get(), run_chained(cfg, ioc, *owned));
}

int run(cli::run_config& cfg)
{
    if (!cfg.connect.empty())
        return cli::run_connected(cfg);
    asio::io_context ioc;
    if (!cfg.config_file.empty())
        return run_from_config(cfg, ioc);
    auto [owned, choice] = pick_backend(ioc, cfg, [&cfg](const cli::backend_choice& late) {
        cfg.backend = late.backend;
        if (!late.warning.empty())
            print_error(late.warning);
    });
    cfg.backend = choice.backend;

    if (cfg.enforcement)
    {
        cli::write_fully(STDOUT_FILENO, cli::enforcement_to_json(owned->enforcement(),
                                                                 choice.backend, choice.reason) +
                                            "\n");
        return 0;
    }
    if (choice.refusal)
    {
        sandbox::exec_result nothing;
        nothing.diag = choice.refusal->diag;
        return report(cfg, choice.refusal->code, nothing);
    }
    if (!choice.warning.empty())
        print_error(choice.warning);
    note_unwritable(*owned);
    for (const auto& note : cli::loopback_rule_notes(cfg.request.options.net))
        print_error(note);
    if (choice.backend == "bwrap")
        for (const auto& note : cli::private_tmp_notes(cfg, [](const std::string& p) {
                 struct stat st
                 {
                 };
                 return ::stat(p.c_str(), &st) == 0;
             }))
            print_error(note);
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

// The run itself, once the chain (if any) is in front of the backend. It has one signal
// set (SIGINT, SIGTERM: the tree is killed, 130) and one deadline: the end of the timeout
// while a --stdin-file FIFO is waited for, then its end plus the kill grace, when the
// worker's SIGKILL has ended the tree at the latest: a write still waiting for the reader
// then has stalled.
int run_chained(cli::run_config& cfg, asio::io_context& ioc, sandbox::runner& runner)
{
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    if (cfg.tty)
        return cli::run_terminal_session(ioc, runner, cfg, signals);

    using clock = std::chrono::steady_clock;
    const auto timeout = cfg.request.options.timeout;
    const auto start = clock::now();
    asio::steady_timer deadline(ioc, timeout > std::chrono::nanoseconds::zero()
                                         ? start + timeout
                                         : clock::time_point::max());
    if (cfg.stdin_fifo)
    {
        auto w = wait_for_writer(ioc, signals, deadline, cfg.request);
        if (!w.ready)
            return report(cfg, w.ec, w.result);
    }
    if (timeout > std::chrono::nanoseconds::zero())
        deadline.expires_at(start + timeout + cfg.request.options.kill_grace);

    cli::output_sink out(ioc.get_executor());
    if (!cfg.json)
        cfg.request.on_output_async = [&out](sandbox::output_stream s, std::string_view data,
                                             sandbox::output_resume resume) {
            out.write(s, data, std::move(resume));
        };
    asio::cancellation_signal cancel;
    signals.async_wait([&](boost::system::error_code ec, int) {
        if (ec)
            return;
        out.interrupt();
        cancel.emit(asio::cancellation_type::terminal);
    });
    deadline.async_wait([&out](boost::system::error_code ec) {
        if (!ec)
            out.deadline_passed();
    });
    boost::system::error_code result_ec;
    sandbox::exec_result result;
    sandbox::async_exec(runner, std::move(cfg.request),
                        asio::bind_cancellation_slot(
                            cancel.slot(), [&](boost::system::error_code ec,
                                               sandbox::exec_result r) {
                                result_ec = ec;
                                result = std::move(r);
                                boost::system::error_code ignored;
                                signals.cancel(ignored);
                                deadline.cancel();
                            }));
    // A signal that came before this point is queued in the set: the wait sees it as soon
    // as the loop runs, after the exec has started and can be cancelled.
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
        cli::write_fully(STDERR_FILENO, "Try 'sandbox-run --help'.\n");
    return cli::exit_sandbox_failure;
}

int main_checked(int argc, char** argv)
{
    auto cfg = cli::parse_command_line(argc, argv);
    if (!cfg)
        return usage_error(cfg.error());
    if (cfg->help)
    {
        cli::write_fully(STDOUT_FILENO, cli::usage());
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
