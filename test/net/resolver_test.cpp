// test/net/resolver_test.cpp: the c-ares resolver against a fake DNS server on a loopback
// UDP port (test/net/fake_dns.hpp), the static map in front of it, and make_resolver.
#include "fake_dns.hpp"
#include "net/resolver.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace net = sandbox::net;
using boost::system::error_code;
using std::chrono::milliseconds;

/// Runs `body` as a coroutine on `io` until everything on `io` is done; rethrows.
void run(asio::io_context& io, std::function<asio::awaitable<void>()> body)
{
    asio::co_spawn(io, std::move(body), [](std::exception_ptr e) {
        if (e)
            std::rethrow_exception(e);
    });
    io.run();
}

/// The c-ares resolver pointed at `dns` only.
std::shared_ptr<net::resolver> cares_at(asio::io_context& io, const fake_dns::server& dns,
                                        milliseconds timeout)
{
    net::cares_options o;
    o.timeout = timeout;
    o.servers = {dns.address()};
    auto r = net::make_cares_resolver(io.get_executor(), o);
    BOOST_TEST_REQUIRE(r.has_value());
    return *r;
}

/// The open file descriptors of this process.
std::size_t open_fds()
{
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
        ++n;
    return n;
}

/// Lets every coroutine spawned so far run to its first wait.
asio::awaitable<void> yield_once()
{
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
}

/// An answer with one A record.
fake_dns::answer one_a(const char* v4)
{
    fake_dns::answer a;
    a.a = {asio::ip::make_address_v4(v4)};
    return a;
}

/// A name the fake server never answers.
fake_dns::answer silent()
{
    fake_dns::answer a;
    a.what = fake_dns::answer::kind::silent;
    return a;
}

/// Lookups started in the background: how each ended, and a wake-up when all have.
struct lookups
{
    lookups(asio::io_context& io, std::size_t n) : expected(n), all_ended(io, asio::steady_timer::time_point::max()) {}
    std::vector<error_code> ends{};
    std::size_t expected;
    asio::steady_timer all_ended;

    asio::awaitable<void> wait()
    {
        if (ends.size() < expected)
            co_await all_ended.async_wait(asio::as_tuple(asio::use_awaitable));
    }
};

/// Looks `name` up and records how it ended in `l`.
asio::awaitable<void> lookup_into(net::resolver* r, std::string name, lookups* l)
{
    auto res = co_await r->resolve(std::move(name));
    l->ends.push_back(res.ec);
    if (l->ends.size() == l->expected)
        l->all_ended.cancel();
}

/// Starts lookups of slow0.test ... slow<n-1>.test.
void start_slow_lookups(asio::io_context& io, net::resolver* r, lookups* l)
{
    for (std::size_t i = 0; i < l->expected; ++i)
        asio::co_spawn(io, lookup_into(r, "slow" + std::to_string(i) + ".test", l), asio::detached);
}

/// A fake server on which slow0.test ... slow<n-1>.test are never answered.
void set_slow_names(fake_dns::server& dns, std::size_t n)
{
    for (std::size_t i = 0; i < n; ++i)
        dns.set("slow" + std::to_string(i) + ".test", silent());
}

