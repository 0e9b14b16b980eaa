// lib/exec/supervise.cpp: one supervised execution, as seen from the caller's executor.
// The command runs under a worker of the supervisor helper (lib/supervisor/): we send it
// the plan (with the timeout, which the worker keeps) and the child's ends of the pipes, read
// the output (capped), feed stdin, and turn cancellation into kill requests. The worker
// keeps the deadline, samples the caps, kills and reaps the whole tree and reports; we
// complete once that report is in and both pipes are at EOF.
//
// One exec, from the caller down (each name is a layer):
//   sandbox::async_exec            token adapter (runner.hpp)
//   detail::async_exec_impl        compiled; `launch` co_spawns runner::exec on the runner's
//                                  executor and turns its throws into (error_code, result)
//                                  plus diagnostics (lib/runner.cpp, lib/front_end.hpp)
//   <backend>::exec                the runner: checks the request, builds a spawn_plan
//   backend::exec_plan             the backend-facing entry: a refusal or a failed run
//                                  throws (here)
//   backend::async_supervise       token adapter over a plan (also for tests and probes)
//   detail::start_supervised       makes the `supervision` below and starts it; sessions
//                                  call it directly for the returned child_control
// The supervision asks the service for a worker channel (asynchronously: a helper to start
// or replace never holds the caller's loop), sends the plan, and ends in `ending_`.
#include <sandbox/backend/supervise.hpp>
#include <sandbox/backend/request.hpp>
#include <sandbox/error.hpp>

#include "exec/child_control.hpp"
#include "exec/exit_classification.hpp"
#include "exec/input_writer.hpp"
#include "kernel/cgroup_site.hpp"
#include "protocol/init_status.hpp"
#include "protocol/protocol.hpp"
#include "supervisor/client.hpp"

#include <boost/asio/as_tuple.hpp>
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
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <variant>

#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sandbox::backend {

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;
using detail::proto::end_reason;
namespace proto = detail::proto;

constexpr std::size_t read_chunk = 64 * 1024;
constexpr auto default_partial_grace = 2s;
// After the worker's report every process of the tree is dead, so the pipes end as soon as
// their buffers are read, unless the tree handed a pipe to a process outside it.
constexpr auto drain_limit = 500ms;

// The reasons a command cannot start, from the worker's posix_spawn errno.
failure spawn_failure(int err, const std::string& executable)
{
    std::string why = err == ENOEXEC ? "not an executable format (no #! line, no ELF header)"
                                     : std::strerror(err);
    // Only what concerns the command names it: EMFILE or a protocol error is ours.
    const errc code = errc_from_errno(err);
    failure f = make_failure(code, "cannot execute " + executable + ": " + why,
                             code == errc::internal ? "" : "command");
    f.diag.path = executable;
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

failure os_failure(const std::string& what, int err)
{
    return make_os_failure(errc::internal, what, err);
}

struct pipe_pair
{
    unique_fd read, write;
    bool open()
    {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0)
            return false;
        read.reset(fds[0]);
        write.reset(fds[1]);
        return true;
    }
};

// The command's standard descriptors: the ends sent to the worker, and ours.
struct stdio_set
{
    unique_fd child_out, child_err, child_in; // child_err empty on a terminal (child_out twice)
    unique_fd out, err, in;                    // ours: read out/err, write in; err empty on a tty
    std::string tty_path;
};

// A pseudo-terminal of `size`: the master is ours (read as stdout), the slave goes to the
// worker, which holds it until the spawn; the command opens it by name as its controlling
// terminal. When the last process holding the slave is gone, reading the master ends (EIO).
outcome<stdio_set> open_terminal(terminal_size size)
{
    stdio_set s;
    s.out.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!s.out || ::grantpt(s.out.get()) != 0 || ::unlockpt(s.out.get()) != 0)
        return os_failure("cannot open a pseudo-terminal", errno);
    char name[128];
    if (int rc = ::ptsname_r(s.out.get(), name, sizeof name); rc != 0)
        return os_failure("cannot name the pseudo-terminal", rc);
    winsize ws{};
    ws.ws_row = size.rows;
    ws.ws_col = size.cols;
    if (::ioctl(s.out.get(), TIOCSWINSZ, &ws) != 0)
        return os_failure("cannot size the pseudo-terminal", errno);
    s.child_out.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    if (!s.child_out)
        return os_failure("cannot open the pseudo-terminal slave", errno);
    s.tty_path = name;
    return s;
}

outcome<stdio_set> open_stdio(const spawn_plan& plan)
{
    if (plan.tty)
        return open_terminal(*plan.tty);
    stdio_set s;
    pipe_pair out, err, in;
    if (!out.open() || !err.open() || (plan.input && !in.open()))
        return os_failure("cannot create the command's pipes", errno);
    s.child_out = std::move(out.write);
    s.child_err = std::move(err.write);
    s.child_in = std::move(in.read);
    s.out = std::move(out.read);
    s.err = std::move(err.read);
    s.in = std::move(in.write);
    return s;
}

// Streamed output is read into one buffer per thread, only once a pipe is readable: an idle
// session holds no read buffer.
char* scratch_buffer()
{
    thread_local std::unique_ptr<char[]> buf(new char[read_chunk]);
    return buf.get();
}

// Reads handed to the output handler per wake-up, so one chatty stream cannot hold the loop.
constexpr int reads_per_wakeup = 16;

