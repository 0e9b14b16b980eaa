// test/cmake/consumer/main.cpp: runs one command through the installed library.
#include <sandbox/local_runner.hpp>

#include <boost/asio/io_context.hpp>

#include <iostream>

int main()
{
    boost::asio::io_context ioc;
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
    ioc.run();
    return rc;
}
