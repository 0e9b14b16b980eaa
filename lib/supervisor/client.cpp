// lib/supervisor/client.cpp: starting the helper, handing out worker channels, shutdown.
#include "supervisor/client.hpp"
#include "supervisor/program_lookup.hpp"

#include <sandbox/backend/supervise.hpp>

#include <sandbox/error.hpp>

#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sandbox::detail {

namespace asio = boost::asio;

namespace {

using backend::unique_fd;

// How long shutdown waits for the helper to kill and reap everything before it kills the
// helper itself (then the workers see their lifeline close and do the same).
constexpr int shutdown_wait_ms = 2000;
// A helper that takes no request for this long while its control socket is full is wedged:
// it is killed and replaced.
constexpr auto wedged_after = std::chrono::milliseconds(100);

// True while the worker behind `fd` is alive and idle: nothing to read, not hung up.
bool channel_usable(int fd)
{
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    return ::poll(&p, 1, 0) == 0;
}

// Waits up to `ms` for the helper to exit, then reaps it.
bool reap_helper(int pidfd, pid_t pid, int ms)
{
    if (pidfd >= 0)
    {
        pollfd p{pidfd, POLLIN, 0};
        int rc;
        do
            rc = ::poll(&p, 1, ms);
        while (rc < 0 && errno == EINTR);
        if (rc == 0)
            return false;
        siginfo_t info{};
        ::syscall(SYS_waitid, P_PIDFD, pidfd, &info, WEXITED, nullptr);
        return true;
    }
    for (int waited = 0;; waited += 5)
    {
        if (::waitpid(pid, nullptr, WNOHANG) != 0)
            return true;
        if (waited >= ms)
            return false;
        ::usleep(5000);
    }
}

} // namespace

boost::asio::execution_context::id supervisor_service::id;

std::string supervisor_program()
{
    return find_supervisor_program().path;
}

supervisor_service::supervisor_service(boost::asio::execution_context& ctx)
    : boost::asio::execution_context::service(ctx)
{
}

supervisor_service::~supervisor_service()
{
    shutdown();
}

// Blocks (up to 2 s, then kills the helper): the execution context is going away, so no
// loop of the caller's runs here. What the lock guarded is destroyed after it is let go:
// a waiting request's handler holds an execution, whose end asks for the lock again.
void supervisor_service::shutdown()
{
    std::deque<waiter> waiting;
    kept_list kept;
    {
        std::lock_guard l(mu_);
        stop_helper_locked(true);
        waiting.swap(waiting_);
        kept.swap(kept_);
    }
}

outcome<void> supervisor_service::start_helper_locked()
{
    const program_lookup found = find_supervisor_program();
    const std::string& path = found.path;
    if (path.empty())
        return make_failure(errc::not_available,
                            "the supervisor helper sandbox-supervisor was not found (" +
                                found.tried + "); set SANDBOX_SUPERVISOR to its path",
                            "supervisor");
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return make_os_failure(errc::internal, "cannot create the supervisor socket", errno);
    unique_fd ours(sv[0]), theirs(sv[1]);

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawnattr_init(&attr);
    // The helper holds none of our descriptors, not even our stdio (a pipe a caller waits
    // on would stay open while the helper lives), and is in a session of its own, out of
    // reach of our terminal's signals.
    ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    ::posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    ::posix_spawn_file_actions_adddup2(&fa, theirs.get(), 3);
    ::posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    ::posix_spawnattr_setsigmask(&attr, &none);
    ::posix_spawnattr_setsigdefault(&attr, &all);
    ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
                                          POSIX_SPAWN_SETSIGDEF);
    const std::string version = std::to_string(proto::version);
    // The helper watches this process through a pidfd: when it dies, the helper kills every
    // tree, whoever holds copies of the control socket.
    const std::string caller = std::to_string(::getpid());
    // Where the helper makes its cgroup tree, when this context uses the cgroup path.
    const std::string& site = cgroup_site_.parent;
    char* argv[] = {const_cast<char*>(path.c_str()), const_cast<char*>("--protocol"),
                    const_cast<char*>(version.c_str()), const_cast<char*>("--caller"),
                    const_cast<char*>(caller.c_str()),
                    site.empty() ? nullptr : const_cast<char*>("--cgroup"),
                    const_cast<char*>(site.c_str()), nullptr};
    char* envp[] = {nullptr};
    pid_t pid = -1;
    int rc = ::posix_spawn(&pid, path.c_str(), &fa, &attr, argv, envp);
    ::posix_spawn_file_actions_destroy(&fa);
    ::posix_spawnattr_destroy(&attr);
    if (rc != 0)
    {
        auto f = make_os_failure(errc::internal, "cannot start the supervisor helper " + path, rc);
        f.diag.path = path;
        return f;
    }
    helper_pid_ = pid;
    helper_pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    control_ = std::move(ours);
    helper_tree_.clear();
    if (!site.empty())
        if (std::uint64_t start = 0; process_start_time(pid, start) == 0) // (our unreaped
            helper_tree_ = site + "/" + tree_name(pid, start);            // child: its pid)
    return {};
}

