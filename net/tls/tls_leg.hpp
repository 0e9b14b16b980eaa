// net/tls/tls_leg.hpp: one TLS leg of an inspected tunnel, driven by readiness: OpenSSL reads
// and writes the non-blocking socket itself (through a BIO of ours that first hands over the
// bytes already read from it), and the leg waits on the socket only when OpenSSL asks to.
// Unlike asio::ssl::stream it keeps no buffers of its own (asio's holds four of 17 KiB):
// an idle leg is its SSL object, whose buffers SSL_MODE_RELEASE_BUFFERS lets go.
#ifndef SANDBOX_NET_TLS_TLS_LEG_HPP
#define SANDBOX_NET_TLS_TLS_LEG_HPP

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <openssl/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace sandbox::net::tls {

/// \brief A socket and the SSL object that speaks TLS on it. Owns both. Not thread-safe; one
/// reader and one writer at a time (a pump each way).
///
/// Errors: `asio::error::eof` for the peer's close_notify, `asio::ssl::error::stream_truncated`
/// for a close without one, OpenSSL's reasons in Asio's ssl category, socket errors as they
/// are, `operation_aborted` when the awaiting coroutine is cancelled.
class tls_leg
{
public:
    /// `first`: bytes already read from `socket`, given to OpenSSL before any of the socket's.
    tls_leg(boost::asio::ip::tcp::socket socket, SSL* ssl, std::string first);
    ~tls_leg();
    tls_leg(const tls_leg&) = delete;
    tls_leg& operator=(const tls_leg&) = delete;

    SSL* native_handle() const noexcept { return ssl_; }
    boost::asio::ip::tcp::socket& socket() noexcept { return socket_; }

    /// The handshake, in the role the SSL object was made for.
    boost::asio::awaitable<boost::system::error_code> handshake();
    /// \brief Plaintext now, without waiting: bytes, or an error, or `would_block` when
    /// OpenSSL needs the socket first (`wait()` then waits for what it needs). Any buffer may
    /// follow a `would_block`, so an idle reader need hold none.
    std::pair<boost::system::error_code, std::size_t> try_read(char* data, std::size_t size);
    /// Until the socket can give (or take) what the last `try_read` wanted.
    boost::asio::awaitable<boost::system::error_code> wait();
    /// All of `data`.
    boost::asio::awaitable<boost::system::error_code> write(const char* data, std::size_t size);
    /// close_notify sent (the peer's is not waited for).
    boost::asio::awaitable<boost::system::error_code> shutdown();

    struct bio_access;

private:
    template <class Op> boost::asio::awaitable<boost::system::error_code> drive(Op op);
    boost::system::error_code error_of(int ssl_error);

    boost::asio::ip::tcp::socket socket_;
    SSL* ssl_;
    std::string first_;
    std::size_t first_used_ = 0;
    int last_errno_ = 0;
    int wants_ = 0; ///< SSL_ERROR_WANT_READ or _WRITE: what the last try_read waits for
};

/// \brief Copies `from`'s plaintext to `to` until `from` ends or either fails: "closed" (its
/// close_notify), "truncated" (its TCP end without one) or "reset". `count` gets the bytes,
/// `last` the time of the last move. A 16 KiB buffer is held only while bytes move; the loop
/// runs others every 256 KiB.
boost::asio::awaitable<std::string> pump(tls_leg& from, tls_leg& to, std::uint64_t& count,
                                         std::chrono::steady_clock::time_point& last);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_TLS_LEG_HPP
