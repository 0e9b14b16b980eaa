// lib/request.cpp: the checks and derived limits every backend applies to a request.
#include <sandbox/backend/environment.hpp>
#include <sandbox/backend/request.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/sampler.hpp>

#include "supervisor/client.hpp"

#include <cstring>
#include <limits>
#include <string>

namespace sandbox::backend {

namespace {

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// HTTP hooks run in inspected tunnels only: a call that sets one without inspection would
// never see it called.
outcome<> check_hooks(const http_hooks& h, const net_policy& net)
{
    // Whole bodies go to a head hook whose direction has no body hook of its own.
    const bool shows_whole =
        (h.on_request && !h.on_request_body) || (h.on_response && !h.on_response_body);
    if (!shows_whole && net.mitm && net.mitm->enabled && net.mitm->inspect_bodies)
        return make_failure(errc::validation,
                            "net.mitm.inspect_bodies shows whole bodies to the caller's request "
                            "or response hook: the call has none that would see them",
                            "net.mitm.inspect_bodies");
    if (h.empty())
        return {};
    if (!net.mitm || !net.mitm->enabled)
        return make_failure(errc::validation,
                            "HTTP hooks see the requests of inspected tunnels only: the call "
                            "needs net.mitm",
                            "http");
    if (h.timeout.count() <= 0)
        return make_failure(errc::validation, "an HTTP hook's timeout must be more than zero",
                            "http.timeout");
    return {};
}

} // namespace

outcome<> check_request(const exec_request& req, bool sampler_usable)
{
    const exec_options& o = req.options;
    if (req.command.empty())
        return make_failure(errc::validation, "empty command", "command");
    if (has_nul(req.command))
        return make_failure(errc::validation, "command holds a NUL byte", "command");
    for (std::size_t i = 0; i < req.args.size(); ++i)
        if (has_nul(req.args[i]))
            return make_failure(errc::validation,
                                "argument " + std::to_string(i) + " holds a NUL byte", "args");
    if (has_nul(o.work_dir))
        return make_failure(errc::validation, "work dir holds a NUL byte", "work_dir");
    if (req.stdin_fd && o.input)
        return make_failure(errc::validation,
                            "stdin is given twice: as a descriptor and as input bytes", "input");
    if (req.tty && (req.stdin_fd || o.input))
        return make_failure(errc::validation,
                            "a terminal run takes no input yet (neither input bytes nor a stdin "
                            "descriptor)",
                            "input");
    if (req.tty && (req.tty->rows == 0 || req.tty->cols == 0))
        return make_failure(errc::validation, "a terminal needs at least one row and column",
                            "tty");
    if (req.stdin_fd && !*req.stdin_fd)
        return make_failure(errc::validation, "the stdin descriptor is closed", "input");
    if (auto r = validate_env_policy(o.env); !r)
        return r.error();
    if (auto r = o.net.validate(); !r)
        return r.error();
    if (auto r = check_hooks(req.http, o.net); !r)
        return r.error();
    // Without the probe (a process spawned and waited for): a gate that fails only once
    // installed fails the spawn, with the same error.
    if (o.limits.max_processes > 0 && detail::fork_gate_ruled_out())
        return fork_gate_unavailable(0);
    return validate_exec_policy(o, sampler_usable);
}

failure fork_gate_unavailable(int err)
{
    std::string why = "the process cap cannot be enforced here: its seccomp fork gate needs "
                      "seccomp user notification (Linux 5.5+) and a seccomp() this process may "
                      "call";
    if (err != 0)
        why += std::string(" (installing it failed: ") + std::strerror(err) + ")";
    failure f = make_failure(errc::not_available,
                             why + "; run without max_processes, or where seccomp is allowed",
                             "processes");
    if (err != 0)
        f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

cap_limits caps_of(const exec_options& o) noexcept
{
    cap_limits c;
    c.memory_bytes = o.limits.memory_bytes > 0 ? static_cast<std::uint64_t>(o.limits.memory_bytes)
                                               : 0;
    c.cpu = cpu_budget(o);
    c.max_processes = o.limits.max_processes > 0
                          ? static_cast<std::uint64_t>(o.limits.max_processes)
                          : 0;
    c.max_tasks = o.limits.max_tasks > 0 ? static_cast<std::uint64_t>(o.limits.max_tasks) : 0;
    return c;
}

std::uint64_t output_cap(const exec_options& o, std::int64_t runner_default) noexcept
{
    std::int64_t cap = o.limits.max_output_bytes > 0 ? o.limits.max_output_bytes : runner_default;
    return cap > 0 ? static_cast<std::uint64_t>(cap) : std::numeric_limits<std::uint64_t>::max();
}

exec_request request_of(const session_spec& spec)
{
    exec_request req;
    req.command = spec.command;
    req.args = spec.args;
    req.options = spec.options;
    req.tty = spec.tty;
    req.on_net_record = spec.on_net_record;
    req.http = spec.http;
    return req;
}

} // namespace sandbox::backend
