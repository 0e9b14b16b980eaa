// sandbox/backend/request.hpp: what every backend does with a request before it builds a
// spawn plan: the shared checks, and the caps and output limit the request implies.
#ifndef SANDBOX_BACKEND_REQUEST_HPP
#define SANDBOX_BACKEND_REQUEST_HPP

#include <sandbox/backend/caps.hpp>
#include <sandbox/config.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/session.hpp>

#include <cstdint>

namespace sandbox::backend {

/// \brief The backend-independent checks, in order: the command (non-empty, no NUL byte),
/// the arguments and the work dir (no NUL byte), `stdin_fd` together with `options.input`,
/// a terminal with input or without rows or columns,
/// the environment policy, the net policy (`net_policy::validate`) and the exec policy
/// (`validate_exec_policy`). Fails with the first problem found; nothing is touched.
SANDBOX_DECL outcome<> check_request(const exec_request& req, bool sampler_usable);

/// `not_available` for a process cap this host cannot hold: its seccomp fork gate cannot be
/// installed (`fork_gate_usable()` said so, or installing it failed with `err`; 0: no OS
/// error to pass on).
SANDBOX_DECL failure fork_gate_unavailable(int err);

/// The caps `opts` asks for (negative values must have been refused already).
SANDBOX_DECL cap_limits caps_of(const exec_options& opts) noexcept;

/// Bytes kept per stream: the request's cap, else the runner's default; no cap when both
/// are zero or negative.
SANDBOX_DECL std::uint64_t output_cap(const exec_options& opts,
                                      std::int64_t runner_default) noexcept;

/// The exec request a session spec stands for (its command, arguments, options, terminal).
SANDBOX_DECL exec_request request_of(const session_spec& spec);

} // namespace sandbox::backend

#endif // SANDBOX_BACKEND_REQUEST_HPP
