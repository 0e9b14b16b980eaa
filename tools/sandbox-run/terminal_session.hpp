// tools/sandbox-run/terminal_session.hpp: `sandbox-run --tty`: the command as a terminal
// session of the library, connected to our own terminal.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_TERMINAL_SESSION_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_TERMINAL_SESSION_HPP

#include "cli.hpp"

#include <sandbox/runner.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

namespace sandbox::cli {

/// \brief Runs `cfg.request` on a pseudo-terminal of its own, sized like ours, and returns
/// sandbox-run's exit status.
///
/// Our terminal (stdin) is put in raw mode while the command runs and restored exactly as it
/// was before this returns, whatever happens. Keys reach the command unchanged, so Ctrl-C is
/// its terminal's VINTR (sandbox-run is not interrupted), and end of our input is passed on
/// as VEOF. SIGWINCH on us resizes its terminal. SIGINT or SIGTERM sent to sandbox-run kill
/// the tree (exit 130): `signals` is the run's set of SIGINT and SIGTERM (SIGWINCH is
/// added). The exit status follows the plain runs' rules (`exit_status_for`).
/// Stdin that is not a terminal is refused (exit 125).
int run_terminal_session(boost::asio::io_context& ioc, sandbox::runner& r, run_config& cfg,
                         boost::asio::signal_set& signals);

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_TERMINAL_SESSION_HPP
