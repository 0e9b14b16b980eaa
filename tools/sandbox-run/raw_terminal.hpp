// tools/sandbox-run/raw_terminal.hpp: our own terminal in raw mode while a terminal session
// runs (local --tty, or --connect --tty), restored whatever ends sandbox-run; its size.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_RAW_TERMINAL_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_RAW_TERMINAL_HPP

#include <sandbox/session.hpp>

#include <csignal>
#include <utility>
#include <vector>

namespace sandbox::cli {

/// Our terminal `fd` in raw mode for the lifetime of this object, then exactly as it was,
/// also when a signal ends sandbox-run meanwhile (one that was ignored stays ignored).
class raw_mode
{
public:
    explicit raw_mode(int fd);
    ~raw_mode();
    raw_mode(const raw_mode&) = delete;
    raw_mode& operator=(const raw_mode&) = delete;

private:
    void catch_default(int sig);

    int fd_ = -1;
    std::vector<std::pair<int, struct sigaction>> caught_;
};

/// The size of the terminal `fd` (80x24 when it has none).
terminal_size size_of(int fd);

} // namespace sandbox::cli

#endif
