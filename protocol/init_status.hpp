// protocol/init_status.hpp: the status pipe between `sandbox-supervisor --init` (pid 1 of a
// bwrap sandbox, helper/status_init.cpp) and the library (lib/exec/supervise.cpp), which
// reads it to tell how a sandboxed command really ended. One line each, in this order:
//   "started"          the sandbox was set up (written before the command is looked up)
//   "unreachable DIR"  a PATH entry the command's user cannot search (skipped; up to 16)
//   "exec ERRNO"       the command could not be executed
//   "status WSTATUS"   the command's raw wait status
#ifndef SANDBOX_PROTOCOL_INIT_STATUS_HPP
#define SANDBOX_PROTOCOL_INIT_STATUS_HPP

#include <csignal>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::detail {

/// The job signals a wrapped command's wrapper ignores (see above).
inline constexpr int job_signals[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGTERM};

/// What the status pipe said, parsed (pure; unit-tested).
struct init_report
{
    bool started = false;
    std::optional<int> exec_errno{};
    std::vector<std::string> unreachable_path{};
    std::optional<int> wait_status{};
};
init_report parse_init_report(std::string_view text);

} // namespace sandbox::detail

#endif // SANDBOX_PROTOCOL_INIT_STATUS_HPP
