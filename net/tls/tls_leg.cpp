// net/tls/tls_leg.cpp: a TLS leg driven by socket readiness (see tls_leg.hpp).
#include "tls_leg.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include <sys/socket.h>

namespace sandbox::net::tls {

namespace asio = boost::asio;
using boost::system::error_code;

// The BIO under a leg's SSL object: reads the bytes read ahead, then the socket; writes the
// socket. Non-blocking: "retry" when the socket would block.
struct tls_leg::bio_access
{
    static tls_leg& of(BIO* b) { return *static_cast<tls_leg*>(BIO_get_data(b)); }

    static int read(BIO* b, char* out, int len)
    {
        BIO_clear_retry_flags(b);
        tls_leg& leg = of(b);
        if (leg.first_used_ < leg.first_.size())
        {
            const std::size_t n =
                std::min(static_cast<std::size_t>(len), leg.first_.size() - leg.first_used_);
            std::memcpy(out, leg.first_.data() + leg.first_used_, n);
            leg.first_used_ += n;
            if (leg.first_used_ == leg.first_.size())
                std::string().swap(leg.first_), leg.first_used_ = 0;
            return static_cast<int>(n);
        }
        const ssize_t n =
            ::recv(leg.socket_.native_handle(), out, static_cast<std::size_t>(len), 0);
        return settle(b, leg, n, true);
    }

    static int write(BIO* b, const char* in, int len)
    {
        BIO_clear_retry_flags(b);
        tls_leg& leg = of(b);
        const ssize_t n =
            ::send(leg.socket_.native_handle(), in, static_cast<std::size_t>(len), MSG_NOSIGNAL);
        return settle(b, leg, n, false);
    }

    static int settle(BIO* b, tls_leg& leg, ssize_t n, bool reading)
    {
        if (n >= 0)
            return static_cast<int>(n);
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        {
            if (reading)
                BIO_set_retry_read(b);
            else
                BIO_set_retry_write(b);
        }
        else
            leg.last_errno_ = errno;
        return -1;
    }

    static long ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

    static int create(BIO* b)
    {
        BIO_set_init(b, 1);
        return 1;
    }

    static const BIO_METHOD* method()
    {
        static BIO_METHOD* m = [] {
            BIO_METHOD* made =
                BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "sandbox tls_leg");
            BIO_meth_set_read(made, &read);
            BIO_meth_set_write(made, &write);
            BIO_meth_set_ctrl(made, &ctrl);
            BIO_meth_set_create(made, &create);
            return made;
        }();
        return m;
    }
};

tls_leg::tls_leg(asio::ip::tcp::socket socket, SSL* ssl, std::string first)
    : socket_(std::move(socket)), ssl_(ssl), first_(std::move(first))
{
    error_code ignored;
    socket_.non_blocking(true, ignored);
    // A relay of records: a head and its body leave as two records, and Nagle would hold the
    // second until the first is acknowledged (a delayed ACK: 40 ms per small response).
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
    BIO* b = BIO_new(bio_access::method());
    BIO_set_data(b, this);
    SSL_set_bio(ssl_, b, b); // one reference, owned by the SSL object
    if (SSL_is_server(ssl_)) // the role its context's method gave it
        SSL_set_accept_state(ssl_);
    else
        SSL_set_connect_state(ssl_);
}

tls_leg::~tls_leg()
{
    SSL_free(ssl_);
}

