// net/tls/prefixed_stream.hpp: a stream whose first reads return bytes already read from it
// (a ClientHello read to decide whether to inspect, bytes an upstream sent early), then read
// from the stream itself. Writes go straight through. What an ssl::stream sits on, so that
// OpenSSL gets the bytes that were read ahead.
#ifndef SANDBOX_NET_TLS_PREFIXED_STREAM_HPP
#define SANDBOX_NET_TLS_PREFIXED_STREAM_HPP

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <string>
#include <utility>

namespace sandbox::net::tls {

/// \brief `Stream` (an Asio stream socket) with `prefix` read before it.
template <class Stream> class prefixed_stream
{
public:
    using executor_type = typename Stream::executor_type;
    using lowest_layer_type = typename Stream::lowest_layer_type;
    using next_layer_type = Stream;

    prefixed_stream(Stream s, std::string prefix) : s_(std::move(s)), prefix_(std::move(prefix)) {}

    executor_type get_executor() noexcept { return s_.get_executor(); }
    lowest_layer_type& lowest_layer() noexcept { return s_.lowest_layer(); }
    const lowest_layer_type& lowest_layer() const noexcept { return s_.lowest_layer(); }
    Stream& next_layer() noexcept { return s_; }

    /// The prefix's bytes first (completed through a post, never inside this call), then the
    /// stream's.
    template <class MutableBuffers, class Token>
    auto async_read_some(const MutableBuffers& buffers, Token&& token)
    {
        if (at_ == prefix_.size())
            return s_.async_read_some(buffers, std::forward<Token>(token));
        const std::size_t n = boost::asio::buffer_copy(buffers, boost::asio::buffer(prefix_) + at_);
        at_ += n;
        if (at_ == prefix_.size())
        {
            prefix_.clear();
            prefix_.shrink_to_fit();
            at_ = 0;
        }
        return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
            [this, n](auto handler) {
                auto ex = boost::asio::get_associated_executor(handler, s_.get_executor());
                boost::asio::post(ex, [h = std::move(handler), n]() mutable {
                    std::move(h)(boost::system::error_code{}, n);
                });
            },
            token);
    }

    template <class ConstBuffers, class Token>
    auto async_write_some(const ConstBuffers& buffers, Token&& token)
    {
        return s_.async_write_some(buffers, std::forward<Token>(token));
    }

private:
    Stream s_;
    std::string prefix_;
    std::size_t at_ = 0;
};

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_PREFIXED_STREAM_HPP
