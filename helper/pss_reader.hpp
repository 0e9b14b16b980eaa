// helper/pss_reader.hpp: the memory cap's second look (the summed PSS of a tree),
// read on a thread of its own so that the worker's loop never waits for it.
//
// Reading /proc/PID/smaps_rollup takes the member's memory-map lock, and a member can keep
// that lock taken for as long as it likes (one thread populating a huge mapping while another
// asks to change the map: the reader queues behind both). Read on the worker's only thread,
// that stalled its timeout, its fork gate and its other samples for the whole time (a 1 s
// timeout ended after 57 s). So the reads run on a thread, and the worker's loop looks at it
// every 20 ms meanwhile. The pass is "late", and the caller judges the tree by its RSS sum
// (an upper bound), when the thread has been blocked (asleep uninterruptibly, no cpu gained)
// for 100 ms, or is blocked when the tree's RSS sum has grown by a fifth of the cap since the
// pass began, or after 500 ms and 100 ms more per GiB of RSS however it goes. A pass that works stays on
// time: a full pass over a dozen processes sharing 64 MiB took 7-25 ms here.
// While a late pass still runs, the next one is late at once, so no threads pile up.
#ifndef SANDBOX_HELPER_PSS_READER_HPP
#define SANDBOX_HELPER_PSS_READER_HPP

#include "helper/subtree.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace sandbox::detail {

/// The summed PSS of the live members, read on the calling thread; nullopt (with `why`)
/// when one could not be read for another reason than having exited.
std::optional<std::uint64_t> tree_pss(const std::vector<subtree_member>& members,
                                      std::string& why);

/// \brief A floor under the tree's footprint that takes no page walk: the largest private
/// anonymous memory of one live member (statm). Such pages are shared, copy-on-write, only
/// with the member's own relatives, all in the tree, so the tree's summed PSS is at least
/// this much (KSM, which merges identical pages of processes that opted in, aside). 0 when
/// none could be read.
std::uint64_t largest_private_bytes(const std::vector<subtree_member>& members) noexcept;

/// When a pass is late (see above).
struct pss_limits
{
    std::chrono::nanoseconds look_every{std::chrono::milliseconds(20)};
    std::chrono::nanoseconds blocked{std::chrono::milliseconds(100)};
    std::chrono::nanoseconds at_most{std::chrono::milliseconds(500)};
    /// The RSS sum at which the tree has grown too far meanwhile.
    std::uint64_t grown_rss = UINT64_MAX;
};

/// The limits for a pass over a tree whose RSS sum is `rss_bytes`, under a cap of `cap`.
pss_limits pss_limits_for(std::uint64_t rss_bytes, std::uint64_t cap) noexcept;

struct pss_outcome
{
    enum class kind
    {
        done,   // `bytes` holds the sum
        failed, // a read failed: `why`
        late,   // not done within the deadline (or an earlier pass still runs)
    };
    kind what = kind::late;
    std::uint64_t bytes = 0;
    std::string why;
};

/// \brief Reads a tree's summed PSS on a thread, watched from the worker's loop. One per
/// execution; destroying it lets a pass still running finish on its own (it owns what it
/// uses), so the worker's report never waits for a read held up by a memory-map lock.
class pss_reader
{
public:
    explicit pss_reader(boost::asio::io_context& ctx);
    ~pss_reader();
    pss_reader(const pss_reader&) = delete;
    pss_reader& operator=(const pss_reader&) = delete;

    /// Reads the PSS of `members`; completes when done, failed, or late by `limits`.
    /// `rss_now` gives the tree's RSS sum now (a cheap listing: no memory-map lock).
    boost::asio::awaitable<pss_outcome> read(std::vector<subtree_member> members,
                                             pss_limits limits,
                                             std::function<std::uint64_t()> rss_now);
    /// Ends a wait now (its outcome is `late`).
    void cancel();

private:
    struct pass; // what the thread and the loop share
    bool idle();
    // Waits up to `d` for the pass to end; false when cancelled.
    boost::asio::awaitable<bool> wait_for(std::chrono::nanoseconds d);

    boost::asio::io_context& ctx_;
    std::optional<boost::asio::posix::stream_descriptor> done_fd_;
    boost::asio::steady_timer timer_;
    bool cancelled_ = false;
    std::uint64_t waits_ = 0;
    std::shared_ptr<pass> current_;
    std::thread thread_;
};

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_PSS_READER_HPP
