// helper/main.cpp: `sandbox-supervisor`, the helper process the library
// starts once per execution context.
//
// It is a child subreaper in its own session. On the control socket (fd 3) the library
// hands it one end of a fresh channel per worker it wants; the helper forks a worker
// (worker.hpp) for it. Every worker holds the read end of the helper's lifeline pipe, so
// workers notice the helper's death. Orphans of a worker that died (killed by its own tree)
// fall to the helper, which kills them. When the control socket closes (the library's
// runner or io_context went away, or the library's process died) the helper kills every
// worker and every process below them, reaps them all, and exits. It does the same when the
// library's process dies, watched through a pidfd of it taken at start: a command can copy
// the control socket out of a dumpable caller (pidfd_getfd) and so keep the EOF from
// arriving, but it cannot keep a process that died alive. The helper is not dumpable, so a
// command of the same user can neither ptrace it nor copy its descriptors.
//
//   usage: sandbox-supervisor --protocol N --caller PID [--cgroup DIR]   (started by the
//                                library, control socket = fd 3; with DIR, its cgroup tree
//                                goes there: see cgroup.hpp)
//          sandbox-supervisor --probe-fork-gate   (installs the fork gate's filter on itself
//                                                  and exits: 0, or the errno it failed with)
//          sandbox-supervisor --init FD [--net-bridge FD2] -- COMMAND [ARG...]   (inside a sandbox; status_init.hpp)
//          sandbox-supervisor --as UID GID -- PROGRAM [ARG...]   (root caller's sandbox; run_as.hpp)
//          sandbox-supervisor --access-as UID GID [MODE PATH]...   (what its user can reach)
#include "helper/cgroup.hpp"
#include "helper/channel.hpp"
#include "helper/fork_gate.hpp"
#include "protocol/protocol.hpp"
#include "helper/run_as.hpp"
#include "helper/status_init.hpp"
#include "helper/subtree.hpp"
#include "helper/worker.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>
#include <unordered_set>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace proto = sandbox::detail::proto;
using awaitable = asio::awaitable<void>;

constexpr int control_fd = 3;

class helper
{
public:
    helper(asio::io_context& ctx, int sigfd, int lifeline_r, int lifeline_w, rlimit nofile,
           int caller, sandbox::detail::cgroup_tree tree)
        : ctx_(ctx), control_(ctx, control_fd), sigfd_(ctx, sigfd), caller_(ctx, caller),
          lifeline_r_(lifeline_r), lifeline_w_(lifeline_w), command_nofile_(nofile),
          tree_(std::move(tree))
    {
    }

    void start()
    {
        asio::co_spawn(ctx_, read_control(), asio::detached);
        asio::co_spawn(ctx_, reap_loop(), asio::detached);
        asio::co_spawn(ctx_, watch_caller(), asio::detached);
    }

private:
    awaitable read_control();
    awaitable reap_loop();
    awaitable watch_caller();
    void fork_worker(int chan);
    void sweep_orphans();
    void drop_leaves_of(pid_t worker);
    void remove_dropped_leaves();
    [[noreturn]] void shut_down();

    asio::io_context& ctx_;
    asio::posix::stream_descriptor control_, sigfd_, caller_;
    sandbox::unique_fd lifeline_r_, lifeline_w_;
    rlimit command_nofile_;
    std::unordered_set<pid_t> workers_;
    sandbox::detail::cgroup_tree tree_;
    std::vector<std::string> dropped_leaves_; // of dead workers: killed, removed once empty
};

awaitable helper::read_control()
{
    co_await sandbox::detail::read_messages(control_, [this](proto::message& m) {
        if (m.head.type == proto::msg_type::spawn_worker && m.fds.size() == 1)
            fork_worker(m.fds[0].get());
    });
    shut_down(); // the library's side closed: its io_context is gone, or its process died
}

