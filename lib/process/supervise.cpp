// lib/process/supervise.cpp: one supervised execution. Callback-driven state on the caller's
// executor: two capped output readers, an optional stdin writer, the pidfd wait, a timeout
// timer, a kill-grace timer, a pipe-holder timer and the sampler watch. It completes once
// the leader has exited, both pipes are at EOF (or their holders were killed) and the
// leader is reaped.
#include <sandbox/backend/supervise.hpp>
#include <sandbox/error.hpp>

#include "process/proc.hpp"
#include "process/spawn.hpp"
#include "process/tree.hpp"
#include "sampler/sampler_service.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <csignal>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace sandbox::backend {

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using detail::end_reason;

constexpr std::size_t read_chunk = 64 * 1024;
constexpr auto holder_check_delay = 20ms;
constexpr int max_holder_rounds = 25;
constexpr auto default_partial_grace = 2s;

// write() that cannot raise SIGPIPE in the host process: SIGPIPE is blocked in this thread
// for the call and a SIGPIPE it caused is consumed. No process-wide handler is touched.
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t len) noexcept
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    bool was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t n = ::write(fd, data, len);
    int err = errno;
    if (n < 0 && err == EPIPE && !was_pending)
    {
        timespec zero{0, 0};
        while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR)
        {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = err;
    return n;
}

std::uint64_t pipe_inode(int fd) noexcept
{
    struct stat st;
    return ::fstat(fd, &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

std::string millis(std::chrono::nanoseconds d)
{
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) +
           " ms";
}

class supervision : public std::enable_shared_from_this<supervision>
{
public:
    supervision(asio::any_io_executor ex, spawn_plan plan, supervise_handler h)
        : ex_(std::move(ex)), plan_(std::move(plan)), handler_(std::move(h)), pidfd_(ex_),
          out_{asio::posix::stream_descriptor(ex_)}, err_{asio::posix::stream_descriptor(ex_)},
          in_(ex_), arbiter_(std::make_shared<detail::kill_arbiter>())
    {
    }

    void start(detail::spawned_child c);

    // Keeps the handler's executor (which may belong to another execution context) from
    // running out of work while the operation is pending, as Asio operations do.
    void track_handler_work()
    {
        handler_work_ = asio::prefer(asio::get_associated_executor(handler_, ex_),
                                     asio::execution::outstanding_work.tracked);
    }

    void on_cancel(asio::cancellation_type t);

private:
    struct stream
    {
        asio::posix::stream_descriptor d;
        stream_capture cap{};
        std::unique_ptr<char[]> buf{};
        bool eof = false;
        std::uint64_t ino = 0;
    };

    void read(stream& s);
    void drain(stream& s);
    void end_stream(stream& s);
    void on_read(stream& s, boost::system::error_code ec, std::size_t n);
    void write_input();
    void on_leader_exit();
    void on_timeout();
    void stop_tree(std::chrono::nanoseconds grace);
    void check_holders();
    void maybe_finish();
    void finish();
    void complete(boost::system::error_code ec, exec_result r);
    std::vector<detail::known_process> known_members() const
    {
        return watch_ ? watch_->members() : std::vector<detail::known_process>{};
    }

    asio::any_io_executor ex_;
    spawn_plan plan_;
    supervise_handler handler_;
    pid_t pid_ = -1;
    asio::posix::stream_descriptor pidfd_;
    stream out_, err_;
    asio::posix::stream_descriptor in_;
    std::size_t input_off_ = 0;
    std::optional<asio::steady_timer> timeout_timer_, grace_timer_, holder_timer_;
    std::shared_ptr<detail::kill_arbiter> arbiter_;
    std::shared_ptr<detail::tree_watch> watch_;
    clock::time_point started_{};
    bool leader_exited_ = false;
    bool completed_ = false;
    bool pipes_abandoned_ = false;
    unique_fd devnull_;
    asio::any_completion_executor handler_work_;
    int holder_rounds_ = 0;
};

struct cancel_fn
{
    std::weak_ptr<supervision> w;
    void operator()(asio::cancellation_type t) const
    {
        if (auto s = w.lock())
            s->on_cancel(t);
    }
};

void supervision::start(detail::spawned_child c)
{
    started_ = clock::now();
    pid_ = c.pid;
    pidfd_.assign(c.pidfd.release());
    out_.d.assign(c.stdout_r.release());
    err_.d.assign(c.stderr_r.release());
    out_.buf.reset(new char[read_chunk]);
    err_.buf.reset(new char[read_chunk]);

    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected())
        slot.template emplace<cancel_fn>(cancel_fn{weak_from_this()});

    if (plan_.memory_bytes > 0 || plan_.cpu_budget > 0ns || plan_.max_processes > 0)
    {
        detail::cap_limits l{plan_.memory_bytes, plan_.cpu_budget, plan_.max_processes};
        auto& ctx = asio::query(ex_, asio::execution::context);
        watch_ = asio::use_service<detail::sampler_service>(ctx).watch(
            ex_, pid_, l, plan_.sample_interval, arbiter_);
    }
    if (plan_.timeout > 0ns)
    {
        timeout_timer_.emplace(ex_, plan_.timeout);
        timeout_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec)
                self->on_timeout();
        });
    }
    if (plan_.input)
    {
        int fd = c.stdin_w.release();
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        in_.assign(fd);
        write_input();
    }
    read(out_);
    read(err_);
    pidfd_.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](boost::system::error_code ec) {
                          if (!ec)
                              self->on_leader_exit();
                      });
}

