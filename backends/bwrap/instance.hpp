// backends/bwrap/instance.hpp: bwrap's instances (sandbox/instance.hpp). The instance's tree
// is a bwrap run like a cold exec's (same mounts, masks, network, caps held over it by a
// worker of the host's helper), but its status init serves instead of running a command
// (helper/status_init.hpp, --serve): for each command the library hands it a fresh channel
// over the instance's control socket, it forks a worker for it inside the sandbox, and the
// command's plan goes to that worker as a cold exec's goes to a host worker. So each command
// has its own subreaper, timeout, caps, exit classification and whole-tree kill, and the
// library's exec core (lib/exec/) runs it unchanged: only where its worker comes from
// differs (spawn_plan::acquire_channel), and what the worker resolves inside
// (spawn_plan::inside_work_dir).
#ifndef SANDBOX_BACKENDS_BWRAP_INSTANCE_HPP
#define SANDBOX_BACKENDS_BWRAP_INSTANCE_HPP

#include <sandbox/backend/supervise.hpp>
#include <sandbox/bwrap_runner.hpp>
#include <sandbox/instance.hpp>

#include "runner_state.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sandbox::bwrap {

/// What the instance's tree plan takes and leaves besides the plan.
struct instance_parts
{
    unique_fd init_end;   ///< in: the init's end of the control socket (passed last)
    bool bridged = false; ///< out: its network goes through the egress proxy
    std::vector<std::pair<std::string, std::string>> trust_env{}; ///< out: TLS inspection's
};

/// The plan of an instance's tree: `prepare` of a cold exec with the init serving
/// (bwrap_runner.cpp).
outcome<backend::spawn_plan> prepare_instance_tree(const boost::asio::any_io_executor& ex,
                                                   exec_request& req,
                                                   const bwrap_runner_options& opts,
                                                   const bwrap_runner::state& st,
                                                   instance_parts& parts);

/// A command's environment as a cold exec's (bwrap_runner.cpp): the env policy over the
/// host's, TMPDIR, HOME for a sandbox user, the trust variables (unless injected).
std::vector<std::string>
command_environment(const exec_options& o, bool sandbox_user,
                    const std::vector<std::pair<std::string, std::string>>& trust_env);

/// The path of a descriptor (/proc/self/fd), empty when it cannot be read.
std::string path_of_fd(int fd);

/// `bwrap_runner::try_open`.
boost::asio::awaitable<outcome<std::shared_ptr<instance>>>
open_instance(boost::asio::any_io_executor ex, const bwrap_runner_options& opts,
              std::shared_ptr<bwrap_runner::state> st, enforcement_report e, instance_spec spec);

} // namespace sandbox::bwrap

#endif // SANDBOX_BACKENDS_BWRAP_INSTANCE_HPP
