// net/socks_front.cpp: see socks_front.hpp.
//
// Replies: connected 00; bad_request, upstream_failed, tunnel_cap 01; denied and
// upstream_refused 02; resolve_failed, resolve_timeout, dial_failed, dial_timeout 04;
// dial_refused 05; unsupported command 07; unsupported address type 08. A failure reply is
// followed by a close at once. Connections that end before a complete request (no acceptable
// method, a broken greeting, the handshake timeout) are closed without a record: they named
// no destination.
#include "socks_front.hpp"

#include "deadline.hpp"
#include "relay.hpp"
#include "tunnel.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <cstdint>
#include <optional>

namespace sandbox::net {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;

namespace {

constexpr std::uint8_t rep_ok = 0x00;
constexpr std::uint8_t rep_general = 0x01;
constexpr std::uint8_t rep_not_allowed = 0x02;
constexpr std::uint8_t rep_host_unreachable = 0x04;
constexpr std::uint8_t rep_refused = 0x05;
constexpr std::uint8_t rep_command = 0x07;
constexpr std::uint8_t rep_address_type = 0x08;

/// The REP byte of a status.
std::uint8_t rep_of(open_status s)
{
    switch (s)
    {
    case open_status::connected: return rep_ok;
    case open_status::denied:
    case open_status::upstream_refused: return rep_not_allowed;
    case open_status::resolve_failed:
    case open_status::resolve_timeout:
    case open_status::dial_failed:
    case open_status::dial_timeout: return rep_host_unreachable;
    case open_status::dial_refused: return rep_refused;
    case open_status::unsupported: return rep_command;
    case open_status::bad_request:
    case open_status::upstream_failed:
    case open_status::tunnel_cap: break;
    }
    return rep_general;
}

/// The client's bytes so far; `fill` reads more until `n` are held.
struct inbox
{
    tcp::socket& sock;
    std::string bytes;
    std::size_t pos = 0;

