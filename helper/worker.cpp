// helper/worker.cpp: the per-execution subreaper (see worker.hpp). Coroutines on the
// worker's own io_context, on its main thread, read the channel, watch the helper's lifeline,
// reap children (SIGCHLD through a signalfd: blocked in every thread, which inherit the
// mask), answer the fork gate and sample the caps; only the memory cap's PSS reads run on a
// thread of their own (pss_reader.hpp).
#include "helper/worker.hpp"

#include "helper/spawn.hpp"
#include "helper/fork_gate.hpp"
#include "helper/pss_reader.hpp"
#include "helper/budget.hpp"
#include "helper/channel.hpp"
#include "protocol/protocol.hpp"
#include "helper/subtree.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

namespace asio = boost::asio;
using backend::unique_fd;
using proto::end_reason;
using std::chrono::nanoseconds;
using awaitable = asio::awaitable<void>;

// How long a fork the gate let go may take to show in a listing (process_gate).
constexpr nanoseconds fork_settle_time = std::chrono::milliseconds(5);

// The cpus a tree's tasks may run on at once (for pace_of's reach times): all that
// are online, since a member may widen the affinity it inherited.
unsigned online_cpus()
{
    static const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<unsigned>(n) : 1u;
}

nanoseconds tv_ns(const timeval& tv)
{
    return std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
}

nanoseconds children_cpu()
{
    struct rusage ru{};
    ::getrusage(RUSAGE_CHILDREN, &ru);
    return tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
}

nanoseconds ticks_ns(std::uint64_t ticks)
{
    return nanoseconds(static_cast<std::int64_t>(ticks * 1'000'000'000ull /
                                                 static_cast<std::uint64_t>(clock_ticks_per_second())));
}

// One listing summed up: usage, the ledger's view of each member, and whether a live member
// ignores SIGCHLD. The children of such a member end without reaching any rusage, so the
// ledger can only add what they had used when last seen: the tree is sampled as often as can
// be while such a member lives, even with no child (one forked just after a sample and gone
// before the next would never be seen), and those children's time is read in nanoseconds
// (schedstat), not as utime + stime, which are whole clock ticks rounded down separately (up
// to 20 ms short per child).
struct tallied
{
    tree_usage usage;
    std::vector<cpu_ledger::member> seen;
    bool kernel_reaper = false;
};

tallied tally(const std::vector<subtree_member>& members)
{
    tallied t;
    t.seen.reserve(members.size());
    std::vector<pid_t> reapers;
    for (const auto& m : members)
        if (!m.stat.zombie() && m.stat.children_reaped_by_kernel())
            reapers.push_back(m.stat.pid);
    t.kernel_reaper = !reapers.empty();
    for (const auto& m : members)
    {
        const auto& st = m.stat;
        nanoseconds own = ticks_ns(st.utime + st.stime);
        int err = 0;
        if (!st.zombie() && std::find(reapers.begin(), reapers.end(), st.ppid) != reapers.end())
        {
            if (auto ns = read_runtime_ns(st.pid, err)) // a child the kernel will reap
                own = std::max(own, nanoseconds(static_cast<std::int64_t>(*ns)));
        }
        t.seen.push_back({st.pid, st.ppid, st.starttime, own, ticks_ns(st.cutime + st.cstime),
                          !st.zombie() && st.children_reaped_by_kernel()});
        // A process in state X is being reaped right now: a waiting parent may already hold
        // its time in the children time read earlier in this listing. The next sample finds
        // it there (or, for a kernel reaper's child, in the ledger).
        if (st.state != 'X')
            t.usage.cpu += ticks_ns(st.cpu_ticks());
        t.usage.rss_bytes += st.rss_pages * static_cast<std::uint64_t>(page_size_bytes());
        t.usage.processes += st.live() ? 1 : 0;
        t.usage.tasks += st.live() ? static_cast<std::uint64_t>(st.num_threads) : 0;
    }
    return t;
}

// The tree's RSS sum now: a listing, whose stat reads take no memory-map lock.
std::uint64_t rss_sum_now()
{
    std::vector<subtree_member> members;
    list_subtree(members);
    std::uint64_t sum = 0;
    for (const auto& m : members)
        sum += m.stat.rss_pages * static_cast<std::uint64_t>(page_size_bytes());
    return sum;
}

