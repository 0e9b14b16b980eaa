// tools/sandboxd/daemon.hpp: what the daemon holds: the registry of the current document
// (replaced on reload; a session keeps the one it was started with), the sessions, the
// pending approvals, the audit trail.
#ifndef SANDBOXD_DAEMON_HPP
#define SANDBOXD_DAEMON_HPP

#include "approvals.hpp"

#include <sandbox/config/registry.hpp>
#include <sandbox/instance.hpp>
#include <sandbox/policy/audit.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace sandboxd {

/// Who is on the other end of a connection (SO_PEERCRED).
struct peer
{
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    int pid = 0;
};

struct session_record
{
    std::shared_ptr<sandbox::session> session;
    std::shared_ptr<const sandbox::config::registry> registry; // keeps its runner alive
    std::string sandbox;
    peer owner;
    std::int64_t output_reserved = 0; // its log's cap, counted against session_output_budget
    std::string instance{};           // the instance it runs in; empty: none
    std::shared_ptr<void> held{};     // what it keeps while open (its instance, busy)
};

/// How an instance is being used: the execs under way in it, and when the last one ended
/// (or the instance opened). Shared with those execs, which may outlive the record.
struct instance_use
{
    std::int64_t busy = 0;
    std::chrono::steady_clock::time_point last_used = std::chrono::steady_clock::now();
};

struct instance_record
{
    // The runner must outlive the instance: the registry is destroyed last, and every copy
    // of `instance` holds it too (an aliasing pointer), so a close or an exec that outlives
    // the record after a reload never uses a destroyed runner.
    std::shared_ptr<const sandbox::config::registry> registry;
    std::shared_ptr<sandbox::instance> instance;
    std::string sandbox;
    std::string backend;
    peer owner;
    std::shared_ptr<instance_use> use = std::make_shared<instance_use>();
};

/// Why a new session is refused (the HTTP status, the config key, the message), if it is.
struct refusal
{
    unsigned status = 0;
    std::string limit;
    std::string message;
};

struct daemon_options
{
    std::string config_file;
    std::map<std::string, std::string, std::less<>> workspaces;
    std::string listen; // --listen; empty: the document's, else the default
};

class daemon
{
public:
    daemon(boost::asio::any_io_executor ex, daemon_options opts);

    /// Loads the document and builds its registry. On failure the current one stays (and
    /// the failure is returned); the first load must succeed.
    sandbox::outcome<void> load();

    const sandbox::config::document& document() const { return registry_->source(); }
    std::shared_ptr<const sandbox::config::registry> registry() const { return registry_; }
    approval_board& approvals() { return approvals_; }
    std::map<std::string, session_record>& sessions() { return sessions_; }
    std::map<std::string, instance_record>& instances() { return instances_; }
    const daemon_options& options() const { return opts_; }
    boost::asio::any_io_executor get_executor() const { return ex_; }

    /// The socket the daemon listens on: --listen, else the document's daemon.listen, else
    /// `$XDG_RUNTIME_DIR/sandboxd.sock` (root: /run/sandboxd.sock); empty when none is known.
    std::string socket_path() const { return socket_path_for(document()); }

    /// Is this peer a process of one of the daemon's own trees (a command it started, or
    /// anything that command started)? Such a peer is refused whatever its uid.
    bool in_own_tree(const peer& p) const;

    /// May this peer use the daemon (its own uid, the document's allow-lists)?
    bool admits(const peer& p) const;

    /// Is this peer the daemon's operator (its own uid, or root)? Only an operator answers
    /// approvals and may act on every session.
    bool is_operator(const peer& p) const;

    /// May this peer see and act on that session (its owner, or an operator)?
    bool may_use(const peer& p, const session_record& r) const;
    bool may_use(const peer& p, const instance_record& r) const;

    /// May `owner` hold one more session whose log reserves `output_bytes`? Checks
    /// daemon.max_sessions_per_uid (429), max_sessions and session_output_budget (503),
    /// counting the starts still under way (waiting for an approval, say) as sessions.
    std::optional<refusal> admit_session(const peer& owner, std::int64_t output_bytes) const;

    /// Counts an admitted start of `owner` as a session while the returned guard lives (until
    /// the session is recorded, or refused).
    std::shared_ptr<void> hold_session_start(const peer& owner, std::int64_t output_bytes);

    /// May `owner` open one more instance? daemon.max_instances_per_uid (429) and
    /// max_instances (503), counting the opens under way.
    std::optional<refusal> admit_instance(const peer& owner) const;

    /// Counts an admitted open of `owner` as an instance while the returned guard lives.
    std::shared_ptr<void> hold_instance_open(const peer& owner);

    /// Holds a session id a client chose while its session starts: null when a held
    /// session or another start has it (the id space is the daemon's, across sandboxes).
    std::shared_ptr<void> claim_session_id(const std::string& id);

    /// Counts a connection of `uid` while the returned guard lives; null when the uid holds
    /// daemon.max_connections_per_uid already.
    std::shared_ptr<void> hold_connection(std::uint32_t uid);

    /// One JSON line in the audit file (when the document names one).
    void audit(boost::json::object line);

    /// Closes and forgets the sessions whose command ended over `daemon.session_linger`
    /// ago (a client that never came back for them), the instances that ran no command for
    /// `daemon.instance_idle` and those that ended by themselves; runs until the io_context
    /// stops.
    boost::asio::awaitable<void> sweep_ended_sessions();

    /// Ends every session (terminate with `grace`, then close) and closes every instance,
    /// those whose open completes meanwhile included; used by SIGTERM.
    boost::asio::awaitable<void> end_sessions(std::chrono::nanoseconds grace);

    /// True once `end_sessions` has begun: no new instance is kept.
    bool stopping() const noexcept { return stopping_; }

private:
    std::string socket_path_for(const sandbox::config::document& doc) const;
    void sweep_sessions(std::vector<std::shared_ptr<sandbox::session>>& ended);
    void sweep_instances(std::vector<std::shared_ptr<sandbox::instance>>& ended);

    boost::asio::any_io_executor ex_;
    daemon_options opts_;
    std::shared_ptr<const sandbox::config::registry> registry_;
    approval_board approvals_;
    boost::asio::steady_timer sweep_timer_;
    std::map<std::string, session_record> sessions_;
    std::map<std::string, instance_record> instances_;
    bool stopping_ = false;
    using connection_counts = std::map<std::uint32_t, std::int64_t>; // open ones by uid
    struct start_counts // session starts under way
    {
        std::map<std::uint32_t, std::int64_t> by_uid;
        std::int64_t all = 0;
        std::int64_t output_bytes = 0;
        std::set<std::string> ids; // chosen by their clients
        std::map<std::uint32_t, std::int64_t> instances_by_uid; // instance opens under way
        std::int64_t instances = 0;
    };
    std::shared_ptr<start_counts> starting_ = std::make_shared<start_counts>();
    std::shared_ptr<connection_counts> connections_ = std::make_shared<connection_counts>();
    std::shared_ptr<sandbox::audit_file> audit_sink_;
    // Call numbers of every sandbox, across reloads: started from the clock (microseconds)
    // so that a restarted daemon appending to the same file does not repeat one.
    std::shared_ptr<std::atomic<std::uint64_t>> call_numbers_;
    int audit_fd_ = -1;
    std::string audit_path_;
};

} // namespace sandboxd

#endif