    awaitable<bool> fill(std::size_t n)
    {
        while (bytes.size() - pos < n)
        {
            std::array<char, 4096> chunk{};
            auto [ec, got] = co_await sock.async_read_some(asio::buffer(chunk), use_tuple);
            if (ec)
                co_return false;
            bytes.append(chunk.data(), got);
        }
        co_return true;
    }
    std::uint8_t at(std::size_t i) const { return static_cast<std::uint8_t>(bytes[pos + i]); }
    std::string take(std::size_t n)
    {
        std::string out = bytes.substr(pos, n);
        pos += n;
        return out;
    }
    std::string rest() const { return bytes.substr(pos); }
};

/// A parsed request, or the refusal to answer it with.
struct request
{
    bool complete = false; ///< false: close without a reply
    std::optional<authority> target{};
    std::string requested{};
    open_status refusal = open_status::bad_request;
    std::uint8_t rep = rep_general;
    std::string message{};
};

/// The end of a connection that made no complete request (a named value: GCC 12 mishandles
/// `co_return` of a braced temporary of this type).
request no_request()
{
    request r;
    return r;
}

request refused(std::string requested, open_status s, std::uint8_t rep, std::string message)
{
    return request{true, std::nullopt, std::move(requested), s, rep, std::move(message)};
}

/// Greeting: VER NMETHODS METHODS; answers 05 00, or 05 FF (then the caller closes).
awaitable<bool> greet(inbox& in)
{
    if (!co_await in.fill(2) || in.at(0) != 0x05)
        co_return false;
    const std::size_t n = in.at(1);
    if (!co_await in.fill(2 + n))
        co_return false;
    const std::string methods = in.take(2 + n).substr(2);
    const bool no_auth = methods.find('\0') != std::string::npos;
    const std::array<std::uint8_t, 2> choice{0x05,
                                             no_auth ? std::uint8_t{0x00} : std::uint8_t{0xff}};
    auto [ec, w] = co_await asio::async_write(in.sock, asio::buffer(choice), use_tuple);
    co_return !ec && no_auth;
}

/// The address of an ATYP 01 / 04 request as a canonical host (IPv4-mapped unmapped).
authority literal_target(const std::string& raw, std::uint16_t port)
{
    address a;
    if (raw.size() == 4)
    {
        asio::ip::address_v4::bytes_type b{};
        std::copy(raw.begin(), raw.end(), b.begin());
        a = asio::ip::address_v4(b);
    }
    else
    {
        asio::ip::address_v6::bytes_type b{};
        std::copy(raw.begin(), raw.end(), b.begin());
        a = asio::ip::address_v6(b);
    }
    authority t;
    t.host.ip = unmapped(a);
    t.port = port;
    return t;
}

/// DST.ADDR after the 4-byte head: its raw bytes (the domain without its length byte).
awaitable<std::optional<std::string>> read_address(inbox& in, std::uint8_t atyp)
{
    std::size_t n = atyp == 0x01 ? 4 : 16;
    if (atyp == 0x03)
    {
        if (!co_await in.fill(1))
            co_return std::nullopt;
        n = in.at(0);
        in.take(1);
    }
    if (!co_await in.fill(n + 2))
        co_return std::nullopt;
    co_return in.take(n);
}

request name_request(const std::string& raw, std::uint16_t port)
{
    if (raw.empty())
        return refused(raw, open_status::bad_request, rep_general, "empty domain name");
    auto host = canonicalize_host(raw);
    if (!host)
        return refused(raw, open_status::bad_request, rep_general,
                       "bad domain name: " + host.error().diag.message);
    request r{true, authority{std::move(*host), port}, raw};
    return r;
}

/// Request: VER CMD RSV ATYP DST.ADDR DST.PORT.
awaitable<request> read_request(inbox& in)
{
    if (!co_await in.fill(4) || in.at(0) != 0x05)
        co_return no_request();
    const std::uint8_t cmd = in.at(1);
    const std::uint8_t atyp = in.at(3);
    in.take(4);
    if (cmd != 0x01)
        co_return refused({}, open_status::unsupported, rep_command,
                          "only the SOCKS5 CONNECT command is supported");
    if (atyp != 0x01 && atyp != 0x03 && atyp != 0x04)
        co_return refused({}, open_status::unsupported, rep_address_type,
                          "unsupported SOCKS5 address type");
    auto raw = co_await read_address(in, atyp);
    if (!raw)
        co_return no_request();
    const std::uint16_t port = static_cast<std::uint16_t>(in.at(0) << 8 | in.at(1));
    in.take(2);
    request r;
    if (atyp == 0x03)
        r = name_request(*raw, port);
    else
    {
        auto t = literal_target(*raw, port);
        r = request{true, t, t.host.ip->to_string()};
    }
    if (r.target && port == 0)
        co_return refused(r.requested, open_status::bad_request, rep_general, "port 0");
    co_return r;
}

awaitable<request> handshake(inbox& in)
{
    if (!co_await greet(in))
        co_return no_request();
    request r = co_await read_request(in);
    co_return r;
}

/// VER REP RSV ATYP BND.ADDR BND.PORT; BND is `bound` (or 0.0.0.0:0).
std::string reply(std::uint8_t rep, const std::optional<tcp::endpoint>& bound)
{
    std::string r{'\x05', static_cast<char>(rep), '\x00'};
    const address a = bound ? bound->address() : address(asio::ip::address_v4());
    if (a.is_v4())
    {
        r += '\x01';
        const auto b = a.to_v4().to_bytes();
        r.append(b.begin(), b.end());
    }
    else
    {
        r += '\x04';
        const auto b = a.to_v6().to_bytes();
        r.append(b.begin(), b.end());
    }
    const std::uint16_t port = bound ? bound->port() : 0;
    r += static_cast<char>(port >> 8);
    r += static_cast<char>(port & 0xff);
    return r;
}

awaitable<void> send_reply(tcp::socket& s, std::uint8_t rep,
                           const std::optional<tcp::endpoint>& bound)
{
    const std::string bytes = reply(rep, bound);
    auto [ec, n] = co_await asio::async_write(s, asio::buffer(bytes), use_tuple);
    (void)ec;
}

void close_now(tcp::socket& s)
{
    boost::system::error_code ignored;
    s.close(ignored);
}

awaitable<void> refuse_and_close(tcp::socket& client, std::uint8_t rep)
{
    co_await send_reply(client, rep, std::nullopt);
    close_now(client);
}

/// Opens the request's destination and, once connected, relays until the end.
awaitable<void> connect_and_relay(std::shared_ptr<egress> gate, tcp::socket& client, request req,
                                  std::string pipelined)
{
    // An inspected tunnel takes its place first: past the call's cap, nothing is dialled.
    const tunnel_choice choice =
        choose_tunnel(*gate, net_protocol::socks5, req.requested, *req.target);
    if (choice.over_cap)
        co_return co_await refuse_and_close(client, rep_of(open_status::tunnel_cap));
    opened o = co_await gate->open(net_protocol::socks5, req.requested, *req.target);
    if (o.status != open_status::connected)
        co_return co_await refuse_and_close(client, rep_of(o.status));
    boost::system::error_code ec;
    const auto local = o.socket.local_endpoint(ec);
    co_await send_reply(client, rep_ok, ec ? std::nullopt : std::optional<tcp::endpoint>(local));
    relay_totals totals = co_await carry_tunnel(*gate, client, o, *req.target, std::move(pipelined),
                                                choice.inspected);
    gate->closed(o.record, std::move(totals));
}

} // namespace

awaitable<void> serve_socks5(std::shared_ptr<egress> gate, tcp::socket client, std::string first,
                             std::string over_cap)
{
    inbox in{client, std::move(first)};
    auto got = co_await within(handshake(in), gate->limits().socks_handshake_timeout);
    if (!got || !got->complete)
        co_return close_now(client);
    request req = std::move(*got);
    if (req.target && !over_cap.empty())
    {
        gate->refuse(net_protocol::socks5, req.requested, open_status::tunnel_cap,
                     "too many connections open (" + over_cap + ")", over_cap);
        co_return co_await refuse_and_close(client, rep_of(open_status::tunnel_cap));
    }
    if (!req.target)
    {
        gate->refuse(net_protocol::socks5, req.requested, req.refusal, req.message);
        co_return co_await refuse_and_close(client, req.rep);
    }
    co_await connect_and_relay(std::move(gate), client, std::move(req), in.rest());
}

} // namespace sandbox::net