class supervision final : public detail::child_control,
                          public std::enable_shared_from_this<supervision>
{
public:
    supervision(asio::any_io_executor ex, spawn_plan plan, supervise_handler h,
                detail::supervisor_service& svc, detail::spawned_fn on_spawned = {})
        : ex_(std::move(ex)), plan_(std::move(plan)), handler_(std::move(h)), svc_(svc),
          on_spawned_(std::move(on_spawned)),
          channel_(ex_), out_{asio::posix::stream_descriptor(ex_)},
          err_{asio::posix::stream_descriptor(ex_)}, in_(ex_)
    {
    }

    // A backend's resources for a command whose end was never reported (the caller went
    // away mid-run) go to the service, which lets them go once the helper that ran the tree
    // is reaped: the tree may still be running while its worker kills it (a write-deny
    // stand-in removed under a live sandbox would unmount it there).
    ~supervision()
    {
        if (plan_.tree_resources)
            svc_.keep_until_helper_gone(std::move(plan_.tree_resources));
    }

    void start();
    void on_channel(outcome<unique_fd> channel);

    // Keeps the handler's executor (which may belong to another execution context) from
    // running out of work while the operation is pending, as Asio operations do.
    void track_handler_work()
    {
        handler_work_ = asio::prefer(asio::get_associated_executor(handler_, ex_),
                                     asio::execution::outstanding_work.tracked);
    }

    void on_cancel(asio::cancellation_type t);

    int terminal_fd() const noexcept override
    {
        return completed_ ? -1 : terminal_fd_;
    }
    bool signal(int signo) override;
    void terminate(std::chrono::nanoseconds grace) override;

private:
    struct stream
    {
        asio::posix::stream_descriptor d;
        stream_capture cap{};
        bool no_splice = false; // splice to /dev/null failed: over the cap, read and count
        bool eof = false;
        bool paused = false; // a chunk is with the on_output_async handler
    };

    bool capped() const
    {
        return plan_.caps.any();
    }
    outcome<void> send_first(unique_fd channel);
    void send_rest();
    void read_channel();
    void on_channel_readable();
    void on_report(const proto::message& m);
    void channel_done();
    void send_kill(end_reason why, std::chrono::nanoseconds grace);
    void read(stream& s);
    void wait_readable(stream& s);
    void on_readable(stream& s, boost::system::error_code ec);
    void drain(stream& s);
    void end_stream(stream& s);
    bool capture(stream& s, std::string_view data);
    void deliver(stream& s, std::string_view data);
    output_stream stream_of(const stream& s) const noexcept;
    void hand_over(stream& s, std::string_view data);
    void resume(stream& s, bool keep);
    void stop_output(std::string why);
    void arm_drain_timer();
    void abandon_pipes();
    void write_input();
    void maybe_finish();
    void finish();
    exec_result ended_result(boost::system::error_code& ec);
    exec_result result_from_report(boost::system::error_code& ec,
                                   std::optional<int> wait_status = std::nullopt);
    exec_result setup_timed_out(boost::system::error_code& ec);
    exec_result wrapped_result(boost::system::error_code& ec, const std::string& err);
    void fail(failure f);
    void complete(boost::system::error_code ec, exec_result r);
    template <class Schedule>
    void deliver(boost::system::error_code ec, exec_result r, Schedule schedule);

    asio::any_io_executor ex_;
    spawn_plan plan_;
    supervise_handler handler_;
    detail::supervisor_service& svc_;
    detail::spawned_fn on_spawned_;
    asio::posix::stream_descriptor channel_;
    std::string encoded_;
    std::size_t sent_ = 0;
    bool plan_sent_ = false;
    std::uint32_t cgroup_options_ = 0; // proto::opt_cgroup bits for the runner's setting
    std::optional<std::pair<end_reason, std::chrono::nanoseconds>> pending_kill_;
    // How the worker's part ended, stored once: running until it is set.
    struct running
    {
    };
    struct not_spawned // the worker could not start the command
    {
        int err;
        std::uint32_t stage; // proto::spawn_stage: the command's, the fork gate's, the cgroup's
    };
    struct worker_lost // the worker died (or spoke garbage) before it reported
    {
    };
    std::variant<running, proto::exit_report_msg, not_spawned, worker_lost> ending_;
    bool ended() const noexcept { return !std::holds_alternative<running>(ending_); }
    const proto::exit_report_msg* report() const noexcept
    {
        return std::get_if<proto::exit_report_msg>(&ending_);
    }
    std::string failure_text_;
    stream out_, err_;
    asio::posix::stream_descriptor in_;
    std::size_t input_off_ = 0;
    std::optional<asio::steady_timer> drain_timer_;
    clock::time_point started_{};
    bool completed_ = false;
    bool pipes_abandoned_ = false;
    bool cancel_requested_ = false;
    bool terminate_requested_ = false;
    int terminal_fd_ = -1; // the pseudo-terminal master while out_ holds it
    bool output_stopped_ = false; // the on_output handler asked to stop
    std::string output_stop_text_;
    unique_fd devnull_;
    asio::any_completion_executor handler_work_;
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

// Asks for a worker; a cancellation or terminate() before it is there waits in
// `pending_kill_` and goes out with the plan.
void supervision::start()
{
    started_ = clock::now();
    auto slot = asio::get_associated_cancellation_slot(handler_);
    if (slot.is_connected())
        slot.template emplace<cancel_fn>(cancel_fn{weak_from_this()});
    // Before the helper may be started: the first runner's setting decides where its tree goes.
    auto cgroup = svc_.cgroup_options(plan_.cgroup);
    if (!cgroup)
        return fail(cgroup.error());
    cgroup_options_ = *cgroup;
    svc_.async_acquire(ex_, [self = shared_from_this()](outcome<unique_fd> channel) {
        self->on_channel(std::move(channel));
    });
}

void supervision::on_channel(outcome<unique_fd> channel)
{
    if (!channel)
        return fail(channel.error());
    if (auto sent = send_first(std::move(*channel)); !sent)
        return fail(sent.error());
    if (capped())
        svc_.on_capped_start();
    if (plan_.input)
        write_input();
    read(out_);
    if (!err_.eof)
        read(err_);
    read_channel();
    if (!plan_sent_)
        send_rest();
    else if (pending_kill_)
        send_kill(pending_kill_->first, pending_kill_->second);
}

// Makes the pipes and sends the first chunk of the plan with the child's descriptors; ours
// of those close right after (the kernel holds them in flight).
outcome<void> supervision::send_first(unique_fd channel)
{
    if (plan_.stdin_fd || plan_.tty)
        plan_.input.reset(); // the backend refused both; the descriptor wins if a plan has both
    auto stdio = open_stdio(plan_);
    if (!stdio)
        return stdio.error();
    proto::plan p;
    p.fixed.caps = plan_.caps;
    p.fixed.sample_interval_ns = plan_.sample_interval.count();
    // The worker keeps the deadline (from the spawn, or for a wrapped command from the
    // init's "started"): a caller whose loop is stuck, or who died while a command holds
    // copies of its descriptors, cannot hold or stretch a run.
    p.fixed.timeout_ns = plan_.timeout.count();
    p.fixed.kill_grace_ns = plan_.kill_grace.count();
    p.fixed.sample_faults = plan_.test_sample_faults;
    if (on_spawned_)
        p.fixed.options |= proto::opt_report_spawn;
    p.fixed.options |= cgroup_options_;
    if (plan_.unix_socket_policy)
    {
        p.fixed.options |= proto::opt_connect_broker;
        for (const auto& f : *plan_.unix_socket_policy)
            p.allowed_sockets.push_back({f.dev, f.ino, f.path});
    }
    p.executable = plan_.executable;
    p.argv = std::move(plan_.argv);
    p.envp = std::move(plan_.envp);
    const int child_err = stdio->child_err ? stdio->child_err.get() : stdio->child_out.get();
    std::vector<int> fds{stdio->child_out.get(), child_err};
    if (plan_.tty)
    {
        p.fixed.options |= proto::opt_tty;
        p.tty_path = stdio->tty_path;
    }
    else if (plan_.stdin_fd)
    {
        p.fixed.fds |= proto::fd_stdin;
        fds.push_back(plan_.stdin_fd->get());
    }
    else if (plan_.input)
    {
        p.fixed.fds |= proto::fd_stdin;
        fds.push_back(stdio->child_in.get());
    }
    const int dir = plan_.work_dir ? plan_.work_dir.get() : plan_.borrowed_work_dir_fd;
    if (dir >= 0)
    {
        p.fixed.fds |= proto::fd_work_dir;
        fds.push_back(dir);
    }
    unique_fd started; // the worker's copy of the status pipe: the timeout starts with it
    if (plan_.inner_status)
    {
        started.reset(::fcntl(plan_.inner_status.get(), F_DUPFD_CLOEXEC, 3));
        if (!started)
            return os_failure("cannot hand the status pipe to the supervisor worker", errno);
        p.fixed.fds |= proto::fd_started;
        p.fixed.setup_timeout_ns = plan_.setup_timeout.count();
        fds.push_back(started.get());
    }
    if (plan_.extra_fds.size() > proto::max_extra_fds)
        return make_failure(errc::internal, "too many extra descriptors for the command");
    for (const auto& x : plan_.extra_fds)
        fds.push_back(x->get());
    p.fixed.extra_fds = static_cast<std::uint32_t>(plan_.extra_fds.size());
    if (plan_.inner_status)
        p.fixed.options |= proto::opt_ignore_job_signals;
    encoded_ = proto::encode_plan(p);
    const std::size_t n = std::min(encoded_.size(), proto::max_payload);
    const bool last = n == encoded_.size();
    int rc = proto::send_message(channel.get(), proto::msg_type::plan_chunk,
                                 last ? proto::flag_last : 0, {encoded_.data(), n}, fds);
    if (rc != 0)
        return os_failure("cannot hand the command to its supervisor worker", rc);
    sent_ = n;
    plan_sent_ = last;
    if (last)
        std::string().swap(encoded_);
    plan_.work_dir.reset();
    plan_.stdin_fd.reset(); // ours closes now; the worker holds its own copy
    plan_.extra_fds.clear(); // the status pipe's write end among them: only the tree holds it
    channel_.assign(channel.release());
    out_.d.assign(stdio->out.release());
    if (plan_.tty)
        terminal_fd_ = out_.d.native_handle();
    if (stdio->err)
        err_.d.assign(stdio->err.release());
    else
        err_.eof = true; // a terminal merges stderr into its one stream
    if (plan_.input)
    {
        int fd = stdio->in.release();
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        in_.assign(fd);
    }
    return {};
}

// The rest of a plan larger than one message (a huge argv or environment).
void supervision::send_rest()
{
    while (sent_ < encoded_.size())
    {
        const std::size_t n = std::min(encoded_.size() - sent_, proto::max_payload);
        const bool last = sent_ + n == encoded_.size();
        int rc = proto::send_message(channel_.native_handle(), proto::msg_type::plan_chunk,
                                     last ? proto::flag_last : 0, {encoded_.data() + sent_, n});
        if (rc == EAGAIN)
        {
            channel_.async_wait(asio::posix::stream_descriptor::wait_write,
                                [self = shared_from_this()](boost::system::error_code ec) {
                                    if (!ec && !self->completed_)
                                        self->send_rest();
                                });
            return;
        }
        if (rc != 0)
            return; // the worker is gone: the channel reader sees it
        sent_ += n;
    }
    plan_sent_ = true;
    std::string().swap(encoded_);
    if (pending_kill_)
        send_kill(pending_kill_->first, pending_kill_->second);
}

void supervision::read_channel()
{
    channel_.async_wait(asio::posix::stream_descriptor::wait_read,
                        [self = shared_from_this()](boost::system::error_code ec) {
                            if (!ec && !self->completed_)
                                self->on_channel_readable();
                        });
}

void supervision::on_channel_readable()
{
    for (;;)
    {
        proto::message m;
        bool eof = false;
        int rc = proto::receive_message(channel_.native_handle(), m, eof);
        if (rc == EAGAIN)
            return read_channel();
        if (eof || rc != 0)
        {
            ending_ = worker_lost{};
            boost::system::error_code ignored;
            channel_.close(ignored);
            return channel_done();
        }
        if (m.head.type == proto::msg_type::spawn_failed)
        {
            proto::spawn_failed_msg f;
            const bool read = proto::from_bytes(m.payload, f);
            ending_ = not_spawned{read && f.error != 0 ? f.error : EPROTO,
                                  read ? f.stage : proto::stage_command};
            return channel_done();
        }
        if (m.head.type == proto::msg_type::exit_report)
            return on_report(m);
        proto::spawned_msg sm;
        if (m.head.type == proto::msg_type::spawned && on_spawned_ &&
            proto::from_bytes(m.payload, sm))
            std::exchange(on_spawned_, nullptr)(sm.pid);
    }
}

void supervision::on_report(const proto::message& m)
{
    proto::exit_report_msg r;
    if (!proto::from_bytes(m.payload, r))
    {
        ending_ = worker_lost{};
        return channel_done();
    }
    ending_ = r;
    failure_text_ = m.payload.substr(sizeof r);
    channel_done();
}

// The worker has said its last word on this plan (or is gone): no process of the tree is
// left, so the pipes end once drained, unless a process outside the tree holds them.
void supervision::channel_done()
{
    boost::system::error_code ignored;
    in_.close(ignored);
    maybe_finish();
    if (!completed_)
        arm_drain_timer();
}

// A stream whose chunk is still with the caller (on_output_async) is not stuck: the limit
// starts again once it is back.
void supervision::arm_drain_timer()
{
    drain_timer_.emplace(ex_, drain_limit);
    drain_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (ec || self->completed_)
            return;
        if (self->out_.paused || self->err_.paused)
            return self->arm_drain_timer();
        self->abandon_pipes();
    });
}

