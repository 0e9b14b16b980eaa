// lib/session/output_log.cpp: the bounded byte log of a session.
#include "session/output_log.hpp"

#include <algorithm>
#include <cstring>

namespace sandbox::detail {

void output_log::grow(std::uint64_t needed)
{
    // No wrap happens before the ring reaches its capacity, so offsets are positions.
    if (buf_.size() >= needed)
        return;
    std::size_t size = std::max<std::size_t>(buf_.size(), 4096);
    while (size < needed)
        size *= 2;
    size = std::min(size, cap_);
    buf_.reserve(size); // exactly: resize alone may allocate up to twice the size
    buf_.resize(size);
}

void output_log::store(std::string_view data)
{
    if (end_ + data.size() <= cap_)
        grow(end_ + data.size());
    else
        grow(cap_);
    std::size_t at = position(end_);
    std::size_t first = std::min(data.size(), cap_ - at);
    std::memcpy(buf_.data() + at, data.data(), first);
    std::memcpy(buf_.data(), data.data() + first, data.size() - first);
}

void output_log::trim_runs()
{
    while (runs_.size() >= 2 && runs_[1].offset <= begin_)
        runs_.pop_front();
    if (runs_.size() > max_runs)
    {
        begin_ = runs_[1].offset; // the index is full: give up the oldest stretch
        runs_.pop_front();
    }
}

void output_log::append(output_stream s, std::string_view data)
{
    if (data.empty())
        return;
    if (cap_ == 0)
    {
        end_ += data.size();
        begin_ = end_;
        runs_.clear();
        return;
    }
    if (runs_.empty() || runs_.back().stream != s)
        runs_.push_back({end_, s});
    if (data.size() > cap_)
    {
        end_ += data.size() - cap_; // only the tail can be kept
        data.remove_prefix(data.size() - cap_);
    }
    store(data);
    end_ += data.size();
    begin_ = std::max(begin_, end_ > cap_ ? end_ - cap_ : 0);
    trim_runs();
}

outcome<std::vector<output_log::piece>> output_log::read(std::uint64_t from,
                                                         std::size_t max_bytes) const
{
    if (from < begin_)
    {
        auto f = make_failure(errc::sequence_gap,
                              "output from offset " + std::to_string(from) +
                                  " was dropped; the log now starts at " + std::to_string(begin_),
                              "output");
        f.diag.observed = static_cast<std::int64_t>(begin_);
        f.diag.configured = static_cast<std::int64_t>(from);
        return f;
    }
    if (from > end_)
        return make_failure(errc::validation,
                            "offset " + std::to_string(from) + " is beyond the end of the output (" +
                                std::to_string(end_) + ")",
                            "output");
    std::vector<piece> out;
    const std::uint64_t stop = from + std::min<std::uint64_t>(max_bytes, end_ - from);
    // The run holding `from`: the last one starting at or before it.
    auto it = std::upper_bound(runs_.begin(), runs_.end(), from,
                               [](std::uint64_t o, const run& r) { return o < r.offset; });
    if (it != runs_.begin())
        --it;
    for (std::uint64_t at = from; at < stop; ++it)
    {
        const std::uint64_t run_end = std::next(it) == runs_.end() ? end_ : std::next(it)->offset;
        const std::uint64_t upto = std::min(stop, run_end);
        piece p{it->stream, at, {}};
        p.data.reserve(static_cast<std::size_t>(upto - at));
        while (at < upto) // at most two stretches: before and after the wrap
        {
            const std::size_t pos = position(at);
            const std::size_t n =
                static_cast<std::size_t>(std::min<std::uint64_t>(upto - at, cap_ - pos));
            p.data.append(buf_.data() + pos, n);
            at += n;
        }
        out.push_back(std::move(p));
    }
    return out;
}

} // namespace sandbox::detail
