// examples/session.cpp: keep a shell open, talk to it, come back to its output by offset.
#include <sandbox/local_runner.hpp>
#include <sandbox/process_manager.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>

namespace asio = boost::asio;

asio::awaitable<void> demo(sandbox::runner& runner)
{
    sandbox::process_manager* sessions = runner.sessions(); // null: no sessions here
    sandbox::session_spec spec;
    spec.command = "sh";
    spec.options.env.allow = std::vector<std::string>{"PATH"};
    auto shell = co_await sessions->start(spec);

    co_await shell->write("echo one; echo two >&2\n");
    shell->close_input(); // the shell exits at the end of its input
    auto exit = co_await shell->wait();

    // A client that reconnects later finds the session by id and replays from offset 0.
    auto again = sessions->find(shell->id());
    std::uint64_t at = 0;
    for (;;)
    {
        auto o = co_await again->read(at, 4096);
        for (const auto& c : o.chunks)
            std::cout << (c.stream == sandbox::output_stream::out ? "out " : "err ") << c.offset
                      << ": " << c.data;
        at = o.next;
        if (o.eof)
            break;
    }
    std::cout << "exit " << exit.exit_code << ", " << at << " bytes\n";

    // The same events as a channel: a bounded queue that announces lag instead of holding
    // the session up (here every event fits).
    auto ch = again->watch_channel({.capacity = 16, .on_lag = sandbox::lag_policy::resume});
    co_await shell->close(); // the channel's last event is `closed`
    for (;;)
    {
        auto [ec, ev] = co_await sandbox::async_receive(ch, asio::as_tuple(asio::deferred));
        if (ec) // channel_closed: nothing more
            break;
        if (ev.what == sandbox::session_event::kind::lag) // missed [missed_from, offset)
            std::cout << "missed " << ev.offset - ev.missed_from << " bytes\n";
        else if (ev.what == sandbox::session_event::kind::output)
            std::cout << sandbox::to_string(ev.stream) << " " << ev.offset << ": " << ev.data;
        else
            std::cout << (ev.what == sandbox::session_event::kind::exited ? "exited\n"
                                                                          : "closed\n");
    }
}

int main()
{
    asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor());
    asio::co_spawn(ioc, demo(runner), asio::detached);
    ioc.run();
}
