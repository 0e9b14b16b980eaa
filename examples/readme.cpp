// examples/readme.cpp: the README's example, compiled so that it cannot rot.
#include <sandbox/local_runner.hpp>
#include <boost/asio.hpp>
using namespace std::chrono_literals;

boost::asio::awaitable<void> demo(sandbox::runner& runner)
{
    sandbox::exec_request req;              // GCC 12: build it in its own statement
    req.command = "sh";
    req.args = {"-c", "echo hello; exit 3"};
    req.options.timeout = 5s;
    req.options.env.allow = std::vector<std::string>{"PATH"};
    req.options.limits.memory_bytes = 256 << 20;
    auto [ec, r] = co_await sandbox::async_exec(runner, req,
                                                boost::asio::as_tuple(boost::asio::deferred));
    // ec: timeout, budget_exceeded, not_available, ...; r.exit_code == 3, r.out.data == "hello\n"
    std::printf("%s exit=%d out=%s", ec.message().c_str(), r.exit_code, r.out.data.c_str());
}

int main()
{
    boost::asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor(), {.root = "."});
    boost::asio::co_spawn(ioc, demo(runner), boost::asio::detached);
    ioc.run();
}
