// tools/sandbox-run/connect.hpp: sandbox-run as a client of sandboxd (--connect SOCKET).
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_CONNECT_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_CONNECT_HPP

#include "cli.hpp"

namespace sandbox::cli {

/// Runs `cfg.request` through the sandbox `cfg.sandbox_name` of the daemon at `cfg.connect`
/// and returns sandbox-run's exit status. Without --json the command runs as a session whose
/// output is long-polled and streamed to our stdout and stderr as it comes; SIGINT and
/// SIGTERM terminate it (130). With --json it is one exec, and the daemon's answer is printed.
int run_connected(run_config& cfg);

/// `--connect --tty`: the command as a terminal session of the daemon, sized like our
/// terminal (stdin; refused with 125 when it is not one), attached over the daemon's
/// WebSocket: our terminal in raw mode sends keys, SIGWINCH resizes, SIGINT or SIGTERM sent
/// to sandbox-run terminate the tree (130), the exit status follows the local rules.
int run_connected_terminal(run_config& cfg);

} // namespace sandbox::cli

#endif
