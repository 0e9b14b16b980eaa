// test/unit/output_log_test.cpp: the bounded byte log of sessions (no I/O).
#include "session/output_log.hpp"

#include <boost/test/unit_test.hpp>

#include <random>
#include <string>
#include <vector>

using sandbox::errc;
using sandbox::output_stream;
using sandbox::detail::output_log;

namespace {

constexpr auto out = output_stream::out;
constexpr auto err = output_stream::err;

// Everything readable from `from`, pieces joined, with the stream of each byte.
struct flat
{
    std::string bytes;
    std::vector<output_stream> streams;
};

flat read_all(const output_log& log, std::uint64_t from)
{
    flat f;
    auto r = log.read(from, SIZE_MAX);
    BOOST_TEST_REQUIRE(r.has_value());
    std::uint64_t expect = from;
    for (const auto& p : *r)
    {
        BOOST_TEST(p.offset == expect); // pieces are contiguous
        BOOST_TEST(!p.data.empty());
        expect += p.data.size();
        f.bytes += p.data;
        f.streams.insert(f.streams.end(), p.data.size(), p.stream);
    }
    return f;
}

} // namespace

BOOST_AUTO_TEST_SUITE(output_log_suite)

BOOST_AUTO_TEST_CASE(pieces_split_where_the_stream_changes)
{
    output_log log(1024);
    log.append(out, "hello ");
    log.append(out, "world\n");
    log.append(err, "oops\n");
    log.append(out, "done");
    BOOST_TEST(log.begin() == 0u);
    BOOST_TEST(log.end() == 21u);
    auto r = log.read(0, SIZE_MAX);
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST_REQUIRE(r->size() == 3u);
    BOOST_TEST((*r)[0].data == "hello world\n");
    BOOST_TEST(((*r)[0].stream == out));
    BOOST_TEST((*r)[1].data == "oops\n");
    BOOST_TEST(((*r)[1].stream == err));
    BOOST_TEST((*r)[1].offset == 12u);
    BOOST_TEST((*r)[2].data == "done");
    // From the middle of a stretch, and bounded by max_bytes.
    auto mid = log.read(6, 8);
    BOOST_TEST_REQUIRE(mid.has_value());
    BOOST_TEST_REQUIRE(mid->size() == 2u);
    BOOST_TEST((*mid)[0].data == "world\n");
    BOOST_TEST((*mid)[1].data == "oo");
    // At the end: nothing yet (the session layer waits there).
    BOOST_TEST(log.read(21, 100)->empty());
}

BOOST_AUTO_TEST_CASE(trimming_is_by_bytes_and_reports_the_gap)
{
    output_log log(10);
    log.append(out, "0123456789");
    log.append(err, "abc");
    BOOST_TEST(log.begin() == 3u); // the first chunk was cut in the middle
    BOOST_TEST(log.end() == 13u);
    auto f = read_all(log, 3);
    BOOST_TEST(f.bytes == "3456789abc");
    BOOST_TEST((f.streams[6] == out));
    BOOST_TEST((f.streams[7] == err));

    auto gap = log.read(2, 100);
    BOOST_TEST_REQUIRE(gap.has_error());
    BOOST_TEST(gap.error().code == errc::sequence_gap);
    BOOST_TEST(gap.error().diag.observed == 3); // where reading can resume
    BOOST_TEST(gap.error().diag.configured == 2);

    auto beyond = log.read(14, 1);
    BOOST_TEST_REQUIRE(beyond.has_error());
    BOOST_TEST(beyond.error().code == errc::validation);
}

BOOST_AUTO_TEST_CASE(a_chunk_larger_than_the_log_keeps_its_tail)
{
    output_log log(10);
    log.append(err, "x");
    log.append(out, "abcdefghijklmnopqrstuvwxy"); // 25 bytes
    BOOST_TEST(log.begin() == 16u);
    BOOST_TEST(log.end() == 26u);
    auto f = read_all(log, 16);
    BOOST_TEST(f.bytes == "pqrstuvwxy");
    for (auto s : f.streams)
        BOOST_TEST((s == out));
}

BOOST_AUTO_TEST_CASE(matches_a_model_across_wraps)
{
    // Random appends and reads against an unbounded model of every byte and its stream.
    std::mt19937 rng(12345);
    for (std::size_t cap : {1u, 7u, 64u, 1000u, 5000u})
    {
        BOOST_TEST_CONTEXT("capacity " << cap)
        {
            output_log log(cap);
            std::string all;
            std::vector<output_stream> tags;
            for (int step = 0; step < 2000; ++step)
            {
                const auto s = rng() % 3 == 0 ? err : out;
                std::string chunk(rng() % (cap * 2 + 3), '\0');
                for (auto& c : chunk)
                    c = static_cast<char>('a' + rng() % 26);
                log.append(s, chunk);
                all += chunk;
                tags.insert(tags.end(), chunk.size(), s);

                BOOST_TEST_REQUIRE(log.end() == all.size());
                BOOST_TEST_REQUIRE(log.end() - log.begin() <= cap);
                if (step % 7 != 0)
                    continue;
                const std::uint64_t from =
                    log.begin() + (log.end() > log.begin() ? rng() % (log.end() - log.begin() + 1) : 0);
                auto f = read_all(log, from);
                BOOST_TEST_REQUIRE(f.bytes == all.substr(static_cast<std::size_t>(from)));
                BOOST_TEST_REQUIRE((f.streams == std::vector<output_stream>(
                                                     tags.begin() + static_cast<long>(from),
                                                     tags.end())));
            }
        }
    }
}

BOOST_AUTO_TEST_CASE(memory_stays_within_the_bound_plus_a_constant)
{
    constexpr std::size_t cap = 64 * 1024;
    output_log log(cap);
    const std::size_t bound = cap + output_log::max_runs * 16 + 4096;
    // The worst case for the index: the stream changes with every byte.
    for (int i = 0; i < 200000; ++i)
    {
        log.append(i % 2 ? err : out, "z");
        BOOST_TEST_REQUIRE(log.memory_bytes() <= bound);
    }
    BOOST_TEST(log.end() == 200000u);
    BOOST_TEST(log.end() - log.begin() <= output_log::max_runs); // the index bounded what is kept
    auto f = read_all(log, log.begin());
    for (std::size_t i = 0; i < f.bytes.size(); ++i)
        BOOST_TEST_REQUIRE(((f.streams[i] == err) == ((log.begin() + i) % 2 == 1)));
    // Large chunks: the ring itself is the bound.
    output_log big(cap);
    for (int i = 0; i < 100; ++i)
        big.append(out, std::string(10000, 'b'));
    BOOST_TEST(big.memory_bytes() <= bound);
    BOOST_TEST(big.end() - big.begin() == cap);
    // A capacity that is not a power of two: the ring is allocated exactly.
    output_log odd(10000);
    for (int i = 0; i < 50; ++i)
        odd.append(out, std::string(999, 'o'));
    BOOST_TEST(odd.memory_bytes() <= 10000u + 16u * 2);
}

BOOST_AUTO_TEST_CASE(a_zero_capacity_log_keeps_nothing_but_counts)
{
    output_log log(0);
    log.append(out, "abc");
    BOOST_TEST(log.begin() == 3u);
    BOOST_TEST(log.end() == 3u);
    BOOST_TEST(log.read(3, 10)->empty());
    BOOST_TEST(log.read(0, 10).error().code == errc::sequence_gap);
}

BOOST_AUTO_TEST_SUITE_END()
