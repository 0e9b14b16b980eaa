// sandbox/backend/instance.hpp: what backends share to implement `runner::try_open`: the
// rules a command in an instance follows (pure), and the forwarding instance of a backend
// whose sandbox is the host.
#ifndef SANDBOX_BACKEND_INSTANCE_HPP
#define SANDBOX_BACKEND_INSTANCE_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/instance.hpp>

#include <memory>
#include <string>

namespace sandbox::backend {

/// \brief An instance's spec, checked before anything is started: `input` is refused
/// (`errc::validation`; each command has its own).
SANDBOX_DECL outcome<> check_instance_spec(const instance_spec& spec);

/// \brief A command of an instance narrowed to it (pure; no I/O). It may narrow, never
/// widen: its `net` left default takes the instance's, any other must equal it
/// (`errc::validation`: the network is set up once, at open); an empty `work_dir` takes
/// the instance's; a default `env` takes the instance's. The command's own network hooks
/// (`on_net_record`, `http`) are refused (`errc::validation`: they belong to the instance).
SANDBOX_DECL outcome<> narrow_to_instance(const instance_spec& inst, exec_request& req);

/// \brief `narrow_to_instance` for a session started in an instance (the same rules).
SANDBOX_DECL outcome<> narrow_to_instance(const instance_spec& inst, session_spec& spec);

/// "i-1", "i-2", ...: unique within the process.
SANDBOX_DECL std::string next_instance_id();

/// \brief An instance of a runner whose commands share nothing but the host (the local
/// backend): each command is narrowed to the instance and run by `r` (which must outlive
/// the instance); `close()` kills the commands running and refuses later ones. Instance-
/// wide `limits` and `timeout` are refused (`errc::not_available`: there is no tree that
/// holds them), as is a `net` the runner does not enforce.
SANDBOX_DECL outcome<std::shared_ptr<instance>> open_forwarding_instance(runner& r,
                                                                         instance_spec spec);

} // namespace sandbox::backend

#endif // SANDBOX_BACKEND_INSTANCE_HPP
