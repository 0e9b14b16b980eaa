// examples/coroutine.cpp: run a command from a coroutine and print what it produced.
#include <sandbox/local_runner.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<void> demo(sandbox::runner& runner)
{
    sandbox::exec_request req;                  // build the request in its own statement
    req.command = "sh";                         // (GCC 12 rejects braced temporaries
    req.args = {"-c", "echo hello from $0; exit 3"}; //  inside co_await)
    req.options.timeout = 5s;
    req.options.env.allow = std::vector<std::string>{"PATH"};
    req.options.limits.memory_bytes = 256 << 20;
    try
    {
        sandbox::exec_result r = co_await sandbox::async_exec(runner, req);
        std::cout << "exit " << r.exit_code << ": " << r.out.data;
    }
    catch (const sandbox::error& e) // timeouts, caps, policy refusals
    {
        std::cout << "failed: " << e.code() << " " << e.what() << "\n";
        if (const sandbox::exec_result* partial = e.partial_result()) // null if nothing ran
            std::cout << "output before it stopped: " << partial->out.data;
    }
}

int main()
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(), {.root = "."});
    asio::co_spawn(ioc, demo(runner), asio::detached);
    ioc.run();
}
