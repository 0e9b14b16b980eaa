// net/tls/inspector.hpp: TLS inspection for one sandbox's egress proxy: which CONNECT hosts are
// inspected, the CA and both TLS contexts, and the first bytes of a selected tunnel (its
// ClientHello, read within the handshake deadline).
#ifndef SANDBOX_NET_TLS_INSPECTOR_HPP
#define SANDBOX_NET_TLS_INSPECTOR_HPP

#include "certificate_authority.hpp"
#include "client_hello.hpp"
#include "inspect.hpp"
#include "origin_context.hpp"
#include "server_context.hpp"

#include "net/relay.hpp"

#include <sandbox/http_hooks.hpp>
#include <sandbox/net_policy.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sandbox::net::tls {

/// What to inspect and how.
struct inspection_options
{
    /// Host patterns (the rules' forms: `example.com` with its subdomains, `*.example.com`,
    /// an address, a CIDR block) whose CONNECTs are inspected; empty: every CONNECT.
    std::vector<std::string> hosts{};
    /// Never inspected (relayed as they are); wins over `hosts`.
    std::vector<std::string> exclude_hosts{};
    /// Bytes that are not TLS to an inspected host: relayed as they are (true), or the
    /// tunnel is closed (false, the default: an inspected host is reached through TLS only).
    bool relay_non_tls = false;
    /// The HTTP requests' rules and the headers added to them (`mitm_policy`'s).
    std::vector<http_request_rule> requests{};
    std::vector<header_injection> inject_headers{};
    /// The caller's hooks over those requests (`http_hooks`), and the bodies they see whole
    /// (0: heads only).
    http_hooks hooks{};
    std::size_t body_cap = 0;
    authority_options ca{};
    /// Every origin's trust, and roots for some hosts' origins only (on top of it).
    origin_trust origins{};
    std::vector<scoped_origin_ca> scoped_origins{};
    inspect_limits limits{};
};

/// \brief A place among a call's inspected tunnels (`inspect_limits::max_tunnels`), held
/// while one runs; empty when there was none.
class tunnel_slot
{
public:
    tunnel_slot() noexcept = default;
    explicit tunnel_slot(std::size_t& open) noexcept : open_(&open) { ++open; }
    tunnel_slot(tunnel_slot&& o) noexcept : open_(std::exchange(o.open_, nullptr)) {}
    tunnel_slot& operator=(tunnel_slot&&) = delete;
    ~tunnel_slot()
    {
        if (open_)
            --*open_;
    }
    explicit operator bool() const noexcept { return open_ != nullptr; }

private:
    std::size_t* open_ = nullptr;
};

/// \brief One sandbox's inspection. Not thread-safe: the proxy's executor only.
class inspector
{
public:
    /// `errc::validation` for a bad pattern (limit `net.mitm.hosts`,
    /// `net.mitm.exclude_hosts`, `net.mitm.requests[i]`, `net.mitm.inject_headers[i]`,
    /// `net.mitm.origin_ca_for[i]`) or origin root (`net.mitm.origin_ca`,
    /// `net.mitm.origin_ca_for[i]`); `errc::internal` when OpenSSL fails.
    static outcome<std::unique_ptr<inspector>> create(inspection_options opts);
    ~inspector();

    /// Whether a CONNECT to `host` is inspected.
    bool selects(const canonical_host& host) const;

    /// \brief A place for one more inspected tunnel, taken before its CONNECT is answered
    /// and held until the tunnel ends; empty when `limits.max_tunnels` are open (the
    /// CONNECT is then refused with 503 and `Retry-After`).
    tunnel_slot take_slot();

    /// \brief The tunnel of a selected host once its CONNECT was answered, from the client's
    /// first bytes (`rest`: what it sent after its request): its ClientHello is read within
    /// the handshake deadline; TLS: both legs terminated (`inspect`); not TLS: relayed as it
    /// is when `relay_non_tls`, else closed ("not_tls"); a hello that does not parse, is too
    /// large, or is not whole when the client closes or the deadline passes: closed
    /// ("bad_client_hello", "client_hello_too_large", "no_client_hello"). `early`: bytes the
    /// origin (an upstream) sent already. `connection` numbers the tunnel for the hooks,
    /// `on_request` gets each HTTP request's record (`http_tunnel::on_request`). The sockets
    /// are closed at the end.
    boost::asio::awaitable<relay_totals>
    tunnel(boost::asio::ip::tcp::socket& client, boost::asio::ip::tcp::socket& origin,
           std::string early, net::authority target, std::string rest,
           std::chrono::milliseconds idle_timeout, std::uint64_t connection = 0,
           std::function<void(bool, std::string, net_http_record)> on_request = {});

    certificate_authority& authority() noexcept;
    server_context& server() noexcept;
    /// The origin context of every host that no `scoped_origins` entry names.
    origin_context& origins() noexcept;
    const inspection_options& options() const noexcept;

    struct impl;

private:
    explicit inspector(std::unique_ptr<impl> p) noexcept;
    std::unique_ptr<impl> p_;
};

/// The record's rule for a CONNECT refused at `inspect_limits::max_tunnels`
/// ("max_inspected_tunnels 256").
std::string inspected_cap_rule(const inspector& in);

/// \brief The inspection `m` asks for, with a CA made now for it alone, and the call's
/// `hooks` (shown bodies under `m.inspect_bodies`): null when `m` is off; else as
/// `inspector::create`.
outcome<std::shared_ptr<inspector>> inspection_for(const mitm_policy& m, http_hooks hooks = {});

/// \brief Waits until `s` is readable, never reading (a byte taken by a wait that lost a race
/// would be lost); `operation_aborted` at once when `*stopping` is set, which is checked where
/// the wait starts, so a cancel() that came before it is never missed.
boost::asio::awaitable<boost::system::error_code> readable(boost::asio::ip::tcp::socket& s,
                                                           const bool* stopping = nullptr);

/// \brief Reads from `s` (after `first`, bytes already read) until its ClientHello is whole
/// or judged, or `deadline`: the verdict (`need_more` at the deadline, on EOF, or when
/// `*stopping` was set before a wait began), with every byte read in `first`. It reads only
/// once `s` is readable, so a deadline that wins a race never drops a byte.
boost::asio::awaitable<hello_peek> read_client_hello(boost::asio::ip::tcp::socket& s,
                                                     std::string& first,
                                                     std::chrono::steady_clock::time_point deadline,
                                                     const bool* stopping = nullptr);

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_INSPECTOR_HPP