// True unless `pid` is still the process that started at `starttime` (zombies included: their
// time is still to be counted by whoever reaps them).
bool member_ended(pid_t pid, std::uint64_t starttime)
{
    int err = 0;
    auto st = read_proc_stat(pid, err);
    return !st || st->starttime != starttime;
}

// The live members of a listing (proc_stat::live).
std::uint64_t live_count(const std::vector<subtree_member>& members)
{
    return static_cast<std::uint64_t>(std::count_if(
        members.begin(), members.end(), [](const auto& m) { return m.stat.live(); }));
}

// Closes every descriptor but `a` and `b` (and 0-2, which point at /dev/null).
void close_other_fds(int a, int b)
{
    const unsigned lo = static_cast<unsigned>(std::min(a, b));
    const unsigned hi = static_cast<unsigned>(std::max(a, b));
    auto close_span = [](unsigned first, unsigned last) {
        if (first <= last)
            ::syscall(SYS_close_range, first, last, 0u);
    };
    close_span(3, lo - 1);
    close_span(lo + 1, hi - 1);
    close_span(hi + 1, ~0u);
}

/// The state of the plan being run.
struct current_exec
{
    explicit current_exec(cap_limits l) : budget(l) {}

    std::uint64_t id = 0;
    pid_t pid = -1;
    bool leader_reaped = false;
    int status = 0;
    struct rusage leader_ru{};
    end_reason reason = end_reason::none;
    bool graceful_stop = false;
    cap_budget budget;
    cpu_ledger ledger;
    cap_decision decision{};
    nanoseconds children_base{0};
    std::uint64_t samples = 0, failed = 0, killed_after = 0;
    std::uint32_t faults_left = 0;
    // Members' children are reaped by the kernel (SIGCHLD ignored): seen from a loss the
    // ledger found (kept), or predicted from a live member that ignores SIGCHLD (per sample).
    bool kernel_reaps = false;
    bool kernel_reaper_alive = false;
    std::string last_failure;
    // Members we reaped since the last sample (the ledger leaves them out: they are in our
    // RUSAGE_CHILDREN).
    std::unordered_set<pid_t> reaped_since_sample;
    std::shared_ptr<asio::steady_timer> sample_timer, grace_timer, deadline_timer;
    // The memory cap's second look (made only once the RSS sum reaches the cap).
    std::shared_ptr<pss_reader> pss;
    // Under a process cap: the fork gate's listener and its decisions (fork_gate.hpp).
    std::shared_ptr<asio::posix::stream_descriptor> gate;
    std::optional<process_gate> forks;
};

class worker
{
public:
    worker(asio::io_context& ctx, int chan, int lifeline, int sigfd)
        : ctx_(ctx), chan_(ctx, chan), lifeline_(ctx, lifeline), sigfd_(ctx, sigfd)
    {
    }

    void start()
    {
        asio::co_spawn(ctx_, read_channel(), asio::detached);
        asio::co_spawn(ctx_, watch_lifeline(), asio::detached);
        asio::co_spawn(ctx_, reap_loop(), asio::detached);
    }

private:
    awaitable read_channel();
    awaitable watch_lifeline();
    awaitable reap_loop();
    awaitable sample_loop(std::uint64_t id, nanoseconds interval,
                          std::shared_ptr<asio::steady_timer> t);
    awaitable grace_wait(std::uint64_t id, nanoseconds grace,
                         std::shared_ptr<asio::steady_timer> t);
    awaitable deadline_wait(std::uint64_t id, nanoseconds timeout, nanoseconds grace,
                            std::shared_ptr<asio::steady_timer> t);
    awaitable gate_loop(std::uint64_t id, std::shared_ptr<asio::posix::stream_descriptor> g);
    asio::awaitable<bool> count_at_the_cap(std::uint64_t id, pid_t asking,
                                           asio::steady_timer& settle);
    void on_fork(int listener, const fork_request& req);
    void gate_broke(const char* what, int err);
    bool running(std::uint64_t id) const { return cur_ && cur_->id == id; }
    // Forks are judged by the cap while the tree runs, and during a graceful stop (its
    // members may clean up); once it is being killed, every fork is refused.
    bool admitting() const
    {
        return cur_->reason == end_reason::none || cur_->graceful_stop;
    }
    void on_message(proto::message& m);
    void start_exec(const proto::plan& p);
    void spawn_failed(int err, proto::spawn_stage stage = proto::stage_command);
    void signal_group(int signo);
    // One sample: the listing and its usage (`ok` false when it failed), the members
    // and whether the memory cap needs their PSS before the usage can be judged.
    struct sample
    {
        bool ok = false;
        tree_usage usage;
        std::vector<subtree_member> members;
        bool wants_pss = false;
    };
    sample look();
    asio::awaitable<void> second_look(std::uint64_t id, sample& s);
    std::optional<tree_usage> judge(const sample& s);
    pace_input pace_of(const cap_budget& b, nanoseconds took) const;
    void stop(end_reason why, nanoseconds grace);
    void on_reaped(pid_t p, int status, const struct rusage& ru);
    void after_reap(bool children_left);
    void kill_all_and_finish();
    void finish();
    [[noreturn]] void terminate(end_reason why);
    reap_fn reaper()
    {
        return [this](pid_t p, int st, const struct rusage& ru) { on_reaped(p, st, ru); };
    }

