// net/bridge.hpp: the host side of the listener hand-off. A sandbox's status init
// creates the proxy's listeners inside the sandbox's network namespace (which has only
// `lo`), sends them over an inherited socket (SCM_RIGHTS), then runs the command; the host
// accepts on them directly: no relay process, no copy, no start race.
#ifndef SANDBOX_LIB_NET_BRIDGE_HPP
#define SANDBOX_LIB_NET_BRIDGE_HPP

#include "proxy.hpp"

#include <sandbox/failure.hpp>
#include <sandbox/unique_fd.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>

namespace sandbox::net {

/// \brief One sandbox's network: its proxy and the socket its init hands the listeners
/// over. Kept alive as the plan's `tree_resources`: it stops the proxy when it goes.
class sandbox_network
{
public:
    /// The socket pair's two ends: `host_end` stays here, `init_end` goes to the init.
    struct ends
    {
        unique_fd host_end;
        unique_fd init_end;
    };
    // Exported (SANDBOX_DECL) for the bwrap backend, like the constructor and destructor.
    SANDBOX_DECL static outcome<ends> make_ends();

    /// Starts reading listeners from `host_end` and serving them with `gate`.
    SANDBOX_DECL sandbox_network(std::shared_ptr<egress> gate, unique_fd host_end);
    SANDBOX_DECL ~sandbox_network();

    /// \brief Stops the proxy and calls `done` on its executor once every connection has
    /// ended and emitted its `closed` record (the exec's records come before its result).
    SANDBOX_DECL void settle(std::function<void()> done);

    struct state;

private:
    std::shared_ptr<state> st_;
};

} // namespace sandbox::net

#endif // SANDBOX_LIB_NET_BRIDGE_HPP