error_code tls_leg::error_of(int ssl_error)
{
    if (ssl_error == SSL_ERROR_ZERO_RETURN)
        return asio::error::eof;
    const unsigned long err = ERR_peek_last_error();
    ERR_clear_error();
    if (ssl_error == SSL_ERROR_SYSCALL && err == 0)
        return last_errno_ ? error_code(last_errno_, boost::system::system_category())
                           : error_code(asio::ssl::error::stream_truncated);
    if (ERR_GET_LIB(err) == ERR_LIB_SSL &&
        ERR_GET_REASON(err) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        return asio::ssl::error::stream_truncated;
    if (err == 0) // a callback's "retry" (none of ours asks for one): never a success
        return asio::error::fault;
    return error_code(static_cast<int>(err), asio::error::get_ssl_category());
}

template <class Op> asio::awaitable<error_code> tls_leg::drive(Op op)
{
    for (;;)
    {
        ERR_clear_error();
        last_errno_ = 0;
        const int r = op();
        if (r > 0)
            co_return error_code();
        const int e = SSL_get_error(ssl_, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            co_return error_of(e);
        auto [ec] = co_await socket_.async_wait(
            e == SSL_ERROR_WANT_READ ? asio::socket_base::wait_read : asio::socket_base::wait_write,
            asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return ec;
    }
}

asio::awaitable<error_code> tls_leg::handshake()
{
    return drive([this] { return SSL_do_handshake(ssl_); });
}

std::pair<error_code, std::size_t> tls_leg::try_read(char* data, std::size_t size)
{
    ERR_clear_error();
    last_errno_ = 0;
    std::size_t n = 0;
    const int r = SSL_read_ex(ssl_, data, size, &n);
    if (r > 0)
        return {error_code(), n};
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    {
        wants_ = e;
        return {asio::error::would_block, 0};
    }
    return {error_of(e), 0};
}

asio::awaitable<error_code> tls_leg::wait()
{
    auto [ec] =
        co_await socket_.async_wait(wants_ == SSL_ERROR_WANT_WRITE ? asio::socket_base::wait_write
                                                                   : asio::socket_base::wait_read,
                                    asio::as_tuple(asio::use_awaitable));
    co_return ec;
}

asio::awaitable<error_code> tls_leg::write(const char* data, std::size_t size)
{
    while (size > 0)
    {
        std::size_t n = 0;
        const int chunk = static_cast<int>(std::min<std::size_t>(size, INT_MAX));
        auto ec = co_await drive(
            [&] { return SSL_write_ex(ssl_, data, static_cast<std::size_t>(chunk), &n); });
        if (ec)
            co_return ec;
        data += n;
        size -= n;
    }
    co_return error_code();
}

asio::awaitable<error_code> tls_leg::shutdown()
{
    return drive([this] {
        const int r = SSL_shutdown(ssl_);
        return r >= 0 ? 1 : r; // 0: ours sent, the peer's not waited for
    });
}

namespace {

// A pump's buffer: one TLS record's plaintext.
constexpr std::size_t pump_chunk = 16 * 1024;

// Chunks a pump moves before it lets the loop run others (its reads and writes complete
// without suspending while both sockets keep up): 256 KiB, a fraction of a millisecond.
constexpr int chunks_per_turn = 16;

} // namespace

// Copies `from` to `to` until `from` ends or fails: "closed" (its close_notify), "truncated"
// (its TCP end without one) or "reset". The buffer is held only while bytes move: an idle
// pump waits on the socket with none.
asio::awaitable<std::string> pump(tls_leg& from, tls_leg& to, std::uint64_t& count,
                                  std::chrono::steady_clock::time_point& last)
{
    std::unique_ptr<char[]> buf;
    for (int turn = 1;; ++turn)
    {
        if (turn % chunks_per_turn == 0)
            co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        if (!buf)
            buf = std::make_unique_for_overwrite<char[]>(pump_chunk);
        auto [ec, n] = from.try_read(buf.get(), pump_chunk);
        if (ec == asio::error::would_block)
        {
            buf.reset();
            if (co_await from.wait())
                co_return "reset";
            continue;
        }
        if (n > 0)
        {
            if (co_await to.write(buf.get(), n))
                co_return "reset";
            count += n;
            last = std::chrono::steady_clock::now();
        }
        if (ec == asio::error::eof)
            co_return "closed";
        if (ec == asio::ssl::error::stream_truncated)
            co_return "truncated";
        if (ec)
            co_return "reset";
    }
}

} // namespace sandbox::net::tls
