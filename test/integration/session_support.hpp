// test/integration/session_support.hpp: helpers for tests that drive sessions from a
// coroutine: run one to completion, a shell spec, read until a text shows or to the end.
#ifndef SBX_TEST_SESSION_SUPPORT_HPP
#define SBX_TEST_SESSION_SUPPORT_HPP

#include <boost/test/unit_test.hpp>

#include <sandbox/process_manager.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <string>

namespace sbx_test {

/// Runs `f` on `ioc` until it completes (required within `limit`); rethrows its exception.
inline void run_coro(boost::asio::io_context& ioc, std::function<boost::asio::awaitable<void>()> f,
                     std::chrono::seconds limit = std::chrono::seconds(30))
{
    bool done = false;
    std::exception_ptr failure;
    boost::asio::co_spawn(ioc, std::move(f), [&](std::exception_ptr e) {
        failure = e;
        done = true;
        ioc.stop(); // sessions still running are work; the test goes on without them
    });
    ioc.restart();
    ioc.run_for(limit);
    BOOST_REQUIRE_MESSAGE(done, "coroutine did not complete within the time limit");
    if (failure)
        std::rethrow_exception(failure);
}

/// `/bin/sh -c script`, with an optional id.
inline sandbox::session_spec shell(std::string script, std::string id = {})
{
    sandbox::session_spec s;
    s.id = std::move(id);
    s.command = "/bin/sh";
    s.args = {"-c", std::move(script)};
    return s;
}

/// Reads from `from` until the output (both streams) contains `needle`, or to the end;
/// returns all of it.
inline boost::asio::awaitable<std::string> read_until(sandbox::session& s, std::uint64_t& from,
                                                      const std::string& needle)
{
    std::string all;
    for (;;)
    {
        auto o = co_await s.read(from, 4096);
        from = o.next;
        for (auto& c : o.chunks)
            all += c.data;
        if (all.find(needle) != std::string::npos || o.eof)
            co_return all;
    }
}

/// Everything until EOF, per stream.
struct drained
{
    std::string out, err;
    std::uint64_t next = 0;
};
inline boost::asio::awaitable<drained> read_all(sandbox::session& s, std::uint64_t from = 0)
{
    drained d;
    d.next = from;
    for (;;)
    {
        auto o = co_await s.read(d.next, 64 * 1024);
        d.next = o.next;
        for (auto& c : o.chunks)
            (c.stream == sandbox::output_stream::err ? d.err : d.out) += c.data;
        if (o.eof)
            co_return d;
    }
}

} // namespace sbx_test

#endif // SBX_TEST_SESSION_SUPPORT_HPP
