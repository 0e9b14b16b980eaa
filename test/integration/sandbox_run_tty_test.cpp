// test/integration/sandbox_run_tty_test.cpp: `sandbox-run --tty` on a real pseudo-terminal
// that plays the user's terminal: size and input reach the command, Ctrl-C reaches it (not
// sandbox-run), SIGWINCH resizes it, the exit status is passed on and our terminal is left
// exactly as it was.
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

extern char** environ;

namespace {

using namespace std::chrono_literals;
using sbx_test::sandbox_run;

// A pseudo-terminal playing the user's: sandbox-run runs with its slave as controlling
// terminal and stdio; the test types into and reads from the master.
class user_terminal
{
public:
    explicit user_terminal(unsigned short rows = 30, unsigned short cols = 100)
    {
        master_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        BOOST_REQUIRE(master_ >= 0);
        BOOST_REQUIRE(::grantpt(master_) == 0 && ::unlockpt(master_) == 0);
        char name[128];
        BOOST_REQUIRE(::ptsname_r(master_, name, sizeof name) == 0);
        slave_name_ = name;
        resize(rows, cols);
        // Held open so the terminal keeps its settings between the runs that use it.
        slave_ = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        BOOST_REQUIRE(slave_ >= 0);
    }
    ~user_terminal()
    {
        if (pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0)
        {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        ::close(slave_);
        ::close(master_);
    }

    void resize(unsigned short rows, unsigned short cols)
    {
        winsize ws{};
        ws.ws_row = rows;
        ws.ws_col = cols;
        BOOST_REQUIRE(::ioctl(master_, TIOCSWINSZ, &ws) == 0);
    }

    termios settings() const
    {
        termios t{};
        BOOST_REQUIRE(::tcgetattr(slave_, &t) == 0);
        return t;
    }

    // The terminal device belongs to `uid` (as a login gives it to the user).
    void give_to(uid_t uid) { BOOST_REQUIRE(::fchown(slave_, uid, static_cast<gid_t>(-1)) == 0); }
    const std::string& slave_name() const { return slave_name_; }

    // sandbox-run ARGS on the local backend in a session of its own with this terminal as
    // controlling terminal (and as stdin, unless `stdin_path` names another file).
    void start(std::vector<std::string> args, const std::string& stdin_path = {})
    {
        args.insert(args.begin(), {"--backend", "local"});
        spawn(sandbox_run, args, stdin_path, environ, {});
    }

    // `program ARGS` the same way, with environment `env`, in `dir` (unless empty).
    void spawn(const std::string& program, const std::vector<std::string>& args,
               const std::string& stdin_path, char* const* env, const std::string& dir)
    {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        ::posix_spawn_file_actions_init(&fa);
        ::posix_spawnattr_init(&attr);
        // Default dispositions and no blocked signal, as a shell on a terminal starts it
        // (whatever the test runs under: nohup and `&` leave SIGHUP, SIGINT, SIGQUIT ignored).
        sigset_t all, none;
        sigfillset(&all);
        sigemptyset(&none);
        ::posix_spawnattr_setsigdefault(&attr, &all);
        ::posix_spawnattr_setsigmask(&attr, &none);
        ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
                                              POSIX_SPAWN_SETSIGMASK);
        // The first terminal the new session leader opens becomes its controlling terminal.
        ::posix_spawn_file_actions_addopen(&fa, 1, slave_name_.c_str(), O_RDWR, 0);
        ::posix_spawn_file_actions_adddup2(&fa, 1, 2);
        if (stdin_path.empty())
            ::posix_spawn_file_actions_adddup2(&fa, 1, 0);
        else
            ::posix_spawn_file_actions_addopen(&fa, 0, stdin_path.c_str(), O_RDONLY, 0);
        if (!dir.empty())
            ::posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());
        std::vector<char*> argv{const_cast<char*>(program.c_str())};
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        int rc = ::posix_spawn(&pid_, program.c_str(), &fa, &attr, argv.data(), env);
        ::posix_spawn_file_actions_destroy(&fa);
        ::posix_spawnattr_destroy(&attr);
        BOOST_REQUIRE(rc == 0);
    }

    void type(const std::string& keys)
    {
        BOOST_REQUIRE(::write(master_, keys.data(), keys.size()) ==
                      static_cast<ssize_t>(keys.size()));
    }

    // What the terminal shows, until it contains `needle` (or 10 s pass).
    std::string read_until(const std::string& needle)
    {
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (screen_.find(needle) == std::string::npos &&
               std::chrono::steady_clock::now() < deadline)
            drain(50ms);
        return screen_;
    }

    void signal(int sig) { ::kill(pid_, sig); }

