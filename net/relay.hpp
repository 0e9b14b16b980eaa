// net/relay.hpp: copies bytes both ways between a client and its destination. Bytes a
// receiver does not take stay in the sender's kernel buffer (an idle or stalled tunnel holds
// no buffer of the proxy's); a FIN from one side is passed on (shutdown of that direction)
// without cutting the other; bytes moved either way reset the idle timer.
#ifndef SANDBOX_LIB_NET_RELAY_HPP
#define SANDBOX_LIB_NET_RELAY_HPP

#include <sandbox/net_proxy.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace sandbox::net {

/// What a relay moved, and why it ended: "eof" (both sides closed their direction), "idle_timeout",
/// "reset" (an error on either side), "stopped" (cancelled: the proxy stopped).
struct relay_totals
{
    std::uint64_t up = 0;   ///< client to server, `to_server` included
    std::uint64_t down = 0; ///< server to client, `to_client` included
    std::string reason{};
    /// Set by TLS inspection for the tunnels it selected.
    std::optional<net_tls_record> tls{};
    /// The server name of an uninspected tunnel, when it was read (`net_record::sni`).
    std::optional<std::string> sni{};
    bool sni_mismatch = false;
};

/// \brief Judges the client's first bytes before any of them goes on (the relay's client to
/// server direction only; the other runs meanwhile): it may read more of them into `held`,
/// which is then written first. An empty answer lets the tunnel go on; any other ends it,
/// and is the relay's reason. `stopping` turns true when the relay ends meanwhile (the
/// other direction failed, the idle timeout): a wait must not begin then.
using first_flight = std::function<boost::asio::awaitable<std::string>(
    boost::asio::ip::tcp::socket& client, std::string& held, const bool& stopping)>;

/// \brief Text a client sent, fit for a record: control bytes, DEL, non-ASCII and `\` as
/// \xNN, at most `cap` bytes (an escape is never cut).
std::string escape_for_record(std::string_view s, std::size_t cap = 300);

/// \brief Relays until both directions ended, the idle timeout, an error, or cancellation
/// (terminal: both sockets are closed). `to_server` (bytes the client pipelined after its
/// request) and `to_client` (bytes an upstream sent after its reply) are written first;
/// `check`, when set, judges the client's first bytes before (`first_flight`).
boost::asio::awaitable<relay_totals> relay(boost::asio::ip::tcp::socket& client,
                                           boost::asio::ip::tcp::socket& server,
                                           std::string to_server, std::string to_client,
                                           std::chrono::milliseconds idle_timeout,
                                           first_flight check = {});

/// \brief One direction only: writes `first`, then copies `from` to `to` until `from` ends
/// (EOF: shutdown(send) on `to`), the idle timeout, an error or cancellation; `from` is
/// closed at the end, `to` is left to the caller (to drain and close). The bytes are
/// counted in `down` (the HTTP front's response).
boost::asio::awaitable<relay_totals> relay_one_way(boost::asio::ip::tcp::socket& from,
                                                   boost::asio::ip::tcp::socket& to,
                                                   std::string first,
                                                   std::chrono::milliseconds idle_timeout);

/// \brief The splice pipes this process's relays have borrowed (a direction moving bytes, or
/// stalled with bytes in its pipe), not counting those kept for reuse by the calling
/// thread: an idle tunnel holds none. For tests and figures (exact when one thread relays).
std::size_t relay_pipes_borrowed() noexcept;

/// \brief Closes the empty pipes the calling thread keeps for reuse.
void relay_drop_kept_pipes() noexcept;

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_RELAY_HPP
