// net/proxy.hpp: the egress proxy's server side: listeners (handed over by a sandbox's
// init, or a test's own), one port for HTTP and SOCKS5 (the first byte tells them apart),
// the HTTP front (CONNECT, absolute-form forwarding), the tunnel cap, and the relay
// (no buffer of its own while a direction waits, half-close per direction, idle timeout).
#ifndef SANDBOX_LIB_NET_PROXY_HPP
#define SANDBOX_LIB_NET_PROXY_HPP

#include "egress.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>

namespace sandbox::net {

/// \brief One sandbox's proxy. Runs on the executor of its egress; its members are called
/// there. Destroying it stops it.
class egress_proxy
{
public:
    explicit egress_proxy(std::shared_ptr<egress> gate);
    ~egress_proxy();
    egress_proxy(const egress_proxy&) = delete;
    egress_proxy& operator=(const egress_proxy&) = delete;

    /// \brief Accepts connections on `listener` (already listening) until `stop`.
    void add_listener(boost::asio::ip::tcp::acceptor listener);
    /// \brief Closes the listeners and every connection (each gets its `closed` record with
    /// reason "stopped"). Idempotent.
    void stop();
    /// \brief `stop`, then calls `drained` once every connection has ended and emitted its
    /// last record, or after `bound` if some connection has not ended by then (a connection
    /// ends within a turn of the loop once stopped; the bound is for a defect, never a
    /// wait the caller should see). `drained` runs on the egress's executor, once.
    void stop(std::function<void()> drained,
              std::chrono::milliseconds bound = std::chrono::milliseconds(2000));
    /// Connections open now (being decided, or relaying).
    std::size_t connections() const noexcept;

    struct state;

private:
    std::shared_ptr<state> st_;
};

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_PROXY_HPP
