// tools/sandbox-run/report.cpp: what a run comes to: its exit status, text safe for a
// terminal, and --check's JSON of a config entry.
#include "cli_internal.hpp"

#include <sandbox/config/document.hpp>

#include <boost/asio/error.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace sandbox::cli {

namespace json = boost::json;
using namespace std::chrono_literals;

bool command_refused(const sandbox::exec_result& r)
{
    if (r.status != exec_status::not_started || r.diag.limit != "command" || !r.diag.cause)
        return false;
    // The OS said no to the command itself, not to our machinery (EMFILE, EPROTO, ...).
    const errc e = errc_from_errno(r.diag.cause.value());
    return e == errc::not_found || e == errc::forbidden || e == errc::validation ||
           e == errc::conflict;
}

void shrink_timeout(sandbox::exec_options& o, std::chrono::nanoseconds left)
{
    left = std::max<std::chrono::nanoseconds>(left, 1ns);
    const auto budget = sandbox::cpu_budget(o);
    o.timeout = left;
    if (budget <= 0ns)
        return;
    __extension__ typedef unsigned __int128 wide;
    const wide mc = (static_cast<wide>(budget.count()) * 1000 +
                     static_cast<wide>(left.count()) - 1) /
                    static_cast<wide>(left.count());
    constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();
    o.limits.cpu_millicores = mc > static_cast<wide>(int64_max) ? int64_max
                                                                 : static_cast<std::int64_t>(mc);
}

int exit_status_for(const boost::system::error_code& ec, const sandbox::exec_result& r)
{
    if (!ec && r.status == exec_status::exited)
        return r.exit_code >= 0 && r.exit_code <= 255 ? r.exit_code : exit_sandbox_failure;
    switch (r.status)
    {
    case exec_status::signaled:
    case exec_status::terminated: return 128 + r.signal;
    case exec_status::timed_out: return exit_timeout;
    case exec_status::budget_exceeded: return exit_budget;
    case exec_status::cancelled: return exit_cancelled;
    case exec_status::unenforceable: return exit_sandbox_failure;
    case exec_status::exited:
    case exec_status::not_started: break;
    }
    if (!ec)
        return exit_sandbox_failure; // a success that ran nothing: not a result we can pass on
    if (ec == boost::asio::error::operation_aborted)
        return exit_cancelled;
    if (ec == errc::timeout)
        return exit_timeout;
    if (ec == errc::budget_exceeded)
        return exit_budget;
    if (command_refused(r))
        return ec == errc::not_found ? exit_not_found : exit_not_executable;
    return exit_sandbox_failure;
}

std::string printable_text(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (const unsigned char c : text)
    {
        if (c >= 0x20 && c < 0x7f)
        {
            out += static_cast<char>(c);
            continue;
        }
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", c);
        out += buf;
    }
    return out;
}

namespace {

json::value strings_or_null(const std::optional<std::vector<std::string>>& v)
{
    if (!v)
        return nullptr;
    return json::array(v->begin(), v->end());
}

// Milliseconds: an integer when whole (as JSON readers expect 30000, not 3E4).
json::value millis(std::chrono::nanoseconds d)
{
    if (d.count() % 1000000 == 0)
        return d.count() / 1000000;
    return static_cast<double>(d.count()) / 1e6;
}

} // namespace

std::string entry_to_json(const sandbox::config::sandbox_entry& e, std::string_view root,
                          const sandbox::enforcement_report& enforcement)
{
    const auto& d = e.defaults;
    json::object env{{"allow", strings_or_null(d.env.allow)}};
    json::object inject;
    for (const auto& [k, v] : d.env.inject)
        inject[k] = v;
    env["inject"] = std::move(inject);
    json::object limits{{"memory_bytes", d.limits.memory_bytes},
                        {"cpu_millicores", d.limits.cpu_millicores},
                        {"disk_bytes", d.limits.disk_bytes},
                        {"max_output_bytes", d.limits.max_output_bytes},
                        {"max_processes", d.limits.max_processes},
                        {"max_tasks", d.limits.max_tasks}};
    json::object approval{{"outside_workdir", e.approval.outside_workdir},
                          {"non_default_network", e.approval.non_default_network},
                          {"interactive", e.approval.interactive},
                          {"sensitive_commands", json::array(e.approval.sensitive_commands.begin(),
                                                             e.approval.sensitive_commands.end())},
                          {"deadline_ms", millis(e.approval.deadline)}};
    json::object policy{
        {"timeout_ms", millis(d.timeout)},
        {"kill_grace_ms", millis(d.kill_grace)},
        {"env", std::move(env)},
        {"net", sandbox::config::net_policy_to_json(d.net)},
        {"resources", std::move(limits)},
        {"allowed_commands", strings_or_null(e.allowed_commands)},
        {"command_match", e.match == sandbox::command_match::exact ? "exact" : "base_name"},
        {"approval", std::move(approval)}};
    json::object o{{"name", e.name},
                   {"backend", e.backend},
                   {"root", std::string(root)},
                   {"run_as", sandbox::config::to_string(e.run_as)},
                   {"policy", std::move(policy)},
                   {"enforcement", json::parse(sandbox::to_json(enforcement))}};
    return json::serialize(o);
}

} // namespace sandbox::cli