    // sandbox-run's raw wait status (bounded: 10 s). The terminal is drained meanwhile, a
    // poll of 10 ms at a time, so a run that exits is seen within 10 ms.
    int wait()
    {
        int status = 0;
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        while (std::chrono::steady_clock::now() < deadline)
        {
            if (::waitpid(pid_, &status, WNOHANG) == pid_)
            {
                pid_ = -1;
                return status;
            }
            drain(10ms);
        }
        BOOST_FAIL("sandbox-run did not exit");
        return -1;
    }

private:
    // Appends what the terminal shows within `limit` (one poll, one read) to screen_.
    void drain(std::chrono::milliseconds limit)
    {
        pollfd p{master_, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(limit.count())) == 1)
        {
            char buf[4096];
            ssize_t n = ::read(master_, buf, sizeof buf);
            if (n > 0)
                screen_.append(buf, static_cast<std::size_t>(n));
        }
    }

    int master_ = -1;
    int slave_ = -1;
    std::string slave_name_;
    pid_t pid_ = -1;
    std::string screen_;
};

bool same(const termios& a, const termios& b)
{
    return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag &&
           a.c_lflag == b.c_lflag && std::memcmp(a.c_cc, b.c_cc, sizeof a.c_cc) == 0;
}

// Sends `sig` to `sandbox-run --tty` while its command runs (our terminal raw meanwhile),
// and checks that afterwards our terminal is exactly as before and that the command's tree,
// a process of another session included, is gone. Returns sandbox-run's wait status.
int signal_a_running_session(int sig)
{
    user_terminal t;
    const termios before = t.settings();
    sbx_test::temp_dir dir;
    const auto pidfile = dir.path() / "pids";
    t.start({"--tty", "--", "sh", "-c",
             "setsid sleep 30 & echo $! > " + pidfile.string() + "; echo ready; wait"});
    t.read_until("ready");
    BOOST_TEST((t.settings().c_lflag & (ECHO | ICANON)) == 0u);
    t.signal(sig);
    const int st = t.wait();
    BOOST_TEST(same(t.settings(), before));
    BOOST_TEST(sbx_test::wait_gone(sbx_test::read_pids(pidfile)));
    return st;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sandbox_run_tty)

BOOST_AUTO_TEST_CASE(size_input_and_exit_status_pass_through_and_the_terminal_is_restored)
{
    user_terminal t(30, 100);
    const termios before = t.settings();
    t.start({"--tty", "--", "sh", "-c", "stty size; read x; echo got-$x; exit 3"});
    BOOST_TEST(t.read_until("30 100").find("30 100") != std::string::npos);
    // While the command runs our terminal is raw: no echo, no line editing of ours.
    BOOST_TEST((t.settings().c_lflag & (ECHO | ICANON)) == 0u);
    t.type("hi\r");
    BOOST_TEST(t.read_until("got-hi").find("got-hi") != std::string::npos);
    const int st = t.wait();
    BOOST_TEST(WIFEXITED(st));
    BOOST_TEST(WEXITSTATUS(st) == 3);
    BOOST_TEST(same(t.settings(), before));
}

BOOST_AUTO_TEST_CASE(ctrl_c_reaches_the_command_not_sandbox_run)
{
    user_terminal t;
    const termios before = t.settings();
    t.start({"--tty", "--", "sh", "-c", "echo ready; exec cat"});
    t.read_until("ready");
    t.type("\x03");
    const int st = t.wait();
    BOOST_TEST(WIFEXITED(st)); // sandbox-run itself was not interrupted
    BOOST_TEST(WEXITSTATUS(st) == 128 + SIGINT); // cat died of SIGINT
    BOOST_TEST(same(t.settings(), before));
}

BOOST_AUTO_TEST_CASE(a_window_change_resizes_the_commands_terminal)
{
    user_terminal t(30, 100);
    t.start({"--tty", "--", "sh", "-c",
             "trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.02; done"});
    t.read_until("ready");
    t.resize(33, 111); // the kernel sends SIGWINCH to sandbox-run, which passes it on
    BOOST_TEST(t.read_until("33 111").find("33 111") != std::string::npos);
    const int st = t.wait();
    BOOST_TEST(WIFEXITED(st));
    BOOST_TEST(WEXITSTATUS(st) == 0);
}

BOOST_AUTO_TEST_CASE(sigterm_to_sandbox_run_kills_the_tree_and_restores_the_terminal)
{
    const int st = signal_a_running_session(SIGTERM);
    BOOST_TEST(WIFEXITED(st));
    BOOST_TEST(WEXITSTATUS(st) == 130);
}

BOOST_AUTO_TEST_CASE(every_signal_that_ends_sandbox_run_restores_the_terminal)
{
    // Before, only SIGINT and SIGTERM (which cancel the run) restored it: the others killed
    // sandbox-run with the caller's terminal left raw. Now it is restored, sandbox-run dies of
    // the signal as before, and the tree goes with it.
    for (int sig : {SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM})
    {
        BOOST_TEST_CONTEXT("signal " << sig)
        {
            const int st = signal_a_running_session(sig);
            BOOST_TEST(WIFSIGNALED(st));
            BOOST_TEST((WIFSIGNALED(st) ? WTERMSIG(st) : 0) == sig);
        }
    }
}