// A helper we give up on (SIGKILLed) cannot kill its trees, nor the orphans of a worker it
// lost: with a cgroup tree, one write kills every process of it, wherever they went.
void supervisor_service::kill_helper_tree_locked()
{
    if (!helper_tree_.empty())
        kill_cgroup_path(helper_tree_);
}

outcome<std::uint32_t> supervisor_service::cgroup_options(const std::string& request)
{
    if (request.empty() || request == "off")
        return std::uint32_t{0};
    std::lock_guard l(mu_);
    if (!cgroup_request_)
    {
        cgroup_request_ = request;
        cgroup_site_ = find_cgroup_site(request);
    }
    if (*cgroup_request_ != request)
        return make_failure(errc::not_available,
                            "this execution context's supervisor keeps its trees under cgroup " +
                                *cgroup_request_ + ", not " + request +
                                " (one cgroup setting per io_context)",
                            "cgroup");
    const bool explicit_dir = request != "auto";
    if (!cgroup_site_.why_not.empty())
    {
        if (explicit_dir)
            return make_failure(errc::not_available,
                                "cgroup " + request + " cannot be used: " + cgroup_site_.why_not,
                                "cgroup");
        return std::uint32_t{0}; // auto: the sampler holds the caps
    }
    return std::uint32_t{proto::opt_cgroup | (explicit_dir ? proto::opt_cgroup_required : 0u)};
}

void supervisor_service::stop_helper_locked(bool wait)
{
    idle_.clear();
    control_.reset(); // the helper kills every worker and tree, reaps them, and exits
    if (helper_pid_ > 0 && !reap_helper(helper_pidfd_.get(), helper_pid_, wait ? shutdown_wait_ms : 0))
    {
        ::kill(helper_pid_, SIGKILL); // our unreaped child; its workers see the lifeline close
        kill_helper_tree_locked();
        reap_helper(helper_pidfd_.get(), helper_pid_, shutdown_wait_ms);
        if (!helper_tree_.empty()) // (a helper that exited by itself removed its own)
            remove_cgroup_path(helper_tree_, std::chrono::milliseconds(200));
    }
    helper_tree_.clear();
    for (const auto& r : retired_) // killed already: each is gone in a moment
        while (::waitpid(r.pid, nullptr, 0) < 0 && errno == EINTR)
        {
        }
    retired_.clear();
    helper_pidfd_.reset();
    helper_pid_ = -1;
    ++generation_;
}

// The newest idle worker that is still there, taken: one that retired (its claim says so,
// or its channel hung up) is dropped on the way.
unique_fd supervisor_service::idle_channel_locked()
{
    while (!idle_.empty())
    {
        idle_worker w = std::move(idle_.back());
        idle_.pop_back();
        if (w.claim && !w.claim.take())
        {
            ++retired_workers_;
            continue;
        }
        if (channel_usable(w.channel.get()))
            return std::move(w.channel);
    }
    return {};
}

