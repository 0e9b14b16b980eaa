// net/deadline.hpp: one awaitable raced against a steady timer (the egress proxy's dial,
// upstream and SOCKS5 handshake timeouts).
#ifndef SANDBOX_LIB_NET_DEADLINE_HPP
#define SANDBOX_LIB_NET_DEADLINE_HPP

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <optional>
#include <utility>

namespace sandbox::net {

/// The completion token of the proxy's coroutines: errors as values, never thrown.
inline constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);

/// \brief Runs `op` until it completes or `limit` passes; `nullopt` when the timer won (then
/// `op` was cancelled and has finished). `op` must report its errors as values: an
/// exception from it would leave the race to the timer.
template <class T>
boost::asio::awaitable<std::optional<T>> within(boost::asio::awaitable<T> op,
                                                std::chrono::steady_clock::duration limit)
{
    using namespace boost::asio::experimental::awaitable_operators;
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, limit);
    auto r = co_await (std::move(op) || timer.async_wait(use_tuple));
    if (r.index() == 0)
        co_return std::optional<T>(std::move(std::get<0>(r)));
    co_return std::nullopt;
}

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_DEADLINE_HPP
