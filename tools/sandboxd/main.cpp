// tools/sandboxd/main.cpp: sandboxd, the daemon that serves the sandboxes of a config document
// to local programs in any language over HTTP on a unix socket (docs/sandboxd.md).
//
//   sandboxd --config FILE [--listen PATH] [--workspace NAME=DIR]...
//
// SIGHUP reloads the document (a bad one keeps the old: logged), SIGTERM and SIGINT stop
// accepting, end the sessions with their grace and exit 0 (exit statuses: --help). A socket
// passed by systemd (LISTEN_FDS=1, LISTEN_PID=us) is used instead of --listen.
#include "daemon.hpp"
#include "server.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/program_options.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

namespace asio = boost::asio;
namespace po = boost::program_options;
using local = asio::local::stream_protocol;

void log(const std::string& line) { std::cerr << "sandboxd: " << line << std::endl; }

// A socket file left by a daemon that died: removed when nobody answers on it.
void remove_stale(const std::string& path)
{
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode))
        return;
    asio::io_context probe;
    local::socket s(probe);
    boost::system::error_code ec;
    s.connect(local::endpoint(path), ec);
    if (ec == asio::error::connection_refused)
        ::unlink(path.c_str());
}

// The path a unix socket is bound to (empty when it has none).
std::string bound_path(int fd)
{
    sockaddr_un a{};
    socklen_t len = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || a.sun_family != AF_UNIX ||
        a.sun_path[0] != '/')
        return {};
    return std::string(a.sun_path, ::strnlen(a.sun_path, sizeof a.sun_path));
}

// The name our socket is bound to until it listens: beside `path`, then renamed to it, so that
// a client that sees `path` can connect (bound and not yet listening, it refuses: under ASan
// on a busy host a client that waited for the file met that). Empty when it would not fit
// in sun_path; `path` itself is bound then.
std::string staging_name(const std::string& path)
{
    const auto slash = path.rfind('/');
    std::string s = path.substr(0, slash == std::string::npos ? 0 : slash + 1) + ".sandboxd." +
                    std::to_string(::getpid());
    return s.size() < sizeof(sockaddr_un::sun_path) ? s : std::string();
}

// Binds `a` at `path` through `staging` (when not empty) and listens.
void bind_and_listen(local::acceptor& a, const std::string& path, const std::string& staging,
                     boost::system::error_code& ec)
{
    struct stat st;
    if (!staging.empty() && ::lstat(staging.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
        ::unlink(staging.c_str());    // left by a daemon that had our pid
    const mode_t old = ::umask(0177); // the socket is born 0600: no window for others
    a.open(local(), ec);
    if (!ec)
        a.bind(local::endpoint(staging.empty() ? path : staging), ec);
    ::umask(old);
    if (!ec)
        a.listen(asio::socket_base::max_listen_connections, ec);
    if (ec || staging.empty())
        return;
    // Never over a socket someone answers on (remove_stale left it): as a bind there would.
    if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0)
        ec.assign(errno == EEXIST ? EADDRINUSE : errno, boost::system::system_category());
    if (ec)
        ::unlink(staging.c_str());
}

// The listening socket: systemd's, or our own at `path` (mode 0600).
bool open_listener(local::acceptor& a, const std::string& path)
{
    const char* fds = std::getenv("LISTEN_FDS");
    const char* pid = std::getenv("LISTEN_PID");
    if (fds && pid && std::atoi(fds) == 1 && std::atoi(pid) == ::getpid())
    {
        a.assign(local(), 3);
        ::unsetenv("LISTEN_FDS");
        ::unsetenv("LISTEN_PID");
        log("listening on the socket systemd passed");
        return true;
    }
    if (path.empty())
    {
        log("no socket: give --listen PATH (XDG_RUNTIME_DIR is not set)");
        return false;
    }
    remove_stale(path);
    boost::system::error_code ec;
    bind_and_listen(a, path, staging_name(path), ec);
    if (ec)
    {
        log("cannot listen on " + path + ": " + ec.message());
        return false;
    }
    log("listening on " + path);
    return true;
}

// The soft descriptor limit raised to the hard one: every tunnel, follower and session pipe
// is a descriptor, and 1,024 is soon spent by one busy client (systemd's unit sets the hard
// limit with LimitNOFILE=). Returns the limit in force.
rlim_t raise_nofile()
{
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0)
        return 0;
    if (r.rlim_cur < r.rlim_max)
    {
        rlimit want = r;
        want.rlim_cur = r.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &want) == 0)
            r = want;
    }
    return r.rlim_cur;
}

