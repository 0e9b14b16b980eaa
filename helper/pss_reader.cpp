// helper/pss_reader.cpp: summed PSS of a tree, read off the worker's loop.
#include "helper/pss_reader.hpp"

#include <sandbox/unique_fd.hpp>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <sys/eventfd.h>
#include <unistd.h>

namespace sandbox::detail {

namespace {

namespace asio = boost::asio;
using backend::unique_fd;

// One member's PSS. For a member whose main thread has ended it is read through a running
// thread; if that thread has ended since the listing, through another one, and if threads
// keep ending under the reads, its RSS from the listing stands (an upper bound).
std::optional<std::uint64_t> member_pss(const subtree_member& m, int& err)
{
    if (m.memory_thread == 0)
        return read_pss_bytes(m.stat.pid, err);
    pid_t tid = m.memory_thread;
    for (int tries = 0; tries < 3; ++tries)
    {
        if (auto pss = read_thread_pss_bytes(m.stat.pid, tid, err))
            return pss;
        if (err != ENOENT && err != ESRCH)
            return std::nullopt;
        auto t = read_running_thread_stat(m.stat.pid, err);
        if (!t)
            return std::nullopt; // no thread is left (err ESRCH), or a read failed
        tid = t->pid;
    }
    err = 0;
    return m.stat.rss_pages * static_cast<std::uint64_t>(page_size_bytes());
}

pss_outcome late(std::string why) { return {pss_outcome::kind::late, 0, std::move(why)}; }

pss_outcome outcome_of(std::optional<std::uint64_t> bytes, std::string why)
{
    if (bytes)
        return {pss_outcome::kind::done, *bytes, {}};
    return {pss_outcome::kind::failed, 0, std::move(why)};
}

} // namespace

std::optional<std::uint64_t> tree_pss(const std::vector<subtree_member>& members,
                                      std::string& why)
{
    std::uint64_t sum = 0;
    for (const auto& m : members)
    {
        if (m.stat.zombie())
            continue;
        int err = 0;
        if (auto pss = member_pss(m, err))
            sum += *pss;
        else if (err != ENOENT && err != ESRCH)
        {
            why = std::string("reading smaps_rollup failed: ") + std::strerror(err);
            return std::nullopt;
        }
    }
    return sum;
}

std::uint64_t largest_private_bytes(const std::vector<subtree_member>& members) noexcept
{
    std::uint64_t most = 0;
    for (const auto& m : members)
    {
        if (!m.stat.live())
            continue;
        int err = 0;
        if (auto bytes = read_anon_bytes(m.stat.pid, m.memory_thread, err))
            most = std::max(most, *bytes);
    }
    return most;
}

pss_limits pss_limits_for(std::uint64_t rss_bytes, std::uint64_t cap) noexcept
{
    constexpr std::uint64_t gib = 1ull << 30;
    pss_limits l;
    l.at_most += std::chrono::milliseconds(100) * static_cast<std::int64_t>((rss_bytes + gib - 1) / gib);
    l.grown_rss = rss_bytes + cap / 5;
    return l;
}

// Written by the thread, then `finished` (release), then one write to `event`; read by the
// loop once `finished` is seen (acquire). The thread keeps the pass, and so the descriptor,
// alive until it is done with both.
struct pss_reader::pass
{
    unique_fd event;
    std::atomic<pid_t> tid{0}; // the reading thread, once it runs
    std::atomic<bool> finished{false};
    std::optional<std::uint64_t> bytes;
    std::string why;
};

pss_reader::pss_reader(asio::io_context& ctx) : ctx_(ctx), timer_(ctx) {}

pss_reader::~pss_reader()
{
    if (!thread_.joinable())
        return;
    if (current_ && !current_->finished.load(std::memory_order_acquire))
        thread_.detach(); // held up: it ends on its own, touching only its pass
    else
        thread_.join();
}

bool pss_reader::idle()
{
    if (current_ && !current_->finished.load(std::memory_order_acquire))
        return false;
    if (thread_.joinable())
        thread_.join();
    current_.reset();
    return true;
}

void pss_reader::cancel()
{
    cancelled_ = true;
    timer_.cancel();
    if (done_fd_)
        done_fd_->cancel();
}

asio::awaitable<bool> pss_reader::wait_for(std::chrono::nanoseconds d)
{
    timer_.expires_after(d);
    timer_.async_wait([this, wait = ++waits_](boost::system::error_code ec) {
        // (a timer that fired as the wait ended must not end the next one)
        if (!ec && wait == waits_ && done_fd_)
            done_fd_->cancel(); // (the pass owns its descriptor: ours is a copy)
    });
    boost::system::error_code ec;
    co_await done_fd_->async_wait(asio::posix::stream_descriptor::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
    timer_.cancel();
    co_return !cancelled_;
}

namespace {

// Whether the reading thread `tid` is held up: asleep uninterruptibly (a lock) and no cpu
// gained since `runtime` (updated).
bool held_up(pid_t tid, std::uint64_t& runtime)
{
    int err = 0;
    auto st = tid > 0 ? read_proc_stat(tid, err) : std::nullopt;
    auto ns = tid > 0 ? read_runtime_ns(tid, err) : std::nullopt;
    const bool gained = ns && *ns != runtime;
    if (ns)
        runtime = *ns;
    return st && st->state == 'D' && !gained;
}

std::string ms_text(std::chrono::nanoseconds d)
{
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) +
           " ms";
}

} // namespace

asio::awaitable<pss_outcome> pss_reader::read(std::vector<subtree_member> members,
                                              pss_limits limits,
                                              std::function<std::uint64_t()> rss_now)
{
    if (!idle())
        co_return late("an earlier PSS read has not returned");
    auto p = std::make_shared<pass>();
    p->event.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    unique_fd ours(p->event ? ::dup(p->event.get()) : -1);
    auto here = [&] { // no descriptor or no thread to spare: read here, as before
        std::string why;
        auto bytes = tree_pss(members, why);
        return outcome_of(bytes, std::move(why));
    };
    if (!ours)
        co_return here();
    try
    {
        thread_ = std::thread([p, members] {
            p->tid.store(static_cast<pid_t>(::gettid()), std::memory_order_release);
            p->bytes = tree_pss(members, p->why);
            p->finished.store(true, std::memory_order_release);
            const std::uint64_t one = 1;
            [[maybe_unused]] auto n = ::write(p->event.get(), &one, sizeof one);
        });
    }
    catch (const std::system_error&)
    {
        co_return here();
    }
    current_ = p;
    cancelled_ = false;
    done_fd_.emplace(ctx_, ours.release());
    using clock = std::chrono::steady_clock;
    const auto began = clock::now();
    auto looked = began;
    std::uint64_t runtime = 0;
    std::chrono::nanoseconds blocked{0};
    std::string why;
    while (why.empty() && !p->finished.load(std::memory_order_acquire))
    {
        const bool waited = co_await wait_for(limits.look_every);
        const auto now = clock::now();
        const bool stuck = held_up(p->tid.load(), runtime);
        blocked = stuck ? blocked + (now - looked) : std::chrono::nanoseconds(0);
        looked = now;
        if (!waited)
            why = "the execution ended";
        else if (p->finished.load(std::memory_order_acquire))
            break;
        else if (blocked >= limits.blocked)
            why = "the PSS read was held up for " + ms_text(blocked);
        else if (now - began >= limits.at_most)
            why = "the PSS read took longer than " + ms_text(limits.at_most);
        // (only while it is held up: a tree that forks children sharing its pages grows its
        // RSS sum, not its footprint, while a working read goes on)
        else if (stuck && rss_now() >= limits.grown_rss)
            why = "the tree grew by a fifth of the cap while it held its PSS read up";
    }
    done_fd_.reset();
    if (!p->finished.load(std::memory_order_acquire))
        co_return late(why);
    idle(); // joins the thread
    co_return outcome_of(p->bytes, p->why);
}

} // namespace sandbox::detail
