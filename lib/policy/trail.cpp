// lib/policy/trail.cpp: building and writing the audit records of one call.
#include "policy/trail.hpp"

#include "front_end.hpp"

#include <sandbox/exec_result.hpp>

#include <boost/asio/error.hpp>

namespace sandbox::detail {

trail::trail(std::shared_ptr<audit_sink> sink, std::uint64_t call, call_kind kind,
             const std::string& command, const std::vector<std::string>& args,
             const std::string& work_dir, bool tty, const std::string& session_id)
    : sink_(std::move(sink))
{
    if (!sink_)
        return;
    proto_.call = call;
    proto_.kind = kind;
    proto_.command = command;
    proto_.args = args;
    proto_.work_dir = work_dir;
    proto_.tty = tty;
    proto_.session_id = session_id;
}

audit_record trail::base(audit_event e, std::string layer) const
{
    audit_record r = proto_;
    r.time = std::chrono::system_clock::now();
    r.event = e;
    r.layer = std::move(layer);
    return r;
}

boost::system::error_code trail::write(audit_event e, std::string layer, std::string reason,
                                       const boost::system::error_code& ec)
{
    closed_ = closed_ || e == audit_event::denied || e == audit_event::refused ||
              e == audit_event::finished;
    if (!sink_)
        return {};
    auto r = base(e, std::move(layer));
    r.reason = std::move(reason);
    if (ec)
        r.error = error_name(ec);
    return sink_->write(r);
}

void trail::note(audit_event e, std::string layer, std::string reason,
                 const boost::system::error_code& ec)
{
    (void)write(e, std::move(layer), std::move(reason), ec);
}

std::optional<failure> trail::vouch(audit_event e, std::string layer, std::string reason)
{
    const auto why = write(e, std::move(layer), std::move(reason), {});
    if (!why)
        return std::nullopt;
    failure f;
    f.code = make_error_code(errc::internal);
    f.diag.message = "the audit trail cannot record the call (" + why.message() + "): nothing ran";
    f.diag.cause = why;
    f.diag.rule = "audit";
    return f;
}

net_record_handler trail::net_handler(net_record_handler next)
{
    if (!sink_)
        return next;
    net_proto_ = std::make_shared<audit_record>(proto_);
    return [sink = sink_, proto = net_proto_, next = std::move(next)](const net_record& n) {
        audit_record r = *proto;
        r.time = std::chrono::system_clock::now();
        r.event = n.event == net_event::decision  ? audit_event::connection
                  : n.event == net_event::request ? audit_event::http_request
                                                  : audit_event::connection_closed;
        r.layer = "network";
        r.net = n;
        (void)sink->write(r);
        if (next)
            next(n);
    };
}

void trail::started(const std::string& session_id)
{
    if (!sink_)
        return;
    proto_.session_id = session_id;
    if (net_proto_)
        net_proto_->session_id = session_id;
    note(audit_event::started, "backend");
}

namespace {

// A session's end comes as a result, not an error: the error its status stands for.
boost::system::error_code error_of(exec_status s)
{
    switch (s)
    {
    case exec_status::timed_out: return make_error_code(errc::timeout);
    case exec_status::budget_exceeded: return make_error_code(errc::budget_exceeded);
    case exec_status::unenforceable: return make_error_code(errc::not_available);
    case exec_status::cancelled: return boost::asio::error::operation_aborted;
    default: return {};
    }
}

} // namespace

void trail::ended(const exec_result* result, const boost::system::error_code& ec_in,
                  const std::string& message)
{
    closed_ = true;
    if (!sink_)
        return;
    const auto ec = ec_in || !result ? ec_in : error_of(result->status);
    const bool ran = result && result->status != exec_status::not_started;
    auto r = base(ran ? audit_event::finished : audit_event::refused, "backend");
    if (ec)
    {
        r.error = error_name(ec);
        r.reason = message.empty() && result ? result->diag.message : message;
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
    caught c = catch_exception(ep);
    ended(c.partial ? &*c.partial : nullptr, c.code, to_string(c.diag));
}

failure trail::deny(const char* layer, std::string message)
{
    failure f;
    f.code = make_error_code(errc::policy_denied);
    note(audit_event::denied, layer, message, f.code);
    f.diag.message = std::move(message);
    f.diag.rule = layer;
    return f;
}

} // namespace sandbox::detail