    asio::io_context& ctx_;
    asio::posix::stream_descriptor chan_, lifeline_, sigfd_;
    std::string plan_buf_;
    std::vector<unique_fd> plan_fds_;
    std::optional<current_exec> cur_;
    std::uint64_t next_id_ = 1;
    bool closing_ = false;
};

awaitable worker::read_channel()
{
    co_await read_messages(chan_, [this](proto::message& m) { on_message(m); });
    terminate(end_reason::abandoned); // the library let go of this channel, or died
}

awaitable worker::watch_lifeline()
{
    boost::system::error_code ec;
    co_await lifeline_.async_wait(asio::posix::stream_descriptor::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
    // Only the helper holds the write end and never writes: readable means it is gone.
    terminate(end_reason::supervisor_lost);
}

awaitable worker::reap_loop()
{
    co_await on_each_sigchld(sigfd_, [this] { after_reap(reap_exited(reaper())); });
}

void worker::on_message(proto::message& m)
{
    switch (m.head.type)
    {
    case proto::msg_type::plan_chunk:
        if (plan_buf_.empty() && plan_fds_.empty())
            plan_fds_ = std::move(m.fds);
        plan_buf_ += m.payload;
        if ((m.head.flags & proto::flag_last) != 0)
        {
            auto p = proto::decode_plan(plan_buf_);
            plan_buf_.clear();
            if (!p || cur_)
                spawn_failed(cur_ ? EBUSY : EPROTO);
            else
                start_exec(*p);
            plan_fds_.clear();
        }
        break;
    case proto::msg_type::kill:
    {
        proto::kill_msg k;
        if (proto::from_bytes(m.payload, k) &&
            (k.reason == end_reason::timed_out || k.reason == end_reason::cancelled))
            stop(k.reason, nanoseconds(std::max<std::int64_t>(k.grace_ns, 0)));
        break;
    }
    case proto::msg_type::signal:
    {
        proto::signal_msg sig;
        if (proto::from_bytes(m.payload, sig) && sig.signo > 0 && sig.signo < NSIG)
            signal_group(sig.signo);
        break;
    }
    default:
        break; // nothing else is sent to a worker
    }
}

// The command leads its process group, so its pid names the group; while the leader is
// unreaped (a zombie at worst) neither the pid nor the group id can be reused.
void worker::signal_group(int signo)
{
    if (!cur_ || cur_->leader_reaped)
        return; // (during a graceful stop too: a SIGKILL may not wait for the grace)
    if (::kill(-cur_->pid, signo) != 0)
        ::kill(cur_->pid, signo); // the group is gone (the leader left it): the leader alone
}

void worker::spawn_failed(int err, proto::spawn_stage stage)
{
    proto::spawn_failed_msg f{err, stage};
    proto::send_message(chan_.native_handle(), proto::msg_type::spawn_failed, 0,
                        proto::as_bytes(f));
}

void worker::start_exec(const proto::plan& p)
{
    const auto& f = p.fixed;
    const std::size_t want = 2 + ((f.fds & proto::fd_stdin) ? 1 : 0) +
                             ((f.fds & proto::fd_work_dir) ? 1 : 0) + f.extra_fds;
    if (f.extra_fds > proto::max_extra_fds || plan_fds_.size() != want)
        return spawn_failed(EPROTO);
    spawn_args a;
    a.executable = p.executable;
    a.argv = p.argv;
    a.envp = p.envp;
    a.stdout_fd = plan_fds_[0].get();
    a.stderr_fd = plan_fds_[1].get();
    std::size_t next = 2;
    if (f.fds & proto::fd_stdin)
        a.stdin_fd = plan_fds_[next++].get();
    if (f.fds & proto::fd_work_dir)
        a.work_dir_fd = plan_fds_[next++].get();
    while (next < plan_fds_.size())
        a.extra_fds.push_back(plan_fds_[next++].get());
    a.ignore_job_signals = (f.options & proto::opt_ignore_job_signals) != 0;
    if (f.options & proto::opt_tty)
        a.tty_path = p.tty_path;
    pid_t pid = -1;
    cap_limits limits = f.caps;
    unique_fd listener;
    bool gate_failed = false;
    int rc = limits.max_processes > 0 ? spawn_gated(a, pid, listener, gate_failed)
                                      : spawn_command(a, pid);
    // Our copies of the command's pipes go now, or the library never sees EOF.
    plan_fds_.clear();
    if (rc != 0)
        return spawn_failed(rc, gate_failed ? proto::stage_fork_gate : proto::stage_command);

    cur_.emplace(limits);
    cur_->id = next_id_++;
    cur_->pid = pid;
    cur_->children_base = children_cpu();
    cur_->faults_left = f.sample_faults;
    if (f.options & proto::opt_report_spawn)
    {
        proto::spawned_msg sm{pid, 0};
        proto::send_message(chan_.native_handle(), proto::msg_type::spawned, 0,
                            proto::as_bytes(sm));
    }
    if (listener)
    {
        cur_->forks.emplace(limits.max_processes, fork_settle_time);
        cur_->forks->on_listing(1); // the command
        cur_->gate = std::make_shared<asio::posix::stream_descriptor>(ctx_, listener.release());
        asio::co_spawn(ctx_, gate_loop(cur_->id, cur_->gate), asio::detached);
    }
    if (f.timeout_ns > 0)
    {
        cur_->deadline_timer = std::make_shared<asio::steady_timer>(ctx_);
        asio::co_spawn(ctx_,
                       deadline_wait(cur_->id, nanoseconds(f.timeout_ns),
                                     nanoseconds(std::max<std::int64_t>(f.kill_grace_ns, 0)),
                                     cur_->deadline_timer),
                       asio::detached);
    }
    if (limits.any())
    {
        cur_->sample_timer = std::make_shared<asio::steady_timer>(ctx_);
        const auto interval = nanoseconds(std::max<std::int64_t>(f.sample_interval_ns, 1'000'000));
        asio::co_spawn(ctx_, sample_loop(cur_->id, interval, cur_->sample_timer), asio::detached);
    }
}

// What the pacer needs of the last sample (sample_pacer). A memory cap's reach counts the
// tree's own tasks (at most one per cpu) faulting at once, a cpu budget's every cpu; an idle
// tree waits longer only where even every cpu could not pass a bound meanwhile.
pace_input worker::pace_of(const cap_budget& b, nanoseconds took) const
{
    const unsigned cpus = online_cpus();
    const auto tasks = static_cast<unsigned>(std::min<std::uint64_t>(b.last_tasks(), cpus));
    pace_input in;
    // (as often as can be while a member's children are reaped by the kernel: see tally)
    in.pressure = cur_->kernel_reaps || cur_->kernel_reaper_alive ? 1.0 : b.pressure();
    in.reach = std::min(b.memory_reach_time(tasks), b.cpu_reach_time(cpus));
    in.idle_reach = std::min(b.memory_reach_time(cpus), b.cpu_reach_time(cpus));
    in.took = took;
    return in;
}

awaitable worker::sample_loop(std::uint64_t id, nanoseconds interval,
                              std::shared_ptr<asio::steady_timer> t)
{
    // A young tree is sampled often so that a fork bomb or a fast allocator is caught
    // early, a tree near a cap more often again, an idle one far from its caps less often,
    // and none later than it could pass a cap's bound (sample_pacer, pace_of).
    sample_pacer pacer(interval, cur_->budget.limits().max_tasks == 0);
    auto delay = pacer.first();
    for (;;)
    {
        t->expires_after(delay);
        boost::system::error_code ec;
        co_await t->async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec || !cur_ || cur_->id != id || cur_->reason != end_reason::none)
            co_return;
        const auto began = std::chrono::steady_clock::now();
        auto taken = look();
        if (taken.wants_pss)
        {
            co_await second_look(id, taken);
            if (!cur_ || cur_->id != id || cur_->reason != end_reason::none)
                co_return;
        }
        const auto usage = judge(taken);
        if (!cur_ || cur_->id != id)
            co_return;
        const auto now = std::chrono::steady_clock::now();
        const auto in = pace_of(cur_->budget, now - began);
        delay = usage ? pacer.after_sample(*usage, now, in) : pacer.after_failure(in);
    }
}

