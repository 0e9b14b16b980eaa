// lib/exec/worker_wire.cpp: the exec core's wire to its worker (supervision.hpp): a channel
// from the supervisor service, the plan with the child's descriptors, then one coroutine that
// sends the rest of a large plan and reads the worker's reports (spawned, spawn failed,
// exit); the kill and signal requests.
#include "exec/stdio.hpp"
#include "exec/supervision.hpp"

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <algorithm>

#include <fcntl.h>

namespace sandbox::backend {

namespace {

// After the worker's report every process of the tree is dead, so the pipes end as soon as
// their buffers are read, unless the tree handed a pipe to a process outside it.
constexpr std::chrono::milliseconds drain_limit{500};

struct cancel_fn
{
    std::weak_ptr<supervision> w;
    void operator()(asio::cancellation_type t) const
    {
        if (auto s = w.lock())
            s->on_cancel(t);
    }
};

} // namespace

// Asks for a worker; a cancellation or terminate() before the plan is out waits in the
// machine and goes out with it.
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
    auto take = [self = shared_from_this()](outcome<unique_fd> channel) {
        self->on_channel(std::move(channel));
    };
    if (plan_.acquire_channel)
        return std::exchange(plan_.acquire_channel, nullptr)(std::move(take));
    svc_.async_acquire(ex_, std::move(take));
}

void supervision::on_channel(outcome<unique_fd> channel)
{
    if (!channel)
        return fail(channel.error());
    auto sent = send_first(std::move(*channel));
    if (!sent)
        return fail(sent.error());
    if (capped())
        svc_.on_capped_start();
    if (plan_.input)
        asio::co_spawn(ex_, feed_input(shared_from_this()), asio::detached);
    read(out_);
    if (err_.d.is_open())
        read(err_);
    feed({detail::exec_event::kind::plan_out, *sent});
    asio::co_spawn(ex_, talk_to_worker(shared_from_this()), asio::detached);
}

// Makes the pipes and sends the first chunk of the plan with the child's descriptors; ours
// of those close right after (the kernel holds them in flight). True when that was all of it.
outcome<bool> supervision::send_first(unique_fd channel)
{
    if (plan_.stdin_fd || plan_.tty)
        plan_.input.reset(); // the backend refused both; the descriptor wins if a plan has both
    auto stdio = open_stdio(plan_);
    if (!stdio)
        return stdio.error();
    proto::plan p = plan_message();
    unique_fd started; // the worker's copy of the status pipe: the timeout starts with it
    auto fds = child_descriptors(*stdio, p, started);
    if (!fds)
        return fds.error();
    encoded_ = proto::encode_plan(p);
    const std::size_t n = std::min(encoded_.size(), proto::max_payload);
    const bool last = n == encoded_.size();
    int rc = proto::send_message(channel.get(), proto::msg_type::plan_chunk,
                                 last ? proto::flag_last : 0, {encoded_.data(), n}, *fds);
    if (rc != 0)
        return make_os_failure(errc::internal, "cannot hand the command to its supervisor worker",
                               rc);
    sent_ = n;
    if (last)
        std::string().swap(encoded_);
    plan_.work_dir.reset();
    plan_.stdin_fd.reset();  // ours closes now; the worker holds its own copy
    plan_.extra_fds.clear(); // the status pipe's write end among them: only the tree holds it
    channel_.assign(channel.release());
    keep_our_ends(*stdio);
    return last;
}

// The plan's fixed part, the command and its environment (moved out of the spawn plan).
proto::plan supervision::plan_message()
{
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
    if (plan_.inner_status)
        p.fixed.options |= proto::opt_ignore_job_signals;
    if (plan_.inside_work_dir)
    {
        p.fixed.options |= proto::opt_inside;
        p.work_dir_path = *plan_.inside_work_dir;
    }
    p.executable = plan_.executable;
    p.argv = std::move(plan_.argv);
    p.envp = std::move(plan_.envp);
    return p;
}

// The descriptors that go with the plan, in the order its `fds` bits say: stdout, stderr,
// then stdin, the work dir, the status pipe (`started` keeps the worker's copy open until
// the message is sent) and the backend's extra ones.
outcome<std::vector<int>> supervision::child_descriptors(const stdio_set& stdio, proto::plan& p,
                                                         unique_fd& started)
{
    const int child_err = stdio.child_err ? stdio.child_err.get() : stdio.child_out.get();
    std::vector<int> fds{stdio.child_out.get(), child_err};
    if (plan_.tty)
    {
        p.fixed.options |= proto::opt_tty;
        p.tty_path = stdio.tty_path;
    }
    else if (plan_.stdin_fd)
    {
        p.fixed.fds |= proto::fd_stdin;
        fds.push_back(plan_.stdin_fd->get());
    }
    else if (plan_.input)
    {
        p.fixed.fds |= proto::fd_stdin;
        fds.push_back(stdio.child_in.get());
    }
    const int dir = plan_.work_dir ? plan_.work_dir.get() : plan_.borrowed_work_dir_fd;
    if (dir >= 0)
    {
        p.fixed.fds |= proto::fd_work_dir;
        fds.push_back(dir);
    }
    if (plan_.inner_status)
    {
        started.reset(::fcntl(plan_.inner_status.get(), F_DUPFD_CLOEXEC, 3));
        if (!started)
            return make_os_failure(errc::internal,
                                   "cannot hand the status pipe to the supervisor worker", errno);
        p.fixed.fds |= proto::fd_started;
        p.fixed.setup_timeout_ns = plan_.setup_timeout.count();
        fds.push_back(started.get());
    }
    if (plan_.extra_fds.size() > proto::max_extra_fds)
        return make_failure(errc::internal, "too many extra descriptors for the command");
    for (const auto& x : plan_.extra_fds)
        fds.push_back(x->get());
    p.fixed.extra_fds = static_cast<std::uint32_t>(plan_.extra_fds.size());
    return fds;
}