// Asks the helper for a worker on a fresh channel: ours, or an empty one when the control
// socket is full (wait for room). A helper that is gone is replaced once.
outcome<unique_fd> supervisor_service::request_worker_locked(const asio::any_io_executor& ex)
{
    for (int attempt = 0; attempt < 2; ++attempt)
    {
        if (!control_)
            if (auto r = start_helper_locked(); !r)
                return r.error();
        int sv[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0)
            return make_os_failure(errc::internal, "cannot create a supervisor channel", errno);
        unique_fd ours(sv[0]), theirs(sv[1]);
        const int fds[1] = {theirs.get()};
        const int rc =
            proto::send_message(control_.get(), proto::msg_type::spawn_worker, 0, {}, fds);
        if (rc == 0)
            return ours;
        if (rc == EAGAIN)
            return unique_fd();
        retire_helper_locked(ex); // gone: reaped in the background, another one starts
    }
    return make_failure(errc::internal, "the supervisor helper does not accept requests",
                        "supervisor");
}

void supervisor_service::async_acquire(const asio::any_io_executor& ex, channel_handler h)
{
    std::unique_lock l(mu_);
    if (auto ch = idle_channel_locked())
    {
        l.unlock();
        return h(std::move(ch));
    }
    if (waiting_.empty()) // else the ones before go first
    {
        auto got = request_worker_locked(ex);
        if (!got || *got)
        {
            l.unlock();
            return h(std::move(got));
        }
    }
    waiting_.push_back({ex, std::move(h)});
    if (waiting_.size() == 1)
        wait_for_room_locked(ex);
}

// Room on the control socket, or the helper taking nothing for `wedged_after`.
struct supervisor_service::room_wait
{
    asio::posix::stream_descriptor control; // a copy of the control socket's descriptor
    asio::steady_timer limit;
    bool over = false;
};

void supervisor_service::wait_for_room_locked(const asio::any_io_executor& ex)
{
    auto w = std::make_shared<room_wait>(
        room_wait{asio::posix::stream_descriptor(ex), asio::steady_timer(ex, wedged_after)});
    if (int fd = ::fcntl(control_.get(), F_DUPFD_CLOEXEC, 3); fd >= 0)
    {
        w->control.assign(fd);
        w->control.async_wait(asio::posix::stream_descriptor::wait_write,
                              [this, w](boost::system::error_code ec) {
                                  if (!ec)
                                      on_room(w, false);
                              });
    }
    w->limit.async_wait([this, w](boost::system::error_code ec) {
        if (!ec)
            on_room(w, true);
    });
}

// Serves the waiting requests in order, after replacing a wedged helper; waits again when
// the socket fills up before all are served.
void supervisor_service::on_room(const std::shared_ptr<room_wait>& w, bool wedged)
{
    const auto ex = w->limit.get_executor();
    std::vector<std::pair<waiter, outcome<unique_fd>>> served;
    {
        std::lock_guard l(mu_);
        if (std::exchange(w->over, true))
            return;
        boost::system::error_code ignored;
        w->limit.cancel();
        w->control.close(ignored);
        if (wedged)
            retire_helper_locked(ex);
        while (!waiting_.empty())
        {
            auto got = request_worker_locked(ex);
            if (got && !*got)
            {
                wait_for_room_locked(ex);
                break;
            }
            served.emplace_back(std::move(waiting_.front()), std::move(got));
            waiting_.pop_front();
        }
    }
    for (auto& [wt, got] : served)
        asio::post(wt.ex, [h = std::move(wt.h), got = std::move(got)]() mutable {
            h(std::move(got));
        });
}

// The helper is gone or wedged: its workers and trees die with it (each worker watches its
// lifeline); it is killed, and reaped once it has exited, on `ex`.
void supervisor_service::retire_helper_locked(const asio::any_io_executor& ex)
{
    idle_.clear();
    if (control_)
        ::shutdown(control_.get(), SHUT_RDWR); // copies held by a room wait see it too
    control_.reset();
    if (helper_pid_ > 0)
    {
        ::kill(helper_pid_, SIGKILL); // our unreaped child: the pid cannot have been reused
        kill_helper_tree_locked();
        retired_.push_back({helper_pid_, generation_, std::move(helper_tree_)});
        reap_later(ex, helper_pid_, std::move(helper_pidfd_));
    }
    helper_pidfd_.reset();
    helper_pid_ = -1;
    helper_tree_.clear();
    ++generation_;
}

