// tools/sandboxd/instances.cpp: /v1/sandboxes/NAME/instances: open a sandbox once, run many
// commands in it (the library's instances), close it; each instance belongs to the uid that
// opened it, and counts against daemon.max_instances_per_uid until it is closed or expires.
#include "calls.hpp"
#include "wire.hpp"

#include <sandbox/config/document.hpp>
#include <sandbox/error.hpp>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/json.hpp>

namespace sandboxd {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using sandbox::errc;

namespace {

json::object instance_json(const std::string& id, const instance_record& r)
{
    const auto idle = std::chrono::steady_clock::now() - r.use->last_used;
    json::object o{
        {"id", id},
        {"sandbox", r.sandbox},
        {"backend", r.backend},
        {"owner_uid", r.owner.uid},
        {"open", r.instance->is_open()},
        {"running", r.use->busy},
        {"idle_ms", r.use->busy > 0
                        ? 0
                        : std::chrono::duration_cast<std::chrono::milliseconds>(idle).count()}};
    if (const auto* end = r.instance->ended())
        o["ended"] = json::parse(sandbox::to_json(end->result, end->ec, r.backend));
    return o;
}

// The instance `id` of sandbox `name`, if `who` may use it (its owner or the operator).
instance_record& record_of(daemon& d, const std::string& name, const std::string& id,
                           const peer& who)
{
    auto it = d.instances().find(id);
    if (it == d.instances().end() || it->second.sandbox != name)
        throw route_error{
            failure_of(errc::not_found, "no instance \"" + id + "\" of sandbox \"" + name + "\"")};
    if (!d.may_use(who, it->second))
        throw route_error{failure_of(errc::forbidden, "instance \"" + id + "\" belongs to uid " +
                                                          std::to_string(it->second.owner.uid))};
    return it->second;
}

// The instance as the daemon holds it: every copy keeps the registry (its runner) alive,
// and the instance goes first when the last copy does.
std::shared_ptr<sandbox::instance>
held_with(std::shared_ptr<const sandbox::config::registry> registry,
          std::shared_ptr<sandbox::instance> inst)
{
    using both = std::pair<std::shared_ptr<const sandbox::config::registry>,
                           std::shared_ptr<sandbox::instance>>; // destroyed second first
    auto held = std::make_shared<both>(std::move(registry), std::move(inst));
    return std::shared_ptr<sandbox::instance>(held, held->second.get());
}

asio::awaitable<response> open_instance(daemon& d, const request& req, const std::string& name,
                                        const peer& who, const client_watch& gone)
{
    const auto p = pin(d, name, who);
    auto options = sandbox::config::parse_instance_call(req.body());
    if (!options)
        throw route_error{options.error()};
    if (d.stopping())
        throw route_error{failure_of(errc::not_available, "the daemon is stopping")};
    if (auto no = d.admit_instance(who))
    {
        d.audit({{"event", "instance_refused"},
                 {"sandbox", name},
                 {"peer_uid", who.uid},
                 {"limit", no->limit}});
        co_return refused(req, *no);
    }
    const auto opening = d.hold_instance_open(who); // counted while it opens
    sandbox::instance_spec spec;
    spec.options = std::move(*options);
    auto call = p.runner->try_open(std::move(spec));
    auto opened = co_await while_connected(std::move(call), gone);
    if (!opened)
    {
        d.audit({{"event", "client_gone"},
                 {"sandbox", name},
                 {"peer_uid", who.uid},
                 {"peer_pid", who.pid},
                 {"target", std::string(req.target())}});
        throw client_went_away{};
    }
    if (!*opened)
        throw route_error{std::move(*opened).error()};
    auto inst = held_with(p.registry, std::move(**opened));
    if (d.stopping())
    {
        co_await inst->close();
        throw route_error{failure_of(errc::not_available, "the daemon is stopping")};
    }
    const auto id = inst->id();
    auto& rec = d.instances()[id] =
        instance_record{p.registry, std::move(inst), name, p.backend, who};
    d.audit({{"event", "instance_owner"},
             {"instance", id},
             {"sandbox", name},
             {"peer_uid", who.uid},
             {"peer_pid", who.pid}});
    co_return json_response(req, http::status::created, instance_json(id, rec));
}

// Counts an exec in the instance from here until the guard goes: the idle sweep leaves a
// busy instance alone, and its idle time starts when the last exec ends.
std::shared_ptr<void> mark_busy(const std::shared_ptr<instance_use>& use)
{
    ++use->busy;
    return std::shared_ptr<void>(use.get(), [use](void*) {
        --use->busy;
        use->last_used = std::chrono::steady_clock::now();
    });
}

asio::awaitable<response> exec_in(daemon& d, const request& req, const std::string& name,
                                  const std::string& id, const peer& who, const client_watch& gone)
{
    auto& rec = record_of(d, name, id, who);
    // A reload that no longer lets this uid run commands as the daemon's user (run_as)
    // ends that for the instances it holds too; a removed sandbox keeps the instance's.
    const auto* now = d.registry()->entry(name);
    check_run_as(now ? *now : *rec.registry->entry(name), rec.owner);
    auto inst = rec.instance; // the record may be closed and dropped meanwhile
    const auto backend = rec.backend;
    auto call = sandbox::config::parse_call(req.body());
    if (!call)
        throw route_error{call.error()};
    if (call->tty || !call->id.empty())
        throw route_error{failure_of(errc::validation, call->tty ? "tty: an exec has no terminal"
                                                                 : "id: an exec has no id")};
    const auto busy = mark_busy(rec.use);
    sandbox::exec_request x;
    x.command = std::move(call->command);
    x.args = std::move(call->args);
    x.options = std::move(call->options);
    x.requested_by = requester_of(who);
    auto run = inst->try_exec(std::move(x));
    auto done = co_await while_connected(std::move(run), gone);
    if (!done)
    {
        d.audit({{"event", "client_gone"},
                 {"sandbox", name},
                 {"instance", id},
                 {"peer_uid", who.uid},
                 {"peer_pid", who.pid},
                 {"target", std::string(req.target())}});
        throw client_went_away{};
    }
    co_return exec_answer(req, *done, backend);
}

// A session inside the instance: a session of the daemon like any (its id under
// /v1/sessions, the same bounds per uid), whose record keeps the instance busy (no idle
// expiry) until it is closed. Closing the instance ends it.
asio::awaitable<response> start_session_in(daemon& d, const request& req, const std::string& name,
                                           const std::string& id, const peer& who)
{
    auto& rec = record_of(d, name, id, who);
    const auto* now = d.registry()->entry(name);
    check_run_as(now ? *now : *rec.registry->entry(name), rec.owner);
    if (!rec.instance->is_open())
        throw route_error{failure_of(errc::instance_closed, "instance \"" + id + "\" has ended")};
    auto inst = rec.instance;
    auto held =
        std::make_shared<std::pair<std::shared_ptr<sandbox::instance>, std::shared_ptr<void>>>(
            inst, mark_busy(rec.use));
    session_place where{inst->sessions(), rec.registry, id, std::move(held)};
    response r = co_await start_session(d, req, name, who, std::move(where));
    co_return r;
}

asio::awaitable<response> close_instance(daemon& d, const request& req, const std::string& name,
                                         const std::string& id, const peer& who)
{
    auto inst = record_of(d, name, id, who).instance;
    d.instances().erase(id);
    co_await inst->close(); // never fails; a command running in it ends instance_closed
    co_return json_response(req, http::status::ok, json::object{{"id", id}, {"closed", true}});
}

json::object list(daemon& d, const std::string& name, const peer& who)
{
    json::array out;
    bool any = false; // of a sandbox a reload removed since
    for (const auto& [id, rec] : d.instances())
    {
        if (rec.sandbox != name)
            continue;
        any = true;
        if (d.may_use(who, rec))
            out.push_back(instance_json(id, rec));
    }
    if (!any && !d.registry()->entry(name))
        throw route_error{failure_of(errc::not_found, "no sandbox named \"" + name + "\"")};
    return json::object{{"instances", std::move(out)}};
}

} // namespace

asio::awaitable<response> route_instances(daemon& d, const request& req,
                                          const std::vector<std::string>& seg, const peer& who,
                                          const client_watch& gone)
{
    const auto m = req.method();
    const auto n = seg.size();
    const auto& name = seg[2];
    if (n == 4 && m == http::verb::post)
    {
        response r = co_await open_instance(d, req, name, who, gone);
        co_return r;
    }
    if (n == 4 && m == http::verb::get)
        co_return json_response(req, http::status::ok, list(d, name, who));
    if (n == 5 && m == http::verb::get)
        co_return json_response(req, http::status::ok,
                                instance_json(seg[4], record_of(d, name, seg[4], who)));
    if (n == 5 && m == http::verb::delete_)
    {
        response r = co_await close_instance(d, req, name, seg[4], who);
        co_return r;
    }
    if (n == 6 && m == http::verb::post && seg[5] == "exec")
    {
        response r = co_await exec_in(d, req, name, seg[4], who, gone);
        co_return r;
    }
    if (n == 6 && m == http::verb::post && seg[5] == "sessions")
    {
        response r = co_await start_session_in(d, req, name, seg[4], who);
        co_return r;
    }
    throw route_error{
        failure_of(errc::not_found, "no such endpoint: " + std::string(req.method_string()) + " " +
                                        std::string(req.target()))};
}

} // namespace sandboxd