awaitable worker::gate_loop(std::uint64_t id, std::shared_ptr<asio::posix::stream_descriptor> g)
{
    asio::steady_timer settle(ctx_);
    const int fd = g->native_handle();
    for (;;)
    {
        // Wake-ups are edge-triggered and two forks can come as one: take every request
        // waiting before waiting again. Readable also means the tree is gone (no process
        // uses the filter): then there is nothing to receive (before Linux 6.6 receiving
        // would block for good).
        const auto state = gate_state(fd);
        if (state == gate_listener::tree_gone)
            co_return;
        boost::system::error_code ec;
        if (state == gate_listener::idle)
        {
            co_await g->async_wait(asio::posix::stream_descriptor::wait_read,
                                   asio::redirect_error(asio::use_awaitable, ec));
            if (ec || !running(id))
                co_return;
            continue;
        }
        fork_request req;
        if (int err = receive_fork(fd, req); err == ENOENT || err == EINTR)
            continue; // the task asking was killed meanwhile
        else if (err != 0)
            co_return gate_broke("receiving a fork failed", err);
        if (admitting() && cur_->forks->wants_listing() &&
            !co_await count_at_the_cap(id, req.pid, settle))
            co_return;
        on_fork(fd, req);
        if (!running(id))
            co_return;
    }
}