// Our ends of the command's streams, once the child's are with the worker.
void supervision::keep_our_ends(stdio_set& stdio)
{
    out_.d.assign(stdio.out.release());
    if (plan_.tty)
        terminal_fd_ = out_.d.native_handle();
    if (stdio.err)
        err_.d.assign(stdio.err.release());
    else
        end_stream(err_); // a terminal merges stderr into its one stream
    if (plan_.input)
    {
        int fd = stdio.in.release();
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
        in_.assign(fd);
    }
}

// The worker's side of the run: the rest of a large plan, then its reports until its last
// word on the plan (or its loss). Nothing comes from it before it holds the whole plan.
asio::awaitable<void> supervision::talk_to_worker(std::shared_ptr<supervision> /*keep_alive*/)
{
    co_await send_rest();
    for (;;)
    {
        auto [ec] =
            co_await channel_.async_wait(asio::posix::stream_descriptor::wait_read, with_error);
        if (ec || phase() == detail::exec_phase::done || !take_messages())
            co_return;
    }
}

// The rest of a plan larger than one message (a huge argv or environment). A worker gone
// meanwhile is seen by the reading that follows.
asio::awaitable<void> supervision::send_rest()
{
    while (phase() == detail::exec_phase::sending)
    {
        if (sent_ == encoded_.size())
        {
            std::string().swap(encoded_);
            feed({detail::exec_event::kind::rest_out});
            co_return;
        }
        const std::size_t n = std::min(encoded_.size() - sent_, proto::max_payload);
        const bool last = sent_ + n == encoded_.size();
        int rc = proto::send_message(channel_.native_handle(), proto::msg_type::plan_chunk,
                                     last ? proto::flag_last : 0, {encoded_.data() + sent_, n});
        if (rc == EAGAIN)
        {
            auto [ec] = co_await channel_.async_wait(asio::posix::stream_descriptor::wait_write,
                                                     with_error);
            if (ec)
                co_return;
            continue;
        }
        if (rc != 0)
            co_return;
        sent_ += n;
    }
}

// What the worker sent, up to its last word: false once that came (or it is gone).
bool supervision::take_messages()
{
    for (;;)
    {
        proto::message m;
        bool eof = false;
        int rc = proto::receive_message(channel_.native_handle(), m, eof);
        if (rc == EAGAIN)
            return true;
        if (eof || rc != 0)
        {
            ending_ = worker_lost{};
            boost::system::error_code ignored;
            channel_.close(ignored);
            channel_done();
            return false;
        }
        if (m.head.type == proto::msg_type::spawn_failed)
        {
            proto::spawn_failed_msg f;
            const bool read = proto::from_bytes(m.payload, f);
            ending_ = not_spawned{read && f.error != 0 ? f.error : EPROTO,
                                  read ? f.stage : proto::stage_command};
            channel_done();
            return false;
        }
        if (m.head.type == proto::msg_type::exit_report)
        {
            on_report(m);
            return false;
        }
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
    feed({detail::exec_event::kind::worker_done});
}

// A stream whose chunk is still with the caller (on_output_async) is not stuck: the limit
// starts again once it is back.
void supervision::arm_drain_timer()
{
    drain_timer_.emplace(ex_, drain_limit);
    drain_timer_->async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec)
            self->feed({detail::exec_event::kind::drain_limit, false,
                        self->out_.paused || self->err_.paused});
    });
}

void supervision::send_kill(const detail::kill_request& r)
{
    proto::kill_msg k{r.why, 0, r.grace.count()};
    // A full socket or a gone worker: the channel reader learns the outcome either way.
    proto::send_message(channel_.native_handle(), proto::msg_type::kill, 0, proto::as_bytes(k));
}

bool supervision::signal(int signo)
{
    if (!detail::tree_running(phase()))
        return false;
    proto::signal_msg m{signo, 0};
    return proto::send_message(channel_.native_handle(), proto::msg_type::signal, 0,
                               proto::as_bytes(m)) == 0;
}

void supervision::terminate(std::chrono::nanoseconds grace)
{
    feed({detail::exec_event::kind::terminate, false, false, grace});
}

} // namespace sandbox::backend