void supervision::read(stream& s)
{
    s.d.async_read_some(asio::buffer(s.buf.get(), read_chunk),
                        [self = shared_from_this(), &s](boost::system::error_code ec,
                                                        std::size_t n) {
                            self->on_read(s, ec, n);
                        });
}

void supervision::on_read(stream& s, boost::system::error_code ec, std::size_t n)
{
    if (n > 0)
    {
        std::size_t room = plan_.max_output_bytes > s.cap.data.size()
                               ? static_cast<std::size_t>(std::min<std::uint64_t>(
                                     plan_.max_output_bytes - s.cap.data.size(), n))
                               : 0;
        s.cap.data.append(s.buf.get(), room);
        if (room < n)
        {
            s.cap.dropped_bytes += n - room;
            s.cap.truncated = true;
        }
    }
    if (ec || completed_)
        return end_stream(s);
    if (s.cap.data.size() >= plan_.max_output_bytes)
    {
        // Over the cap: move the rest to /dev/null inside the kernel (splice), counting it.
        if (!devnull_)
            devnull_.reset(::open("/dev/null", O_WRONLY | O_CLOEXEC));
        if (devnull_)
        {
            s.buf.reset();
            return drain(s);
        }
    }
    read(s);
}

void supervision::drain(stream& s)
{
    for (;;)
    {
        ssize_t n = ::splice(s.d.native_handle(), nullptr, devnull_.get(), nullptr, 1 << 20,
                             SPLICE_F_NONBLOCK);
        if (n > 0)
        {
            s.cap.dropped_bytes += static_cast<std::uint64_t>(n);
            s.cap.truncated = true;
            continue;
        }
        if (n == 0)
            return end_stream(s);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN)
        {
            s.d.async_wait(asio::posix::stream_descriptor::wait_read,
                           [self = shared_from_this(), &s](boost::system::error_code ec) {
                               if (ec || self->completed_)
                                   self->end_stream(s);
                               else
                                   self->drain(s);
                           });
            return;
        }
        // splice is not possible here: drain by reading instead.
        s.buf.reset(new char[read_chunk]);
        return read(s);
    }
}

void supervision::end_stream(stream& s)
{
    s.eof = true;
    boost::system::error_code ignored;
    s.d.close(ignored);
    maybe_finish();
}

void supervision::write_input()
{
    const std::string& data = *plan_.input;
    while (input_off_ < data.size())
    {
        ssize_t n = write_no_sigpipe(in_.native_handle(), data.data() + input_off_,
                                     data.size() - input_off_);
        if (n > 0)
        {
            input_off_ += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
            in_.async_wait(asio::posix::stream_descriptor::wait_write,
                           [self = shared_from_this()](boost::system::error_code ec) {
                               if (!ec && self->in_.is_open())
                                   self->write_input();
                           });
            return;
        }
        break; // EPIPE: the child closed its stdin; the rest is not wanted
    }
    boost::system::error_code ignored;
    in_.close(ignored);
}

