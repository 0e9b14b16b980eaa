// test/net/fake_dns.hpp: a DNS server on a loopback UDP port for the resolver's tests and
// benchmark. It reads a query's id and question only, and answers each name as told: A and
// AAAA records (in the order given, after an optional delay), NXDOMAIN, or never. It counts
// the queries per name. Names it was not told about get NXDOMAIN.
#ifndef SANDBOX_TEST_NET_FAKE_DNS_HPP
#define SANDBOX_TEST_NET_FAKE_DNS_HPP

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fake_dns {

namespace asio = boost::asio;

/// How the server answers one name.
struct answer
{
    enum class kind
    {
        records,  ///< NOERROR with the records of the asked type (none: NODATA)
        nxdomain, ///< rcode 3
        silent,   ///< never answers
    };
    kind what = kind::records;
    std::vector<asio::ip::address_v4> a{};
    std::vector<asio::ip::address_v6> aaaa{};
    std::chrono::milliseconds delay{0};
};

/// A question as read from a query.
struct question
{
    std::uint16_t id = 0;
    std::uint16_t flags = 0;
    std::string name{};     ///< lower case, no trailing dot
    std::uint16_t type = 0; ///< 1 A, 28 AAAA
    std::size_t end = 0;    ///< one past the question's last byte
};

/// The question of a query, or nothing when it is not one this server reads.
inline std::optional<question> read_question(const std::uint8_t* p, std::size_t n)
{
    if (n < 12 || (p[2] & 0x80) != 0 || p[4] != 0 || p[5] != 1)
        return std::nullopt;
    question q;
    q.id = static_cast<std::uint16_t>(p[0] << 8 | p[1]);
    q.flags = static_cast<std::uint16_t>(p[2] << 8 | p[3]);
    std::size_t i = 12;
    while (i < n && p[i] != 0)
    {
        const std::size_t len = p[i];
        if (len > 63 || i + 1 + len >= n)
            return std::nullopt;
        if (!q.name.empty())
            q.name += '.';
        for (std::size_t k = 0; k < len; ++k)
        {
            const char c = static_cast<char>(p[i + 1 + k]);
            q.name += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
        }
        i += 1 + len;
    }
    if (i + 5 > n)
        return std::nullopt;
    q.type = static_cast<std::uint16_t>(p[i + 1] << 8 | p[i + 2]);
    q.end = i + 5;
    return q;
}

/// The reply to `q` (whose bytes are `query`) under `a`.
inline std::vector<std::uint8_t> make_reply(const std::uint8_t* query, const question& q,
                                            const answer& a)
{
    std::vector<std::vector<std::uint8_t>> rdata;
    if (a.what == answer::kind::records && q.type == 1)
        for (const auto& v4 : a.a)
        {
            const auto b = v4.to_bytes();
            rdata.emplace_back(b.begin(), b.end());
        }
    if (a.what == answer::kind::records && q.type == 28)
        for (const auto& v6 : a.aaaa)
        {
            const auto b = v6.to_bytes();
            rdata.emplace_back(b.begin(), b.end());
        }
    const std::uint8_t rcode = a.what == answer::kind::nxdomain ? 3 : 0;
    std::vector<std::uint8_t> out(query, query + q.end);
    out[2] = static_cast<std::uint8_t>(0x80 | (q.flags >> 8 & 0x01)); // QR, RD copied
    out[3] = static_cast<std::uint8_t>(0x80 | rcode);                 // RA
    out[6] = 0;
    out[7] = static_cast<std::uint8_t>(rdata.size());
    out[8] = out[9] = out[10] = out[11] = 0;
    for (const auto& r : rdata)
    {
        const std::uint8_t rr[] = {0xc0, 0x0c, 0, static_cast<std::uint8_t>(q.type), 0, 1,
                                   0, 0, 0, 60, 0, static_cast<std::uint8_t>(r.size())};
        out.insert(out.end(), std::begin(rr), std::end(rr));
        out.insert(out.end(), r.begin(), r.end());
    }
    return out;
}

/// The server. Construct, `start()`, point the resolver at `server()`, `stop()` at the end
/// (closes the socket and drops delayed answers); it must outlive the io_context's run.
class server
{
public:
    explicit server(const asio::any_io_executor& ex)
        : ex_(ex), socket_(ex, asio::ip::udp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0))
    {
    }

    /// "127.0.0.1:PORT", for cares_options::servers.
    std::string address() const
    {
        return "127.0.0.1:" + std::to_string(socket_.local_endpoint().port());
    }
    void set(const std::string& name, answer a) { answers_[name] = std::move(a); }
    /// Queries received for `name` (A and AAAA count separately).
    std::size_t queries(const std::string& name) const
    {
        const auto it = counts_.find(name);
        return it == counts_.end() ? 0 : it->second;
    }
    std::size_t queries() const { return total_; }

    void start()
    {
        asio::co_spawn(ex_, serve(), asio::detached);
    }
    void stop()
    {
        socket_.close();
        for (auto& t : delayed_)
            t->cancel();
        delayed_.clear();
    }

private:
    asio::awaitable<void> serve()
    {
        std::array<std::uint8_t, 1500> buf{};
        for (;;)
        {
            asio::ip::udp::endpoint peer;
            auto [ec, n] = co_await socket_.async_receive_from(
                asio::buffer(buf), peer, asio::as_tuple(asio::use_awaitable));
            if (ec == asio::error::operation_aborted || !socket_.is_open())
                co_return;
            if (!ec)
                on_query(buf.data(), n, peer);
        }
    }

    void on_query(const std::uint8_t* p, std::size_t n, const asio::ip::udp::endpoint& peer)
    {
        const auto q = read_question(p, n);
        if (!q)
            return;
        ++counts_[q->name];
        ++total_;
        answer a;
        a.what = answer::kind::nxdomain;
        if (const auto it = answers_.find(q->name); it != answers_.end())
            a = it->second;
        if (a.what == answer::kind::silent)
            return;
        auto reply = std::make_shared<std::vector<std::uint8_t>>(make_reply(p, *q, a));
        if (a.delay.count() == 0)
            return send(*reply, peer);
        auto t = std::make_shared<asio::steady_timer>(ex_, a.delay);
        delayed_.push_back(t);
        t->async_wait([this, t, reply, peer](boost::system::error_code ec) {
            std::erase(delayed_, t);
            if (!ec)
                send(*reply, peer);
        });
    }

    void send(const std::vector<std::uint8_t>& reply, const asio::ip::udp::endpoint& peer)
    {
        boost::system::error_code ec;
        if (socket_.is_open())
            socket_.send_to(asio::buffer(reply), peer, 0, ec); // loopback UDP: never blocks long
    }

    asio::any_io_executor ex_;
    asio::ip::udp::socket socket_;
    std::map<std::string, answer> answers_;
    std::map<std::string, std::size_t> counts_;
    std::size_t total_ = 0;
    std::vector<std::shared_ptr<asio::steady_timer>> delayed_;
};

} // namespace fake_dns

#endif // SANDBOX_TEST_NET_FAKE_DNS_HPP
