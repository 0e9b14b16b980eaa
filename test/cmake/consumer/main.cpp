// test/cmake/consumer/main.cpp: runs one command and one session through the installed
// library, with the documented default tokens (`co_await sandbox::async_start(pm, spec)`,
// `co_await sandbox::async_read(s, 0, 4096)`) and a plain callback.
#include <sandbox/local_runner.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <exception>
#include <iostream>
#include <string>

namespace asio = boost::asio;

asio::awaitable<std::string> session_output_of(sandbox::runner& runner)
{
    sandbox::session_spec spec;
    spec.command = "echo";
    spec.args = {"session ok"};
    auto s = co_await sandbox::async_start(*runner.sessions(), spec);
    std::string out;
    std::uint64_t at = 0;
    for (;;)
    {
        sandbox::session_output o = co_await sandbox::async_read(*s, at, 4096);
        for (const auto& c : o.chunks)
            out += c.data;
        at = o.next;
        if (o.eof)
            break;
    }
    co_await sandbox::async_close(*s);
    co_return out;
}

int main()
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor());
    sandbox::exec_request req;
    req.command = "echo";
    req.args = {"consumer ok"};
    int rc = 1;
    sandbox::async_exec(runner, std::move(req),
                        [&](boost::system::error_code ec, sandbox::exec_result r) {
                            std::cout << r.out.data;
                            rc = (!ec && r.exit_code == 0 && r.out.data == "consumer ok\n") ? 0 : 1;
                        });
    std::string session_out;
    asio::co_spawn(ioc, session_output_of(runner), [&](std::exception_ptr e, std::string out) {
        session_out = e ? "failed" : out;
    });
    ioc.run();
    std::cout << session_out;
    return rc == 0 && session_out == "session ok\n" ? 0 : 1;
}
