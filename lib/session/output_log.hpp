// lib/session/output_log.hpp: one session's output as an append-only byte log with a bound,
// read by byte cursor. Pure (no I/O): the sessions layer appends what it reads from the
// command and serves `read(after, max)` and watchers from it.
#ifndef SANDBOX_LIB_SESSION_OUTPUT_LOG_HPP
#define SANDBOX_LIB_SESSION_OUTPUT_LOG_HPP

#include <sandbox/exec_request.hpp>
#include <sandbox/failure.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::detail {

/// \brief A bounded, append-only log of output bytes, each tagged with its stream.
///
/// Every byte ever appended has an offset (0, 1, 2, ...); the log retains the newest ones,
/// `[begin(), end())`, at most `capacity` bytes. Trimming is by bytes: a chunk is cut in the
/// middle when only its tail still fits. Memory is a ring of `capacity` bytes plus an index
/// of stream changes that never exceeds `max_runs` entries (when it would, the oldest run is
/// trimmed as if the bytes had run out), so it never exceeds the bound plus a small constant.
class output_log
{
public:
    /// Stream changes kept at most (16 bytes each): alternating one-byte writes on stdout and
    /// stderr cannot make the index outgrow the data.
    static constexpr std::size_t max_runs = 4096;

    explicit output_log(std::size_t capacity) : cap_(capacity) {}

    /// Appends `data` (any size; only its last `capacity` bytes can be kept).
    void append(output_stream s, std::string_view data);

    /// Offset of the oldest retained byte.
    std::uint64_t begin() const noexcept { return begin_; }
    /// Offset one past the newest byte: the total ever appended.
    std::uint64_t end() const noexcept { return end_; }
    std::size_t capacity() const noexcept { return cap_; }

    /// One stretch of one stream.
    struct piece
    {
        output_stream stream = output_stream::out;
        std::uint64_t offset = 0;
        std::string data;
    };

    /// \brief Up to `max_bytes` from offset `from`, split where the stream changes.
    ///
    /// Empty when `from == end()`. `errc::sequence_gap` when `from < begin()` (those bytes
    /// were trimmed; `diag.observed` is `begin()`, where reading can resume);
    /// `errc::validation` when `from > end()`.
    outcome<std::vector<piece>> read(std::uint64_t from, std::size_t max_bytes) const;

    /// Bytes held: the ring and the index.
    std::size_t memory_bytes() const noexcept
    {
        return buf_.capacity() + runs_.size() * sizeof(run);
    }

private:
    struct run
    {
        std::uint64_t offset; // where this stream's stretch starts
        output_stream stream;
    };

    void store(std::string_view data);
    void grow(std::uint64_t needed);
    void trim_runs();
    std::size_t position(std::uint64_t offset) const noexcept
    {
        return static_cast<std::size_t>(offset % cap_);
    }

    std::size_t cap_;
    std::vector<char> buf_; // grows up to cap_, then wraps
    std::uint64_t begin_ = 0;
    std::uint64_t end_ = 0;
    std::deque<run> runs_;
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_SESSION_OUTPUT_LOG_HPP
