// tools/sandbox-run/connect.cpp: the sandboxd client. One HTTP/1.1 connection (Beast) on the
// daemon's unix socket; a streamed run is a session read by long-poll from byte offsets, so a
// lost connection could resume where it was (the daemon keeps the session).
#include "connect.hpp"
#include "daemon_client.hpp"

#include "streaming.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

namespace sandbox::cli {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using local = asio::local::stream_protocol;
using client::answer;
using client::connection;
using client::error_message;

// sandboxd's data_base64 (Beast's base64, as the daemon encodes it: padded, so whole
// groups of four). Anything else is refused whole: Beast's decoder stops at the first byte
// it cannot read, and half an answer written out would pass for the command's output.
std::string base64_decode(std::string_view in)
{
    namespace b64 = boost::beast::detail::base64;
    std::string out(b64::decoded_size(in.size()) + 3, '\0');
    const auto [written, read] = b64::decode(out.data(), in.data(), in.size());
    const std::string_view pad = in.substr(read);
    if (in.size() % 4 != 0 || pad.size() > 2 || pad.find_first_not_of('=') != pad.npos)
        throw std::runtime_error("its output was not base64 (data_base64)");
    out.resize(written);
    return out;
}

struct emitted
{
    std::uint64_t next = 0;
    bool eof = false;
    bool written = true; // false: streaming had to stop (the sink says why)
};

// Writes the chunks of one output answer through the sink (the loop never waits for our
// reader); returns the next offset and whether the output has ended.
asio::awaitable<emitted> emit(output_sink& sink, const json::object& o)
{
    emitted e{static_cast<std::uint64_t>(o.at("next").to_number<std::int64_t>()),
              o.at("eof").get_bool()};
    for (const auto& c : o.at("chunks").get_array())
    {
        const auto& chunk = c.get_object();
        const auto stream =
            chunk.at("stream").get_string() == "stderr" ? output_stream::err : output_stream::out;
        std::string decoded; // data_base64 only; data is written from the answer itself
        std::string_view bytes;
        if (auto* d = chunk.if_contains("data"))
            bytes = std::string_view(d->get_string().data(), d->get_string().size());
        else if (auto* b = chunk.if_contains("data_base64"))
            bytes = decoded = base64_decode(b->get_string());
        if (!co_await async_write_output(sink, stream, bytes))
        {
            e.written = false;
            co_return e;
        }
    }
    co_return e;
}

// --stdin-file over the daemon: the file's bytes posted as the session's input, in chunks
// (the first connection long-polls the output), then end of input. A chunk over the
// daemon's body limit (413) is sent again in halves. A FIFO or pipe is read without blocking
// the loop; a regular file is read as it is (it never blocks for long).
// One input chunk posted on a connection of its own; the daemon closes a connection after
// a 413 (the rest of that body is not read), so each post opens one. Returns the status.
asio::awaitable<unsigned> post_input(run_config& cfg, const std::string& id, std::string body)
{
    connection c(co_await asio::this_coro::executor);
    if (co_await c.open(cfg.connect))
        co_return 0;
    auto a = co_await c.call(http::verb::post, "/v1/sessions/" + id + "/input", std::move(body));
    co_return a.status;
}

asio::awaitable<void> feed_input(run_config& cfg, std::string id)
{
    const int fd = cfg.request.stdin_fd->get();
    auto ex = co_await asio::this_coro::executor;
    std::optional<asio::posix::stream_descriptor> pipe;
    if (cfg.stdin_fifo)
        pipe.emplace(ex, ::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    std::size_t chunk = 64 * 1024;
    std::string buf(chunk, '\0');
    for (bool open = true; open;)
    {
        std::size_t n = 0;
        if (pipe)
        {
            auto [ec, got] = co_await pipe->async_read_some(asio::buffer(buf.data(), buf.size()),
                                                           asio::as_tuple(asio::use_awaitable));
            n = ec ? 0 : got;
        }
        else
        {
            const ssize_t got = ::read(fd, buf.data(), buf.size());
            n = got > 0 ? static_cast<std::size_t>(got) : 0;
        }
        open = n > 0;
        for (std::size_t at = 0; at < n;)
        {
            const std::size_t part = std::min(chunk, n - at);
            const auto status = co_await post_input(cfg, id, buf.substr(at, part));
            if (status == 413 && part > 1)
                chunk = part / 2;
            else if (status != 200)
                co_return; // the command has ended, or its input is closed: nothing to feed
            else
                at += part;
        }
    }
    connection c(ex);
    if (!co_await c.open(cfg.connect))
        co_await c.call(http::verb::post, "/v1/sessions/" + id + "/close-input", "");
}

// The streamed run: a session, its output long-polled until the end, its exit.
// Streaming stopped (our reader went away, a signal): the session is ended on the daemon
// and the exit status says why, as a local run's does.
asio::awaitable<int> stop_streaming(connection& c, const output_sink& sink, std::string& id)
{
    say(sink.describe());
    co_await c.call(http::verb::post, "/v1/sessions/" + id + "/terminate", R"({"grace":"0s"})");
    co_await c.call(http::verb::delete_, "/v1/sessions/" + id, "");
    id.clear();
    co_return exit_status_for(sink.why());
}

asio::awaitable<int> streamed(connection& c, run_config& cfg, output_sink& sink, bool& interrupted,
                              std::string& id)
{
    auto started =
        co_await c.call(http::verb::post, "/v1/sandboxes/" + cfg.sandbox_name + "/sessions",
                        sandbox::config::call_to_json(cfg.request));
    if (started.status != 201)
    {
        say(error_message(started));
        // A command the OS refused (not found: 127, not executable: 126), as a local run.
        auto [ec, r] = sandbox::exec_result_from_json(started.body);
        co_return exit_status_for(ec, r);
    }
    id = std::string(json::parse(started.body).at("id").get_string());
    if (cfg.request.stdin_fd)
        asio::co_spawn(co_await asio::this_coro::executor, feed_input(cfg, id),
                       [](std::exception_ptr) {}); // a lost daemon ends the run elsewhere
    else
        co_await c.call(http::verb::post, "/v1/sessions/" + id + "/close-input", "");
    std::uint64_t at = 0;
    for (;;)
    {
        auto out = co_await c.call(http::verb::get,
                                   "/v1/sessions/" + id + "/output?offset=" + std::to_string(at) +
                                       "&wait=30000",
                                   "");
        if (out.status == 409) // dropped before we read it: say so, go on where it resumes
        {
            const auto v = json::parse(out.body).at("error").at("resume_at").to_number<std::int64_t>();
            say("warning: " + std::to_string(static_cast<std::uint64_t>(v) - at) +
                " bytes of output were dropped before they could be read");
            at = static_cast<std::uint64_t>(v);
            continue;
        }
        if (out.status != 200)
        {
            say(error_message(out));
            co_return exit_sandbox_failure;
        }
        const auto e = co_await emit(sink, json::parse(out.body).get_object());
        if (!e.written)
            co_return co_await stop_streaming(c, sink, id);
        at = e.next;
        if (e.eof)
            break;
    }
    auto waited = co_await c.call(http::verb::post, "/v1/sessions/" + id + "/wait", "");
    co_await c.call(http::verb::delete_, "/v1/sessions/" + id, "");
    id.clear();
    auto [ec, result] = sandbox::exec_result_from_json(waited.body);
    if (interrupted)
        co_return exit_cancelled;
    if (ec) // a command the OS refused after the session was answered: said as a local run
        say(sandbox::error_name(ec) + ": " + (result.diag.message.empty() ? ec.message()
                                                                          : result.diag.message));
    co_return exit_status_for(ec, result);
}

// --json: the daemon's answer, written through the sink like streamed output (a reader with
// no room makes the coroutine wait, never the loop).
asio::awaitable<int> once(connection& c, run_config& cfg, output_sink& sink)
{
    auto a = co_await c.call(http::verb::post, "/v1/sandboxes/" + cfg.sandbox_name + "/exec",
                             sandbox::config::call_to_json(cfg.request));
    auto [ec, result] = sandbox::exec_result_from_json(a.body);
    if (a.status >= 300 && !ec)
        ec = errc::internal;
    if (!co_await async_write_output(sink, output_stream::out, a.body))
        co_return exit_status_for(sink.why()); // the command has ended: only the answer is lost
    co_return exit_status_for(ec, result);
}

// --instance ID: one exec in the daemon's instance; its output written when it ends (the
// daemon's answer whole with --json). The caller's signal closes the connection, which the
// daemon takes as the client gone: it cancels the exec (the command's tree is killed).
asio::awaitable<int> in_instance(connection& c, run_config& cfg, output_sink& sink,
                                 const bool& interrupted)
{
    answer a;
    try
    {
        a = co_await c.call(http::verb::post,
                            "/v1/sandboxes/" + cfg.sandbox_name + "/instances/" + cfg.instance +
                                "/exec",
                            sandbox::config::call_to_json(cfg.request));
    }
    catch (const boost::system::system_error&)
    {
        if (interrupted)
            co_return exit_cancelled;
        throw;
    }
    auto [ec, result] = sandbox::exec_result_from_json(a.body);
    if (a.status >= 300 && !ec)
        ec = errc::internal;
    if (cfg.json)
    {
        if (!co_await async_write_output(sink, output_stream::out, a.body))
            co_return exit_status_for(sink.why());
        co_return exit_status_for(ec, result);
    }
    // A command that ran, or one whose instance was closed under it (its output so far is
    // kept), writes its output; one that never ran has only the daemon's reason.
    const bool closed = ec == errc::instance_closed;
    if (a.status == 200 || closed)
        if (!co_await async_write_output(sink, output_stream::out, result.out.data) ||
            !co_await async_write_output(sink, output_stream::err, result.err.data))
            co_return exit_status_for(sink.why());
    if (a.status != 200)
        say(error_message(a));
    co_return closed ? exit_sandbox_failure : exit_status_for(ec, result);
}

} // namespace

int run_connected(run_config& cfg)
{
    if (cfg.tty)
        return run_connected_terminal(cfg);
    asio::io_context ioc;
    int status = exit_sandbox_failure;
    bool interrupted = false;
    std::string session_id;
    connection c(ioc);
    output_sink sink(ioc.get_executor());
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    // A signal ends the session on the daemon (its own connection: ours is busy polling).
    signals.async_wait([&](boost::system::error_code ec, int) {
        if (!ec && !cfg.instance.empty())
        {
            interrupted = true;
            sink.interrupt(); // a write waiting for our reader ends too
            c.close();        // the daemon cancels the exec of a client that went
            return;
        }
        if (ec || session_id.empty())
            return;
        interrupted = true;
        sink.interrupt(); // a write waiting for our reader ends too
        asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
            connection side(ioc);
            auto err = co_await side.open(cfg.connect);
            if (!err)
                co_await side.call(http::verb::post, "/v1/sessions/" + session_id + "/terminate",
                                   R"({"grace":"0s"})");
        }, [](std::exception_ptr) {});
    });
    asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
        if (auto ec = co_await c.open(cfg.connect))
        {
            if (interrupted)
                status = exit_cancelled;
            else
                say("--connect " + cfg.connect + ": " + ec.message());
            co_return;
        }
        if (!cfg.instance.empty())
            status = co_await in_instance(c, cfg, sink, interrupted);
        else if (cfg.json)
            status = co_await once(c, cfg, sink);
        else
            status = co_await streamed(c, cfg, sink, interrupted, session_id);
    }, [&](std::exception_ptr e) {
        // However the run ended (a socket that is missing or no socket included), the signal
        // wait must end too, or the io_context never runs out of work.
        boost::system::error_code ignored;
        signals.cancel(ignored);
        if (!e)
            return;
        try
        {
            std::rethrow_exception(e);
        }
        catch (const std::exception& x)
        {
            say(std::string("the daemon's connection failed: ") + x.what());
        }
    });
    ioc.run();
    return status;
}

} // namespace sandbox::cli
