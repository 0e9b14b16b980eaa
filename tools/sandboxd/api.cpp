// tools/sandboxd/api.cpp: routes and handlers of /v1. Bodies are JSON (a call in the syntax
// of config defaults: sandbox::config::parse_call), results in sandbox-run --json's shape.
#include "api.hpp"
#include "calls.hpp"
#include "wire.hpp"

#include <sandbox/config/document.hpp>
#include <sandbox/error.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/resource_limits.hpp>
#include <sandbox/utf8.hpp>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/websocket/rfc6455.hpp>
#include <boost/json.hpp>

#include <unistd.h>

namespace sandboxd {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using sandbox::errc;

sandbox::failure failure_of(errc c, std::string message)
{
    return sandbox::make_failure(c, std::move(message));
}

// Never silently: a root daemon would run them as root.
void check_run_as(const sandbox::config::sandbox_entry& e, const peer& who)
{
    const auto self = ::geteuid();
    if (e.backend != "local" || e.run_as == sandbox::config::run_as_user::daemon ||
        who.uid == self)
        return;
    throw route_error{failure_of(
        errc::forbidden, "sandbox \"" + e.name + "\" runs commands as the daemon's user (uid " +
                             std::to_string(self) + "), not as uid " + std::to_string(who.uid) +
                             ": the config must say run_as: daemon to let other uids use it")};
}

pinned_sandbox pin(daemon& d, const std::string& name, const peer& who)
{
    pinned_sandbox p{d.registry(), nullptr, {}};
    p.runner = p.registry->find(name);
    if (!p.runner)
        throw route_error{failure_of(errc::not_found, "no sandbox named \"" + name + "\"")};
    const auto* entry = p.registry->entry(name);
    check_run_as(*entry, who);
    p.backend = entry->backend;
    return p;
}

namespace {

sandbox::config::call_document call_of(const request& req)
{
    auto c = sandbox::config::parse_call(req.body());
    if (!c)
        throw route_error{c.error()};
    return std::move(*c);
}

// The session `id`, if `who` may use it (its owner or the daemon's operator).
session_record& record_of(daemon& d, const std::string& id, const peer& who)
{
    auto it = d.sessions().find(id);
    if (it == d.sessions().end())
        throw route_error{failure_of(errc::not_found, "no session \"" + id + "\"")};
    if (!d.may_use(who, it->second))
        throw route_error{failure_of(errc::forbidden, "session \"" + id + "\" belongs to uid " +
                                                          std::to_string(it->second.owner.uid))};
    return it->second;
}

void require_operator(const daemon& d, const peer& who)
{
    if (!d.is_operator(who))
        throw route_error{failure_of(errc::forbidden,
                                     "only the daemon's own uid or root answers approvals")};
}

json::object body_object(const request& req)
{
    if (req.body().empty())
        return {};
    boost::system::error_code ec;
    auto v = json::parse(req.body(), ec);
    if (ec || !v.is_object())
        throw route_error{failure_of(errc::validation, "the body must be a JSON object")};
    return v.get_object();
}

asio::awaitable<response> list_sandboxes(daemon& d, const request& req)
{
    json::array out;
    auto reg = d.registry();
    for (const auto& name : reg->names())
        out.push_back(json::object{
            {"name", name},
            {"backend", reg->entry(name)->backend},
            {"run_as", sandbox::config::to_string(reg->entry(name)->run_as)},
            {"root", reg->root(name)},
            {"enforcement", json::parse(sandbox::to_json(reg->get(name).enforcement()))}});
    co_return json_response(req, http::status::ok, json::object{{"sandboxes", std::move(out)}});
}

} // namespace

sandbox::requester requester_of(const peer& who)
{
    return {who.uid, who.gid, static_cast<std::int32_t>(who.pid)};
}

using sandbox::exec_outcome;

response exec_answer(const request& req, const sandbox::exec_outcome& done,
                     const std::string& backend)
{
    // A command that ran answers 200 whatever its end; one that never ran, the error's status.
    const auto& ec = done.ec;
    const bool ran = !ec || ec == errc::timeout || ec == errc::budget_exceeded;
    return text_json(req, ran ? http::status::ok : status_for(ec),
                     sandbox::to_json(done.result, ec, backend));
}

namespace {

asio::awaitable<response> exec(daemon& d, const request& req, const std::string& name,
                               const peer& who, const client_watch& gone)
{
    const auto p = pin(d, name, who);
    auto call = call_of(req);
    if (call.tty)
        throw route_error{failure_of(errc::validation, "tty: an exec has no terminal (start a "
                                                       "session)")};
    if (!call.id.empty())
        throw route_error{failure_of(errc::validation, "id: an exec has no id (start a "
                                                       "session)")};
    sandbox::exec_request x;
    x.command = std::move(call.command);
    x.args = std::move(call.args);
    x.options = std::move(call.options);
    x.requested_by = requester_of(who);
    auto run = p.runner->try_exec(std::move(x));
    auto done = co_await while_connected(std::move(run), gone);
    if (!done)
    {
        d.audit({{"event", "client_gone"}, {"sandbox", name}, {"peer_uid", who.uid},
                 {"peer_pid", who.pid}, {"target", std::string(req.target())}});
        throw client_went_away{};
    }
    co_return exec_answer(req, *done, p.backend);
}

} // namespace

response refused(const request& req, const refusal& r)
{
    json::object e{{"code", "budget_exceeded"}, {"message", r.message}, {"limit", r.limit}};
    return json_response(req, static_cast<http::status>(r.status),
                         json::object{{"error", std::move(e)}});
}

namespace {

// The cap of a new session's output log, written into its options so that what it reserves
// of daemon.session_output_budget bounds what it may keep.
std::int64_t output_cap(const daemon& d, sandbox::exec_options& o)
{
    const auto budget = d.document().daemon.session_output_budget;
    auto& cap = o.limits.max_output_bytes;
    cap = std::min(cap > 0 ? cap : sandbox::default_max_output_bytes, budget);
    return cap;
}

} // namespace

asio::awaitable<response> start_session(daemon& d, const request& req, const std::string& name,
                                        const peer& who, session_place where)
{
    if (!where.manager)
        throw route_error{failure_of(errc::not_available, where.instance.empty()
                                                              ? "this sandbox has no sessions"
                                                              : "this instance has no sessions")};
    auto call = call_of(req);
    const auto reserve = output_cap(d, call.options);
    if (auto no = d.admit_session(who, reserve))
    {
        d.audit({{"event", "session_refused"}, {"sandbox", name}, {"peer_uid", who.uid},
                 {"limit", no->limit}});
        co_return refused(req, *no);
    }
    // Counted from here, so that starts waiting together (for an approval, say) cannot pass
    // the bounds that each one alone would meet.
    const auto starting = d.hold_session_start(who, reserve);
    std::shared_ptr<void> claimed;
    if (!call.id.empty() && !(claimed = d.claim_session_id(call.id)))
        throw route_error{failure_of(errc::conflict, "session id \"" + call.id + "\" is in use")};
    sandbox::session_spec spec;
    spec.id = std::move(call.id);
    spec.command = std::move(call.command);
    spec.args = std::move(call.args);
    spec.options = std::move(call.options);
    spec.requested_by = requester_of(who);
    if (call.tty)
        spec.tty = sandbox::terminal_size{static_cast<unsigned short>(call.tty->first),
                                          static_cast<unsigned short>(call.tty->second)};
    auto started = co_await where.manager->try_start(std::move(spec));
    if (!started)
        throw route_error{std::move(started).error()};
    auto s = std::move(*started);
    auto info = s->info();
    if (!info.exit) // a refusal of the command by the OS may be on its way: look once more
    {
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        info = s->info();
    }
    if (info.exit && end_error(*info.exit)) // never started: answer as an exec would
    {
        co_await s->close();
        throw route_error{sandbox::failure{end_error(*info.exit), info.exit->diag}};
    }
    d.sessions()[info.id] = session_record{
        s, std::move(where.registry), name, who, reserve, where.instance, std::move(where.held)};
    co_return json_response(req, http::status::created, session_json(name, info, where.instance));
}

namespace {

asio::awaitable<response> start_sandbox_session(daemon& d, const request& req,
                                                const std::string& name, const peer& who)
{
    auto p = pin(d, name, who);
    session_place where{p.runner->sessions(), std::move(p.registry)};
    response r = co_await start_session(d, req, name, who, std::move(where));
    co_return r;
}

asio::awaitable<response> read_output(daemon& d, const request& req, const std::string& id,
                                      const peer& who)
{
    auto& rec = record_of(d, id, who);
    auto s = rec.session;
    const auto offset = number(query(req.target(), "offset")).value_or(0);
    const auto max = std::min<std::uint64_t>(number(query(req.target(), "max")).value_or(1 << 20),
                                             16 << 20);
    const auto wait_ms = std::min<std::uint64_t>(number(query(req.target(), "wait")).value_or(0),
                                                 600000);
    if (max == 0)
        throw route_error{failure_of(errc::validation, "max must be positive")};
    sandbox::session_output out;
    out.next = offset;
    try
    {
        // Long-poll: wait up to `wait` ms for output when there is none yet.
        const bool ready = offset < s->output_end() || s->info().exit.has_value();
        if (ready) // read at once: data, the end, or a gap
            out = co_await s->read(offset, max);
        else if (wait_ms > 0)
        {
            using namespace asio::experimental::awaitable_operators;
            auto ex = co_await asio::this_coro::executor;
            asio::steady_timer timer(ex, std::chrono::milliseconds(wait_ms));
            auto got = co_await (s->read(offset, max) || timer.async_wait(asio::use_awaitable));
            if (got.index() == 0)
                out = std::get<0>(std::move(got));
        }
    }
    catch (const sandbox::error& e)
    {
        if (e.code() == errc::sequence_gap)
        {
            json::object err{{"code", "sequence_gap"},
                             {"message", e.diag().message},
                             {"resume_at", e.diag().observed}};
            co_return json_response(req, http::status::conflict,
                                    json::object{{"error", std::move(err)}});
        }
        throw;
    }
    json::array chunks;
    for (const auto& c : out.chunks)
    {
        json::object o{{"stream", sandbox::to_string(c.stream)}, {"offset", c.offset}};
        put_bytes(o, c.data);
        chunks.push_back(std::move(o));
    }
    co_return json_response(req, http::status::ok,
                            json::object{{"chunks", std::move(chunks)},
                                         {"next", out.next},
                                         {"eof", out.eof}});
}

void check(const boost::system::error_code& ec)
{
    if (ec)
        throw route_error{sandbox::failure{ec, sandbox::diagnostics{.message = ec.message()}}};
}


asio::awaitable<response> session_action(daemon& d, const request& req, const std::string& id,
                                         const std::string& action, const peer& who)
{
    auto& rec = record_of(d, id, who);
    auto s = rec.session;
    const auto name = rec.sandbox;
    const auto instance = rec.instance;
    if (action == "input")
        co_await s->write(req.body());
    else if (action == "close-input")
        check(s->close_input());
    else if (action == "signal")
    {
        auto b = body_object(req);
        auto* v = b.if_contains("signal");
        auto sig = v && v->is_string() ? signal_named(v->get_string()) : std::nullopt;
        if (!sig)
            throw route_error{failure_of(errc::validation,
                                         "signal: one of interrupt, terminate, kill, hangup, "
                                         "user1, user2")};
        check(s->signal(*sig));
    }
    else if (action == "resize")
    {
        auto b = body_object(req);
        auto* r = b.if_contains("rows");
        auto* c = b.if_contains("cols");
        if (!r || !c || !r->is_int64() || !c->is_int64() || r->get_int64() < 1 ||
            c->get_int64() < 1 || r->get_int64() > 10000 || c->get_int64() > 10000)
            throw route_error{failure_of(errc::validation, "rows and cols: 1 to 10000")};
        check(s->resize({static_cast<unsigned short>(r->get_int64()),
                         static_cast<unsigned short>(c->get_int64())}));
    }
    else if (action == "terminate" || action == "wait")
    {
        std::chrono::nanoseconds grace = std::chrono::seconds(2);
        auto b = body_object(req);
        if (auto* g = b.if_contains("grace"))
        {
            auto v = g->is_string() ? sandbox::config::parse_duration(g->get_string())
                                    : sandbox::outcome<std::chrono::nanoseconds>(
                                          failure_of(errc::validation, "grace: a duration"));
            if (!v)
                throw route_error{v.error()};
            grace = *v;
        }
        sandbox::exec_result result;
        if (action == "wait")
            result = co_await s->wait();
        else
            result = co_await s->terminate(grace);
        co_return text_json(req, http::status::ok, sandbox::to_json(result, end_error(result)));
    }
    else
        throw route_error{failure_of(errc::not_found, "no such action: " + action)};
    co_return json_response(req, http::status::ok, session_json(name, s->info(), instance));
}

asio::awaitable<response> close_session(daemon& d, const request& req, const std::string& id,
                                        const peer& who)
{
    auto& rec = record_of(d, id, who);
    auto s = rec.session;
    auto held = std::move(rec.held); // its instance stays busy until the session is gone
    d.sessions().erase(id);
    co_await s->close();
    co_return json_response(req, http::status::ok, json::object{{"id", id}, {"closed", true}});
}

asio::awaitable<response> answer_approval(daemon& d, const request& req, const std::string& id)
{
    auto b = body_object(req);
    auto* v = b.if_contains("decision");
    if (!v || !v->is_string() || (v->get_string() != "allow" && v->get_string() != "deny"))
        throw route_error{failure_of(errc::validation, "decision: allow or deny")};
    std::string reason;
    if (auto* r = b.if_contains("reason"); r && r->is_string())
        reason = std::string(r->get_string());
    if (!d.approvals().answer(id, v->get_string() == "allow", reason))
        throw route_error{failure_of(errc::not_found, "no pending approval \"" + id +
                                                          "\" (answered, timed out or unknown)")};
    co_return json_response(req, http::status::ok,
                            json::object{{"id", id}, {"decision", v->get_string()}});
}

asio::awaitable<response> route(daemon& d, const request& req, const peer& who,
                                const client_watch& gone)
{
    const auto seg = segments(req.target());
    const auto m = req.method();
    const auto n = seg.size();
    if (n < 2 || seg[0] != "v1")
        throw route_error{failure_of(errc::not_found, "no such endpoint (the API is under /v1)")};
    if (seg[1] == "sandboxes")
    {
        if (n == 2 && m == http::verb::get)
            {
            response r_ = co_await list_sandboxes(d, req);
            co_return r_;
        }
        if (n == 4 && m == http::verb::post && seg[3] == "exec")
            {
            response r_ = co_await exec(d, req, seg[2], who, gone);
            co_return r_;
        }
        if (n == 4 && m == http::verb::post && seg[3] == "sessions")
            {
                response r_ = co_await start_sandbox_session(d, req, seg[2], who);
                co_return r_;
        }
        if (n >= 4 && seg[3] == "instances")
        {
            response r_ = co_await route_instances(d, req, seg, who, gone);
            co_return r_;
        }
    }
    else if (seg[1] == "sessions")
    {
        if (n == 2 && m == http::verb::get)
        {
            json::array out;
            for (const auto& [id, rec] : d.sessions())
                if (d.may_use(who, rec))
                    out.push_back(session_json(rec.sandbox, rec.session->info(), rec.instance));
            co_return json_response(req, http::status::ok,
                                    json::object{{"sessions", std::move(out)}});
        }
        if (n == 3 && m == http::verb::get)
        {
            auto& rec = record_of(d, seg[2], who);
            co_return json_response(req, http::status::ok,
                                    session_json(rec.sandbox, rec.session->info(), rec.instance));
        }
        if (n == 3 && m == http::verb::delete_)
            {
            response r_ = co_await close_session(d, req, seg[2], who);
            co_return r_;
        }
        if (n == 4 && m == http::verb::get && seg[3] == "output")
            {
            response r_ = co_await read_output(d, req, seg[2], who);
            co_return r_;
        }
        if (n == 4 && m == http::verb::post)
            {
            response r_ = co_await session_action(d, req, seg[2], seg[3], who);
            co_return r_;
        }
    }
    else if (seg[1] == "approvals")
    {
        require_operator(d, who);
        if (n == 2 && m == http::verb::get)
            co_return json_response(req, http::status::ok,
                                    json::object{{"approvals", d.approvals().list()}});
        if (n == 3 && m == http::verb::post)
            {
            response r_ = co_await answer_approval(d, req, seg[2]);
            co_return r_;
        }
    }
    throw route_error{failure_of(errc::not_found, "no such endpoint: " +
                                                      std::string(req.method_string()) + " " +
                                                      std::string(req.target()))};
}

} // namespace

std::shared_ptr<sandbox::session> follow_target(daemon& d, const request& req, const peer& who,
                                                std::uint64_t& offset)
{
    const auto seg = segments(req.target());
    if (req.method() != http::verb::get || seg.size() != 4 || seg[0] != "v1" ||
        seg[1] != "sessions" || seg[3] != "output" || query(req.target(), "follow") != "1")
        return nullptr;
    auto it = d.sessions().find(seg[2]);
    if (it == d.sessions().end() || !d.may_use(who, it->second))
        return nullptr; // answered by `handle` (404, 403)
    offset = number(query(req.target(), "offset")).value_or(0);
    return it->second.session;
}

std::optional<sandbox::session_signal> signal_named(std::string_view s)
{
    using sig = sandbox::session_signal;
    if (s == "interrupt" || s == "SIGINT" || s == "INT") return sig::interrupt;
    if (s == "terminate" || s == "SIGTERM" || s == "TERM") return sig::terminate;
    if (s == "kill" || s == "SIGKILL" || s == "KILL") return sig::kill;
    if (s == "hangup" || s == "SIGHUP" || s == "HUP") return sig::hangup;
    if (s == "user1" || s == "SIGUSR1" || s == "USR1") return sig::user1;
    if (s == "user2" || s == "SIGUSR2" || s == "USR2") return sig::user2;
    return std::nullopt;
}

bool attach_target(daemon& d, const request& req, const peer& who,
                   std::shared_ptr<sandbox::session>& s, std::uint64_t& offset,
                   std::optional<response>& refusal)
{
    const auto seg = segments(req.target());
    if (req.method() != http::verb::get || seg.size() != 4 || seg[0] != "v1" ||
        seg[1] != "sessions" || seg[3] != "attach")
        return false;
    auto it = d.sessions().find(seg[2]);
    const auto from = query(req.target(), "offset");
    if (it == d.sessions().end())
        refusal = error_response(req, errc::not_found, "no session \"" + seg[2] + "\"");
    else if (!d.may_use(who, it->second))
        refusal = error_response(req, errc::forbidden,
                                 "session \"" + seg[2] + "\" belongs to uid " +
                                     std::to_string(it->second.owner.uid));
    else if (!it->second.session->is_tty())
        refusal = error_response(req, errc::conflict,
                                 "attach is for terminal sessions: follow this one's output "
                                 "(GET .../output?follow=1)");
    else if (!boost::beast::websocket::is_upgrade(req))
        refusal = error_response(req, errc::validation, "attach needs a WebSocket upgrade");
    else if (from && !number(from))
        refusal = error_response(req, errc::validation, "offset: a byte offset");
    else
    {
        s = it->second.session;
        offset = number(from).value_or(0);
    }
    return true;
}

asio::awaitable<response> handle(daemon& d, const request& req, const peer& who,
                                 client_watch gone)
{
    sandbox::failure f;
    try
    {
        {
            response r_ = co_await route(d, req, who, gone);
            co_return r_;
        }
    }
    catch (const route_error& e)
    {
        f = e.f;
    }
    catch (const sandbox::error& e)
    {
        f = sandbox::failure{e.code(), e.diag()};
    }
    catch (const std::exception& e)
    {
        f = sandbox::make_failure(errc::internal, e.what());
    }
    co_return error_response(req, f.code,
                             f.diag.message.empty() ? f.code.message() : f.diag.message, f.diag);
}

} // namespace sandboxd