void supervision::on_leader_exit()
{
    leader_exited_ = true;
    arbiter_->claim(end_reason::natural);
    // Whatever the leader left behind in its group (and, when caps were watched, anywhere
    // in its tree) goes now: exec never waits on a background job.
    auto known = known_members();
    detail::signal_tree(pid_, pid_, known, SIGKILL, false);
    boost::system::error_code ignored;
    in_.close(ignored);
    maybe_finish();
    if (!completed_)
    {
        holder_timer_.emplace(ex_, holder_check_delay);
        holder_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
            if (!ec)
                self->check_holders();
        });
    }
}

// The leader is gone but a pipe is still open: some process outside the group (setsid,
// setpgid, double fork) holds it. Find the holders through /proc and kill them; after
// max_holder_rounds stop reading rather than hang.
void supervision::check_holders()
{
    if (completed_)
        return;
    for (stream* s : {&out_, &err_})
    {
        if (s->eof)
            continue;
        if (!s->ino)
            s->ino = pipe_inode(s->d.native_handle());
        for (pid_t p : detail::find_pipe_holders(s->ino))
            ::kill(p, SIGKILL);
    }
    if (++holder_rounds_ >= max_holder_rounds)
    {
        pipes_abandoned_ = true;
        boost::system::error_code ignored;
        for (stream* s : {&out_, &err_})
            if (!s->eof)
                s->d.cancel(ignored);
        return;
    }
    holder_timer_->expires_after(holder_check_delay);
    holder_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec)
            self->check_holders();
    });
}

void supervision::on_timeout()
{
    if (leader_exited_ || completed_)
        return;
    if (arbiter_->claim(end_reason::timed_out))
        stop_tree(plan_.kill_grace);
}

void supervision::on_cancel(asio::cancellation_type t)
{
    if (completed_)
        return;
    if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
        asio::cancellation_type::none)
        return;
    if (leader_exited_)
    {
        // Only draining is left: stop it now.
        pipes_abandoned_ = true;
        boost::system::error_code ignored;
        out_.d.cancel(ignored);
        err_.d.cancel(ignored);
        return;
    }
    if (!arbiter_->claim(end_reason::cancelled))
        return;
    bool terminal = (t & asio::cancellation_type::terminal) != asio::cancellation_type::none;
    stop_tree(terminal ? 0ns
                       : (plan_.kill_grace > 0ns ? plan_.kill_grace
                                                 : std::chrono::nanoseconds(default_partial_grace)));
}

void supervision::stop_tree(std::chrono::nanoseconds grace)
{
    auto known = known_members();
    if (grace <= 0ns)
    {
        detail::signal_tree(pid_, pid_, known, SIGKILL, true);
        return;
    }
    detail::signal_tree(pid_, pid_, known, SIGTERM, true);
    grace_timer_.emplace(ex_, grace);
    grace_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec && !self->leader_exited_)
            detail::signal_tree(self->pid_, self->pid_, self->known_members(), SIGKILL, true);
    });
}

void supervision::maybe_finish()
{
    if (!completed_ && leader_exited_ && out_.eof && err_.eof)
        finish();
}

