// lib/supervisor/pss_reader.cpp: summed PSS of a tree, read off the worker's loop.
#include "supervisor/pss_reader.hpp"

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

std::chrono::nanoseconds pss_deadline(std::uint64_t rss_bytes) noexcept
{
    using std::chrono::milliseconds;
    constexpr std::uint64_t gib = 1ull << 30;
    return milliseconds(20) + milliseconds(20) * static_cast<std::int64_t>(rss_bytes / gib);
}

// Written by the thread, then `finished` (release), then one write to `event`; read by the
// loop once `finished` is seen (acquire). The thread keeps the pass, and so the descriptor,
// alive until it is done with both.
struct pss_reader::pass
{
    unique_fd event;
    std::atomic<bool> finished{false};
    std::optional<std::uint64_t> bytes;
    std::string why;
};

pss_reader::pss_reader(asio::io_context& ctx) : ctx_(ctx), deadline_(ctx) {}

pss_reader::~pss_reader()
{
    if (thread_.joinable())
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
    deadline_.cancel();
    if (done_fd_)
        done_fd_->cancel();
}

asio::awaitable<pss_outcome> pss_reader::read(std::vector<subtree_member> members,
                                              std::chrono::nanoseconds deadline)
{
    if (!idle())
        co_return late("an earlier PSS read has not returned");
    auto p = std::make_shared<pass>();
    p->event.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    unique_fd ours(p->event ? ::dup(p->event.get()) : -1);
    if (!ours)
    {
        std::string why; // no descriptor to spare: read here, as before there was a thread
        auto bytes = tree_pss(members, why);
        co_return outcome_of(bytes, std::move(why));
    }
    try
    {
        thread_ = std::thread([p, members = std::move(members)] {
            p->bytes = tree_pss(members, p->why);
            p->finished.store(true, std::memory_order_release);
            const std::uint64_t one = 1;
            [[maybe_unused]] auto n = ::write(p->event.get(), &one, sizeof one);
        });
    }
    catch (const std::system_error& e)
    {
        co_return outcome_of(std::nullopt, std::string("no thread for the PSS read: ") + e.what());
    }
    current_ = p;
    done_fd_.emplace(ctx_, ours.release());
    deadline_.expires_after(deadline);
    deadline_.async_wait([this](boost::system::error_code ec) {
        if (!ec && done_fd_)
            done_fd_->cancel();
    });
    boost::system::error_code ec;
    co_await done_fd_->async_wait(asio::posix::stream_descriptor::wait_read,
                                  asio::redirect_error(asio::use_awaitable, ec));
    deadline_.cancel();
    done_fd_.reset();
    if (!p->finished.load(std::memory_order_acquire))
        co_return late("the PSS read took longer than " +
                       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(deadline)
                                          .count()) +
                       " ms");
    idle(); // joins the thread
    co_return outcome_of(p->bytes, p->why);
}

} // namespace sandbox::detail
