// test/net/socks_test.cpp: serve_socks5 end to end on loopback (network.md §11.16, the
// SOCKS5 half of §11.15 and §11.18's cap): a real client socket, the real egress with a
// scripted resolver, and a destination on 127.0.0.2 (allowed by an explicit rule).
#include "egress_fakes.hpp"

#include "net/deadline.hpp"
#include "net/socks_front.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/test/unit_test.hpp>

#include <functional>

namespace sandbox::net::test {
namespace {

using asio::awaitable;
using asio::use_awaitable;

const std::string greeting("\x05\x01\x00", 3);

/// A request: CMD, ATYP and DST.ADDR as given, DST.PORT `port`.
std::string socks_request(char cmd, char atyp, const std::string& addr, std::uint16_t port)
{
    std::string r{'\x05', cmd, '\x00', atyp};
    r += addr;
    r += static_cast<char>(port >> 8);
    r += static_cast<char>(port & 0xff);
    return r;
}

std::string domain(const std::string& name)
{
    return static_cast<char>(name.size()) + name;
}

awaitable<void> send(tcp::socket& s, const std::string& bytes)
{
    co_await asio::async_write(s, asio::buffer(bytes), use_awaitable);
}

/// Everything until EOF (or an error).
awaitable<std::string> read_all(tcp::socket& s)
{
    std::string out;
    for (;;)
    {
        std::array<char, 4096> chunk{};
        auto [ec, n] = co_await s.async_read_some(asio::buffer(chunk), use_tuple);
        out.append(chunk.data(), n);
        if (ec)
            co_return out;
    }
}

/// The SOCKS5 front on a loopback port, serving one client, and an optional destination on
/// 127.0.0.2 that reads to EOF and answers with the count of bytes it got.
struct socks_rig
{
    asio::io_context ctx;
    egress_rig eg;
    tcp::acceptor front{listen_on(ctx, "127.0.0.1")};
    tcp::acceptor dest{listen_on(ctx, "127.0.0.2")};
    std::string over_cap{}; // the cap that is spent ("" none)
    std::string dest_got;
    bool dest_served = false;

    explicit socks_rig(std::vector<net_rule> rules) : eg(std::move(rules))
    {
        eg.cfg.limits.socks_handshake_timeout = std::chrono::milliseconds(200);
    }
    std::uint16_t dest_port() const { return dest.local_endpoint().port(); }

