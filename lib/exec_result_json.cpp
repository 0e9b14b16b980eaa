// lib/exec_result_json.cpp: an exec's result as one JSON object (sandbox-run --json's and
// sandboxd's shape), and back.
#include <sandbox/error.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/utf8.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string_view.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <string>
#include <type_traits>

namespace sandbox {

namespace {

/// One flat JSON object, written by hand so that numbers stay plain: Boost.JSON prints a
/// double such as 1003.2 as 1.0032E3. Strings are escaped by Boost.JSON.
class json_writer
{
public:
    json_writer& field(std::string_view key, std::string_view text)
    {
        name(key);
        out_ += boost::json::serialize(boost::json::string_view(text.data(), text.size()));
        return *this;
    }
    json_writer& field(std::string_view key, bool b)
    {
        name(key);
        out_ += b ? "true" : "false";
        return *this;
    }
    template <class Int>
    requires std::is_integral_v<Int> json_writer& field(std::string_view key, Int v)
    {
        name(key);
        out_ += std::to_string(v);
        return *this;
    }
    /// Milliseconds as a plain decimal with one to six places (whole nanoseconds), never
    /// an exponent, and always a fraction so that the JSON type does not vary: "1003.2",
    /// "1000.0".
    json_writer& millis(std::string_view key, std::chrono::nanoseconds d)
    {
        name(key);
        const std::int64_t ns = d.count();
        out_ += std::to_string(ns / 1'000'000);
        std::int64_t frac = ns % 1'000'000;
        if (frac < 0)
            frac = -frac;
        std::string digits = std::to_string(frac);
        digits.insert(0, 6 - digits.size(), '0');
        digits.erase(std::max<std::size_t>(1, digits.find_last_not_of('0') + 1));
        out_ += '.';
        out_ += digits;
        return *this;
    }
    json_writer& object(std::string_view key, const json_writer& inner)
    {
        name(key);
        out_ += inner.str();
        return *this;
    }
    std::string str() const { return out_ + "}"; }

private:
    void name(std::string_view key)
    {
        if (out_.size() > 1)
            out_ += ',';
        out_ += boost::json::serialize(boost::json::string_view(key.data(), key.size()));
        out_ += ':';
    }

    std::string out_ = "{";
};

} // namespace

std::string to_json(const exec_result& r, const boost::system::error_code& ec,
                    std::string_view backend)
{
    json_writer o;
    o.field("exit_code", r.exit_code)
        .field("stdout", sanitize_utf8(r.out.data))
        .field("stderr", sanitize_utf8(r.err.data))
        .field("stdout_truncated", r.out.truncated)
        .field("stderr_truncated", r.err.truncated)
        .field("stdout_dropped_bytes", r.out.dropped_bytes)
        .field("stderr_dropped_bytes", r.err.dropped_bytes)
        .field("status", std::string_view(to_string(r.status)))
        .field("signal", r.signal);
    if (r.budget != budget_kind::none)
        o.field("budget", std::string_view(to_string(r.budget)));
    o.millis("duration_ms", r.wall_time)
        .field("peak_memory_bytes", r.peak_memory_bytes)
        .millis("cpu_time_ms", r.cpu_time)
        .field("in_cgroup", r.in_cgroup);
    if (!backend.empty())
        o.field("backend", backend);
    if (ec)
    {
        std::string message = to_string(r.diag);
        if (message.empty())
            message = ec.message();
        json_writer e;
        e.field("code", error_name(ec)).field("message", sanitize_utf8(message));
        // What a client needs to classify it as a local run would (command_refused).
        if (!r.diag.limit.empty())
            e.field("limit", std::string_view(r.diag.limit));
        if (r.diag.cause && (r.diag.cause.category() == boost::system::system_category() ||
                             r.diag.cause.category() == boost::system::generic_category()))
            e.field("errno", static_cast<std::int64_t>(r.diag.cause.value()));
        o.object("error", e);
    }
    return o.str();
}

std::pair<boost::system::error_code, exec_result> exec_result_from_json(std::string_view text)
{
    std::pair<boost::system::error_code, exec_result> out;
    boost::system::error_code pec;
    auto v = boost::json::parse(text, pec);
    auto& [ec, r] = out;
    if (pec || !v.is_object())
    {
        ec = errc::internal;
        r.diag.message = "the daemon's answer is not JSON";
        return out;
    }
    const auto& o = v.get_object();
    auto integer = [&](const char* k) {
        auto* x = o.if_contains(k);
        return x && x->is_int64() ? static_cast<int>(x->get_int64()) : 0;
    };
    r.exit_code = o.contains("exit_code") ? integer("exit_code") : -1;
    r.signal = integer("signal");
    auto capture = [&](const char* name, stream_capture& c) {
        const std::string n(name);
        if (auto* d = o.if_contains(n); d && d->is_string())
            c.data = std::string(d->get_string());
        if (auto* t = o.if_contains(n + "_truncated"); t && t->is_bool())
            c.truncated = t->get_bool();
        if (auto* b = o.if_contains(n + "_dropped_bytes"); b && b->is_int64() && b->get_int64() > 0)
            c.dropped_bytes = static_cast<std::uint64_t>(b->get_int64());
    };
    capture("stdout", r.out);
    capture("stderr", r.err);
    if (auto* s = o.if_contains("status"); s && s->is_string())
        for (auto st :
             {exec_status::not_started, exec_status::exited, exec_status::signaled,
              exec_status::timed_out, exec_status::budget_exceeded, exec_status::unenforceable,
              exec_status::cancelled, exec_status::terminated})
            if (s->get_string() == sandbox::to_string(st))
                r.status = st;
    if (auto* e = o.if_contains("error"); e && e->is_object())
    {
        const auto& eo = e->get_object();
        ec = errc::internal;
        if (auto* c = eo.if_contains("code"); c && c->is_string())
            for (int i = 1; i <= static_cast<int>(errc::instance_closed); ++i)
                if (c->get_string() == sandbox::to_string(static_cast<errc>(i)))
                    ec = static_cast<errc>(i);
        if (auto* m = eo.if_contains("message"); m && m->is_string())
            r.diag.message = std::string(m->get_string());
        if (auto* l = eo.if_contains("limit"); l && l->is_string())
            r.diag.limit = std::string(l->get_string());
        if (auto* n = eo.if_contains("errno"); n && n->is_int64())
            r.diag.cause = boost::system::error_code(static_cast<int>(n->get_int64()),
                                                     boost::system::system_category());
    }
    return out;
}

} // namespace sandbox
