// tools/sandbox-run/config_run.hpp: sandbox-run through a config document (--config): the
// runner of one entry (--sandbox), and --check.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_CONFIG_RUN_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_CONFIG_RUN_HPP

#include "cli.hpp"

#include <sandbox/config/registry.hpp>
#include <sandbox/policy/audit.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/io_context.hpp>

#include <memory>
#include <optional>

namespace sandbox {
class bwrap_runner;
}

namespace sandbox::cli {

/// The entry's runner for a run, and what keeps it alive.
struct config_pick
{
    std::unique_ptr<sandbox::config::registry> registry{};
    /// A runner that forwards to the entry's chain (so that --allow-command and --ask can
    /// wrap it); null on a refusal.
    std::unique_ptr<sandbox::runner> runner{};
    /// The entry's backend name, for --json and --enforcement.
    std::string backend{};
    /// The audit file of --audit, given to the entry's chain.
    std::shared_ptr<sandbox::audit_file> audit{};
    /// Set when nothing may run (exit status 125).
    std::optional<sandbox::failure> refusal{};
};

/// Loads `cfg.config_file`, builds the entry `cfg.sandbox_name` (with the terminal approver
/// and `--workspace`s), and runs the bwrap probe when the entry is on bwrap. Moves
/// `cfg.chain.audit` into the entry's chain.
config_pick pick_from_config(boost::asio::io_context& ioc, run_config& cfg);

/// bwrap's verdict on the command line or entry it was built for: its option checks, then its
/// probe (run once per runner: the run itself does not probe again), run to its end on `ioc`.
/// Empty when it can run here.
std::optional<sandbox::failure> check_bwrap(boost::asio::io_context& ioc, sandbox::bwrap_runner& b);

/// `--check`: prints one JSON line per entry (`entry_to_json`) and returns 0, or prints every
/// problem on stderr and returns 125.
int check_config(boost::asio::io_context& ioc, const run_config& cfg);

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_CONFIG_RUN_HPP