// A fork at the cap: lists the tree (once the forks of other tasks admitted just now have had
// time to land), and while the fork still does not fit, up to four times more a settle time
// apart (20 ms in all), since a member being killed may still be listed until it gets a cpu. The tree waits meanwhile: every fork of it is
// held until answered. False when the execution ended meanwhile.
asio::awaitable<bool> worker::count_at_the_cap(std::uint64_t id, pid_t asking,
                                                asio::steady_timer& settle)
{
    auto relist = [this] {
        std::vector<subtree_member> members;
        list_subtree(members); // on an error, what could be read (a lower bound)
        cur_->forks->on_listing(live_count(members));
    };
    auto wait_until = [&](std::chrono::steady_clock::time_point t) -> asio::awaitable<bool> {
        boost::system::error_code ec;
        settle.expires_at(t);
        co_await settle.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        co_return running(id);
    };
    if (auto until = cur_->forks->list_after(asking, std::chrono::steady_clock::now()))
        if (!co_await wait_until(*until))
            co_return false;
    relist();
    for (int look = 0; look < 4 && cur_->forks->wants_listing(); ++look)
    {
        if (!co_await wait_until(std::chrono::steady_clock::now() + fork_settle_time))
            co_return false;
        relist();
    }
    co_return true;
}

// One fork of the tree asks to go ahead: admitted while the count stays within the cap;
// otherwise refused, and the tree is killed as over budget, as the sampler would on seeing
// one process too many (during a graceful stop a refusal is all: the grace's end kills).
void worker::on_fork(int listener, const fork_request& req)
{
    auto& c = *cur_;
    const bool open = admitting();
    const bool allow = open && c.forks->admit(req.pid, std::chrono::steady_clock::now());
    const int err = answer_fork(listener, req, allow);
    if (err != 0 && err != ENOENT) // the task would wait for good
        return gate_broke("answering a fork failed", err);
    if (allow || !open || c.graceful_stop || err == ENOENT) // (the task asking is gone)
        return;
    c.decision = {cap_action::kill_budget, budget_kind::processes,
                  static_cast<std::int64_t>(c.forks->wanted()),
                  static_cast<std::int64_t>(c.forks->cap())};
    stop(end_reason::budget, nanoseconds(0));
}

// The listener failed in a way that could leave a fork waiting for good: the cap cannot be
// held, so the tree goes, as unenforceable.
void worker::gate_broke(const char* what, int err)
{
    if (!cur_ || (cur_->reason != end_reason::none && !cur_->graceful_stop))
        return;
    cur_->decision = {cap_action::kill_unenforceable, budget_kind::processes, 0,
                      static_cast<std::int64_t>(cur_->forks->cap())};
    cur_->last_failure = std::string(what) + ": " + std::strerror(err);
    stop(end_reason::unenforceable, nanoseconds(0));
}

