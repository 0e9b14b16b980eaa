// test/integration/net_support.hpp: what the bwrap network suites share (net_bwrap_test,
// tls_bwrap_test): a directory the sandbox user can read, servers on the host's loopback in
// python (HTTP, HTTPS, echo), a package index and a git repository to serve, and a fixture
// that runs bash under allow_list with every record kept.
#ifndef SANDBOX_TEST_INTEGRATION_NET_SUPPORT_HPP
#define SANDBOX_TEST_INTEGRATION_NET_SUPPORT_HPP

#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/net_proxy.hpp>
#include <sandbox/process_manager.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sbx_net_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline const char* const python = "/usr/bin/python3"; // not the PATH's (a shim under /root)

// A directory under /var/tmp (the sandbox has its own /tmp), readable by the sandbox user.
class shared_dir
{
public:
    shared_dir()
        : path_(fs::path("/var/tmp") /
                ("sbx-net-" + std::to_string(::getpid()) + "-" + std::to_string(++count_)))
    {
        fs::create_directories(path_);
        ::chmod(path_.c_str(), 0755);
    }
    ~shared_dir()
    {
        std::error_code ec;
        fs::remove_all(path_, ec);
    }
    shared_dir(const shared_dir&) = delete;
    shared_dir& operator=(const shared_dir&) = delete;
    const fs::path& path() const { return path_; }
    std::string file(const std::string& name, const std::string& text) const
    {
        std::ofstream(path_ / name) << text;
        return (path_ / name).string();
    }

private:
    static inline int count_ = 0;
    fs::path path_;
};

// The host's servers, in python: `http DIR [ADDRESS]`, `https DIR CERT KEY` (a threading
// HTTP server on DIR, at 127.0.0.1 unless given), `echo` (each connection echoed until EOF). Each
// prints its port first.
inline const char* const server_py = R"(import functools, http.server, socket, ssl, sys, threading
mode = sys.argv[1]
if mode == 'echo':
    ls = socket.socket(); ls.bind(('127.0.0.1', 0)); ls.listen(64)
    print(ls.getsockname()[1], flush=True)
    def serve(c):
        with c:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
    while True:
        c, _ = ls.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # /echo-headers: the request's headers, one a line
        if not self.path.startswith('/echo-headers'):
            return super().do_GET()
        body = ''.join('%s: %s\n' % kv for kv in self.headers.items()).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
handler = functools.partial(Handler, directory=sys.argv[2])
bind = sys.argv[3] if mode == 'http' and len(sys.argv) > 3 else '127.0.0.1'
class Server(http.server.ThreadingHTTPServer):
    def shutdown_request(self, request):  # TLS: close_notify first, as a careful server does
        try:
            request.settimeout(2); request.unwrap()
        except Exception:
            pass
        super().shutdown_request(request)
srv = Server((bind, 0), handler)
if mode == 'https':
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(sys.argv[3], sys.argv[4])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
)";

// A server process on the host, killed and reaped on destruction.
class host_server
{
public:
    explicit host_server(std::vector<std::string> args)
    {
        int out[2];
        BOOST_REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
        pid_ = ::fork();
        BOOST_REQUIRE(pid_ >= 0);
        if (pid_ == 0)
        {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL); // not left behind by a crashed test
            ::dup2(out[1], 1);
            const int null = ::open("/dev/null", O_WRONLY);
            ::dup2(null, 2);
            std::vector<char*> argv;
            for (auto& a : args)
                argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(argv[0], argv.data());
            ::_exit(127);
        }
        ::close(out[1]);
        std::string line;
        char c;
        while (::read(out[0], &c, 1) == 1 && c != '\n')
            line += c;
        ::close(out[0]);
        port_ = std::atoi(line.c_str());
        BOOST_REQUIRE_MESSAGE(port_ > 0, "the host server did not start: " + args[1]);
    }
    ~host_server()
    {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    host_server(const host_server&) = delete;
    host_server& operator=(const host_server&) = delete;
    int port() const { return port_; }
    std::string port_text() const { return std::to_string(port_); }

private:
    pid_t pid_ = -1;
    int port_ = 0;
};

// Names pinned to the host's loopback; "files.test" allowed (any port), and the loopback
// addresses allowed as destinations (the SSRF guard refuses them otherwise); "other.test"
// has no rule.
inline sandbox::bwrap_runner_options net_runner_options(const std::string& root)
{
    sandbox::bwrap_runner_options o;
    o.root = root;
    o.proxy.resolve = {{"files.test", "127.0.0.1"}, {"other.test", "127.0.0.1"}};
    return o;
}

inline sandbox::exec_options allow_files()
{
    sandbox::exec_options o;
    o.net.mode = sandbox::net_mode::allow_list;
    o.net.rules = {{sandbox::net_action::allow, "files.test", 0},
                   {sandbox::net_action::allow, "127.0.0.1", 0}};
    o.timeout = 30s;
    return o;
}

