// tools/sandbox-run/connect_terminal.cpp: `sandbox-run --connect SOCKET --tty`: a terminal
// session of sandboxd attached over its WebSocket (docs/sandboxd.md "Attach"), with our own
// terminal in raw mode. Keys go as binary messages on the WebSocket; resizes and signals as
// HTTP calls on a connection of their own, so that the WebSocket has one writer.
#include "connect.hpp"
#include "daemon_client.hpp"
#include "raw_terminal.hpp"
#include "streaming.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/websocket.hpp>

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

namespace sandbox::cli {
namespace {

using namespace client;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using ws_type = websocket::stream<local::socket>;

struct terminal_run
{
    run_config& cfg;
    std::string id;
    bool interrupted = false;
    bool ended = false;
    std::string exit_json; // the exit event's result
    output_sink* sink = nullptr; // our terminal, written without blocking the loop
};

// One HTTP call on a connection of its own (a resize or a terminate while the WebSocket runs).
asio::awaitable<void> side_call(terminal_run& run, std::string target, std::string body)
{
    connection side(co_await asio::this_coro::executor);
    if (co_await side.open(run.cfg.connect))
        co_return;
    co_await side.call(http::verb::post, std::move(target), std::move(body));
}

// Our keys to the session; end of our input becomes its close-input.
asio::awaitable<void> pump_keys(terminal_run& run, ws_type& ws)
{
    auto ex = co_await asio::this_coro::executor;
    asio::posix::stream_descriptor in(ex, ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
    char buf[4096];
    while (!run.ended)
    {
        boost::system::error_code ec;
        co_await in.async_wait(asio::posix::stream_descriptor::wait_read,
                               asio::redirect_error(asio::use_awaitable, ec));
        if (ec || run.ended)
            co_return;
        const ssize_t n = ::read(in.native_handle(), buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        ws.binary(n > 0);
        const std::string msg = n > 0 ? std::string(buf, static_cast<std::size_t>(n))
                                      : std::string(R"({"type":"close-input"})");
        auto [wec, w] = co_await ws.async_write(asio::buffer(msg), asio::as_tuple(asio::use_awaitable));
        if (wec || n <= 0)
            co_return;
    }
}

// SIGWINCH resizes the session's terminal; SIGINT or SIGTERM terminate its tree.
asio::awaitable<void> pump_signals(terminal_run& run, asio::signal_set& signals)
{
    for (;;)
    {
        boost::system::error_code ec;
        const int sig = co_await signals.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec || run.ended)
            co_return;
        if (sig == SIGWINCH)
        {
            const auto size = size_of(STDIN_FILENO);
            std::string target = "/v1/sessions/" + run.id + "/resize";
            std::string body =
                json::serialize(json::object{{"rows", size.rows}, {"cols", size.cols}});
            co_await side_call(run, std::move(target), std::move(body));
            continue;
        }
        run.interrupted = true;
        run.sink->interrupt(); // a write waiting for our terminal ends too
        std::string target = "/v1/sessions/" + run.id + "/terminate";
        std::string body = R"({"grace":"0s"})";
        co_await side_call(run, std::move(target), std::move(body));
    }
}

// The session's output to our stdout until its exit (or closed) message, or until our
// terminal takes no more (hung up, a signal): then the session's tree is ended.
asio::awaitable<void> pump_output(terminal_run& run, ws_type& ws)
{
    beast::flat_buffer buf;
    for (bool writing = true; writing;)
    {
        auto [ec, n] = co_await ws.async_read(buf, asio::as_tuple(asio::use_awaitable));
        if (ec)
            break;
        std::string data = beast::buffers_to_string(buf.data());
        buf.consume(buf.size());
        if (!ws.got_text())
        {
            writing = co_await async_write_output(*run.sink, output_stream::out, data);
            continue;
        }
        boost::system::error_code pec;
        auto v = json::parse(data, pec);
        if (pec || !v.is_object())
            continue;
        const auto& o = v.get_object();
        const auto* type = o.if_contains("type");
        if (type && *type == "gap")
            writing = co_await async_write_output(
                *run.sink, output_stream::out,
                "\r\n[sandbox-run: " +
                    std::to_string(o.at("resume_at").to_number<std::int64_t>() -
                                   o.at("from").to_number<std::int64_t>()) +
                    " bytes of output dropped]\r\n");
        else if (type && *type == "exit")
            run.exit_json = json::serialize(o.at("result"));
    }
    run.ended = true;
    if (run.sink->why() != write_end::ok && !run.interrupted)
        co_await side_call(run, "/v1/sessions/" + run.id + "/terminate", R"({"grace":"0s"})");
}

asio::awaitable<int> session(terminal_run& run, asio::signal_set& signals)
{
    auto ex = co_await asio::this_coro::executor;
    connection c(ex);
    if (auto ec = co_await c.open(run.cfg.connect))
    {
        say("--connect " + run.cfg.connect + ": " + ec.message());
        co_return exit_sandbox_failure;
    }
    auto call = json::parse(sandbox::config::call_to_json(run.cfg.request)).as_object();
    const auto size = size_of(STDIN_FILENO);
    call["tty"] = json::object{{"rows", size.rows}, {"cols", size.cols}};
    // The sandbox's own terminal session, or one inside the instance --instance names.
    const std::string where = run.cfg.instance.empty()
                                  ? "/v1/sandboxes/" + run.cfg.sandbox_name + "/sessions"
                                  : "/v1/sandboxes/" + run.cfg.sandbox_name + "/instances/" +
                                        run.cfg.instance + "/sessions";
    auto started = co_await c.call(http::verb::post, where, json::serialize(call));
    if (started.status != 201)
    {
        say(error_message(started));
        auto [ec, r] = sandbox::exec_result_from_json(started.body);
        co_return exit_status_for(ec, r);
    }
    run.id = std::string(json::parse(started.body).at("id").get_string());
    ws_type ws(ex);
    co_await ws.next_layer().async_connect(local::endpoint(run.cfg.connect), asio::use_awaitable);
    co_await ws.async_handshake("sandboxd", "/v1/sessions/" + run.id + "/attach?offset=0",
                                asio::use_awaitable);
    output_sink sink(ex);
    run.sink = &sink;
    {
        raw_mode raw(STDIN_FILENO);
        asio::co_spawn(ex, pump_keys(run, ws), asio::detached);
        asio::co_spawn(ex, pump_signals(run, signals), asio::detached);
        co_await pump_output(run, ws);
    }
    boost::system::error_code ignored;
    signals.cancel(ignored);
    auto waited = co_await c.call(http::verb::post, "/v1/sessions/" + run.id + "/wait", "");
    co_await c.call(http::verb::delete_, "/v1/sessions/" + run.id, "");
    if (run.interrupted)
        co_return exit_cancelled;
    if (sink.why() != write_end::ok)
    {
        say(sink.describe());
        co_return exit_status_for(sink.why());
    }
    auto [ec, result] =
        sandbox::exec_result_from_json(waited.status == 200 ? waited.body : run.exit_json);
    co_return exit_status_for(ec, result);
}

} // namespace

int run_connected_terminal(run_config& cfg)
{
    if (!::isatty(STDIN_FILENO))
    {
        say("--tty needs a terminal on stdin");
        return exit_sandbox_failure;
    }
    asio::io_context ioc;
    asio::signal_set signals(ioc, SIGINT, SIGTERM, SIGWINCH);
    terminal_run run{cfg, {}, false, false, {}, nullptr};
    int status = exit_sandbox_failure;
    asio::co_spawn(ioc, session(run, signals), [&](std::exception_ptr e, int s) {
        status = s;
        if (e)
        {
            try
            {
                std::rethrow_exception(e);
            }
            catch (const std::exception& x)
            {
                say(std::string("the daemon's connection failed: ") + x.what());
            }
            status = exit_sandbox_failure;
        }
        ioc.stop(); // the key and signal pumps end with the io_context
    });
    ioc.run();
    return status;
}

} // namespace sandbox::cli
