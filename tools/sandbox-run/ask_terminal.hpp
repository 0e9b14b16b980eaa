// tools/sandbox-run/ask_terminal.hpp: the approver of `--ask`: a yes/no question on the
// controlling terminal.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_ASK_TERMINAL_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_ASK_TERMINAL_HPP

#include <sandbox/policy/call.hpp>

#include <string>

namespace sandbox::cli {

/// \brief Asks on `/dev/tty` (opened for the question, never stdin, so piped input cannot
/// answer): the reason, the command line with control characters escaped, and "[y/N]".
/// `y` or `yes` (any case) allows; anything else, end of input, or no controlling terminal
/// denies.
sandbox::approver terminal_approver(std::string tty_path = "/dev/tty");

/// The command line as shown in the question: words quoted where needed, bytes below 0x20
/// and 0x7f as `\xNN`, so an argument cannot redraw the prompt.
std::string printable_command(const sandbox::call_snapshot& c);

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_ASK_TERMINAL_HPP