void helper::fork_worker(int chan)
{
    pid_t pid = ::fork();
    if (pid == 0)
        sandbox::detail::run_worker(chan, lifeline_r_.get(), command_nofile_,
                                    {tree_ ? tree_.fd() : -1, tree_.controllers()}); // no return
    if (pid > 0)
    {
        workers_.insert(pid);
        return;
    }
    // Out of processes or memory: the library learns it before anything ran.
    proto::spawn_failed_msg f{errno, 0};
    proto::send_message(chan, proto::msg_type::spawn_failed, 0, proto::as_bytes(f));
}

awaitable helper::watch_caller()
{
    boost::system::error_code ec;
    co_await caller_.async_wait(asio::posix::stream_descriptor::wait_read,
                                asio::redirect_error(asio::use_awaitable, ec));
    shut_down(); // a pidfd is readable once its process has ended (or on an error: fail closed)
}

awaitable helper::reap_loop()
{
    co_await sandbox::detail::on_each_sigchld(sigfd_, [this] {
        sandbox::detail::reap_exited([this](pid_t p, int, const struct rusage&) {
            if (workers_.erase(p) != 0)
                drop_leaves_of(p);
        });
        sweep_orphans();
        remove_dropped_leaves();
    });
}

// A worker that died (its own tree may have killed it) left its subtree to us: anything
// below us that is not a live worker's is such an orphan, and dies now.
void helper::sweep_orphans()
{
    std::vector<pid_t> children;
    sandbox::detail::own_children(children);
    for (pid_t p : children)
        if (workers_.count(p) == 0)
            ::kill(p, SIGKILL); // our unreaped child: its pid cannot be recycled
    // Their own children fall to us in turn, and their deaths bring us back here.
}

// A worker that died (killed by its own tree, say) leaves its execution's cgroup: every
// process in it dies at once, wherever in the process tree it went, and the cgroup goes
// once they are reaped (they fall to us: sweep_orphans).
void helper::drop_leaves_of(pid_t worker)
{
    if (!tree_)
        return;
    const std::string prefix = "x-" + std::to_string(worker) + "-";
    std::vector<std::string> children;
    sandbox::detail::list_child_cgroups(tree_.fd(), children);
    for (const auto& name : children)
    {
        if (name.rfind(prefix, 0) != 0)
            continue;
        const std::string path = tree_.path() + "/" + name;
        sandbox::detail::kill_cgroup_path(path);
        dropped_leaves_.push_back(path);
    }
}

void helper::remove_dropped_leaves()
{
    std::erase_if(dropped_leaves_, [](const std::string& path) {
        return ::rmdir(path.c_str()) == 0 || errno == ENOENT;
    });
}

void helper::shut_down()
{
    // Every worker and every process below them: killed and reaped before we go; then the
    // cgroup tree goes (each execution's cgroup killed again first: nothing of it survives).
    lifeline_w_.reset();
    sandbox::detail::kill_subtree(nullptr);
    if (tree_)
        tree_.tear_down(std::chrono::milliseconds(500));
    ::_exit(0);
}

// The value after `name`; empty when missing.
std::string option_text(int argc, char** argv, std::string_view name)
{
    for (int i = 1; i + 1 < argc; ++i)
        if (name == argv[i])
            return argv[i + 1];
    return {};
}

// The helper's cgroup tree under `dir` (the library resolved "auto" already), after the
// trees of dead helpers there are removed. No tree when it cannot be made: executions that
// require one fail to spawn, the others run without one.
sandbox::detail::cgroup_tree open_cgroup_tree(const std::string& dir)
{
    sandbox::detail::cgroup_tree tree;
    if (dir.empty())
        return tree;
    const auto site = sandbox::detail::find_cgroup_site(dir);
    if (!site.why_not.empty())
        return tree;
    sandbox::detail::cgroup_tree::sweep_stale(site.parent, std::chrono::milliseconds(500));
    std::string why;
    sandbox::detail::cgroup_tree::open(site, tree, why);
    return tree;
}

