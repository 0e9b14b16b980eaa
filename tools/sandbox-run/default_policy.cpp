// tools/sandbox-run/default_policy.cpp: the policy every plain run starts from, and the
// notes sandbox-run prints about a command line that will not do what it looks like.
#include "cli_internal.hpp"

#include <sandbox/host_port.hpp>

#include <algorithm>

namespace sandbox::cli {

using namespace std::chrono_literals;

namespace {

constexpr std::chrono::nanoseconds default_timeout = 10min;
constexpr std::int64_t default_max_processes = 1024;

} // namespace

const std::vector<std::string>& default_env_allow()
{
    static const std::vector<std::string> names{"PATH", "HOME",    "USER",     "LOGNAME",
                                                "LANG", "LC_ALL",  "LC_CTYPE", "TERM",
                                                "TZ",   "TMPDIR",  "SHELL"};
    return names;
}

sandbox::exec_options default_policy()
{
    sandbox::exec_options o;
    o.env.allow = default_env_allow();
    o.timeout = default_timeout;
    o.kill_grace = 0ns;
    o.limits.max_output_bytes = sandbox::default_max_output_bytes;
    o.limits.max_processes = default_max_processes;
    o.limits.memory_bytes = 0;
    o.limits.cpu_millicores = 0;
    return o;
}

std::vector<std::string> loopback_rule_notes(const sandbox::net_policy& net)
{
    std::vector<std::string> out;
    for (const auto& r : net.rules)
    {
        if (r.action != sandbox::net_action::allow || !sandbox::is_loopback_host(r.host))
            continue;
        const std::string port = r.port > 0 ? ":" + std::to_string(r.port) : "";
        out.push_back("note: --allow-host " + r.host + port + ": inside the sandbox " + r.host +
                      " is the sandbox's own loopback (clients do not proxy it: no_proxy "
                      "lists localhost, 127.0.0.1 and ::1); to reach a service on the host's "
                      "loopback, use the name " +
                      std::string(sandbox::host_loopback_name) + " and allow it: --allow-host " +
                      std::string(sandbox::host_loopback_name) + port);
    }
    return out;
}

namespace {

// `path` is `dir` or below it.
bool under(const std::string& path, const std::string& dir)
{
    if (dir.empty())
        return false;
    const std::string d = dir.back() == '/' ? dir.substr(0, dir.size() - 1) : dir;
    return path == d || path.rfind(d + "/", 0) == 0;
}

// The /tmp paths an argument names: all of it, or what follows its first '='.
std::optional<std::string> tmp_path_in(const std::string& arg)
{
    for (const std::string& candidate :
         {arg, arg.find('=') == std::string::npos ? std::string() : arg.substr(arg.find('=') + 1)})
        if (candidate.rfind("/tmp/", 0) == 0 && candidate.size() > 5)
            return candidate;
    return std::nullopt;
}

} // namespace

std::vector<std::string> private_tmp_notes(const run_config& cfg,
                                           const std::function<bool(const std::string&)>& exists)
{
    std::vector<std::string> out;
    std::vector<std::string> shown = cfg.bwrap.writable;
    shown.insert(shown.end(), cfg.bwrap.read_only.begin(), cfg.bwrap.read_only.end());
    shown.push_back(cfg.runner.root);
    std::vector<std::string> args{cfg.request.command};
    args.insert(args.end(), cfg.request.args.begin(), cfg.request.args.end());
    for (const auto& arg : args)
    {
        const auto path = tmp_path_in(arg);
        if (!path || !exists(*path) ||
            std::any_of(shown.begin(), shown.end(), [&](auto& d) { return under(*path, d); }))
            continue;
        out.push_back("note: " + *path +
                      " is on the host's /tmp, which the sandbox does not see (its /tmp is "
                      "private): bind it with --read-only " +
                      *path + " (or --writable DIR for a directory the command writes)");
    }
    return out;
}

} // namespace sandbox::cli