worker::sample worker::look()
{
    auto& c = *cur_;
    ++c.samples;
    sample s;
    if (c.faults_left > 0)
    {
        if (c.faults_left != 0xffffffffu)
            --c.faults_left;
        c.last_failure = "injected sampling fault";
        return s;
    }
    if (int err = list_subtree(s.members); err != 0)
    {
        c.last_failure = std::string("reading /proc failed: ") + std::strerror(err);
        return s;
    }
    s.ok = true;
    c.last_failure.clear();
    // Reaped members are in our RUSAGE_CHILDREN or in a live member's cutime/cstime, so each
    // process's time is counted once; the ledger adds what the kernel reaped.
    const nanoseconds reaped = children_cpu() - c.children_base;
    tallied t = tally(s.members);
    s.usage = t.usage;
    s.usage.cpu += reaped;
    c.kernel_reaper_alive = t.kernel_reaper;
    const auto lost_before = c.ledger.lost();
    s.usage.cpu += c.ledger.update(t.seen, member_ended,
                                   [&c](pid_t p) { return c.reaped_since_sample.count(p) != 0; });
    c.reaped_since_sample.clear();
    // Children reaped by the kernel lose what they used after the last sample: while a member
    // ignores SIGCHLD, or once the tree is seen losing time that way, it is sampled as often
    // as can be (pace_of), so each such child loses at most one short interval.
    c.kernel_reaps = c.kernel_reaps || c.ledger.lost() > lost_before;
    // RSS counts a page shared by N members N times: an upper bound. Only when it reaches the
    // cap is the real footprint (PSS) read, which walks page tables.
    const auto cap = c.budget.limits().memory_bytes;
    s.wants_pss = cap > 0 && s.usage.rss_bytes >= cap;
    return s;
}

// The footprint of a tree whose RSS sum reached the memory cap: its PSS, read off the loop.
// A read that fails fails the sample; one that is late leaves the RSS sum to be judged.
asio::awaitable<void> worker::second_look(std::uint64_t id, sample& s)
{
    if (!cur_->pss)
        cur_->pss = std::make_shared<pss_reader>(ctx_);
    auto reader = cur_->pss; // the execution may end (and let go of it) while we wait
    const auto rss = s.usage.rss_bytes;
    const auto cap = cur_->budget.limits().memory_bytes;
    auto out = co_await reader->read(std::move(s.members), pss_limits_for(rss, cap),
                                     [] { return rss_sum_now(); });
    if (!running(id))
        co_return;
    switch (out.what)
    {
    case pss_outcome::kind::done: s.usage.rss_bytes = out.bytes; break;
    case pss_outcome::kind::failed:
        s.ok = false;
        cur_->last_failure = out.why;
        break;
    case pss_outcome::kind::late:
        cur_->last_failure = "judged by the RSS sum: " + out.why;
        break;
    }
}

std::optional<tree_usage> worker::judge(const sample& s)
{
    auto& c = *cur_;
    cap_decision d = s.ok ? c.budget.on_sample(s.usage) : c.budget.on_failure();
    if (!s.ok)
        ++c.failed;
    if (d.action != cap_action::keep_going)
    {
        c.decision = d;
        stop(d.action == cap_action::kill_budget ? end_reason::budget : end_reason::unenforceable,
             nanoseconds(0));
    }
    return s.ok ? std::optional<tree_usage>(s.usage) : std::nullopt;
}

void worker::stop(end_reason why, nanoseconds grace)
{
    if (!cur_)
        return; // a kill that crossed the report: nothing runs any more
    auto& c = *cur_;
    if (c.reason == end_reason::none)
        c.reason = why;
    else if (!(c.graceful_stop && grace == nanoseconds(0)))
        return; // the first cause stands; only a harder stop gets through
    if (grace > nanoseconds(0))
    {
        c.graceful_stop = true;
        signal_subtree(SIGTERM);
        c.grace_timer = std::make_shared<asio::steady_timer>(ctx_);
        asio::co_spawn(ctx_, grace_wait(c.id, grace, c.grace_timer), asio::detached);
        return;
    }
    c.graceful_stop = false;
    kill_all_and_finish();
}