const char* exit_statuses = "Exit status:\n"
                            "  0  stopped by SIGTERM or SIGINT (sessions ended with their grace)\n"
                            "  1  could not start: the config document is invalid, the socket "
                            "cannot be listened on, or an internal error\n"
                            "  2  bad command line\n";

struct flags
{
    sandboxd::daemon_options d;
    bool ok = true;
};

flags parse(int argc, char** argv)
{
    po::options_description desc("sandboxd options");
    desc.add_options()("config", po::value<std::string>()->required(), "config document")(
        "listen", po::value<std::string>(), "unix socket path")(
        "workspace", po::value<std::vector<std::string>>()->composing(), "NAME=DIR")(
        "help,h", "this text");
    flags f;
    try
    {
        po::variables_map vm;
        po::store(po::parse_command_line(argc, argv, desc), vm);
        if (vm.count("help"))
        {
            std::cout << "Usage: sandboxd --config FILE [--listen PATH] [--workspace NAME=DIR]...\n"
                      << desc << "\n"
                      << exit_statuses;
            std::exit(0);
        }
        po::notify(vm);
        f.d.config_file = vm["config"].as<std::string>();
        if (vm.count("listen"))
            f.d.listen = vm["listen"].as<std::string>();
        if (vm.count("workspace"))
            for (const auto& kv : vm["workspace"].as<std::vector<std::string>>())
            {
                const auto eq = kv.find('=');
                if (eq == std::string::npos || eq == 0)
                    throw po::error("--workspace: expected NAME=DIR, got " + kv);
                f.d.workspaces[kv.substr(0, eq)] = kv.substr(eq + 1);
            }
    }
    catch (const po::error& e)
    {
        log(e.what());
        f.ok = false;
    }
    return f;
}

asio::awaitable<void> on_signals(asio::signal_set& signals, sandboxd::daemon& d,
                                 local::acceptor& acceptor, const std::string& socket_path,
                                 asio::io_context& ioc)
{
    for (;;)
    {
        const int sig = co_await signals.async_wait(asio::use_awaitable);
        if (sig == SIGHUP)
        {
            if (auto r = d.load(); !r)
                log("reload failed, the old config stays: " + r.error().diag.message);
            else
                log("reloaded " + d.options().config_file);
            continue;
        }
        log("stopping: no new connections, ending " + std::to_string(d.sessions().size()) +
            " session(s) and " + std::to_string(d.instances().size()) + " instance(s)");
        boost::system::error_code ignored;
        acceptor.close(ignored);
        if (!socket_path.empty())
            ::unlink(socket_path.c_str());
        co_await d.end_sessions(std::chrono::seconds(2));
        ioc.stop();
        co_return;
    }
}

} // namespace

int main(int argc, char** argv)
{
    auto f = parse(argc, argv);
    if (!f.ok)
        return 2;
    const auto nofile = raise_nofile();
    if (const char* fds = std::getenv("LISTEN_FDS"); fds && f.d.listen.empty())
        f.d.listen = bound_path(3); // systemd's socket: hidden from commands like our own
    try
    {
        asio::io_context ioc;
        // Caught from here on, before the socket exists: a client (or a test, or logrotate)
        // may send SIGHUP as soon as it sees the socket, and the default action would end us.
        // One that comes before the loop runs waits for it (a reload, or the stop).
        asio::signal_set signals(ioc, SIGHUP, SIGTERM, SIGINT);
        sandboxd::daemon d(ioc.get_executor(), f.d);
        if (auto r = d.load(); !r)
        {
            log(r.error().diag.message);
            return 1;
        }
        const std::string path = d.socket_path();
        local::acceptor acceptor(ioc);
        const bool activated = std::getenv("LISTEN_FDS") != nullptr;
        if (!open_listener(acceptor, path))
            return 1;
        log("descriptor limit " + std::to_string(nofile));
        const std::string owned_path = activated ? std::string() : path;
        asio::co_spawn(ioc, on_signals(signals, d, acceptor, owned_path, ioc), asio::detached);
        asio::co_spawn(ioc, sandboxd::serve(d, acceptor), asio::detached);
        asio::co_spawn(ioc, d.sweep_ended_sessions(), asio::detached);
        ioc.run();
        return 0;
    }
    catch (const std::exception& e)
    {
        log(std::string("internal: ") + e.what());
        return 1;
    }
}
