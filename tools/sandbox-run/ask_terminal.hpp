// tools/sandbox-run/ask_terminal.hpp: the approver of `--ask`: a yes/no question on the
// controlling terminal.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_ASK_TERMINAL_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_ASK_TERMINAL_HPP

#include <sandbox/policy/call.hpp>

#include <string>

namespace sandbox::cli {

/// \brief Asks on `/dev/tty` (opened for the question, never stdin, so piped input cannot
/// answer; what was typed before the question is discarded): the reason and the command
/// line, both escaped (`printable_command`), and "[y/N]".
/// `y` or `yes` (any case) allows; anything else, end of input, or no controlling terminal
/// denies.
sandbox::approver terminal_approver(std::string tty_path = "/dev/tty");

/// \brief The command line as shown in the question: words in single quotes unless they
/// have only letters, digits and `_-./=:,+@%`; control bytes, DEL and every non-ASCII byte
/// as `\xNN`, so no argument can move the cursor, hide text or redraw the question.
std::string printable_command(const sandbox::call_snapshot& c);

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_ASK_TERMINAL_HPP