void supervisor_service::reap_later(const asio::any_io_executor& ex, pid_t pid, unique_fd pidfd)
{
    if (!pidfd)
        return wait_exit(ex, pid);
    auto d = std::make_shared<asio::posix::stream_descriptor>(ex, pidfd.release());
    d->async_wait(asio::posix::stream_descriptor::wait_read,
                  [this, d, pid](boost::system::error_code ec) {
                      if (!ec)
                          reaped(pid);
                  });
}

// Without pidfd (Linux before 5.3): looks every 5 ms.
void supervisor_service::wait_exit(const asio::any_io_executor& ex, pid_t pid)
{
    auto t = std::make_shared<asio::steady_timer>(ex, std::chrono::milliseconds(5));
    t->async_wait([this, t, ex, pid](boost::system::error_code ec) {
        if (ec)
            return;
        if (::waitpid(pid, nullptr, WNOHANG) == 0)
            return wait_exit(ex, pid);
        reaped(pid);
    });
}

void supervisor_service::reaped(pid_t pid)
{
    ::waitpid(pid, nullptr, WNOHANG); // it has exited: no wait
    kept_list released;
    {
        std::lock_guard l(mu_);
        auto at = std::find_if(retired_.begin(), retired_.end(),
                               [pid](const retired& r) { return r.pid == pid; });
        if (at == retired_.end())
            return;
        released = take_kept_locked(at->generation);
        // One try, no wait (on the caller's loop): a cgroup still busy is removed by the
        // next helper's sweep of stale trees.
        if (!at->tree.empty())
            remove_cgroup_path(at->tree, std::chrono::milliseconds(0));
        retired_.erase(at);
    }
    // `released` goes here, outside the lock (a lease's destructor touches the filesystem).
}

supervisor_service::kept_list supervisor_service::take_kept_locked(std::uint64_t generation)
{
    kept_list out;
    auto mid = std::stable_partition(kept_.begin(), kept_.end(), [generation](const auto& k) {
        return k.first != generation;
    });
    std::move(mid, kept_.end(), std::back_inserter(out));
    kept_.erase(mid, kept_.end());
    return out;
}

void supervisor_service::keep_until_helper_gone(std::shared_ptr<void> resources)
{
    std::unique_lock l(mu_);
    if (helper_pid_ > 0 || !retired_.empty()) // a helper that may run the tree, or was
    {                                         // replaced a moment ago
        kept_.emplace_back(helper_pid_ > 0 ? generation_ : retired_.back().generation,
                           std::move(resources));
        return;
    }
    l.unlock();
    resources.reset(); // no helper, so no tree
}

void supervisor_service::release(unique_fd channel)
{
    std::vector<idle_worker> gone; // closed once the lock is let go
    std::lock_guard l(mu_);
    prune_retired_locked(gone);
    if (!control_ || idle_.size() >= pool_.max_idle)
        return; // its channel closes: the worker exits
    idle_worker w{std::move(channel), {}};
    if (idle_.size() >= pool_.keep_idle && pool_.retire_after > std::chrono::nanoseconds(0))
    {
        // Beyond the kept ones: it leaves after the wait unless taken first. Where the
        // claim cannot be made or sent, it waits like a kept one (max_idle still bounds).
        if (auto c = proto::idle_claim::make())
        {
            const proto::retire_msg r{pool_.retire_after.count()};
            const int fds[1] = {c.fd()};
            if (proto::send_message(w.channel.get(), proto::msg_type::retire, 0, proto::as_bytes(r),
                                    fds) == 0)
            {
                c.drop_fd();
                w.claim = std::move(c);
            }
        }
    }
    idle_.push_back(std::move(w));
}

