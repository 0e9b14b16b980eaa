// tools/sandbox-run/daemon_client.hpp: one HTTP/1.1 connection (Beast) to sandboxd's unix
// socket, for `--connect` (connect.cpp, connect_terminal.cpp).
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_DAEMON_CLIENT_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_DAEMON_CLIENT_HPP

#include "streaming.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <string>

#include <unistd.h>

namespace sandbox::cli::client {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using local = asio::local::stream_protocol;

struct answer
{
    unsigned status = 0;
    std::string body;
};

class connection
{
public:
    explicit connection(asio::io_context& ioc) : sock_(ioc) {}
    explicit connection(const asio::any_io_executor& ex) : sock_(ex) {}

    asio::awaitable<boost::system::error_code> open(const std::string& path)
    {
        auto [ec] = co_await sock_.async_connect(local::endpoint(path),
                                                 asio::as_tuple(asio::use_awaitable));
        co_return ec;
    }

    asio::awaitable<answer> call(http::verb method, std::string target, std::string body)
    {
        http::request<http::string_body> req{method, target, 11};
        req.set(http::field::host, "sandboxd");
        req.set(http::field::content_type, "application/json");
        req.keep_alive(true);
        req.body() = std::move(body);
        req.prepare_payload();
        co_await http::async_write(sock_, req, asio::use_awaitable);
        http::response<http::string_body> res;
        co_await http::async_read(sock_, buf_, res, asio::use_awaitable);
        co_return answer{res.result_int(), std::move(res.body())};
    }

    /// Ends the connection: a call under way fails; the daemon cancels an exec whose client
    /// went away.
    void close()
    {
        boost::system::error_code ignored;
        sock_.close(ignored);
    }

private:
    local::socket sock_;
    boost::beast::flat_buffer buf_;
};

inline std::string error_message(const answer& a)
{
    boost::system::error_code ec;
    auto v = json::parse(a.body, ec);
    if (!ec && v.is_object())
        if (auto* e = v.get_object().if_contains("error"); e && e->is_object())
        {
            const auto& o = e->get_object();
            std::string code = o.contains("code") && o.at("code").is_string()
                                   ? std::string(o.at("code").get_string())
                                   : "error";
            std::string msg = o.contains("message") && o.at("message").is_string()
                                  ? std::string(o.at("message").get_string())
                                  : a.body;
            return code + ": " + msg;
        }
    return "HTTP " + std::to_string(a.status) + ": " + a.body;
}

} // namespace sandbox::cli::client

#endif