void supervision::finish()
{
    completed_ = true;
    for (auto* t : {&timeout_timer_, &grace_timer_, &holder_timer_})
        if (*t)
            (*t)->cancel();
    // Stop the sampler before reaping: after the reap the group id may be reused.
    if (watch_)
        watch_->stop();

    siginfo_t info{};
    struct rusage ru{};
    long rc;
    do
        rc = ::syscall(SYS_waitid, P_PIDFD, pidfd_.native_handle(), &info, WEXITED, &ru);
    while (rc < 0 && errno == EINTR);
    int wait_err = rc < 0 ? errno : 0;
    boost::system::error_code ignored;
    pidfd_.close(ignored);
    in_.close(ignored);

    exec_result r;
    r.wall_time = clock::now() - started_;
    r.out = std::move(out_.cap);
    r.err = std::move(err_.cap);
    r.diag.backend = plan_.backend_name;
    auto tv_ns = [](const timeval& tv) {
        return std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
    };
    r.cpu_time = tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
    r.peak_memory_bytes = static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
    if (watch_)
    {
        r.peak_memory_bytes = std::max(r.peak_memory_bytes, watch_->peak_rss_bytes());
        r.cpu_time = std::max<std::chrono::nanoseconds>(r.cpu_time, watch_->cpu_used());
    }
    bool killed_by_signal = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
    if (killed_by_signal)
        r.signal = info.si_status;

    boost::system::error_code ec;
    switch (arbiter_->get())
    {
    case end_reason::timed_out:
        r.status = exec_status::timed_out;
        ec = make_error_code(errc::timeout);
        r.diag.message = "timed out after " + millis(plan_.timeout) + "; process tree killed";
        r.diag.limit = "timeout";
        r.diag.configured = plan_.timeout.count();
        r.diag.observed = r.wall_time.count();
        break;
    case end_reason::cancelled:
        r.status = exec_status::cancelled;
        ec = asio::error::operation_aborted;
        r.diag.message = "cancelled by the caller; process tree killed";
        break;
    case end_reason::budget:
    {
        auto d = watch_->decision();
        r.status = exec_status::budget_exceeded;
        r.budget = d.which;
        ec = make_error_code(errc::budget_exceeded);
        r.diag.limit = to_string(d.which);
        r.diag.observed = d.observed;
        r.diag.configured = d.configured;
        {
            const bool procs = d.which == budget_kind::processes; // trips above, not at
            const char* unit = d.which == budget_kind::memory ? " bytes"
                               : procs                        ? " processes"
                                                              : " ns of cpu";
            r.diag.message = std::string(to_string(d.which)) + " cap exceeded (" +
                             std::to_string(d.observed) + (procs ? " > " : " >= ") +
                             std::to_string(d.configured) + unit + "); process tree killed";
        }
        break;
    }
    case end_reason::unenforceable:
        r.status = exec_status::unenforceable;
        ec = make_error_code(errc::not_available);
        r.diag.message = "resource caps became unenforceable: sampling failed " +
                         std::to_string(max_consecutive_sample_failures) +
                         " times in a row (" + watch_->last_failure() + "); process tree killed";
        r.diag.limit = "sampler";
        break;
    case end_reason::natural:
    case end_reason::none:
        if (wait_err != 0)
        {
            ec = make_error_code(errc::internal);
            r.diag.message = std::string("waiting for the process failed: ") +
                             std::strerror(wait_err);
            r.diag.cause = boost::system::error_code(wait_err, boost::system::system_category());
        }
        else if (killed_by_signal)
        {
            r.status = exec_status::signaled;
        }
        else
        {
            r.status = exec_status::exited;
            r.exit_code = info.si_status;
        }
        break;
    }
    if (pipes_abandoned_ && arbiter_->get() == end_reason::natural)
        r.diag.message = "output pipes were still held open after the tree was killed; "
                         "stopped reading them";
    complete(ec, std::move(r));
}

void supervision::complete(boost::system::error_code ec, exec_result r)
{
    auto h = std::move(handler_);
    auto work = std::move(handler_work_);
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected())
        slot.clear();
    auto hex = asio::get_associated_executor(h, ex_);
    asio::dispatch(ex_, asio::bind_executor(hex, [h = std::move(h), ec, r = std::move(r)]() mutable {
                       std::move(h)(ec, std::move(r));
                   }));
}

} // namespace

void async_supervise_impl(asio::any_io_executor ex, spawn_plan plan, supervise_handler handler)
{
    detail::spawn_args a;
    a.executable = plan.executable;
    a.argv = std::move(plan.argv);
    a.envp = std::move(plan.envp);
    a.work_dir_fd = plan.work_dir ? plan.work_dir.get() : plan.borrowed_work_dir_fd;
    a.stdin_pipe = plan.input.has_value();
    auto child = detail::spawn_child(a);
    plan.work_dir.reset();
    if (!child)
    {
        exec_result r;
        r.diag = child.error().diag;
        r.diag.backend = plan.backend_name;
        auto ec = child.error().code;
        auto hex = asio::get_associated_executor(handler, ex);
        asio::post(ex, asio::bind_executor(hex, [h = std::move(handler), ec,
                                                  r = std::move(r)]() mutable {
                       std::move(h)(ec, std::move(r));
                   }));
        return;
    }
    auto s = std::make_shared<supervision>(ex, std::move(plan), std::move(handler));
    s->track_handler_work();
    s->start(std::move(*child));
}

} // namespace sandbox::backend
