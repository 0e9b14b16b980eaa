// backends/bwrap/runner_state.hpp: what a bwrap runner keeps between calls: its options
// checked and resolved once (a bad one is kept as `setup_error` and refuses every call), and
// the probe that decides whether bwrap can run here.
#ifndef SANDBOX_BWRAP_RUNNER_STATE_HPP
#define SANDBOX_BWRAP_RUNNER_STATE_HPP

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/error.hpp>

#include "bwrap_args.hpp"
#include "sandbox_user.hpp"
#include "write_deny.hpp"

#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sandbox {

struct bwrap_runner::state
{
    std::string bwrap;              // the program, or empty when not found
    std::vector<std::string> homes; // the caller's (passwd, $HOME): the built-in masks
    std::vector<std::string> writable;
    std::vector<std::string> dirs; // the root, then the writable paths
    std::vector<bwrap::masked_path> masked;
    std::vector<bwrap::write_deny_target> write_deny;
    std::vector<std::string> sockets;
    std::optional<bwrap::host_user> user; // a root caller's sandbox user; unset: the caller
    std::vector<std::string> unwritable;  // the root, writable paths: that user cannot write
    std::optional<failure> setup_error;   // a bad option, found at construction
    bool probed = false;                  // the probe has decided
    std::optional<failure> unusable;      // what it decided, when bwrap cannot run here
    // While a probe runs: the calls that wait for it.
    struct probe_run
    {
        boost::asio::steady_timer done; // cancelled when the probe ends, however it ends
        bool ended = false;
        bool went_on = false; // it decided nothing: its waiters go on as it does
    };
    std::shared_ptr<probe_run> probing{};
};

/// `p` resolved (symlinks, dot segments), or empty when it does not exist.
std::string canonical_or_empty(const std::string& p);

/// Checks and resolves the options into `s` (its `setup_error` says what was wrong).
void prepare_state(bwrap_runner::state& s, const bwrap_runner_options& o);

} // namespace sandbox

#endif // SANDBOX_BWRAP_RUNNER_STATE_HPP
