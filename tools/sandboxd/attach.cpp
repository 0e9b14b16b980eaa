// tools/sandboxd/attach.cpp: a terminal session over a WebSocket (see attach.hpp). Two
// loops share the socket, one reading (keys and controls), one writing (output); Beast
// allows one of each at a time.
#include "attach.hpp"

#include <sandbox/error.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>

#include <optional>
#include <string>

namespace sandboxd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace json = boost::json;
namespace websocket = beast::websocket;
using ws_type = websocket::stream<stream_type>;
using namespace asio::experimental::awaitable_operators;

namespace {

std::int64_t dimension(const json::object& o, std::string_view key)
{
    const auto* v = o.if_contains(key);
    return v && v->is_int64() ? v->get_int64() : 0;
}

// One control message; the error text for a bad one ("" when it was good).
std::string control(sandbox::session& s, std::string_view text)
{
    boost::system::error_code ec;
    auto v = json::parse(text, ec);
    if (ec || !v.is_object() || !v.get_object().if_contains("type") ||
        !v.get_object().at("type").is_string())
        return "a control message is a JSON object with a \"type\"";
    const auto& o = v.get_object();
    const auto type = o.at("type").get_string();
    if (type == "resize")
    {
        const auto rows = dimension(o, "rows"), cols = dimension(o, "cols");
        if (rows < 1 || cols < 1 || rows > 10000 || cols > 10000)
            return "resize: rows and cols from 1 to 10000";
        s.resize({static_cast<unsigned short>(rows), static_cast<unsigned short>(cols)});
    }
    else if (type == "signal")
    {
        const auto* name = o.if_contains("signal");
        auto sig = name && name->is_string() ? signal_named(name->get_string()) : std::nullopt;
        if (!sig)
            return "signal: one of interrupt, terminate, kill, hangup, user1, user2";
        s.signal(*sig);
    }
    else if (type == "close-input")
        s.close_input();
    else
        return "unknown control type \"" + std::string(type) + "\"";
    return {};
}

// Keys and controls until the client closes, the socket fails or a control is bad (then
// `bad` holds why). A key written after the command ended is dropped: the exit is on its way.
asio::awaitable<void> pump_in(ws_type& ws, std::shared_ptr<sandbox::session> s, std::string& bad)
{
    beast::flat_buffer buf;
    for (;;)
    {
        auto [ec, n] = co_await ws.async_read(buf, asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;
        std::string data = beast::buffers_to_string(buf.data());
        buf.consume(buf.size());
        if (!ws.got_text())
        {
            try
            {
                co_await s->write(std::move(data));
            }
            catch (const boost::system::system_error&)
            {
            }
            continue;
        }
        bad = control(*s, data);
        if (!bad.empty())
            co_return;
    }
}

// The output from `offset`, then the end (exit or closed) and a normal close.
asio::awaitable<void> pump_out(ws_type& ws, std::shared_ptr<sandbox::session> s,
                               std::uint64_t offset)
{
    auto w = s->watch(offset);
    for (;;)
    {
        std::optional<sandbox::session_event> e;
        std::string gap;
        const auto before = w.position();
        try
        {
            e = co_await w.next();
        }
        catch (const sandbox::error& x)
        {
            if (x.code() != sandbox::errc::sequence_gap)
                break; // closed under us
            gap = gap_line(before, w.position());
        }
        const bool output = e && e->what == sandbox::session_event::kind::output;
        ws.text(!output);
        const std::string frame = !gap.empty() ? gap : output ? e->data : event_line(*e);
        auto [ec, n] = co_await ws.async_write(asio::buffer(frame),
                                               asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return; // the client went: the session goes on
        if (e && !output)
            break;
    }
    co_await ws.async_close(websocket::close_code::normal, asio::as_tuple(asio::use_awaitable));
}

} // namespace

asio::awaitable<void> attach(stream_type& stream, const request& req,
                             std::shared_ptr<sandbox::session> s, std::uint64_t offset)
{
    stream.expires_never(); // the WebSocket's own timeouts take over
    ws_type ws(std::move(stream));
    ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
    ws.read_message_max(1 << 20);
    auto [aec] = co_await ws.async_accept(req, asio::as_tuple(asio::use_awaitable));
    if (aec)
        co_return;
    std::string bad;
    co_await (pump_in(ws, s, bad) || pump_out(ws, s, offset));
    if (!bad.empty() && ws.is_open())
        co_await ws.async_close(websocket::close_reason(websocket::close_code::policy_error,
                                                        "validation: " + bad),
                                asio::as_tuple(asio::use_awaitable));
}

} // namespace sandboxd
