// net/tls/hook_call.cpp: a hook called under its deadline, and its answer judged.
#include "hook_call.hpp"

#include "host/request_pattern.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/string.hpp>

#include <algorithm>

namespace sandbox::net::tls {

namespace {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

// The hook's answer, or none when it threw (a cancellation it did not catch included).
asio::awaitable<std::optional<http_verdict>>
guarded(const std::function<asio::awaitable<http_verdict>()>& hook)
{
    std::optional<http_verdict> v;
    try
    {
        v = co_await hook();
    }
    catch (...)
    {
        v.reset();
    }
    co_return v;
}

hook_answer answer_of(hook_answer::kind what)
{
    hook_answer a;
    a.what = what;
    return a;
}

// The hook's own reason, fit for a plain-text body: no control bytes, at most 200 bytes.
std::string printable(std::string_view s)
{
    std::string out;
    for (const char c : s)
    {
        if (out.size() >= 200)
            break;
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u != 0x7f)
            out += c;
    }
    return out;
}

// Edits the proxy can apply: names it may set or remove, values it may send.
bool applicable(const http_verdict& v)
{
    for (const auto& h : v.set_headers)
        if (!detail::check_injected_header_name(h.name) ||
            !detail::check_injected_header_value(h.value))
            return false;
    return std::all_of(v.remove_headers.begin(), v.remove_headers.end(), [](const std::string& n) {
        return bool(detail::check_injected_header_name(n));
    });
}

hook_decision refusal(int status, const char* reason, std::string why, const char* word)
{
    hook_decision d;
    d.pass = false;
    d.status = status;
    d.reason = reason;
    d.why = std::move(why);
    d.word = word;
    return d;
}

} // namespace

asio::awaitable<hook_answer> call_hook(std::function<asio::awaitable<http_verdict>()> hook,
                                       std::chrono::milliseconds timeout)
{
    asio::steady_timer deadline(co_await asio::this_coro::executor, timeout);
    auto r = co_await (guarded(hook) || deadline.async_wait(asio::as_tuple(asio::use_awaitable)));
    hook_answer a = answer_of(hook_answer::kind::timed_out);
    if (r.index() == 0)
    {
        auto& v = std::get<0>(r);
        a.what = v ? hook_answer::kind::answered : hook_answer::kind::threw;
        if (v)
            a.verdict = std::move(*v);
    }
    co_return a;
}

hook_decision decide(const hook_answer& a, bool allow_on_timeout, std::string_view which)
{
    // The texts are built for a refusal only: an allowed message pays for none.
    const auto hook = [&] { return "the " + std::string(which) + " hook"; };
    if (a.what == hook_answer::kind::timed_out)
    {
        if (!allow_on_timeout)
            return refusal(504, "hook_timeout", hook() + " did not answer in time", "timeout");
        hook_decision d;
        d.word = "timeout_allowed";
        return d;
    }
    if (a.what == hook_answer::kind::threw)
        return refusal(403, "hook_error", "blocked: " + hook() + " failed", "error");
    const http_verdict& v = a.verdict;
    if (!v.allow)
    {
        const int status = v.status >= 400 && v.status <= 599 ? v.status : 403;
        std::string why = "refused by " + hook();
        if (const std::string r = printable(v.reason); !r.empty())
            why += ": " + r;
        return refusal(status, "hook_deny", std::move(why), "denied");
    }
    if (!applicable(v))
        return refusal(403, "hook_error",
                       "blocked: " + hook() + " asked for a header change the proxy does not make",
                       "error");
    hook_decision d;
    const bool edited = !v.set_headers.empty() || !v.remove_headers.empty();
    d.edits = edited ? &v : nullptr;
    d.word = edited ? "modified" : "allowed";
    return d;
}

hook_decision decide_body(const hook_answer& a, bool allow_on_timeout, std::string_view which)
{
    hook_decision d = decide(a, allow_on_timeout, which);
    if (d.pass && d.edits)
        return refusal(403, "hook_error",
                       "blocked: the " + std::string(which) + " hook answered with header changes",
                       "error");
    return d;
}

bool kept_by(const http_verdict* edits, std::string_view name)
{
    if (!edits)
        return true;
    const auto same = [&](std::string_view other) { return boost::beast::iequals(name, other); };
    return std::none_of(edits->set_headers.begin(), edits->set_headers.end(),
                        [&](const http_header& h) { return same(h.name); }) &&
           std::none_of(edits->remove_headers.begin(), edits->remove_headers.end(), same);
}

} // namespace sandbox::net::tls