    awaitable<void> serve_front(std::shared_ptr<egress> gate)
    {
        auto [ec, s] = co_await front.async_accept(asio::as_tuple(use_awaitable));
        if (ec)
            co_return;
        std::string first(1, '\0');
        auto [rec, n] = co_await asio::async_read(s, asio::buffer(first), use_tuple);
        if (rec)
            co_return;
        co_await serve_socks5(std::move(gate), std::move(s), std::move(first), over_cap);
    }
    awaitable<void> serve_dest()
    {
        auto [ec, s] = co_await dest.async_accept(asio::as_tuple(use_awaitable));
        if (ec)
            co_return;
        dest_served = true;
        dest_got = co_await read_all(s);
        co_await send(s, std::to_string(dest_got.size()));
    }
    /// Runs `client` on a socket connected to the front, to the end of everything.
    void run(std::function<awaitable<bool>(tcp::socket&)> client)
    {
        auto gate = eg.make(ctx.get_executor());
        asio::co_spawn(ctx, serve_front(gate), asio::detached);
        asio::co_spawn(ctx, serve_dest(), asio::detached);
        run_on(ctx, [&]() -> awaitable<void> {
            tcp::socket s(ctx);
            co_await s.async_connect(front.local_endpoint(), use_awaitable);
            auto done = co_await within(client(s), std::chrono::seconds(10));
            BOOST_CHECK_MESSAGE(done.has_value(), "the client script timed out");
            s.close();
            front.close();
            dest.close();
        });
    }
};

/// Sends `bytes`, reads to EOF, and returns what came back.
std::string talk(socks_rig& rig, const std::string& bytes)
{
    std::string got;
    rig.run([&](tcp::socket& s) -> awaitable<bool> {
        co_await send(s, bytes);
        got = co_await read_all(s);
        co_return true;
    });
    return got;
}

/// A request after the greeting must be answered `rep` (and closed), with one record.
void expect_reply(std::vector<net_rule> rules, const std::string& request, char rep,
                  const std::string& reason)
{
    socks_rig rig(std::move(rules));
    const std::string got = talk(rig, greeting + request);
    BOOST_REQUIRE_EQUAL(got.size(), 12u); // method choice, then a 10-byte reply, then EOF
    BOOST_CHECK_EQUAL(got.substr(0, 2), std::string("\x05\x00", 2));
    BOOST_CHECK_EQUAL(static_cast<int>(got[3]), static_cast<int>(rep));
    BOOST_REQUIRE_EQUAL(rig.eg.records->size(), 1u);
    BOOST_CHECK_EQUAL(rig.eg.records->front().reason, reason);
    BOOST_CHECK(rig.eg.records->front().protocol == net_protocol::socks5);
    BOOST_CHECK(!rig.dest_served);
}

} // namespace

BOOST_AUTO_TEST_SUITE(socks5_front)

BOOST_AUTO_TEST_CASE(no_methods_or_none_acceptable_is_ff_then_close)
{
    for (const std::string& hello : {std::string("\x05\x00", 2), std::string("\x05\x01\x02", 3),
                                     std::string("\x05\x02\x01\x02", 4)})
    {
        socks_rig rig({});
        BOOST_CHECK_EQUAL(talk(rig, hello), std::string("\x05\xff", 2));
        BOOST_CHECK(rig.eg.records->empty());
    }
}

BOOST_AUTO_TEST_CASE(socks4_is_closed)
{
    socks_rig rig({});
    BOOST_CHECK_EQUAL(talk(rig, std::string("\x04\x01\x00\x50\x7f\x00\x00\x01\x00", 9)), "");
    BOOST_CHECK(rig.eg.records->empty());
}

BOOST_AUTO_TEST_CASE(bad_domains_are_rep_01)
{
    expect_reply({}, socks_request(1, 3, std::string(1, '\0'), 443), 1, "bad_request");
    expect_reply({allow("allowed.test")},
                 socks_request(1, 3, domain(std::string("evil.test\0.allowed.test", 23)), 443), 1,
                 "bad_request");
    expect_reply({allow("allowed.test")}, socks_request(1, 3, domain("allowed.test"), 0), 1,
                 "bad_request");
}

BOOST_AUTO_TEST_CASE(loopback_in_every_address_type_is_rep_02)
{
    expect_reply({allow("allowed.test")},
                 socks_request(1, 1, std::string("\x7f\x00\x00\x01", 4), 80), 2, "loopback");
    const std::string mapped("\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\0\0\x01", 16);
    expect_reply({allow("allowed.test")}, socks_request(1, 4, mapped, 80), 2, "loopback");
    expect_reply({allow("allowed.test")}, socks_request(1, 3, domain("2130706433"), 80), 2,
                 "loopback");
}

BOOST_AUTO_TEST_CASE(unlisted_name_is_rep_02_without_lookup)
{
    socks_rig rig({allow("allowed.test")});
    const std::string got =
        talk(rig, greeting + socks_request(1, 3, domain("secret.other.test"), 443));
    BOOST_REQUIRE_EQUAL(got.size(), 12u);
    BOOST_CHECK_EQUAL(got[3], '\x02');
    BOOST_CHECK_EQUAL(rig.eg.dns->calls, 0u);
    BOOST_REQUIRE_EQUAL(rig.eg.records->size(), 1u);
    BOOST_CHECK_EQUAL(rig.eg.records->front().reason, "no_rule");
    BOOST_CHECK_EQUAL(rig.eg.records->front().host, "secret.other.test");
}

BOOST_AUTO_TEST_CASE(bind_and_udp_are_rep_07_and_atyp_05_is_rep_08)
{
    expect_reply({}, socks_request(2, 1, std::string("\x7f\x00\x00\x01", 4), 80), 7, "unsupported");
    expect_reply({}, socks_request(3, 1, std::string("\x7f\x00\x00\x01", 4), 80), 7, "unsupported");
    expect_reply({}, socks_request(1, 5, std::string("\x7f\x00\x00\x01", 4), 80), 8, "unsupported");
}

BOOST_AUTO_TEST_CASE(dial_refused_is_rep_05)
{
    asio::io_context other;
    const auto port = free_port(other, "127.0.0.2");
    expect_reply({allow("127.0.0.2")},
                 socks_request(1, 1, std::string("\x7f\x00\x00\x02", 4), port), 5, "dial_refused");
}

BOOST_AUTO_TEST_CASE(over_the_cap_is_rep_01_recorded_as_tunnel_cap)
{
    socks_rig rig({allow("127.0.0.2")});
    rig.over_cap = "max_tunnels 1";
    const std::string got = talk(
        rig, greeting + socks_request(1, 1, std::string("\x7f\x00\x00\x02", 4), rig.dest_port()));
    BOOST_REQUIRE_EQUAL(got.size(), 12u);
    BOOST_CHECK_EQUAL(got[3], '\x01');
    BOOST_REQUIRE_EQUAL(rig.eg.records->size(), 1u);
    BOOST_CHECK_EQUAL(rig.eg.records->front().reason, "tunnel_cap");
    BOOST_CHECK(!rig.dest_served);
}

// §11.17: a greeting followed by silence, or a dribbled partial greeting, is closed at the
// handshake timeout (the client's own guard is 10 s; the handshake timeout is 200 ms).
BOOST_AUTO_TEST_CASE(silent_or_partial_handshake_is_closed_at_the_timeout)
{
    {
        socks_rig rig({});
        BOOST_CHECK_EQUAL(talk(rig, greeting), std::string("\x05\x00", 2));
        BOOST_CHECK(rig.eg.records->empty());
    }
    {
        socks_rig rig({});
        BOOST_CHECK_EQUAL(talk(rig, std::string("\x05\x03\x00", 3)), "");
    }
}

// §11.15: greeting, request and payload in one write; then the client's half-close; the
// destination's answer (sent after it saw EOF) still arrives.
BOOST_AUTO_TEST_CASE(pipelined_payload_and_half_close)
{
    socks_rig rig({allow("allowed.test"), allow("127.0.0.2")});
    rig.eg.dns->pin("allowed.test", {"127.0.0.2"});
    const auto port = rig.dest_port();
    std::string reply;
    std::string answer;
    rig.run([&](tcp::socket& s) -> awaitable<bool> {
        co_await send(s,
                      greeting + socks_request(1, 3, domain("allowed.test"), port) + "0123456789");
        reply.resize(12);
        co_await asio::async_read(s, asio::buffer(reply), use_awaitable);
        s.shutdown(tcp::socket::shutdown_send);
        answer = co_await read_all(s);
        co_return true;
    });
    BOOST_CHECK_EQUAL(reply.substr(0, 4), std::string("\x05\x00\x05\x00", 4));
    BOOST_CHECK_EQUAL(reply[5], '\x01'); // BND is the outbound socket's IPv4 address
    BOOST_CHECK(reply.substr(10, 2) != std::string("\0\0", 2));
    BOOST_CHECK_EQUAL(rig.dest_got, "0123456789");
    BOOST_CHECK_EQUAL(answer, "10");
    BOOST_REQUIRE_EQUAL(rig.eg.records->size(), 2u);
    const auto& d = rig.eg.records->front();
    BOOST_CHECK(d.verdict == net_verdict::allowed);
    BOOST_CHECK_EQUAL(d.dialed, "127.0.0.2:" + std::to_string(port));
    const auto& c = rig.eg.records->back();
    BOOST_CHECK(c.event == net_event::closed);
    BOOST_CHECK_EQUAL(c.bytes_up, 10u);
    BOOST_CHECK_EQUAL(c.bytes_down, 2u);
    BOOST_CHECK_EQUAL(c.reason, "eof");
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace sandbox::net::test