void supervision::send_kill(end_reason why, std::chrono::nanoseconds grace)
{
    if (ended())
        return;
    if (!plan_sent_)
    {
        pending_kill_.emplace(why, grace);
        return;
    }
    proto::kill_msg k{why, 0, grace.count()};
    // A full socket or a gone worker: the channel reader learns the outcome either way.
    proto::send_message(channel_.native_handle(), proto::msg_type::kill, 0, proto::as_bytes(k));
}

// Both sinks read the same way: wait until the pipe is readable, then read what is there
// into the thread's buffer (a few reads per wake-up) and hand each piece to the sink.
void supervision::read(stream& s)
{
    s.d.non_blocking(true);
    wait_readable(s);
}

void supervision::wait_readable(stream& s)
{
    s.d.async_wait(asio::posix::stream_descriptor::wait_read,
                   [self = shared_from_this(), &s](boost::system::error_code ec) {
                       self->on_readable(s, ec);
                   });
}

void supervision::on_readable(stream& s, boost::system::error_code ec)
{
    if (s.eof)
        return; // a posted round that arrived after the stream ended
    if (ec || completed_ || pipes_abandoned_)
        return end_stream(s);
    char* buf = scratch_buffer();
    for (int i = 0; i < reads_per_wakeup; ++i)
    {
        ssize_t n = ::read(s.d.native_handle(), buf, read_chunk);
        if (n > 0)
        {
            const std::string_view data(buf, static_cast<std::size_t>(n));
            if (plan_.on_output_async && !output_stopped_)
                return hand_over(s, data);
            if (plan_.on_output || plan_.on_output_async)
                deliver(s, data);
            else if (capture(s, data))
                return drain(s);
            if (completed_)
                return end_stream(s);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return wait_readable(s);
        return end_stream(s); // EOF, or EIO on a terminal whose last slave holder is gone
    }
    // Budget spent with data still there: come back after others had their turn (the
    // reactor is edge-triggered, so waiting could miss what is already buffered).
    asio::post(ex_, [self = shared_from_this(), &s] { self->on_readable(s, {}); });
}

// The tag of what `s` reads: a terminal's merged output is `tty`.
output_stream supervision::stream_of(const stream& s) const noexcept
{
    if (&s != &out_)
        return output_stream::err;
    return plan_.tty ? output_stream::tty : output_stream::out;
}

// Streaming: hand the chunk to the caller's handler; once it says stop, kill the tree and
// discard what is still read.
void supervision::deliver(stream& s, std::string_view data)
{
    if (output_stopped_)
    {
        s.cap.dropped_bytes += data.size();
        s.cap.truncated = true;
        return;
    }
    bool keep = false;
    try
    {
        keep = plan_.on_output(stream_of(s), data);
        if (!keep)
            output_stop_text_ = "the output handler stopped the run";
    }
    catch (const std::exception& e)
    {
        output_stop_text_ = std::string("the output handler threw: ") + e.what();
    }
    catch (...)
    {
        output_stop_text_ = "the output handler threw";
    }
    if (!keep)
        stop_output(std::move(output_stop_text_));
}

void supervision::stop_output(std::string why)
{
    output_stop_text_ = std::move(why);
    output_stopped_ = true;
    on_cancel(asio::cancellation_type::terminal);
}

// Streaming with back-pressure: the chunk goes to the caller, and this stream is read again
// only once the caller resumes it (always from a fresh handler: no recursion).
void supervision::hand_over(stream& s, std::string_view data)
{
    s.paused = true;
    output_resume r = [self = shared_from_this(), &s](bool keep) {
        asio::post(self->ex_, [self, &s, keep] { self->resume(s, keep); });
    };
    try
    {
        plan_.on_output_async(stream_of(s), data, std::move(r));
    }
    catch (const std::exception& e)
    {
        s.paused = false;
        stop_output(std::string("the output handler threw: ") + e.what());
        on_readable(s, {});
    }
    catch (...)
    {
        s.paused = false;
        stop_output("the output handler threw");
        on_readable(s, {});
    }
}

void supervision::resume(stream& s, bool keep)
{
    s.paused = false;
    if (!keep && !output_stopped_)
        stop_output("the output handler stopped the run");
    on_readable(s, {});
}

// Capture: keep what fits under the cap, count the rest. True once the cap is reached and
// the rest can go to /dev/null inside the kernel (splice).
bool supervision::capture(stream& s, std::string_view data)
{
    const std::size_t room = plan_.max_output_bytes > s.cap.data.size()
                                 ? static_cast<std::size_t>(std::min<std::uint64_t>(
                                       plan_.max_output_bytes - s.cap.data.size(), data.size()))
                                 : 0;
    s.cap.data.append(data.data(), room);
    if (room < data.size())
    {
        s.cap.dropped_bytes += data.size() - room;
        s.cap.truncated = true;
    }
    if (s.cap.data.size() < plan_.max_output_bytes || s.no_splice)
        return false;
    if (!devnull_)
        devnull_.reset(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    return static_cast<bool>(devnull_);
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
        s.no_splice = true;
        return wait_readable(s);
    }
}

void supervision::end_stream(stream& s)
{
    if (&s == &out_)
        terminal_fd_ = -1;
    s.eof = true;
    boost::system::error_code ignored;
    s.d.close(ignored);
    maybe_finish();
}

void supervision::write_input()
{
    if (detail::write_input(in_.native_handle(), *plan_.input, input_off_) == EAGAIN)
        return in_.async_wait(asio::posix::stream_descriptor::wait_write,
                              [self = shared_from_this()](boost::system::error_code ec) {
                                  if (!ec && self->in_.is_open())
                                      self->write_input();
                              });
    // All written, or EPIPE: the child closed its stdin, the rest is not wanted.
    boost::system::error_code ignored;
    in_.close(ignored);
}

void supervision::abandon_pipes()
{
    pipes_abandoned_ = true;
    boost::system::error_code ignored;
    for (stream* s : {&out_, &err_})
        if (!s->eof)
            s->d.cancel(ignored);
}

bool supervision::signal(int signo)
{
    if (completed_ || ended() || !plan_sent_)
        return false;
    proto::signal_msg m{signo, 0};
    return proto::send_message(channel_.native_handle(), proto::msg_type::signal, 0,
                               proto::as_bytes(m)) == 0;
}

void supervision::terminate(std::chrono::nanoseconds grace)
{
    if (completed_)
        return;
    terminate_requested_ = true;
    send_kill(end_reason::cancelled, grace);
}

void supervision::on_cancel(asio::cancellation_type t)
{
    if (completed_)
        return;
    if ((t & (asio::cancellation_type::terminal | asio::cancellation_type::partial)) ==
        asio::cancellation_type::none)
        return;
    // Asked before completion, so it completes as cancelled unless the worker already
    // stopped the tree for another cause (timeout, cap): a command that ended by itself
    // meanwhile counts as cancelled too.
    cancel_requested_ = true;
    if (ended())
        return abandon_pipes(); // the tree is gone; only reading the pipes is left

    const bool terminal =
        (t & asio::cancellation_type::terminal) != asio::cancellation_type::none;
    send_kill(end_reason::cancelled,
              terminal ? 0ns
                       : (plan_.kill_grace > 0ns ? plan_.kill_grace
                                                 : std::chrono::nanoseconds(default_partial_grace)));
}

void supervision::maybe_finish()
{
    if (!completed_ && ended() && out_.eof && err_.eof)
        finish();
}

void supervision::finish()
{
    completed_ = true;
    if (drain_timer_)
        drain_timer_->cancel();
    boost::system::error_code ec;
    exec_result r = ended_result(ec);
    r.wall_time = clock::now() - started_;
    r.out = std::move(out_.cap);
    r.err = std::move(err_.cap);
    r.diag.backend = plan_.backend_name;
    const auto* rep = report();
    if (capped())
        svc_.on_capped_end(rep);
    // The worker said the tree is gone (or nothing was spawned), unless it was lost.
    const bool tree_gone = rep ? rep->reason != end_reason::supervisor_lost
                               : std::holds_alternative<not_spawned>(ending_);
    // A worker that reported is idle again and serves the next execution.
    if (tree_gone)
        svc_.release(unique_fd(channel_.release()));
    boost::system::error_code ignored;
    channel_.close(ignored);
    auto settle = std::move(plan_.settle);
    if (!settle || !tree_gone)
        return complete(ec, std::move(r));
    // The backend's records about the tree (the proxy's `closed` ones) come first.
    auto result = std::make_shared<exec_result>(std::move(r));
    settle([self = shared_from_this(), ec, result] { self->complete(ec, std::move(*result)); });
}

// The unix-socket policy's filter did not install on the command.
failure connect_filter_unavailable(int err)
{
    failure f = make_failure(errc::not_available,
                             std::string("the unix-socket policy cannot be held: its seccomp "
                                         "filter did not install (") +
                                 std::strerror(err) + ")",
                             "net.unix_sockets");
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

// The worker could not make the execution's cgroup (a cgroup directory was required).
failure cgroup_unavailable(int err, const std::string& cgroup)
{
    failure f = make_failure(errc::not_available,
                             "cannot run the command in a cgroup of its own under " + cgroup +
                                 ": " + std::strerror(err),
                             "cgroup");
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

// The result the ending stands for. Once the worker has said the tree is gone (a report, or
// nothing spawned), the backend's resources for it go; after a lost worker they stay until
// the helper is reaped (the destructor hands them over).
exec_result supervision::ended_result(boost::system::error_code& ec)
{
    if (const auto* n = std::get_if<not_spawned>(&ending_))
    {
        plan_.tree_resources.reset();
        failure f = n->stage == proto::stage_fork_gate ? fork_gate_unavailable(n->err)
                    : n->stage == proto::stage_cgroup  ? cgroup_unavailable(n->err, plan_.cgroup)
                    : n->stage == proto::stage_connect_filter
                        ? connect_filter_unavailable(n->err)
                        : spawn_failure(n->err, plan_.executable);
        exec_result r;
        r.diag = std::move(f.diag);
        ec = f.code;
        return r;
    }
    if (report())
    {
        plan_.tree_resources.reset();
        return plan_.inner_status ? wrapped_result(ec, err_.cap.data) : result_from_report(ec);
    }
    exec_result r;
    ec = make_error_code(errc::internal);
    r.status = exec_status::unenforceable;
    r.diag.limit = "supervisor";
    r.diag.message = "the supervisor worker of this execution died before it reported "
                     "(the command may have killed it); the helper killed what was left "
                     "of the tree";
    return r;
}

// A wrapped command (bwrap): the status init inside says how the command itself ended. The
// tree is gone by now, so whatever the init wrote is in the pipe.
exec_result supervision::wrapped_result(boost::system::error_code& ec, const std::string& err)
{
    std::string text;
    char buf[256];
    for (ssize_t n; (n = ::read(plan_.inner_status.get(), buf, sizeof buf)) > 0;)
        text.append(buf, static_cast<std::size_t>(n));
    const auto said = detail::parse_init_report(text);
    const auto& rep = *report();
    const bool by_itself = rep.reason == end_reason::natural && !cancel_requested_;
    if (by_itself && said.exec_errno)
    {
        failure f = spawn_failure(*said.exec_errno, plan_.inner_command);
        if (!said.unreachable_path.empty())
        {
            f.diag.message += " (the command's user cannot search these PATH entries, skipped:";
            for (const auto& dir : said.unreachable_path)
                f.diag.message += " " + dir;
            f.diag.message += ")";
        }
        exec_result r;
        r.diag = std::move(f.diag);
        ec = f.code;
        return r;
    }
    if (rep.reason == end_reason::timed_out && !said.started && !cancel_requested_)
        return setup_timed_out(ec);
    if (by_itself && !said.started)
    {
        // The wrapper ended before the init ran: it could not set the sandbox up. Its
        // message is all there is on stderr (unless the output was streamed).
        std::string why = err.substr(0, 400);
        while (!why.empty() && (why.back() == '\n' || why.back() == '\r'))
            why.pop_back();
        const int code = WIFEXITED(rep.wait_status) ? WEXITSTATUS(rep.wait_status) : -1;
        failure f = make_failure(errc::not_available,
                                 plan_.backend_name + " could not set up the sandbox" +
                                     (why.empty() ? " (exit status " + std::to_string(code) + ")"
                                                  : ": " + why),
                                 "backend");
        exec_result r; // not_started: the command never ran
        r.diag = std::move(f.diag);
        ec = f.code;
        return r;
    }
    return result_from_report(ec, said.wait_status);
}

// The set-up's own bound ran out before the init said "started": the command never ran.
exec_result supervision::setup_timed_out(boost::system::error_code& ec)
{
    exec_result r;
    r.status = exec_status::timed_out;
    r.diag.limit = "setup_timeout";
    r.diag.configured = plan_.setup_timeout.count();
    r.diag.observed = (clock::now() - started_).count();
    r.diag.message = plan_.backend_name + " did not set the sandbox up within " +
                     detail::describe_duration(plan_.setup_timeout) +
                     " (its set-up bound); the command never started and the tree was killed";
    ec = make_error_code(errc::timeout);
    return r;
}

exec_result supervision::result_from_report(boost::system::error_code& ec,
                                            std::optional<int> wait_status)
{
    const auto& rep = *report();
    detail::exit_facts f;
    f.reason = rep.reason;
    f.wait_status = wait_status.value_or(rep.wait_status);
    f.budget = static_cast<budget_kind>(rep.budget_which);
    f.observed = rep.observed;
    f.configured = rep.configured;
    f.cancel_requested = cancel_requested_;
    f.terminate_requested = terminate_requested_;
    if (output_stopped_)
        f.output_stop_text = output_stop_text_;
    f.pipes_abandoned = pipes_abandoned_;
    f.timeout = plan_.timeout;
    f.elapsed = clock::now() - started_;
    f.sample_failure_limit = max_consecutive_sample_failures;
    f.sample_failure_text = failure_text_;
    auto o = detail::classify_exit(f);
    ec = o.ec;
    o.r.cpu_time = std::chrono::nanoseconds(rep.cpu_ns);
    o.r.peak_memory_bytes = rep.peak_memory_bytes;
    o.r.in_cgroup = (rep.flags & proto::report_in_cgroup) != 0;
    return std::move(o.r);
}

// Nothing was spawned: the plan never reached a worker.
void supervision::fail(failure f)
{
    completed_ = true;
    plan_.tree_resources.reset();
    exec_result r;
    r.diag = std::move(f.diag);
    r.diag.backend = plan_.backend_name;
    // Posted: the initiating function has not returned yet.
    deliver(f.code, std::move(r), [this](auto fn) { asio::post(ex_, std::move(fn)); });
}

void supervision::complete(boost::system::error_code ec, exec_result r)
{
    deliver(ec, std::move(r), [this](auto fn) { asio::dispatch(ex_, std::move(fn)); });
}

// Hands the result to the handler once, on its own executor, through `schedule` (post or
// dispatch on ours); the handler's cancellation slot is cleared first.
template <class Schedule>
void supervision::deliver(boost::system::error_code ec, exec_result r, Schedule schedule)
{
    auto h = std::move(handler_);
    auto work = std::move(handler_work_);
    auto slot = asio::get_associated_cancellation_slot(h);
    if (slot.is_connected())
        slot.clear();
    auto hex = asio::get_associated_executor(h, ex_);
    schedule(asio::bind_executor(hex, [h = std::move(h), ec, r = std::move(r)]() mutable {
        std::move(h)(ec, std::move(r));
    }));
}

} // namespace


void take_pass_through(exec_request& req, std::int64_t default_max_output_bytes,
                       std::string backend_name, spawn_plan& plan)
{
    const exec_options& o = req.options;
    plan.input = o.input;
    plan.stdin_fd = std::move(req.stdin_fd);
    plan.on_output = std::move(req.on_output);
    plan.on_output_async = std::move(req.on_output_async);
    plan.tty = req.tty;
    plan.max_output_bytes = output_cap(o, default_max_output_bytes);
    plan.timeout = o.timeout;
    plan.kill_grace = o.kill_grace;
    plan.caps = caps_of(o);
    plan.backend_name = std::move(backend_name);
}

enforcement_report supervised_enforcement(const std::string& cgroup)
{
    enforcement_report e = supervised_enforcement();
    e.tree_kill_by = "subreaper";
    e.cpu_cap_by = e.cpu_cap ? "sampler" : "";
    e.memory_cap_by = e.memory_cap ? "sampler" : "";
    e.task_cap_by = e.task_cap ? "sampler" : "";
    e.process_cap_by = e.process_cap ? "fork_gate" : "";
    if (cgroup.empty() || cgroup == "off")
    {
        e.cgroup_notes.push_back("off: this runner's cgroup setting");
        return e;
    }
    const auto site = detail::find_cgroup_site(cgroup);
    if (!site.why_not.empty())
    {
        e.cgroup_notes.push_back(site.why_not);
        if (cgroup != "auto") // an explicit directory that cannot be used refuses every exec
            return enforcement_report{.unavailable = "cgroup " + cgroup + ": " + site.why_not};
        return e;
    }
    // cpu.stat and cgroup.kill need no controller; memory.max and pids.max do.
    e.cgroup = site.parent;
    e.tree_kill_by = "cgroup";
    e.cpu_cap = true;
    e.cpu_cap_by = "cgroup";
    if (site.controllers & detail::cgc_memory)
        e.memory_cap = true, e.memory_cap_by = "cgroup";
    else
        e.cgroup_notes.push_back("memory cap: the memory controller is not enabled for the "
                                 "children of " + site.parent + " (sampled instead)");
    if (site.controllers & detail::cgc_pids)
        e.task_cap = true, e.task_cap_by = "cgroup";
    else
        e.cgroup_notes.push_back("task cap: the pids controller is not enabled for the "
                                 "children of " + site.parent + " (sampled instead)");
    e.cgroup_notes.push_back("process cap: held by the fork gate (the pids controller "
                             "counts threads too)");
    if (!site.has_kill)
        e.cgroup_notes.push_back("no cgroup.kill (Linux 5.14): the tree is frozen, killed "
                                 "and thawed");
    return e;
}

enforcement_report supervised_enforcement()
{
    enforcement_report e;
    e.env_allow_list = true;
    const bool s = sampler_usable();
    e.memory_cap = s;
    e.cpu_cap = s;
    e.process_cap = s && fork_gate_usable();
    e.task_cap = s;
    e.tree_kill = true;
    return e;
}

namespace {

// The helper program, opened once it can be: a wrapper runs it from a descriptor
// (/proc/self/fd/N), so that it need not be visible to the user or inside the sandbox it
// runs as (a build tree under /tmp is not). It is the same program as the supervisor's, so
// it speaks its protocol. Null when it cannot be opened.
std::shared_ptr<const unique_fd> helper_program()
{
    static std::mutex m;
    static std::shared_ptr<const unique_fd> opened;
    std::lock_guard l(m);
    if (!opened)
    {
        const std::string path = detail::supervisor_program();
        unique_fd fd(path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (fd)
            opened = std::make_shared<const unique_fd>(std::move(fd));
    }
    return opened;
}

// The helper program could not be opened for a part it plays besides supervising (`role`).
failure helper_missing(const char* role)
{
    return make_failure(errc::not_available,
                        std::string("the supervisor helper sandbox-supervisor, which ") + role +
                            ", was not found or cannot be opened",
                        "supervisor");
}

} // namespace

outcome<status_init> make_status_init()
{
    // The wrapper runs the init from its fd 4 (/proc/self/fd/4).
    auto program = helper_program();
    if (!program)
        return helper_missing("also reports how a sandboxed command ended");
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return os_failure("cannot create the status pipe", errno);
    status_init s;
    s.status = unique_fd(p[0]);
    s.fds = {std::make_shared<const unique_fd>(p[1]), program};
    s.argv = {"/proc/self/fd/4", "--init", "3", "--"};
    return s;
}

outcome<void> run_as_user(spawn_plan& plan, std::uint32_t uid, std::uint32_t gid)
{
    auto program = helper_program();
    if (!program)
        return helper_missing("switches a root caller's sandbox to its user");
    // The helper among the descriptors the plan hands over (the status init's), or one more.
    auto at = std::find(plan.extra_fds.begin(), plan.extra_fds.end(), program);
    if (at == plan.extra_fds.end())
        at = plan.extra_fds.insert(at, program);
    const auto fd = 3 + (at - plan.extra_fds.begin());
    std::vector<std::string> argv{"sandbox-supervisor", "--as", std::to_string(uid),
                                  std::to_string(gid), "--", plan.executable};
    if (!plan.argv.empty())
        argv.insert(argv.end(), plan.argv.begin() + 1, plan.argv.end());
    plan.argv = std::move(argv);
    plan.executable = "/proc/self/fd/" + std::to_string(fd);
    return {};
}

namespace {

// The helper's answers, one errno per line; empty unless there is one for each check.
std::vector<int> read_answers(int fd, std::size_t want)
{
    std::string text;
    char buf[512];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;)
        if (n > 0)
            text.append(buf, static_cast<std::size_t>(n));
        else if (errno != EINTR)
            return {};
    std::vector<int> got;
    for (std::size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
        got.push_back(std::atoi(text.c_str() + at));
    return got.size() == want ? got : std::vector<int>{};
}

} // namespace

std::vector<int> access_as(std::uint32_t uid, std::uint32_t gid,
                           const std::vector<access_check>& checks)
{
    const std::vector<int> result;
    auto program = helper_program();
    int out[2];
    if (!program || ::pipe2(out, O_CLOEXEC) != 0)
        return result;
    unique_fd read_end(out[0]);
    // Above 3, so that neither dup2 below overwrites the other's source.
    unique_fd write_end(::fcntl(out[1], F_DUPFD_CLOEXEC, 4));
    unique_fd helper(::fcntl(program->get(), F_DUPFD_CLOEXEC, 4));
    ::close(out[1]);
    if (!write_end || !helper)
        return result;
    std::vector<std::string> args{"sandbox-supervisor", "--access-as", std::to_string(uid),
                                  std::to_string(gid)};
    for (const auto& c : checks)
        args.insert(args.end(), {std::to_string(c.mode), c.path});
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    char* envp[] = {nullptr};
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    int rc = ::posix_spawn_file_actions_adddup2(&fa, helper.get(), 3);
    rc = rc ? rc : ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&fa, write_end.get(), 1);
    rc = rc ? rc : ::posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    pid_t pid = -1;
    rc = rc ? rc : ::posix_spawn(&pid, "/proc/self/fd/3", &fa, nullptr, argv.data(), envp);
    ::posix_spawn_file_actions_destroy(&fa);
    write_end.reset();
    if (rc != 0)
        return result;
    auto got = read_answers(read_end.get(), checks.size());
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR)
    {
    }
    return got;
}

outcome<spawn_plan> with_backend_name(outcome<spawn_plan> plan, const char* backend)
{
    if (plan)
        return plan;
    failure f = plan.error();
    f.diag.backend = backend;
    return f;
}

asio::awaitable<exec_result> exec_plan(asio::any_io_executor ex, outcome<spawn_plan> plan,
                                       std::string backend)
{
    plan = with_backend_name(std::move(plan), backend.c_str());
    if (!plan)
        throw error(plan.error().code, plan.error().diag);
    auto [ec, r] = co_await async_supervise(std::move(ex), std::move(*plan),
                                            asio::as_tuple(asio::use_awaitable));
    if (ec)
    {
        diagnostics d = r.diag;
        throw error(ec, std::move(d), std::move(r));
    }
    co_return std::move(r);
}

} // namespace sandbox::backend

namespace sandbox::detail {

namespace asio = boost::asio;

std::shared_ptr<child_control> start_supervised(asio::any_io_executor ex,
                                                backend::spawn_plan plan, spawned_fn on_spawned,
                                                backend::supervise_handler done)
{
    auto& svc = asio::use_service<supervisor_service>(asio::query(ex, asio::execution::context));
    auto s = std::make_shared<backend::supervision>(ex, std::move(plan), std::move(done), svc,
                                           std::move(on_spawned));
    s->track_handler_work();
    s->start();
    return s;
}

} // namespace sandbox::detail
