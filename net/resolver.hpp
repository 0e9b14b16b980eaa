// net/resolver.hpp: name lookups for the egress proxy, behind an interface: c-ares on
// the proxy's executor (no hidden thread, a timeout per query, lookups in parallel), and a
// static map in front of it (pinned names, like curl's --resolve; tests use it alone).
#ifndef SANDBOX_LIB_NET_RESOLVER_HPP
#define SANDBOX_LIB_NET_RESOLVER_HPP

#include <sandbox/failure.hpp>
#include <sandbox/net_proxy.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sandbox::net {

/// \brief A lookup's outcome: the addresses (A and AAAA, in the server's order), or an error:
/// `asio::error::host_not_found` (NXDOMAIN, no data), `asio::error::timed_out`, another
/// code for a server failure.
struct resolve_result
{
    boost::system::error_code ec{};
    std::vector<boost::asio::ip::address> addresses{};
};

/// \brief Resolves names. One lookup per call; the caller never asks twice for one
/// connection.
class resolver
{
public:
    virtual ~resolver() = default;
    /// `name` is canonical (lower-case A-labels). Completes on the resolver's executor.
    virtual boost::asio::awaitable<resolve_result> resolve(std::string name) = 0;
};

/// c-ares settings.
struct cares_options
{
    /// One lookup, over every server and retry.
    std::chrono::milliseconds timeout{5'000};
    /// "ADDRESS", "ADDRESS:PORT", "[V6]:PORT"; empty: /etc/resolv.conf.
    std::vector<std::string> servers{};
};

/// \brief c-ares on `ex`: sockets watched by the executor, a timer per query.
/// `errc::validation` (limit "dns_servers[i]") for a bad server, `errc::internal` when
/// c-ares cannot start.
///
/// The channel opens on the first lookup (it reads resolv.conf then). A lookup asks for A and
/// AAAA at once, reads /etc/hosts first (as c-ares does), uses no search list (the name
/// looked up is the name the rules judged) and keeps the server's order. It ends with
/// `timed_out` at `timeout` however c-ares retries; cancelling it (per-operation
/// cancellation) or destroying the resolver ends it with `operation_aborted`, and a late
/// answer is dropped. Await it on `ex`, run by one thread.
outcome<std::shared_ptr<resolver>> make_cares_resolver(boost::asio::any_io_executor ex,
                                                       cares_options o);

/// \brief Pinned names first; any other name goes to `next` (none: `host_not_found`).
class static_resolver final : public resolver
{
public:
    static_resolver(std::map<std::string, std::vector<boost::asio::ip::address>> pins,
                    std::shared_ptr<resolver> next);
    boost::asio::awaitable<resolve_result> resolve(std::string name) override;
    /// Calls so far, pinned or not (tests: "no lookup for a denied name").
    std::size_t calls() const noexcept { return calls_; }

private:
    std::map<std::string, std::vector<boost::asio::ip::address>> pins_;
    std::shared_ptr<resolver> next_;
    std::size_t calls_ = 0;
};

/// \brief The proxy's resolver from its options: a call's pins (`net_policy::resolve`),
/// then the runner's `resolve` pins for the names the call does not pin (names
/// canonicalized; `errc::validation`, limit "net.resolve[i]" or "resolve[i]", for a bad name
/// or address), in front of c-ares with `dns_servers` and `limits.dns_timeout`.
outcome<std::shared_ptr<resolver>>
make_resolver(boost::asio::any_io_executor ex, const proxy_options& o,
              const std::vector<std::pair<std::string, std::string>>& call_pins = {});

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_RESOLVER_HPP