// Drops the idle workers that retired by themselves (their claims say so).
void supervisor_service::prune_retired_locked(std::vector<idle_worker>& gone)
{
    auto it = std::stable_partition(idle_.begin(), idle_.end(),
                                    [](const idle_worker& w) { return !w.claim.has_retired(); });
    retired_workers_ += static_cast<std::uint64_t>(std::distance(it, idle_.end()));
    std::move(it, idle_.end(), std::back_inserter(gone));
    idle_.erase(it, idle_.end());
}

// New bounds apply to the workers that come back from now on; the ones waiting beyond the
// new `max_idle` go at once (the oldest first).
void supervisor_service::set_pool_options(const worker_pool_options& o)
{
    std::vector<idle_worker> gone;
    std::lock_guard l(mu_);
    pool_ = o;
    pool_.keep_idle = std::min(pool_.keep_idle, pool_.max_idle);
    prune_retired_locked(gone);
    if (idle_.size() > pool_.max_idle)
    {
        const auto excess = static_cast<std::ptrdiff_t>(idle_.size() - pool_.max_idle);
        std::move(idle_.begin(), idle_.begin() + excess, std::back_inserter(gone));
        idle_.erase(idle_.begin(), idle_.begin() + excess);
    }
}

worker_pool_options supervisor_service::pool_options() const
{
    std::lock_guard l(mu_);
    return pool_;
}

worker_pool_stats supervisor_service::pool_stats() const
{
    std::lock_guard l(mu_);
    worker_pool_stats s{0, retired_workers_};
    for (const auto& w : idle_)
        if (w.claim.has_retired())
            ++s.retired_workers;
        else
            ++s.idle_workers;
    return s;
}

void supervisor_service::on_capped_end(const proto::exit_report_msg* r) noexcept
{
    --watched_;
    if (!r)
        return;
    samples_ += r->samples;
    failed_ += r->failed_samples;
    auto longest = longest_gap_ns_.load();
    while (r->longest_sample_gap_ns > longest &&
           !longest_gap_ns_.compare_exchange_weak(longest, r->longest_sample_gap_ns))
    {}
    if (r->reason == proto::end_reason::budget)
        ++budget_kills_;
    if (r->reason == proto::end_reason::unenforceable)
        ++unenforceable_kills_;
}

sampler_stats supervisor_service::stats() const noexcept
{
    sampler_stats s;
    s.watched_trees = watched_.load();
    s.samples = samples_.load();
    s.ticks = s.samples;
    s.failed_samples = failed_.load();
    s.longest_sample_gap = std::chrono::nanoseconds(longest_gap_ns_.load());
    s.budget_kills = budget_kills_.load();
    s.unenforceable_kills = unenforceable_kills_.load();
    return s;
}

pid_t supervisor_service::helper_pid() const
{
    std::lock_guard l(mu_);
    return helper_pid_;
}

} // namespace sandbox::detail

namespace sandbox {

void set_worker_pool_options(boost::asio::execution_context& ctx,
                             const worker_pool_options& options)
{
    boost::asio::use_service<detail::supervisor_service>(ctx).set_pool_options(options);
}

worker_pool_options get_worker_pool_options(boost::asio::execution_context& ctx)
{
    return boost::asio::use_service<detail::supervisor_service>(ctx).pool_options();
}

worker_pool_stats get_worker_pool_stats(const boost::asio::any_io_executor& ex)
{
    auto& ctx = boost::asio::query(ex, boost::asio::execution::context);
    if (!boost::asio::has_service<detail::supervisor_service>(ctx))
        return {};
    return boost::asio::use_service<detail::supervisor_service>(ctx).pool_stats();
}

sampler_stats get_sampler_stats(const boost::asio::any_io_executor& ex)
{
    auto& ctx = boost::asio::query(ex, boost::asio::execution::context);
    if (!boost::asio::has_service<detail::supervisor_service>(ctx))
        return {};
    return boost::asio::use_service<detail::supervisor_service>(ctx).stats();
}

} // namespace sandbox
