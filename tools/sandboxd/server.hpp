// tools/sandboxd/server.hpp: the unix socket listener and one HTTP/1.1 connection loop per
// client (Boost.Beast), with the peer check, the body limit and the idle timeout.
#ifndef SANDBOXD_SERVER_HPP
#define SANDBOXD_SERVER_HPP

#include "daemon.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>

namespace sandboxd {

/// Accepts until the acceptor is closed; each connection runs in its own coroutine, and
/// none can end the daemon (every failure of a client ends that client's connection only).
boost::asio::awaitable<void> serve(daemon& d,
                                   boost::asio::local::stream_protocol::acceptor& acceptor);

} // namespace sandboxd

#endif
