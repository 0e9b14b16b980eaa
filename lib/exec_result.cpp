// lib/exec_result.cpp: names of exec_status, budget_kind and output_stream.
#include <sandbox/exec_request.hpp>
#include <sandbox/exec_result.hpp>

#include <array>
#include <ostream>

namespace sandbox {

namespace {
constexpr std::array<const char*, 8> status_names{
    "not_started", "exited", "signaled", "timed_out", "budget_exceeded", "unenforceable",
    "cancelled", "terminated"};
constexpr std::array<const char*, 5> budget_names{"none", "memory", "cpu", "processes",
                                                  "tasks"};
} // namespace

const char* to_string(output_stream s) noexcept
{
    switch (s)
    {
    case output_stream::out: return "stdout";
    case output_stream::err: return "stderr";
    case output_stream::tty: return "tty";
    }
    return "unknown";
}

const char* to_string(exec_status s) noexcept
{
    auto i = static_cast<std::size_t>(s);
    return i < status_names.size() ? status_names[i] : "unknown";
}

const char* to_string(budget_kind b) noexcept
{
    auto i = static_cast<std::size_t>(b);
    return i < budget_names.size() ? budget_names[i] : "unknown";
}

std::optional<exec_status> parse_exec_status(std::string_view s) noexcept
{
    for (std::size_t i = 0; i < status_names.size(); ++i)
        if (s == status_names[i])
            return static_cast<exec_status>(i);
    return std::nullopt;
}

exec_outcome not_run(boost::system::error_code ec, diagnostics diag)
{
    exec_outcome o;
    o.ec = ec;
    o.result.diag = std::move(diag);
    return o;
}

std::ostream& operator<<(std::ostream& os, exec_status s) { return os << to_string(s); }
std::ostream& operator<<(std::ostream& os, budget_kind b) { return os << to_string(b); }

} // namespace sandbox
