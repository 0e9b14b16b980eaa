// tools/sandboxd/wire.cpp: the API's shapes on the wire (wire.hpp).
#include "wire.hpp"

#include <sandbox/error.hpp>
#include <sandbox/utf8.hpp>

#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>

#include <charconv>

namespace sandboxd {

namespace http = boost::beast::http;
namespace json = boost::json;
using sandbox::errc;

http::status status_for(const boost::system::error_code& ec)
{
    if (ec.category() != sandbox::error_category())
        return http::status::internal_server_error;
    switch (static_cast<errc>(ec.value()))
    {
    case errc::validation: return http::status::bad_request;
    case errc::forbidden:
    case errc::policy_denied: return http::status::forbidden;
    case errc::not_found:
    case errc::session_closed:
    case errc::instance_closed: return http::status::not_found;
    case errc::conflict:
    case errc::sequence_gap: return http::status::conflict;
    case errc::not_available: return http::status::not_implemented;
    default: return http::status::internal_server_error;
    }
}

response text_json(const request& req, http::status s, std::string body)
{
    response r{s, req.version()};
    r.set(http::field::content_type, "application/json");
    r.keep_alive(req.keep_alive());
    r.body() = std::move(body) + "\n";
    r.prepare_payload();
    return r;
}

response json_response(const request& req, http::status s, const json::value& body)
{
    return text_json(req, s, json::serialize(body));
}

const char* code_name(const boost::system::error_code& ec)
{
    if (ec.category() == sandbox::error_category())
        return sandbox::to_string(static_cast<errc>(ec.value()));
    return "internal";
}

// The path's segments after "/v1".
std::vector<std::string> segments(std::string_view target)
{
    std::vector<std::string> out;
    const auto q = target.find('?');
    std::string_view path = target.substr(0, q);
    std::size_t at = 0;
    while (at < path.size())
    {
        auto next = path.find('/', at);
        if (next == std::string_view::npos)
            next = path.size();
        if (next > at)
            out.emplace_back(path.substr(at, next - at));
        at = next + 1;
    }
    return out;
}

std::optional<std::string> query(std::string_view target, std::string_view key)
{
    auto u = boost::urls::parse_origin_form(target);
    if (!u)
        return std::nullopt;
    for (auto p : u->params())
        if (p.key == key)
            return std::string(p.value);
    return std::nullopt;
}

std::optional<std::uint64_t> number(const std::optional<std::string>& s)
{
    if (!s)
        return std::nullopt;
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
    if (ec != std::errc() || end != s->data() + s->size())
        return std::nullopt;
    return v;
}

namespace {

// Beast's base64 (a detail of Boost 1.81, which the build pins: EXACT), as net/upstream.cpp
// uses it; sandbox-run --connect decodes with the same.
std::string base64(std::string_view in)
{
    std::string out(boost::beast::detail::base64::encoded_size(in.size()), '\0');
    out.resize(boost::beast::detail::base64::encode(out.data(), in.data(), in.size()));
    return out;
}

} // namespace

// Output bytes as JSON: "data" when they are valid UTF-8, else "data_base64".
void put_bytes(json::object& o, const std::string& data)
{
    if (sandbox::sanitize_utf8(data) == data)
        o["data"] = data;
    else
        o["data_base64"] = base64(data);
}

// The error of a session whose command never started (the OS refused it after the session
// was answered): the errno's class, else internal. None for a command that ran.
boost::system::error_code end_error(const sandbox::exec_result& r)
{
    if (r.status != sandbox::exec_status::not_started)
        return {};
    if (r.diag.cause && (r.diag.cause.category() == boost::system::system_category() ||
                         r.diag.cause.category() == boost::system::generic_category()))
        return sandbox::errc_from_errno(r.diag.cause.value());
    return errc::internal;
}

namespace {

// {"code", "message"}, and from the diagnostics when set: "limit" and "errno" (an OS error).
json::object error_body(const char* code, std::string message, const sandbox::diagnostics& diag)
{
    json::object e{{"code", code}, {"message", std::move(message)}};
    if (!diag.limit.empty())
        e["limit"] = diag.limit;
    if (diag.cause && (diag.cause.category() == boost::system::system_category() ||
                       diag.cause.category() == boost::system::generic_category()))
        e["errno"] = diag.cause.value();
    return e;
}

} // namespace

json::object error_json(const boost::system::error_code& ec, const sandbox::diagnostics& diag)
{
    return error_body(
        code_name(ec),
        sandbox::sanitize_utf8(diag.message.empty() ? ec.message() : sandbox::to_string(diag)),
        diag);
}

json::object session_json(const std::string& sandbox_name, const sandbox::session_info& i,
                          const std::string& instance)
{
    json::array argv;
    for (const auto& a : i.argv)
        argv.emplace_back(a);
    json::object o{{"id", i.id},
                   {"sandbox", sandbox_name},
                   {"argv", std::move(argv)},
                   {"tty", i.tty},
                   {"pid", i.pid},
                   {"running", i.running},
                   {"started_at_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                         i.started_at.time_since_epoch())
                                         .count()}};
    if (!instance.empty())
        o["instance"] = instance;
    if (i.exit)
    {
        const auto& x = *i.exit; // integers only (Boost.JSON would print 628.1 as 6.281E2)
        o["exit"] = json::object{
            {"status", sandbox::to_string(x.status)},
            {"exit_code", x.exit_code},
            {"signal", x.signal},
            {"duration_us",
             std::chrono::duration_cast<std::chrono::microseconds>(x.wall_time).count()},
            {"cpu_time_us",
             std::chrono::duration_cast<std::chrono::microseconds>(x.cpu_time).count()},
            {"peak_memory_bytes", x.peak_memory_bytes}};
        if (const auto ec = end_error(x))
            o["exit"].get_object()["error"] = error_json(ec, x.diag);
    }
    return o;
}

std::string event_line(const sandbox::session_event& e)
{
    json::object o;
    if (e.what == sandbox::session_event::kind::output)
    {
        o = {{"type", "output"}, {"stream", sandbox::to_string(e.stream)}, {"offset", e.offset}};
        put_bytes(o, e.data);
    }
    else if (e.what == sandbox::session_event::kind::exited && e.exit)
        // The result as sandbox-run --json writes it (plain numbers, never 6.2E2).
        return R"({"type":"exit","offset":)" + std::to_string(e.offset) + R"(,"result":)" +
               sandbox::to_json(*e.exit, end_error(*e.exit)) + "}\n";
    else
        o = {{"type", "closed"}};
    return json::serialize(o) + "\n";
}

std::string gap_line(std::uint64_t from, std::uint64_t resume_at)
{
    return json::serialize(
               json::object{{"type", "gap"}, {"from", from}, {"resume_at", resume_at}}) +
           "\n";
}

response error_response(const request& req, const boost::system::error_code& ec,
                        const std::string& message, const sandbox::diagnostics& diag)
{
    auto status = ec == http::error::body_limit ? http::status::payload_too_large : status_for(ec);
    const char* code = ec == http::error::body_limit ? "validation" : code_name(ec);
    return json_response(req, status, json::object{{"error", error_body(code, message, diag)}});
}

} // namespace sandboxd