BOOST_AUTO_TEST_CASE(an_unprivileged_command_cannot_reach_the_callers_terminal)
{
    // sandbox-run runs as nobody on a terminal that nobody owns, with the terminal as its
    // stdin; the command (the same uid) walks up to it and tries to open its stdin through
    // /proc and push a key into it with TIOCSTI. sandbox-run is not dumpable, so /proc
    // refuses (before, the open worked). The command is in a session of its own: /dev/tty
    // is nothing to it, and the terminal opened by its path takes no TIOCSTI.
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0 ||
        ::access("/usr/bin/perl", X_OK) != 0)
    {
        BOOST_TEST_MESSAGE("skipped: needs root, setpriv and perl");
        return;
    }
    namespace fs = std::filesystem;
    sbx_test::temp_dir dir;
    fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::others_read |
                                    fs::perms::others_exec | fs::perms::group_read |
                                    fs::perms::group_exec);
    const auto run_copy = dir.path() / "sandbox-run";
    const auto sup_copy = dir.path() / "sandbox-supervisor";
    fs::copy_file(sandbox_run, run_copy);
    fs::copy_file(SBX_SUPERVISOR, sup_copy);
    const std::string probe = R"(
my $p = getppid();
while ($p > 1) {
    open(my $c, "<", "/proc/$p/comm") or last;
    my $n = <$c>; chomp $n;
    last if $n eq "sandbox-run";
    open(my $s, "<", "/proc/$p/stat") or last;
    my $st = <$s>; ($p) = $st =~ /\) \S+ (\d+)/;
}
print "found: ", ($p > 1 ? "yes" : "no"), "\n";
my $key = "x";
if (open(my $t, "+<", "/proc/$p/fd/0")) {
    print "proc-fd: opened\n";
    print "proc-tiocsti: ", (ioctl($t, 0x5412, $key) ? "pushed" : "$!"), "\n";
} else { print "proc-fd: $!\n"; }
print "dev-tty: ", (open(my $d, "+<", "/dev/tty") ? "opened" : "$!"), "\n";
if (open(my $q, "+<", $ARGV[0])) {
    print "path-tiocsti: ", (ioctl($q, 0x5412, $key) ? "pushed" : "$!"), "\n";
}
print "done\n";
)";
    user_terminal t;
    t.give_to(65534);
    std::vector<std::string> env_text{"PATH=/usr/bin:/bin", "SANDBOX_SUPERVISOR=" + sup_copy.string()};
    std::vector<char*> env;
    for (auto& e : env_text)
        env.push_back(e.data());
    env.push_back(nullptr);
    t.spawn("/usr/bin/setpriv",
            {"--reuid=65534", "--regid=65534", "--clear-groups", run_copy.string(),
             "--backend", "local", "--",
             "/usr/bin/perl", "-e", probe, t.slave_name()},
            {}, env.data(), dir.str());
    const std::string screen = t.read_until("done");
    BOOST_TEST(screen.find("found: yes") != std::string::npos, screen);
    BOOST_TEST(screen.find("proc-fd: Permission denied") != std::string::npos, screen);
    BOOST_TEST(screen.find("dev-tty: No such device or address") != std::string::npos, screen);
    BOOST_TEST(screen.find("path-tiocsti: Operation not permitted") != std::string::npos, screen);
    BOOST_TEST(screen.find("pushed") == std::string::npos, screen);
    const int st = t.wait();
    BOOST_TEST(WIFEXITED(st));
    BOOST_TEST(WEXITSTATUS(st) == 0);
}

BOOST_FIXTURE_TEST_CASE(tty_needs_a_terminal_and_excludes_json, sbx_test::local_fixture)
{
    for (auto args : {std::vector<std::string>{"--tty", "--", "true"},
                      std::vector<std::string>{"--tty", "--json", "--", "true"}})
    {
        sandbox::exec_request req;
        req.command = sandbox_run;
        req.args = args;
        auto out = run(std::move(req)); // stdin is /dev/null
        BOOST_TEST(!out.ec);
        BOOST_TEST(out.result.exit_code == 125);
        BOOST_TEST(!out.result.err.data.empty());
    }
}

