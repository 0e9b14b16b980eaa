// helper/serve.cpp: the loop that forks a worker per channel (serve.hpp), shared by the
// helper and an instance's init.
#include "helper/serve.hpp"

#include "helper/cgroup.hpp"
#include "helper/channel.hpp"
#include "helper/subtree.hpp"
#include "helper/worker.hpp"
#include "protocol/protocol.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>
#include <string>
#include <unordered_set>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace proto = sandbox::detail::proto;
using awaitable = asio::awaitable<void>;

class helper
{
public:
    helper(asio::io_context& ctx, int control, int sigfd, int lifeline_r, int lifeline_w,
           rlimit nofile, int caller, sandbox::detail::cgroup_tree tree, bool kill_stopped)
        : ctx_(ctx), control_(ctx, control), sigfd_(ctx, sigfd), caller_(ctx),
          lifeline_r_(lifeline_r), lifeline_w_(lifeline_w), command_nofile_(nofile),
          tree_(std::move(tree)), kill_stopped_(kill_stopped)
    {
        if (caller >= 0)
            caller_.assign(caller);
    }

    void start()
    {
        asio::co_spawn(ctx_, read_control(), asio::detached);
        asio::co_spawn(ctx_, reap_loop(), asio::detached);
        if (caller_.is_open())
            asio::co_spawn(ctx_, watch_caller(), asio::detached);
    }

private:
    awaitable read_control();
    awaitable reap_loop();
    awaitable watch_caller();
    void fork_worker(int chan);
    void sweep_orphans();
    void kill_stopped_workers();
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
    bool kill_stopped_ = false;
};

awaitable helper::read_control()
{
    co_await sandbox::detail::read_messages(control_, [this](proto::message& m) {
        if (m.head.type == proto::msg_type::spawn_worker && m.fds.size() == 1)
            fork_worker(m.fds[0].get());
        // Anything else (a message of another kind, descriptors it does not take) is
        // dropped with its descriptors: one bad message costs nothing but itself.
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
        if (kill_stopped_)
            kill_stopped_workers();
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

// A worker that stopped (its command sent it SIGSTOP: inside an instance they are one
// user) would keep its command's deadline no more: it dies, and its tree falls to us.
void helper::kill_stopped_workers()
{
    for (pid_t p : workers_)
    {
        siginfo_t si{};
        if (::waitid(P_PID, static_cast<id_t>(p), &si, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == p)
            ::kill(p, SIGKILL); // our unreaped child: its pid cannot be recycled
    }
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

} // namespace

namespace sandbox::detail {

void serve_workers(int control, int caller, const std::string& cgroup_dir, bool kill_stopped)
{
    // Inherited dispositions: a SIGCHLD set to SIG_IGN would make the kernel reap our
    // children behind our back; SIGPIPE must not kill us (we send with MSG_NOSIGNAL anyway).
    ::signal(SIGCHLD, SIG_DFL);
    ::signal(SIGPIPE, SIG_IGN);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    prepare_subtree_access();

    // Commands get our caller's descriptor limit; the helper may hold many more.
    rlimit nofile{};
    ::getrlimit(RLIMIT_NOFILE, &nofile);
    rlimit raised = nofile;
    raised.rlim_cur = raised.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);

    int lifeline[2];
    if (::pipe2(lifeline, O_CLOEXEC) != 0)
        ::_exit(1);
    int sigfd = open_sigchld_fd();
    if (sigfd < 0)
        ::_exit(1);
    ::fcntl(control, F_SETFL, ::fcntl(control, F_GETFL) | O_NONBLOCK);

    // Before any worker is forked: they are born in the tree's supervisor cgroup.
    auto tree = open_cgroup_tree(cgroup_dir);

    asio::io_context ctx(1);
    helper h(ctx, control, sigfd, lifeline[0], lifeline[1], nofile, caller, std::move(tree),
             kill_stopped);
    h.start();
    ctx.run();
    ::_exit(0);
}

} // namespace sandbox::detail
