// tools/sandbox-run/ask_terminal.cpp: the `--ask` approver, asynchronous on the run's loop.
#include "ask_terminal.hpp"
#include "cli.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

namespace sandbox::cli {

namespace asio = boost::asio;

namespace {

// A word as a shell would need it: bare when it has only "safe" characters.
std::string printable_word(const std::string& w)
{
    static constexpr std::string_view safe =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";
    const bool bare = !w.empty() && w.find_first_not_of(safe) == std::string::npos;
    if (bare)
        return w;
    std::string quoted = "'";
    for (char c : printable_text(w))
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return quoted + "'";
}

// The line typed, without its end and surrounding blanks, lower-cased.
std::string answer_of(std::string line)
{
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
        line.pop_back();
    std::size_t i = 0;
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])))
        ++i;
    line.erase(0, i);
    for (auto& c : line)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return line;
}

// A line ends at '\n', or '\r' if the terminal is raw.
std::pair<asio::buffers_iterator<asio::const_buffers_1>, bool> line_end(
    asio::buffers_iterator<asio::const_buffers_1> begin,
    asio::buffers_iterator<asio::const_buffers_1> end)
{
    for (auto i = begin; i != end; ++i)
        if (*i == '\n' || *i == '\r')
            return {std::next(i), true};
    return {end, false};
}

asio::awaitable<approval_decision> ask(std::string tty_path, approval_request rq)
{
    const int fd = ::open(tty_path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        co_return approval_decision::denied(std::string("no terminal to ask on (") +
                                            std::strerror(errno) + ")");
    asio::posix::stream_descriptor tty(co_await asio::this_coro::executor, fd);
    // Keys typed before the question was shown (or pasted) must not answer it.
    ::tcflush(fd, TCIFLUSH);
    // The reason quotes the command's name: escaped like the command line.
    const std::string question = "sandbox-run: approval needed: " + printable_text(rq.reason) +
                                 "\n  " + printable_command(rq.call) + "\nRun it? [y/N] ";
    co_await asio::async_write(tty, asio::buffer(question), asio::use_awaitable);
    std::string line;
    boost::system::error_code ec;
    co_await asio::async_read_until(tty, asio::dynamic_buffer(line, 256), line_end,
                                    asio::redirect_error(asio::use_awaitable, ec));
    if (ec && line.empty())
        co_return approval_decision::denied("no answer on the terminal (" + ec.message() + ")");
    const std::string a = answer_of(line);
    if (a == "y" || a == "yes")
        co_return approval_decision::allowed("yes on the terminal");
    co_return approval_decision::denied("answered \"" + a + "\" on the terminal");
}

} // namespace

std::string printable_command(const sandbox::call_snapshot& c)
{
    std::string s = printable_word(c.command);
    for (const auto& a : c.args)
    {
        // Two appends, not `" " + word`: GCC 12 at -O3 warns falsely (-Wrestrict) on that.
        s += ' ';
        s += printable_word(a);
    }
    return s;
}

sandbox::approver terminal_approver(std::string tty_path)
{
    return [tty_path = std::move(tty_path)](approval_request rq) {
        return ask(tty_path, std::move(rq));
    };
}

} // namespace sandbox::cli
