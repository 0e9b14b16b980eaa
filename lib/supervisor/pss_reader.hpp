// lib/supervisor/pss_reader.hpp: the memory cap's second look (the summed PSS of a tree),
// read on a thread of its own so that the worker's loop never waits for it.
//
// Reading /proc/PID/smaps_rollup takes the member's memory-map lock, and a member can keep
// that lock taken for as long as it likes (one thread populating a huge mapping while another
// asks to change the map: the reader queues behind both). Read on the worker's only thread,
// that stalled its timeout, its fork gate and its other samples for the whole time (a 1 s
// timeout ended after 57 s). So the reads run on a thread, and a read that is not done within
// a deadline is "late": the caller judges the tree by its RSS sum instead (an upper bound).
// While a late read still runs, the next one is late at once, so no threads pile up.
#ifndef SANDBOX_LIB_SUPERVISOR_PSS_READER_HPP
#define SANDBOX_LIB_SUPERVISOR_PSS_READER_HPP

#include "supervisor/subtree.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
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

/// How long a PSS pass may take before it is late: 20 ms, and 20 ms more per GiB of RSS (the
/// page-table walk costs about 6 ms per GiB here).
std::chrono::nanoseconds pss_deadline(std::uint64_t rss_bytes) noexcept;

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

/// \brief Reads a tree's summed PSS on a thread, waited for on the worker's loop with a
/// deadline. One per execution; destroying it waits for a pass still running (once the tree
/// is dead, a read held by its memory-map lock returns).
class pss_reader
{
public:
    explicit pss_reader(boost::asio::io_context& ctx);
    ~pss_reader();
    pss_reader(const pss_reader&) = delete;
    pss_reader& operator=(const pss_reader&) = delete;

    /// Reads the PSS of `members`; completes when done, failed, or `deadline` has passed.
    boost::asio::awaitable<pss_outcome> read(std::vector<subtree_member> members,
                                             std::chrono::nanoseconds deadline);
    /// Ends a wait now (its outcome is `late`).
    void cancel();

private:
    struct pass; // what the thread and the loop share
    bool idle();

    boost::asio::io_context& ctx_;
    std::optional<boost::asio::posix::stream_descriptor> done_fd_;
    boost::asio::steady_timer deadline_;
    std::shared_ptr<pass> current_;
    std::thread thread_;
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SUPERVISOR_PSS_READER_HPP
