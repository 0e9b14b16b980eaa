// lib/policy/trail.cpp: building and writing the audit records of one call.
#include "policy/trail.hpp"

#include <sandbox/exec_result.hpp>

namespace sandbox::detail {

trail::trail(std::shared_ptr<audit_sink> sink, std::uint64_t call, const call_snapshot& c)
    : sink_(std::move(sink)), call_(call)
{
    if (!sink_)
        return;
    proto_.call = call;
    proto_.kind = c.kind;
    proto_.command = c.command;
    proto_.args = c.args;
    proto_.work_dir = c.options.work_dir;
    proto_.tty = c.tty.has_value();
    proto_.session_id = c.session_id;
}

audit_record trail::base(audit_event e, std::string layer) const
{
    audit_record r = proto_;
    r.time = std::chrono::system_clock::now();
    r.event = e;
    r.layer = std::move(layer);
    return r;
}

void trail::note(audit_event e, std::string layer, std::string reason,
                 const boost::system::error_code& ec)
{
    if (!sink_)
        return;
    auto r = base(e, std::move(layer));
    r.reason = std::move(reason);
    if (ec)
        r.error = error_name(ec);
    sink_->write(r);
}

void trail::started(const std::string& session_id)
{
    if (!sink_)
        return;
    proto_.session_id = session_id;
    note(audit_event::started, "backend");
}

void trail::ended(const exec_result* result, const boost::system::error_code& ec,
                  const std::string& message)
{
    if (!sink_)
        return;
    const bool ran = result && result->status != exec_status::not_started;
    auto r = base(ran ? audit_event::finished : audit_event::refused, "backend");
    if (ec)
    {
        r.error = error_name(ec);
        r.reason = message;
    }
    if (ran)
    {
        r.status = result->status;
        r.exit_code = result->exit_code;
        r.signal = result->signal;
        r.wall_time = result->wall_time;
        r.cpu_time = result->cpu_time;
        r.peak_memory_bytes = result->peak_memory_bytes;
    }
    sink_->write(r);
}

void trail::ended(std::exception_ptr ep)
{
    if (!sink_)
        return;
    try
    {
        std::rethrow_exception(ep);
    }
    catch (const error& e)
    {
        ended(e.partial_result(), e.code(), to_string(e.diag()));
    }
    catch (const boost::system::system_error& e)
    {
        ended(nullptr, e.code(), e.what());
    }
    catch (const std::exception& e)
    {
        ended(nullptr, make_error_code(errc::internal), e.what());
    }
    catch (...)
    {
        ended(nullptr, make_error_code(errc::internal), "unknown exception");
    }
}

void trail::deny(const char* layer, std::string message)
{
    const auto ec = make_error_code(errc::policy_denied);
    note(audit_event::denied, layer, message, ec);
    diagnostics d;
    d.message = std::move(message);
    d.rule = layer;
    throw error(ec, std::move(d));
}

} // namespace sandbox::detail
