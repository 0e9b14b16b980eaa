// net/sni_check.cpp: the server name of an uninspected tunnel, judged and read.
#include "sni_check.hpp"

#include "relay.hpp"
#include "tls/inspector.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace sandbox::net {

namespace {

using verdict = tls::hello_peek::verdict;

// What deny makes of a first flight that is TLS but no whole, sound ClientHello.
std::string refusal_of(verdict v)
{
    return v == verdict::need_more ? "no_client_hello" : "bad_client_hello";
}

} // namespace

sni_judgement judge_sni(const tls::hello_peek& p, const canonical_host& host, sni_mode mode)
{
    sni_judgement j;
    if (mode == sni_mode::off || p.what == verdict::not_tls)
        return j;
    if (p.what != verdict::tls)
    {
        if (mode == sni_mode::deny)
            j.refusal = refusal_of(p.what);
        return j;
    }
    j.sni = escape_for_record(p.sni);
    if (!p.sni.empty())
    {
        const auto named = canonicalize_host(p.sni);
        j.mismatch = !named || named->text() != host.text();
    }
    if (j.mismatch && mode == sni_mode::deny)
        j.refusal = "sni_mismatch";
    return j;
}

boost::asio::awaitable<sni_judgement> check_sni(boost::asio::ip::tcp::socket& client,
                                                std::string& held, const canonical_host& host,
                                                sni_mode mode, std::chrono::milliseconds limit,
                                                const bool* stopping)
{
    if (mode == sni_mode::off)
        co_return sni_judgement{};
    if (held.empty()) // the first byte, however long it takes: the limit starts there
    {
        const boost::system::error_code ec = co_await tls::readable(client, stopping);
        if (ec)
            co_return sni_judgement{}; // the relay ending (it says why) or the socket failing
    }
    const auto deadline = std::chrono::steady_clock::now() + limit;
    const tls::hello_peek p = co_await tls::read_client_hello(client, held, deadline, stopping);
    if (held.empty())
        co_return sni_judgement{}; // the client ended without a byte: nothing to judge
    co_return judge_sni(p, host, mode);
}

} // namespace sandbox::net