awaitable worker::grace_wait(std::uint64_t id, nanoseconds grace,
                             std::shared_ptr<asio::steady_timer> t)
{
    t->expires_after(grace);
    boost::system::error_code ec;
    co_await t->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !cur_ || cur_->id != id || !cur_->graceful_stop)
        co_return;
    cur_->graceful_stop = false;
    kill_all_and_finish();
}

// The timeout, from the spawn: the same stop a kill request for it makes.
awaitable worker::deadline_wait(std::uint64_t id, nanoseconds timeout, nanoseconds grace,
                                std::shared_ptr<asio::steady_timer> t)
{
    t->expires_after(timeout);
    boost::system::error_code ec;
    co_await t->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (!ec && running(id))
        stop(end_reason::timed_out, grace);
}

void worker::on_reaped(pid_t p, int status, const struct rusage& ru)
{
    if (cur_ && cur_->budget.limits().any())
        cur_->reaped_since_sample.insert(p);
    if (cur_ && p == cur_->pid)
    {
        cur_->leader_reaped = true;
        cur_->status = status;
        cur_->leader_ru = ru;
    }
}

void worker::after_reap(bool children_left)
{
    if (!cur_ || !cur_->leader_reaped)
        return;
    if (cur_->graceful_stop)
    {
        // Members get the rest of their grace; done early once all of them are gone.
        if (!children_left)
            finish();
        return;
    }
    if (cur_->reason == end_reason::none)
        cur_->reason = end_reason::natural;
    // Whatever the command left behind goes now: exec never waits on a background job.
    kill_all_and_finish();
}

void worker::kill_all_and_finish()
{
    cur_->killed_after += kill_subtree(reaper());
    finish();
}

void worker::finish()
{
    auto& c = *cur_;
    proto::exit_report_msg r;
    r.pid = c.pid;
    r.wait_status = c.status;
    r.reason = c.reason == end_reason::none ? end_reason::natural : c.reason;
    r.budget_which = static_cast<std::uint32_t>(c.decision.which);
    r.observed = c.decision.observed;
    r.configured = c.decision.configured;
    // Everything is reaped now, so the children's rusage holds the whole tree.
    r.cpu_ns = std::max(children_cpu() - c.children_base + c.ledger.lost(), c.budget.cpu_used())
                   .count();
    r.peak_memory_bytes = std::max<std::uint64_t>(
        c.budget.peak_rss_bytes(), static_cast<std::uint64_t>(c.leader_ru.ru_maxrss) * 1024);
    r.samples = c.samples;
    r.failed_samples = c.failed;
    r.killed_after_exit = c.killed_after;
    std::string payload(proto::as_bytes(r));
    payload += c.last_failure.substr(0, 1024);
    for (auto* t : {c.sample_timer.get(), c.grace_timer.get(), c.deadline_timer.get()})
        if (t)
            t->cancel();
    if (c.pss)
        c.pss->cancel(); // a sample waiting for it ends now (the tree is gone)
    if (c.gate)
    {
        boost::system::error_code ignored;
        c.gate->close(ignored); // the tree is gone: nothing can ask any more
    }
    cur_.reset();
    proto::send_message(chan_.native_handle(), proto::msg_type::exit_report, 0, payload);
    if (closing_)
        ::_exit(0);
}

void worker::terminate(end_reason why)
{
    closing_ = true;
    if (cur_)
    {
        stop(why, nanoseconds(0));
        if (cur_) // a graceful stop was under way: end it now
        {
            cur_->graceful_stop = false;
            kill_all_and_finish();
        }
    }
    kill_subtree(nullptr);
    ::_exit(0);
}

} // namespace

void run_worker(int chan, int lifeline, const rlimit& command_nofile)
{
    close_other_fds(chan, lifeline);
    ::setrlimit(RLIMIT_NOFILE, &command_nofile);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::prctl(PR_SET_NAME, "sbx-worker");
    // A command running as our user cannot ptrace us, nor take the fork gate's listener
    // with pidfd_getfd, to answer its own forks (what it runs is dumpable again at exec).
    ::prctl(PR_SET_DUMPABLE, 0);
    prepare_subtree_access();
    int sigfd = open_sigchld_fd();
    if (sigfd < 0)
        ::_exit(1); // the library sees the channel close and reports the supervisor lost
    {
        asio::io_context ctx(1);
        worker w(ctx, chan, lifeline, sigfd);
        w.start();
        ctx.run();
    }
    ::_exit(0);
}

} // namespace sandbox::detail