BOOST_AUTO_TEST_CASE(ask_takes_its_answer_from_the_terminal)
{
    sbx_test::temp_dir dir;
    const auto made = dir.path() / "made";
    {
        user_terminal t;
        t.start({"--root", dir.str(), "--ask", "touch", "--", "touch", made.string()});
        const auto screen = t.read_until("[y/N]");
        BOOST_TEST(screen.find("sensitive pattern \"touch\"") != std::string::npos, screen);
        t.type("y\n");
        const int st = t.wait();
        BOOST_TEST(WIFEXITED(st));
        BOOST_TEST(WEXITSTATUS(st) == 0);
        BOOST_TEST(std::filesystem::exists(made));
    }
    std::filesystem::remove(made);
    {
        user_terminal t;
        t.start({"--root", dir.str(), "--ask", "touch", "--", "touch", made.string()});
        t.read_until("[y/N]");
        t.type("n\n");
        const int st = t.wait();
        BOOST_TEST(WIFEXITED(st));
        BOOST_TEST(WEXITSTATUS(st) == 125);
        BOOST_TEST(t.read_until("policy_denied").find("policy_denied") != std::string::npos);
        BOOST_TEST(!std::filesystem::exists(made));
    }
    {
        // No answer within --ask-timeout: denied.
        user_terminal t;
        t.start({"--root", dir.str(), "--ask", "touch", "--ask-timeout", "300ms", "--", "touch",
                 made.string()});
        const int st = t.wait();
        BOOST_TEST(WIFEXITED(st));
        BOOST_TEST(WEXITSTATUS(st) == 125);
        BOOST_TEST(t.read_until("deadline").find("deadline") != std::string::npos);
        BOOST_TEST(!std::filesystem::exists(made));
    }
}

BOOST_AUTO_TEST_CASE(ask_shows_control_characters_escaped_and_gates_terminal_sessions)
{
    // Neither an argument nor the command's own name (quoted in the reason) can move the
    // cursor or redraw the question; a --tty session is asked about before it starts, while
    // our terminal is still in its normal mode.
    sbx_test::temp_dir dir;
    const std::string name = "sh\x1b[8m\xc2\x9b";
    std::filesystem::create_symlink("/bin/sh", dir.path() / name);
    user_terminal t;
    const termios before = t.settings();
    t.start({"--root", dir.str(), "--tty", "--ask", "sh*", "--", "./" + name, "-c",
             "echo inside; exit 5", "\r\x1b[2KRun it? [y/N] y"});
    const auto screen = t.read_until("\nRun it? [y/N] ");
    BOOST_TEST(screen.find("\nRun it? [y/N] ") != std::string::npos, screen);
    BOOST_TEST(screen.find("\\x0d\\x1b[2K") != std::string::npos, screen);
    BOOST_TEST(screen.find("sh\\x1b[8m\\xc2\\x9b") != std::string::npos, screen);
    BOOST_TEST(screen.find('\x1b') == std::string::npos);
    BOOST_TEST(screen.find('\x9b') == std::string::npos);
    t.type("yes\n");
    BOOST_TEST(t.read_until("inside").find("inside") != std::string::npos);
    const int st = t.wait();
    BOOST_TEST(WIFEXITED(st));
    BOOST_TEST(WEXITSTATUS(st) == 5);
    BOOST_TEST(same(t.settings(), before));
}

BOOST_AUTO_TEST_CASE(ask_ignores_piped_stdin_and_keys_typed_before_the_question)
{
    // stdin is a file saying "y"; "y" was also typed before sandbox-run started. Neither
    // answers: only a line typed after the question does.
    sbx_test::temp_dir dir;
    const auto yes = dir.path() / "yes.txt";
    std::ofstream(yes) << "y\ny\n";
    const auto made = dir.path() / "made";
    user_terminal t;
    t.type("y\n");
    t.start({"--root", dir.str(), "--ask", "touch", "--", "touch", made.string()}, yes.string());
    t.read_until("[y/N] ");
    t.type("n\n");
    const int st = t.wait();
    BOOST_TEST(WIFEXITED(st));
    BOOST_TEST(WEXITSTATUS(st) == 125);
    BOOST_TEST(!std::filesystem::exists(made));
}

BOOST_AUTO_TEST_CASE(ctrl_c_at_the_question_cancels_a_terminal_session)
{
    sbx_test::temp_dir dir;
    user_terminal t;
    const termios before = t.settings();
    t.start({"--root", dir.str(), "--tty", "--ask", "sh", "--", "sh", "-c", "touch made"});
    t.read_until("[y/N] ");
    t.type("\x03"); // the terminal is not raw yet: SIGINT to sandbox-run
    const int st = t.wait(); // bounded at 10 s; the question would wait a minute
    BOOST_TEST(WIFEXITED(st));
    BOOST_TEST(WEXITSTATUS(st) == 130);
    BOOST_TEST(t.read_until("nothing ran").find("nothing ran") != std::string::npos);
    BOOST_TEST(!std::filesystem::exists(dir.path() / "made"));
    BOOST_TEST(same(t.settings(), before));
}

BOOST_AUTO_TEST_SUITE_END()
