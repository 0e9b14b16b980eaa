// bench/raw_floor.hpp: the "raw floor" for exec_bench: what spawning and supervising a child
// costs with bare Linux primitives and no library (posix_spawn into its own process group,
// pipes for stdout and stderr, pidfd_open, one epoll set, waitid(P_PIDFD)), plus the
// fork-`ps`-per-sample watcher that the reference implementation uses for its caps.
//
// Everything here is deliberately C-style and single-threaded. Any syscall failure ends the
// process with a message (exit status 2): a broken floor must not yield a number.
#ifndef SANDBOX_BENCH_RAW_FLOOR_HPP
#define SANDBOX_BENCH_RAW_FLOOR_HPP

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

namespace raw_floor {

using clock = std::chrono::steady_clock;

/// A command line ready for posix_spawn (argv[0] is the executable path).
class command
{
public:
    explicit command(std::vector<std::string> args);
    command(const command& o) : command(o.args_) {}
    command& operator=(const command&) = delete;
    const char* path() const { return args_.front().c_str(); }
    char* const* argv() const { return argv_.data(); }
    const std::vector<std::string>& args() const { return args_; }

private:
    std::vector<std::string> args_;
    std::vector<char*> argv_;
};

/// The environment every child of the benchmark gets, floor and library alike: the host
/// variables PATH HOME LANG LC_ALL TZ USER, when set.
const std::vector<std::string>& env_allow_names();
char* const* allow_envp();

/// One spawned child: pid, pidfd and the read ends of its stdout / stderr pipes (-1 when the
/// stream goes to /dev/null).
struct child
{
    pid_t pid = -1;
    int pidfd = -1;
    int out = -1;
    int err = -1;
};

/// posix_spawn in a new process group (stdin /dev/null, signal mask empty, SIGPIPE default,
/// fds >= 3 closed), then pidfd_open. `capture`: stdout and stderr are pipes, else /dev/null.
child spawn(const command& cmd, bool capture);

/// waitid(P_PIDFD, WEXITED); closes the pidfd. Returns a wait status (as from waitpid).
int reap(child& c);

/// True when `status` (from reap) is a normal exit with code 0.
bool exited_ok(int status);

/// Byte counts drained from a child's two pipes.
struct drained
{
    std::uint64_t out = 0, err = 0;
};

/// Spawns `cmd` with capture, drains both pipes and waits for the pidfd through one epoll
/// set, reaps with waitid(P_PIDFD). Returns the wall time from spawn to reap (seconds) and
/// the bytes read. Exits the process if the child did not exit with 0.
double run_captured(const command& cmd, drained* bytes = nullptr);

/// `n` sequential captured runs of `cmd` (one reusable epoll set); per-exec microseconds.
std::vector<double> run_sequential(const command& cmd, int n);

/// `n` captured runs of `cmd` with `inflight` children at once, one epoll loop on this
/// thread tracking every pipe and pidfd. Returns the wall seconds for all `n`.
double run_concurrent(const command& cmd, int n, int inflight);

/// Runs `cmd` with stdout and stderr captured; returns what it printed on stdout (and, when
/// `err_text` is given, on stderr there) and sets its wait status.
std::string run_and_read(const command& cmd, int& status, std::string* err_text = nullptr);

/// Long-running children (e.g. `sleep 8`) for the watcher cases. stdout/stderr /dev/null.
std::vector<child> spawn_idle(const command& cmd, int n);
/// SIGKILL each child by its pid (never by name) and reap it.
void kill_and_reap(std::vector<child>& kids);

/// getrusage(who) user + system, in milliseconds.
double cpu_ms(int who);

/// Result of the fork-`ps`-per-sample watcher.
struct ps_watch_result
{
    std::uint64_t samples = 0;       ///< `ps` runs completed (one per tree per tick)
    std::uint64_t matched_lines = 0; ///< lines whose pgid matched the tree sampled
    std::uint64_t ticks = 0;         ///< ticks started
    std::uint64_t late_ticks = 0;    ///< ticks that started behind schedule
    std::uint64_t max_rss_kb = 0;    ///< largest summed RSS seen for one tree
    double self_ms = 0;              ///< RUSAGE_SELF delta over the window
    double children_ms = 0;          ///< RUSAGE_CHILDREN delta (the `ps` processes)
    double wall_s = 0;               ///< the window actually measured
};

/// The reference's method: every `interval`, for each tree, posix_spawn
/// `ps -o pgid=,rss=,time= -ax`, read its output, reap it, sum the lines whose first field is
/// the tree's pgid. Runs for `window` (checked between ps runs, so one that cannot keep up
/// just falls behind and keeps going back to back).
ps_watch_result ps_watch(const std::vector<pid_t>& pgids, std::chrono::nanoseconds interval,
                         std::chrono::nanoseconds window);

} // namespace raw_floor

#endif // SANDBOX_BENCH_RAW_FLOOR_HPP
