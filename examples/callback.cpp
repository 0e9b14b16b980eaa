// examples/callback.cpp: the same with a plain callback, a timeout and the error code.
#include <sandbox/local_runner.hpp>

#include <boost/asio/io_context.hpp>

#include <iostream>

using namespace std::chrono_literals;

int main()
{
    boost::asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor());
    sandbox::exec_request req;
    req.command = "sleep";
    req.args = {"10"};
    req.options.timeout = 200ms;
    sandbox::async_exec(runner, std::move(req),
                        [](boost::system::error_code ec, sandbox::exec_result r) {
                            // ec == sandbox::errc::timeout; r holds what was captured
                            std::cout << ec.message() << " (" << to_string(r.status) << ", "
                                      << r.diag << ")\n";
                        });
    ioc.run();
}
