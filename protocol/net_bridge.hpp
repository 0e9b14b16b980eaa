// protocol/net_bridge.hpp: the listener hand-off between `sandbox-supervisor --init FD
// --net-bridge FD2` (pid 1 of a bwrap sandbox with its own network namespace,
// helper/status_init.cpp) and the library's egress proxy (net/bridge.cpp).
//
// The init creates the proxy's listeners on 127.0.0.1:0 and, with the same port, on [::1]
// when the namespace has IPv6, inside the sandbox's namespace; it sends them over FD2 (an
// AF_UNIX stream socket) in one message: SCM_RIGHTS with one or two descriptors (the IPv4
// listener first) and the text body "listen PORT\n". Then it closes its copies and FD2, and
// runs the command with the proxy variables pointing at 127.0.0.1:PORT. The message is the
// readiness: the kernel queues a connect in a listener's backlog before the host accepts.
#ifndef SANDBOX_PROTOCOL_NET_BRIDGE_HPP
#define SANDBOX_PROTOCOL_NET_BRIDGE_HPP

#include <sandbox/config.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::detail {

/// Most descriptors one hand-off carries (the IPv4 and the IPv6 listener).
inline constexpr std::size_t net_bridge_max_fds = 2;
/// The listeners' backlog (somaxconn's usual ceiling): a burst of connects from the command
/// waits in the kernel, not in SYN retries.
inline constexpr int net_bridge_backlog = 4096;

/// The message body: "listen PORT\n".
std::string net_bridge_body(std::uint16_t port);
/// The port of a body, or nothing when it is not exactly one (port 0 included).
/// Exported from libsandbox: the egress proxy (libsandbox_net) reads the body too.
SANDBOX_DECL std::optional<std::uint16_t> parse_net_bridge_body(std::string_view body);

/// \brief The command's environment under the proxy (pure; unit-tested): `env` ("NAME=value")
/// without any variable whose upper-cased name is HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
/// NO_PROXY or GRPC_PROXY, then both cases of each of them: `http://127.0.0.1:PORT`, and
/// `localhost,127.0.0.1,::1` for NO_PROXY.
/// Exported from libsandbox: an instance's commands get it from the bwrap backend.
SANDBOX_DECL std::vector<std::string> proxy_environment(std::vector<std::string> env,
                                                       std::uint16_t port);

} // namespace sandbox::detail

#endif // SANDBOX_PROTOCOL_NET_BRIDGE_HPP