// The value after `name`, as a number; -1 when missing.
long option_value(int argc, char** argv, std::string_view name)
{
    const std::string text = option_text(argc, argv, name);
    return text.empty() ? -1 : std::strtol(text.c_str(), nullptr, 10);
}

// A pidfd of the library's process, which started us: -1 when it is gone already (we were
// re-parented before we could look) or the kernel has no pidfds. Checked as our parent
// after the pidfd is open, so a recycled pid is never watched.
int open_caller(long caller)
{
    if (caller <= 0)
        return -1;
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(caller), 0));
    if (fd >= 0 && ::getppid() != caller)
    {
        ::close(fd);
        return -1;
    }
    return fd;
}

} // namespace

int main(int argc, char** argv)
{
    // Before anything else: a command of our user must not ptrace us or copy our control
    // socket and lifeline (pidfd_getfd) to outlive its caller. Workers inherit it; what a
    // mode below executes is dumpable again (execve resets it).
    ::prctl(PR_SET_DUMPABLE, 0);
    if (argc > 1 && std::string_view(argv[1]) == "--init")
        sandbox::detail::run_status_init(argc, argv); // inside a sandbox: see status_init.hpp
    // _exit: nothing may run after the filter is on (a leak checker's clone would hit it).
    if (argc == 2 && std::string_view(argv[1]) == "--probe-fork-gate")
        ::_exit(sandbox::detail::probe_fork_gate());
    if (argc > 1 && std::string_view(argv[1]) == "--as")
        sandbox::detail::run_as_user(argc, argv); // a root caller's sandbox: see run_as.hpp
    if (argc > 1 && std::string_view(argv[1]) == "--access-as")
        sandbox::detail::run_access_as(argc, argv); // what that user can reach: run_as.hpp
    if (option_value(argc, argv, "--protocol") != static_cast<long>(proto::version))
    {
        std::fprintf(stderr, "sandbox-supervisor: this helper speaks protocol %u; started "
                             "with another (a library from another build?)\n",
                     proto::version);
        return proto::exit_protocol_mismatch;
    }
    if (::fcntl(control_fd, F_GETFD) < 0)
    {
        std::fprintf(stderr, "sandbox-supervisor: no control socket on fd 3; it is started "
                             "by the sandbox library, not by hand\n");
        return 2;
    }
    ::fcntl(control_fd, F_SETFD, FD_CLOEXEC);
    const int caller = open_caller(option_value(argc, argv, "--caller"));
    if (caller < 0)
    {
        std::fprintf(stderr, "sandbox-supervisor: the calling process (--caller) is gone or "
                             "cannot be watched\n");
        return 2; // nothing has run yet; the library sees the control socket close
    }
    // Inherited dispositions: a SIGCHLD set to SIG_IGN would make the kernel reap our
    // children behind our back; SIGPIPE must not kill us (we send with MSG_NOSIGNAL anyway).
    ::signal(SIGCHLD, SIG_DFL);
    ::signal(SIGPIPE, SIG_IGN);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    sandbox::detail::prepare_subtree_access();

    // Commands get the library's descriptor limit; the helper may hold many more.
    rlimit nofile{};
    ::getrlimit(RLIMIT_NOFILE, &nofile);
    rlimit raised = nofile;
    raised.rlim_cur = raised.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);

    int lifeline[2];
    if (::pipe2(lifeline, O_CLOEXEC) != 0)
        return 1;
    int sigfd = sandbox::detail::open_sigchld_fd();
    if (sigfd < 0)
        return 1;
    ::fcntl(control_fd, F_SETFL, ::fcntl(control_fd, F_GETFL) | O_NONBLOCK);

    // Before any worker is forked: they are born in the tree's supervisor cgroup.
    auto tree = open_cgroup_tree(option_text(argc, argv, "--cgroup"));

    asio::io_context ctx(1);
    helper h(ctx, sigfd, lifeline[0], lifeline[1], nofile, caller, std::move(tree));
    h.start();
    ctx.run();
    return 0;
}