struct net_fixture
{
    asio::io_context ioc;
    sbx_test::temp_dir root;
    shared_dir files;                         // served over http, and the scripts
    std::vector<sandbox::net_record> records; // outlives the runner (and its proxies)
    sandbox::bwrap_runner runner;

    explicit net_fixture(std::chrono::nanoseconds setup_timeout = 60s)
        : runner(ioc.get_executor(), with_setup(net_runner_options(root.str()), setup_timeout))
    {
        ::chmod(root.str().c_str(), 0777); // the sandbox user's work directory
        files.file("hello.txt", "hello from the host\n");
    }

    static sandbox::bwrap_runner_options with_setup(sandbox::bwrap_runner_options o,
                                                    std::chrono::nanoseconds setup_timeout)
    {
        o.setup_timeout = setup_timeout;
        return o;
    }

    sbx_test::run_outcome sh(const std::string& script, sandbox::exec_options o = allow_files(),
                             sandbox::http_hooks hooks = {})
    {
        sandbox::exec_request req;
        req.command = "/bin/bash"; // for /dev/tcp
        req.args = {"-c", script};
        req.options = std::move(o);
        req.options.env.inject["PATH"] = "/usr/bin:/bin";
        req.options.env.inject["HOME"] = "/tmp";
        req.on_net_record = [this](const sandbox::net_record& r) { records.push_back(r); };
        req.http = std::move(hooks);
        return sbx_test::run(ioc, runner, std::move(req), 40s);
    }

    // A session of bash running `script` under `o` (60 s at most), its records kept.
    sandbox::session_spec session(const std::string& script, sandbox::exec_options o)
    {
        sandbox::session_spec spec;
        spec.command = "/bin/bash";
        spec.args = {"-c", script};
        spec.options = std::move(o);
        spec.options.timeout = 60s;
        spec.options.env.inject["PATH"] = "/usr/bin:/bin";
        spec.on_net_record = [this](const sandbox::net_record& r) { records.push_back(r); };
        return spec;
    }

    const sandbox::net_record* find(sandbox::net_event e, sandbox::net_verdict v,
                                    const std::string& host) const
    {
        for (const auto& r : records)
            if (r.event == e && r.host == host &&
                (e == sandbox::net_event::closed || r.verdict == v))
                return &r;
        return nullptr;
    }
};

// A bare repository `dir`/repo.git of one commit (file.txt holding `content`), ready for
// git's dumb HTTP protocol.
inline void bare_repo(const fs::path& dir, const std::string& content)
{
    const fs::path repo = dir / "repo.git";
    const std::string git = "GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c "
                            "user.name=t -c user.email=t@t ";
    BOOST_REQUIRE(
        std::system(("cd " + dir.string() + " && " + git + "init -q work && cd work && " + "echo " +
                     content + " > file.txt && " + git + "add file.txt && " + git +
                     "commit -qm one && " + git + "clone -q --bare . " + repo.string() + " && cd " +
                     repo.string() + " && " + git + "update-server-info")
                        .c_str()) == 0);
}

// A package index of one wheel (PEP 503 "simple" layout) under DIR, for pip.
inline const char* const index_py = R"(import hashlib, os, sys, zipfile
root = sys.argv[1]
os.makedirs(os.path.join(root, 'simple', 'sbxdemo'), exist_ok=True)
wheel = os.path.join(root, 'sbxdemo-1.0-py3-none-any.whl')
files = {'sbxdemo/__init__.py': 'VALUE = 42\n',
         'sbxdemo-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\nName: sbxdemo\nVersion: 1.0\n',
         'sbxdemo-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n'}
with zipfile.ZipFile(wheel, 'w') as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr('sbxdemo-1.0.dist-info/RECORD', ''.join(n + ',,\n' for n in files) + 'sbxdemo-1.0.dist-info/RECORD,,\n')
digest = hashlib.sha256(open(wheel, 'rb').read()).hexdigest()
with open(os.path.join(root, 'simple', 'sbxdemo', 'index.html'), 'w') as f:
    f.write('<html><body><a href="../../sbxdemo-1.0-py3-none-any.whl#sha256=%s">sbxdemo-1.0-py3-none-any.whl</a></body></html>' % digest)
)";

inline boost::test_tools::assertion_result net_usable(boost::unit_test::test_unit_id)
{
    for (const char* p :
         {python, "/usr/bin/curl", "/usr/bin/git", "/usr/bin/openssl", "/usr/bin/bwrap"})
        if (::access(p, X_OK) != 0)
        {
            boost::test_tools::assertion_result r(false);
            r.message() << p << " is missing: the network tests need it";
            return r;
        }
    return true;
}

} // namespace sbx_net_test

#endif // SANDBOX_TEST_INTEGRATION_NET_SUPPORT_HPP
