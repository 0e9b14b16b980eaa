// bench/net/resolver.cpp: 100 lookups at once through the c-ares resolver against a fake DNS
// server on loopback (test/net/fake_dns.hpp) that answers each after 50 ms, or never (the
// lookup's 200 ms timeout ends it); the baseline is one such lookup alone, in the same round.
// Lookups that do not serialize take about one lookup's time: ratio ~ 1, not 100.
#include "cases.hpp"

#include "bench/common.hpp"
#include "net/resolver.hpp"
#include "test/net/fake_dns.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace net_bench {

namespace {

namespace asio = boost::asio;
namespace net = sandbox::net;
using boost::system::error_code;
using std::chrono::milliseconds;

/// One way the fake server treats the names of a case.
struct scenario
{
    const char* name;
    fake_dns::answer answer;
    milliseconds timeout;
    error_code expected; ///< how every lookup must end
};

/// A batch of lookups running at once, and a wake-up when the last has ended.
struct batch
{
    explicit batch(asio::io_context& io) : all_ended(io, asio::steady_timer::time_point::max()) {}
    std::size_t started = 0, ended = 0, unexpected = 0;
    asio::steady_timer all_ended;
};

asio::awaitable<void> one_lookup(net::resolver* r, std::string name, error_code expected,
                                 batch* b)
{
    auto res = co_await r->resolve(std::move(name));
    if (res.ec != expected)
        ++b->unexpected;
    if (++b->ended == b->started)
        b->all_ended.cancel();
}

/// Milliseconds for `n` lookups started together, of names no lookup asked before.
asio::awaitable<double> timed_lookups(asio::io_context& io, fake_dns::server& dns,
                                      net::resolver& r, const scenario& s, int n, int& serial)
{
    batch b(io);
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i)
    {
        names.push_back("n" + std::to_string(serial++) + ".bench");
        dns.set(names.back(), s.answer);
    }
    const auto t0 = std::chrono::steady_clock::now();
    b.started = names.size();
    for (auto& name : names)
        asio::co_spawn(io, one_lookup(&r, std::move(name), s.expected, &b), asio::detached);
    co_await b.all_ended.async_wait(asio::as_tuple(asio::use_awaitable));
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - t0;
    if (b.unexpected)
        std::fprintf(stderr, "resolver bench %s: %zu lookups ended unexpectedly\n", s.name,
                     b.unexpected);
    co_return took.count();
}

/// Rounds of one lookup alone, then `n` together; prints the medians.
asio::awaitable<void> run_scenario(asio::io_context& io, fake_dns::server& dns,
                                   const scenario& s, int n, int rounds)
{
    net::cares_options o;
    o.timeout = s.timeout;
    o.servers = {dns.address()};
    auto made = net::make_cares_resolver(io.get_executor(), o);
    if (!made)
    {
        std::fprintf(stderr, "resolver bench: %s\n", made.error().diag.message.c_str());
        co_return;
    }
    auto r = *made;
    int serial = 0;
    bench::rounds res;
    for (int i = 0; i < rounds; ++i)
    {
        const double alone = co_await timed_lookups(io, dns, *r, s, 1, serial);
        const double together = co_await timed_lookups(io, dns, *r, s, n, serial);
        res.add(together, alone);
    }
    bench::print_json("net", s.name, res.ours_median(), "ms", res.base_median());
}

} // namespace

void run_resolver(const options& o)
{
    const int n = o.quick ? 10 : 100;
    const int rounds = o.quick ? 1 : 5;
    fake_dns::answer slow;
    slow.a = {asio::ip::make_address_v4("192.0.2.1")};
    slow.delay = milliseconds(50);
    fake_dns::answer never;
    never.what = fake_dns::answer::kind::silent;
    const scenario cases[] = {
        {"parallel_100_slow_lookups", slow, milliseconds(5'000), {}},
        {"parallel_100_lookups_timing_out", never, milliseconds(200),
         boost::asio::error::timed_out},
    };
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    dns.start();
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
            for (const auto& s : cases)
                co_await run_scenario(io, dns, s, n, rounds);
            dns.stop();
        },
        [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        });
    io.run();
}

} // namespace net_bench
