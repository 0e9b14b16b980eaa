// tools/sandbox-run/raw_terminal.cpp: see raw_terminal.hpp.
#include "raw_terminal.hpp"

#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

namespace sandbox::cli {

namespace {

// The terminal and settings a fatal signal restores before sandbox-run dies of it.
volatile sig_atomic_t raw_fd = -1;
termios cooked{};

extern "C" void restore_and_die(int sig)
{
    if (raw_fd >= 0)
        ::tcsetattr(raw_fd, TCSANOW, &cooked); // async-signal-safe
    // SA_RESETHAND made the action the default again and SA_NODEFER left the signal
    // unblocked: this ends the process as the signal would have (the tree goes with it).
    ::raise(sig);
}

// Signals whose default action ends the process, other than SIGINT and SIGTERM (they cancel
// the run) and SIGKILL and SIGSTOP (nothing catches them).
std::vector<int> fatal_signals()
{
    std::vector<int> sigs{SIGHUP,  SIGQUIT, SIGUSR1,   SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
                          SIGXCPU, SIGXFSZ, SIGPOLL,   SIGPWR,  SIGSYS,  SIGTRAP,   SIGABRT,
                          SIGBUS,  SIGFPE,  SIGSTKFLT, SIGILL,  SIGSEGV};
    for (int s = SIGRTMIN; s <= SIGRTMAX; ++s)
        sigs.push_back(s);
    return sigs;
}

} // namespace

raw_mode::raw_mode(int fd)
{
    if (::tcgetattr(fd, &cooked) != 0)
        return;
    termios raw = cooked;
    ::cfmakeraw(&raw);
    raw_fd = fd;
    for (int s : fatal_signals())
        catch_default(s);
    if (::tcsetattr(fd, TCSANOW, &raw) == 0)
        fd_ = fd;
}

raw_mode::~raw_mode()
{
    if (fd_ >= 0)
        ::tcsetattr(fd_, TCSANOW, &cooked);
    for (const auto& [sig, old] : caught_)
        ::sigaction(sig, &old, nullptr);
    raw_fd = -1;
}

void raw_mode::catch_default(int sig)
{
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL ||
        (old.sa_flags & SA_SIGINFO) != 0)
        return;
    struct sigaction sa{};
    sa.sa_handler = restore_and_die;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(sig, &sa, nullptr) == 0)
        caught_.emplace_back(sig, old);
}

terminal_size size_of(int fd)
{
    winsize ws{};
    terminal_size s;
    if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
    {
        s.rows = ws.ws_row;
        s.cols = ws.ws_col;
    }
    return s;
}

} // namespace sandbox::cli