/// The v4 and the v6 addresses of `v`, each in `v`'s order.
template <class V4, class V6>
void split(const std::vector<asio::ip::address>& v, V4& v4, V6& v6)
{
    for (const auto& a : v)
    {
        if (a.is_v4())
            v4.push_back(a.to_v4());
        else
            v6.push_back(a.to_v6());
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(resolver)

BOOST_AUTO_TEST_CASE(answers_a_and_aaaa_in_the_server_order)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    fake_dns::answer two;
    two.a = {asio::ip::make_address_v4("192.0.2.7"), asio::ip::make_address_v4("192.0.2.3"),
             asio::ip::make_address_v4("192.0.2.5")};
    two.aaaa = {asio::ip::make_address_v6("2001:db8::9"), asio::ip::make_address_v6("2001:db8::1")};
    dns.set("two.test", two);
    dns.start();
    run(io, [&]() -> asio::awaitable<void> {
        auto r = cares_at(io, dns, milliseconds(10'000));
        auto res = co_await r->resolve("two.test");
        BOOST_TEST(!res.ec);
        std::vector<asio::ip::address_v4> v4;
        std::vector<asio::ip::address_v6> v6;
        split(res.addresses, v4, v6);
        BOOST_TEST(v4 == two.a, boost::test_tools::per_element());
        BOOST_TEST(v6 == two.aaaa, boost::test_tools::per_element());
        dns.stop();
    });
}

BOOST_AUTO_TEST_CASE(nxdomain_is_host_not_found_asked_once_without_search_list)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    fake_dns::answer nx;
    nx.what = fake_dns::answer::kind::nxdomain;
    dns.set("missing.test", nx);
    dns.start();
    run(io, [&]() -> asio::awaitable<void> {
        auto r = cares_at(io, dns, milliseconds(10'000));
        auto res = co_await r->resolve("missing.test");
        BOOST_TEST(res.ec == asio::error::host_not_found);
        BOOST_TEST(res.addresses.empty());
        BOOST_TEST(dns.queries("missing.test") == 2u); // A and AAAA
        BOOST_TEST(dns.queries() == 2u);               // no search-list suffixes tried
        dns.stop();
    });
}

BOOST_AUTO_TEST_CASE(a_name_with_no_address_record_is_host_not_found)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    dns.set("empty.test", fake_dns::answer{}); // NOERROR, no records (NODATA)
    dns.start();
    run(io, [&]() -> asio::awaitable<void> {
        auto r = cares_at(io, dns, milliseconds(10'000));
        auto res = co_await r->resolve("empty.test");
        BOOST_TEST(res.ec == asio::error::host_not_found);
        dns.stop();
    });
}

BOOST_AUTO_TEST_CASE(a_server_that_never_answers_is_timed_out_not_before_the_timeout)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    dns.set("black.test", silent());
    dns.start();
    run(io, [&]() -> asio::awaitable<void> {
        const milliseconds timeout(200);
        auto r = cares_at(io, dns, timeout);
        const auto t0 = std::chrono::steady_clock::now();
        auto res = co_await r->resolve("black.test");
        BOOST_TEST(res.ec == asio::error::timed_out);
        BOOST_TEST((std::chrono::steady_clock::now() - t0 >= timeout));
        BOOST_TEST(dns.queries("black.test") >= 2u);
        dns.stop();
    });
}

BOOST_AUTO_TEST_CASE(a_fast_lookup_passes_100_pending_slow_ones)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    dns.set("fast.test", one_a("192.0.2.1"));
    set_slow_names(dns, 100);
    dns.start();
    lookups slow(io, 100);
    run(io, [&]() -> asio::awaitable<void> {
        auto r = cares_at(io, dns, milliseconds(60'000));
        start_slow_lookups(io, r.get(), &slow);
        co_await yield_once(); // the 100 lookups are sent
        auto res = co_await r->resolve("fast.test");
        BOOST_TEST(!res.ec);
        BOOST_TEST(res.addresses.size() == 1u);
        BOOST_TEST(slow.ends.empty()); // the fast one ended first
        const std::size_t slow_seen = dns.queries() - dns.queries("fast.test");
        BOOST_TEST(slow_seen == 200u); // all were waiting at the server meanwhile
        r.reset();                     // ends the slow ones
        co_await slow.wait();
        dns.stop();
    });
    BOOST_TEST(slow.ends.size() == 100u);
    for (const auto& ec : slow.ends)
        BOOST_TEST(ec == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE(hundred_parallel_slow_lookups_all_time_out)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    set_slow_names(dns, 100);
    dns.start();
    lookups slow(io, 100);
    run(io, [&]() -> asio::awaitable<void> {
        auto r = cares_at(io, dns, milliseconds(200));
        start_slow_lookups(io, r.get(), &slow);
        co_await slow.wait();
        dns.stop();
    });
    BOOST_TEST(slow.ends.size() == 100u);
    for (const auto& ec : slow.ends)
        BOOST_TEST(ec == asio::error::timed_out);
}

BOOST_AUTO_TEST_CASE(destroying_the_resolver_aborts_pending_lookups_and_leaks_nothing)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    set_slow_names(dns, 10);
    dns.start();
    const std::size_t fds_before = open_fds();
    lookups slow(io, 10);
    run(io, [&]() -> asio::awaitable<void> {
        auto r = cares_at(io, dns, milliseconds(60'000));
        start_slow_lookups(io, r.get(), &slow);
        co_await yield_once();
        BOOST_TEST(open_fds() > fds_before); // c-ares's socket
        r.reset();
        co_await slow.wait();
        BOOST_TEST(open_fds() == fds_before); // c-ares closed its socket, we closed none twice
        dns.stop();
    });
    BOOST_TEST(slow.ends.size() == 10u);
    for (const auto& ec : slow.ends)
        BOOST_TEST(ec == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE(a_cancelled_lookup_ends_aborted_and_its_late_answer_is_ignored)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    auto late = one_a("192.0.2.4");
    late.delay = milliseconds(50);
    dns.set("late.test", late);
    dns.start();
    lookups first(io, 1);
    run(io, [&]() -> asio::awaitable<void> {
        auto r = cares_at(io, dns, milliseconds(10'000));
        asio::cancellation_signal cancel;
        asio::co_spawn(io, lookup_into(r.get(), "late.test", &first),
                       asio::bind_cancellation_slot(cancel.slot(), asio::detached));
        co_await yield_once(); // its queries are sent
        cancel.emit(asio::cancellation_type::terminal);
        co_await first.wait();
        // Asked again while the first answers are still on their way: they come back for
        // a lookup that has ended, and are dropped.
        auto again = co_await r->resolve("late.test");
        BOOST_TEST(!again.ec);
        BOOST_TEST(again.addresses.size() == 1u);
        BOOST_TEST(dns.queries("late.test") == 4u);
        dns.stop();
    });
    BOOST_TEST_REQUIRE(first.ends.size() == 1u);
    BOOST_TEST(first.ends[0] == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE(pinned_names_win_and_never_reach_the_server)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    dns.set("pinned.test", one_a("192.0.2.9"));
    dns.set("other.test", one_a("192.0.2.9"));
    dns.start();
    run(io, [&]() -> asio::awaitable<void> {
        const std::vector<asio::ip::address> pin = {asio::ip::make_address("203.0.113.5"),
                                                    asio::ip::make_address("2001:db8::5")};
        net::static_resolver r({{"pinned.test", pin}}, cares_at(io, dns, milliseconds(10'000)));
        auto res = co_await r.resolve("pinned.test");
        BOOST_TEST(!res.ec);
        BOOST_TEST(res.addresses == pin, boost::test_tools::per_element());
        BOOST_TEST(dns.queries("pinned.test") == 0u);
        auto other = co_await r.resolve("other.test");
        BOOST_TEST(!other.ec);
        BOOST_TEST(other.addresses.size() == 1u);
        BOOST_TEST(dns.queries("other.test") == 2u);
        BOOST_TEST(r.calls() == 2u);
        dns.stop();
    });
}

BOOST_AUTO_TEST_CASE(a_static_resolver_alone_answers_other_names_host_not_found)
{
    asio::io_context io;
    run(io, [&]() -> asio::awaitable<void> {
        net::static_resolver r({{"a.test", {asio::ip::make_address("192.0.2.1")}}}, nullptr);
        auto res = co_await r.resolve("b.test");
        BOOST_TEST(res.ec == asio::error::host_not_found);
        BOOST_TEST(r.calls() == 1u);
    });
}

BOOST_AUTO_TEST_CASE(bad_server_strings_are_refused)
{
    asio::io_context io;
    for (const char* bad : {"", "bogus", "dns.test:53", "1.2.3", "1.2.3.4:", "1.2.3.4:0",
                            "1.2.3.4:65536", "1.2.3.4:053", "1.2.3.4:+53", "1.2.3.4:5x",
                            "[::1", "[::1]x", "[::1]:", "[1.2.3.4]:53", "fe80::1%eth0",
                            "[fe80::1%25eth0]:53", "127.0.0.1 ", ":::"})
    {
        net::cares_options o;
        o.servers = {"127.0.0.1", bad};
        auto r = net::make_cares_resolver(io.get_executor(), o);
        BOOST_TEST_CONTEXT("server '" << bad << "'")
        {
            BOOST_TEST_REQUIRE(!r.has_value());
            BOOST_TEST(r.error().code == sandbox::errc::validation);
            BOOST_TEST(r.error().diag.limit == "dns_servers[1]");
        }
    }
    for (const char* good : {"127.0.0.1", "127.0.0.1:5353", "[::1]:53", "[::1]", "::1"})
    {
        net::cares_options o;
        o.servers = {good};
        BOOST_TEST_CONTEXT("server '" << good << "'")
        BOOST_TEST(net::make_cares_resolver(io.get_executor(), o).has_value());
    }
}

BOOST_AUTO_TEST_CASE(make_resolver_pins_canonical_names_in_front_of_its_dns_servers)
{
    asio::io_context io;
    fake_dns::server dns(io.get_executor());
    dns.set("served.test", one_a("192.0.2.9"));
    dns.set("black.test", silent());
    dns.start();
    run(io, [&]() -> asio::awaitable<void> {
        sandbox::proxy_options o;
        o.resolve = {{"Pinned.TEST.", "127.1"},
                     {"pinned.test", "[::ffff:10.0.0.1]"},
                     {"m\xc3\xbcnchen.test", "2001:db8::7"}};
        o.dns_servers = {dns.address()};
        o.limits.dns_timeout = milliseconds(200);
        auto made = net::make_resolver(io.get_executor(), o);
        BOOST_TEST_REQUIRE(made.has_value());
        auto& r = **made;
        auto pinned = co_await r.resolve("pinned.test");
        const std::vector<asio::ip::address> want = {asio::ip::make_address("127.0.0.1"),
                                                     asio::ip::make_address("10.0.0.1")};
        BOOST_TEST(pinned.addresses == want, boost::test_tools::per_element());
        auto idn = co_await r.resolve("xn--mnchen-3ya.test");
        BOOST_TEST_REQUIRE(idn.addresses.size() == 1u);
        BOOST_TEST(idn.addresses[0] == asio::ip::make_address("2001:db8::7"));
        auto other = co_await r.resolve("served.test");
        BOOST_TEST_REQUIRE(other.addresses.size() == 1u);
        BOOST_TEST(other.addresses[0] == asio::ip::make_address("192.0.2.9"));
        auto black = co_await r.resolve("black.test");
        BOOST_TEST(black.ec == asio::error::timed_out); // limits.dns_timeout applies
        BOOST_TEST(dns.queries("pinned.test") == 0u);
        BOOST_TEST(dns.queries("xn--mnchen-3ya.test") == 0u);
        dns.stop();
    });
}

BOOST_AUTO_TEST_CASE(make_resolver_refuses_bad_pins_and_servers)
{
    asio::io_context io;
    const std::pair<std::string, std::string> bad_pins[] = {
        {"", "192.0.2.1"},           {"bad name.test", "192.0.2.1"}, {"a..test", "192.0.2.1"},
        {"192.0.2.1", "192.0.2.2"},  {"[::1]", "192.0.2.1"},        {"ok.test", "other.test"},
        {"ok.test", ""},             {"ok.test", "[fe80::1%25lo]"}, {"ok.test", "1.2.3.4:80"},
    };
    for (const auto& pin : bad_pins)
    {
        sandbox::proxy_options o;
        o.resolve = {{"fine.test", "192.0.2.1"}, pin};
        auto r = net::make_resolver(io.get_executor(), o);
        BOOST_TEST_CONTEXT("pin '" << pin.first << "' -> '" << pin.second << "'")
        {
            BOOST_TEST_REQUIRE(!r.has_value());
            BOOST_TEST(r.error().code == sandbox::errc::validation);
            BOOST_TEST(r.error().diag.limit == "resolve[1]");
        }
    }
    sandbox::proxy_options o;
    o.dns_servers = {"dns.test"};
    auto r = net::make_resolver(io.get_executor(), o);
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(r.error().diag.limit == "dns_servers[0]");
}

BOOST_AUTO_TEST_SUITE_END()
