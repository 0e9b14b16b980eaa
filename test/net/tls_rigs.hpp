// test/net/tls_rigs.hpp: what the TLS inspection tests share. Certificates from a test CA
// checked by OpenSSL's own verifier; `tls_server`, a TLS server on loopback with the server
// context; `inspect_rig`, an origin (one answer, or an echoing HTTP/1.1 server) behind an
// inspected tunnel; `proxy_rig`, the egress proxy itself with inspection in front of that
// origin. Used by tls_test.cpp and tls_cases_test.cpp (tls.md's adversarial cases).
#pragma once

#include "net/address_guard.hpp"
#include "net/egress.hpp"
#include "net/proxy.hpp"
#include "net/resolver.hpp"
#include "net/rule_set.hpp"
#include "net/tls/certificate_authority.hpp"
#include "net/tls/client_hello.hpp"
#include "net/tls/inspect.hpp"
#include "net/tls/inspector.hpp"
#include "net/tls/leaf_cache.hpp"
#include "net/tls/request_policy.hpp"
#include "net/tls/server_context.hpp"
#include "net/tls/trust.hpp"
#include "test/host_shell.hpp"
#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace sandbox;
using namespace sandbox::net;
using namespace std::chrono_literals;

namespace {

inline canonical_host host(const std::string& text)
{
    auto h = canonicalize_host(text);
    BOOST_TEST_REQUIRE(h.has_value(), text);
    return *h;
}

// A temporary directory's path of its own for one rig (the pid and a count: two rigs alive at
// once never share one).
inline std::filesystem::path rig_directory(const std::string& prefix)
{
    static std::atomic<unsigned> made{0};
    return std::filesystem::temp_directory_path() /
           (prefix + std::to_string(::getpid()) + "-" + std::to_string(++made));
}

using bytes = std::vector<unsigned char>;

// What OpenSSL's own client sends first: SNI `name`, ALPN h2 then http/1.1.
inline bytes openssl_client_hello(const std::string& name)
{
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL* ssl = SSL_new(ctx);
    BIO* in = BIO_new(BIO_s_mem());
    BIO* out = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, in, out);
    SSL_set_tlsext_host_name(ssl, name.c_str());
    static const unsigned char protos[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_set_alpn_protos(ssl, protos, sizeof protos);
    SSL_set_connect_state(ssl);
    SSL_do_handshake(ssl);
    bytes b(static_cast<std::size_t>(BIO_pending(out)));
    BIO_read(out, b.data(), static_cast<int>(b.size()));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return b;
}

inline std::unique_ptr<tls::certificate_authority>
make_ca(tls::authority_options o = {}, tls::clock::time_point now = tls::clock::now())
{
    auto ca = tls::certificate_authority::create(std::move(o), now);
    BOOST_TEST_REQUIRE(ca.has_value(), (ca ? "" : ca.error().diag.message));
    return std::move(*ca);
}

// OpenSSL's verdict on `leaf` with only the CA trusted, in strict mode, for a TLS server
// named `name` (an address when `ip`): X509_V_OK or the error.
inline int verify(const tls::certificate_authority& ca, X509* leaf, const std::string& name,
                  bool ip = false)
{
    X509_STORE* store = X509_STORE_new();
    X509_STORE_add_cert(store, ca.certificate());
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, store, leaf, nullptr);
    X509_VERIFY_PARAM* p = X509_STORE_CTX_get0_param(ctx);
    X509_VERIFY_PARAM_set_flags(p, X509_V_FLAG_X509_STRICT);
    X509_VERIFY_PARAM_set_purpose(p, X509_PURPOSE_SSL_SERVER);
    if (ip)
        X509_VERIFY_PARAM_set1_ip_asc(p, name.c_str());
    else
        X509_VERIFY_PARAM_set1_host(p, name.c_str(), name.size());
    const int ok = X509_verify_cert(ctx);
    const int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return err;
}

inline bool critical(X509* c, int nid)
{
    const int at = X509_get_ext_by_NID(c, nid, -1);
    return at >= 0 && X509_EXTENSION_get_critical(X509_get_ext(c, at)) == 1;
}

} // namespace

namespace {

// As a TLS server on `s`: the handshake, one request head, a 200 with `body(ssl)`, the close.
inline asio::awaitable<void> answer_one(asio::ssl::stream<asio::ip::tcp::socket>& s,
                                        std::function<std::string(SSL*)> body)
{
    auto [ec] = co_await s.async_handshake(asio::ssl::stream_base::server,
                                           asio::as_tuple(asio::use_awaitable));
    if (ec)
        co_return;
    std::string head;
    auto [rec, n] = co_await asio::async_read_until(s, asio::dynamic_buffer(head), "\r\n\r\n",
                                                    asio::as_tuple(asio::use_awaitable));
    if (rec)
        co_return;
    const std::string text = body(s.native_handle());
    const std::string reply = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(text.size()) +
                              "\r\nConnection: close\r\n\r\n" + text;
    co_await asio::async_write(s, asio::buffer(reply), asio::as_tuple(asio::use_awaitable));
    co_await s.async_shutdown(asio::as_tuple(asio::use_awaitable));
}

// A TLS server on loopback using the server context: each connection gets its own
// client_hello_state (kept for the test to read), answers one request with "ok", closes.
struct tls_server
{
    asio::io_context ioc;
    asio::ip::tcp::acceptor acceptor{ioc, {asio::ip::make_address("127.0.0.1"), 0}};
    std::unique_ptr<tls::certificate_authority> ca = make_ca();
    std::unique_ptr<tls::server_context> ctx;
    canonical_host connect_host;
    std::vector<std::unique_ptr<tls::client_hello_state>> states;
    std::filesystem::path dir;
    std::thread runner;

    explicit tls_server(const std::string& connect)
        : connect_host(host(connect)), dir(rig_directory("sbx-tls-test-"))
    {
        auto c = tls::server_context::create(*ca);
        BOOST_TEST_REQUIRE(c.has_value());
        ctx = std::move(*c);
        std::filesystem::create_directories(dir);
        std::ofstream(dir / "ca.pem") << ca->certificate_pem();
        asio::co_spawn(ioc, serve(), asio::detached);
        runner = std::thread([this] { ioc.run(); });
    }
    ~tls_server()
    {
        asio::post(ioc, [this] { acceptor.close(); });
        runner.join();
        std::filesystem::remove_all(dir);
    }
    std::uint16_t port() const { return acceptor.local_endpoint().port(); }
    // What the connections so far saw, read on the server's thread.
    std::vector<tls::client_hello_state> seen()
    {
        std::promise<std::vector<tls::client_hello_state>> p;
        asio::post(ioc, [&] {
            std::vector<tls::client_hello_state> v;
            for (const auto& st : states)
                v.push_back(*st);
            p.set_value(std::move(v));
        });
        return p.get_future().get();
    }
    std::size_t cached()
    {
        std::promise<std::size_t> p;
        asio::post(ioc, [&] { p.set_value(ca->cached()); });
        return p.get_future().get();
    }
    std::string ca_file() const { return (dir / "ca.pem").string(); }

    asio::awaitable<void> serve()
    {
        for (;;)
        {
            auto [ec, sock] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec)
                co_return;
            auto st = std::make_unique<tls::client_hello_state>();
            st->connect_host = connect_host;
            auto ssl = ctx->new_connection(*st);
            states.push_back(std::move(st));
            if (ssl)
                asio::co_spawn(ioc, answer(std::move(sock), *ssl), asio::detached);
        }
    }
    static asio::awaitable<void> answer(asio::ip::tcp::socket sock, SSL* ssl)
    {
        asio::ssl::stream<asio::ip::tcp::socket> s(std::move(sock), ssl);
        co_await answer_one(s, [](SSL*) { return std::string("ok"); });
    }
};

// `n` bytes of a pattern with no period a misplaced record would hide.
inline std::string pattern(std::size_t n)
{
    std::string out(n, '\0');
    std::uint32_t x = 2463534242u;
    for (auto& c : out)
    {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        c = static_cast<char>('a' + x % 26);
    }
    return out;
}

// Runs a shell command line, its stdout captured (stderr dropped).
inline sbx_test::shell_outcome run(const std::string& line)
{
    return sbx_test::host_shell(line + " 2>/dev/null");
}

inline std::string curl(const tls_server& s, const std::string& name, bool trust = true)
{
    const std::string port = std::to_string(s.port());
    std::string line = "curl -sS --max-time 10 --noproxy '*' ";
    if (trust)
        line += "--cacert " + s.ca_file() + " ";
    if (name != "127.0.0.1")
        line += "--resolve " + name + ":" + port + ":127.0.0.1 ";
    return line + "https://" + name + ":" + port + "/";
}

} // namespace

namespace {

// An origin speaking TLS with a leaf of its own CA for `name` (whatever SNI it gets), which
// answers one request with what it saw: the SNI and the ALPN. Or, `silent`, an origin that
// accepts and never speaks.
// A stand-in for the egress after CONNECT: each accepted client gets a connection to the
// origin and the inspected tunnel between them; the totals are kept.
struct inspect_rig
{
    asio::io_context ioc;
    asio::ip::tcp::acceptor origin_acceptor{ioc, {asio::ip::make_address("127.0.0.1"), 0}};
    asio::ip::tcp::acceptor proxy_acceptor{ioc, {asio::ip::make_address("127.0.0.1"), 0}};
    std::unique_ptr<tls::certificate_authority> origin_ca = make_ca();
    std::unique_ptr<tls::certificate_authority> proxy_ca = make_ca();
    asio::ssl::context origin_tls{asio::ssl::context::tls_server};
    std::unique_ptr<tls::server_context> server;
    std::unique_ptr<tls::origin_context> origins;
    tls::origin_sessions sessions; // before the io_context's coroutines that use it end
    tls::inspect_limits limits;
    canonical_host connect_host = host("api.test");
    std::vector<tls::inspect_totals> totals;
    std::vector<asio::ip::tcp::socket> held; // a silent origin's connections
    bool silent = false;
    std::size_t body_bytes = 0; // the origin's answer: this many bytes of a pattern, if set
    bool report_reuse = false;  // the origin's answer: whether it resumed our session
    bool truncate =
        false; // the origin's answer: close-delimited, cut by a TCP end (no close_notify)
    bool peek_first = false;
    bool echo = false; // the origin: HTTP/1.1 keep-alive, each answer the head it got
    std::vector<tls::hello_peek> peeks;
    std::optional<tls::request_policy> policy; // the tunnels' request rules and headers
    std::optional<sandbox::http_hooks> hooks;  // the caller's hooks, run on `ioc`
    std::size_t hook_body_cap = 0;             // bodies they see whole (0: heads only)
    std::uint64_t tunnels_opened = 0;
    struct seen_request
    {
        bool allowed;
        std::string reason;
        sandbox::net_http_record http;
    };
    std::vector<seen_request> requests;
    int origin_requests = 0; // requests the echoing origin answered
    std::filesystem::path dir;
    std::thread runner;

    // `expired_for`: the origin's certificate ended that long ago (its CA is still valid).
    inspect_rig(const std::string& origin_name, bool trust_origin_ca, bool silent_origin = false,
                std::chrono::hours expired_for = 0h)
        : silent(silent_origin), dir(rig_directory("sbx-tls-inspect-"))
    {
        auto made = tls::clock::now();
        if (expired_for > 0h)
        {
            made -= expired_for;
            tls::authority_options o;
            o.lifetime = std::chrono::hours(24 * 30);
            o.leaf_lifetime = std::chrono::hours(1); // from `made` - 1 h (the backdate) to `made`
            origin_ca = make_ca(o, made);
        }
        auto leaf = origin_ca->mint(host(origin_name), made);
        BOOST_TEST_REQUIRE(leaf.has_value());
        SSL_CTX_use_certificate(origin_tls.native_handle(), (*leaf)->cert);
        SSL_CTX_use_PrivateKey(origin_tls.native_handle(), origin_ca->leaf_key());
        static const unsigned char h11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
        SSL_CTX_set_alpn_select_cb(
            origin_tls.native_handle(),
            [](SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned int inlen, void*) {
                unsigned char* chosen = nullptr;
                if (SSL_select_next_proto(&chosen, outlen, h11, sizeof h11, in, inlen) !=
                    OPENSSL_NPN_NEGOTIATED)
                    return SSL_TLSEXT_ERR_NOACK;
                *out = chosen;
                return SSL_TLSEXT_ERR_OK;
            },
            nullptr);
        auto s = tls::server_context::create(*proxy_ca);
        BOOST_TEST_REQUIRE(s.has_value());
        server = std::move(*s);
        tls::origin_trust trust;
        trust.system_roots = true;
        if (trust_origin_ca)
            trust.extra_roots_pem.push_back(origin_ca->certificate_pem());
        auto o = tls::origin_context::create(trust);
        BOOST_TEST_REQUIRE(o.has_value());
        origins = std::move(*o);
        std::filesystem::create_directories(dir);
        std::ofstream(dir / "proxy-ca.pem") << proxy_ca->certificate_pem();
        std::ofstream(dir / "origin-ca.pem") << origin_ca->certificate_pem();
        asio::co_spawn(ioc, serve_origin(), asio::detached);
        asio::co_spawn(ioc, serve_proxy(), asio::detached);
    }
    void start()
    {
        runner = std::thread([this] { ioc.run(); });
    }
    ~inspect_rig()
    {
        asio::post(ioc, [this] {
            origin_acceptor.close();
            proxy_acceptor.close();
            held.clear();
        });
        if (runner.joinable())
            runner.join();
        std::filesystem::remove_all(dir);
    }
    std::vector<tls::inspect_totals> seen()
    {
        std::promise<std::vector<tls::inspect_totals>> p;
        asio::post(ioc, [&] { p.set_value(totals); });
        return p.get_future().get();
    }
    // The totals of `n` tunnels: a tunnel ends (its close_notify exchange) a little after
    // the client has its answer.
    std::vector<tls::inspect_totals> ended(std::size_t n)
    {
        auto t = seen();
        for (int i = 0; i < 500 && t.size() < n; ++i, t = seen())
            std::this_thread::sleep_for(10ms);
        return t;
    }
    std::size_t minted()
    {
        std::promise<std::size_t> p;
        asio::post(ioc, [&] { p.set_value(proxy_ca->cached()); });
        return p.get_future().get();
    }
    // curl through the tunnel to an origin the proxy must not vouch for: no handshake for the
    // client (curl's 35), nothing minted, the tunnel's end `origin_untrusted` with `why` in
    // OpenSSL's reason.
    void expect_untrusted_origin(const std::string& why)
    {
        auto r = run(curl("proxy-ca.pem"));
        BOOST_TEST(r.status == 35);
        BOOST_TEST(r.out.empty());
        const auto t = ended(1);
        BOOST_TEST_REQUIRE(t.size() == 1u);
        BOOST_TEST(t[0].reason == "origin_untrusted");
        BOOST_TEST(t[0].detail.find(why) != std::string::npos, t[0].detail);
        BOOST_TEST(minted() == 0u);
    }
    std::string curl(const std::string& ca_file) const
    {
        const std::string port = std::to_string(proxy_acceptor.local_endpoint().port());
        return "curl -sS --max-time 10 --noproxy '*' --cacert " + (dir / ca_file).string() +
               " --resolve api.test:" + port + ":127.0.0.1 https://api.test:" + port + "/";
    }

    // curl through the tunnel to `path` (after `extra` options), trusting the proxy's CA.
    std::string curl_to(const std::string& extra, const std::string& path) const
    {
        const std::string port = std::to_string(proxy_acceptor.local_endpoint().port());
        return "curl -sS --max-time 10 --noproxy '*' --cacert " + (dir / "proxy-ca.pem").string() +
               " --resolve api.test:" + port + ":127.0.0.1 --resolve other.test:" + port +
               ":127.0.0.1 " + extra + " 'https://api.test:" + port + path + "'";
    }
    // A sized and a chunked upload of the same 300,000 bytes through the tunnel, each
    // answered by the echoing origin with what it got; the file's path.
    std::string two_uploads() const
    {
        const std::string file = (dir / "upload.bin").string();
        std::ofstream(file) << pattern(300000);
        auto sized = run(curl_to("--data-binary @" + file + " -H 'Expect:'", "/up"));
        BOOST_TEST(sized.out.find("body=300000\n") != std::string::npos, sized.out);
        auto chunked = run(curl_to(
            "--data-binary @" + file + " -H 'Transfer-Encoding: chunked' -H 'Expect:'", "/up"));
        BOOST_TEST(chunked.out.find("body=300000\n") != std::string::npos, chunked.out);
        return file;
    }
    // python3 runs `script` with `s`, a TLS connection to the tunnel for api.test made with
    // `ctx` (which trusts the proxy's CA) and `options` of wrap_socket; `PORT` is the port.
    std::string python_client(const std::string& script, const std::string& options = "") const
    {
        const std::string port = std::to_string(proxy_acceptor.local_endpoint().port());
        return "python3 -c \"import http.client, socket, ssl, sys, time\n"
               "PORT = " +
               port + "\nctx = ssl.create_default_context(cafile='" +
               (dir / "proxy-ca.pem").string() +
               "')\n"
               "s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', PORT)), "
               "server_hostname='api.test'" +
               options + ")\ns.settimeout(20)\n" + script + "\"";
    }
    // python3 sends `request` (a Python bytes literal) on one connection and prints what
    // comes back until the end.
    std::string python_raw(const std::string& request) const
    {
        return python_client("try: s.sendall(" + request +
                             ")\n"
                             "except OSError: pass\n"
                             "data = b''\n"
                             "try:\n"
                             "    while d := s.recv(65536): data += d\n"
                             "except (ssl.SSLError, OSError): pass\n"
                             "print(data.decode(errors='replace'))\n");
    }

    asio::awaitable<void> serve_origin()
    {
        for (;;)
        {
            auto [ec, sock] =
                co_await origin_acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec)
                co_return;
            if (silent)
                held.push_back(std::move(sock));
            else if (echo)
                asio::co_spawn(ioc, echo_origin(std::move(sock)), asio::detached);
            else
                asio::co_spawn(ioc, answer_origin(std::move(sock)), asio::detached);
        }
    }
    asio::awaitable<void> answer_origin(asio::ip::tcp::socket sock)
    {
        asio::ssl::stream<asio::ip::tcp::socket> s(std::move(sock), origin_tls);
        if (truncate)
        {
            co_await cut_short(s);
            co_return;
        }
        const std::size_t big = body_bytes;
        const bool reuse = report_reuse;
        co_await answer_one(s, [big, reuse](SSL* ssl) {
            if (big > 0)
                return pattern(big);
            if (reuse)
                return std::string(SSL_session_reused(ssl) ? "resumed" : "full");
            const char* sni = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
            const unsigned char* alpn = nullptr;
            unsigned int alpn_len = 0;
            SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
            return "sni=" + std::string(sni ? sni : "") +
                   " alpn=" + std::string(reinterpret_cast<const char*>(alpn), alpn_len);
        });
    }
    // The echoing origin's answers of their own: `/stream`, a chunked body in two events 400 ms
    // apart (as a server-sent stream); `/pattern/N`, N bytes of the pattern; `/trailer`, a
    // chunked body with a trailer; `/close-delimited/N`; `/extended` (a chunk extension).
    asio::awaitable<bool> special_answer(asio::ssl::stream<asio::ip::tcp::socket>& s,
                                         std::string_view target, boost::system::error_code& ec)
    {
        if (target == "/stream")
        {
            static const std::string first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                             "\r\n7\r\nevent 1\r\n";
            static const std::string second = "7\r\nevent 2\r\n0\r\n\r\n";
            std::tie(ec, std::ignore) = co_await asio::async_write(
                s, asio::buffer(first), asio::as_tuple(asio::use_awaitable));
            asio::steady_timer pause(ioc, 400ms);
            co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
            if (!ec)
                std::tie(ec, std::ignore) = co_await asio::async_write(
                    s, asio::buffer(second), asio::as_tuple(asio::use_awaitable));
            co_return true;
        }
        if (target.starts_with("/close-delimited/")) // a body the connection's end frames
        {
            const std::string answer = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" +
                                       pattern(std::stoul(std::string(target.substr(17))));
            std::tie(ec, std::ignore) = co_await asio::async_write(
                s, asio::buffer(answer), asio::as_tuple(asio::use_awaitable));
            co_await s.async_shutdown(asio::as_tuple(asio::use_awaitable));
            ec = asio::error::shut_down; // no more requests on this connection, shut down
            co_return true;
        }
        if (target == "/trailer") // a chunked body with a trailer after its last chunk
        {
            static const std::string answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                              "Trailer: X-Checksum\r\n\r\n5\r\nhello\r\n0\r\n"
                                              "X-Checksum: 5d41402a\r\n\r\n";
            std::tie(ec, std::ignore) = co_await asio::async_write(
                s, asio::buffer(answer), asio::as_tuple(asio::use_awaitable));
            co_return true;
        }
        if (target == "/extended") // a chunk extension, and a trailer
        {
            static const std::string answer = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
                                              "\r\n5;secret=x\r\nhello\r\n0\r\n\r\n";
            std::tie(ec, std::ignore) = co_await asio::async_write(
                s, asio::buffer(answer), asio::as_tuple(asio::use_awaitable));
            co_return true;
        }
        if (!target.starts_with("/pattern/"))
            co_return false;
        const std::string body = pattern(std::stoul(std::string(target.substr(9))));
        const std::string head =
            "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
        std::tie(ec, std::ignore) =
            co_await asio::async_write(s, asio::buffer(head), asio::as_tuple(asio::use_awaitable));
        if (!ec)
            std::tie(ec, std::ignore) = co_await asio::async_write(
                s, asio::buffer(body), asio::as_tuple(asio::use_awaitable));
        co_return true;
    }
    // Answers requests until the client closes: 100 Continue when asked, 101 for an
    // Upgrade (then every byte back as it came), `special_answer`'s, else 200 whose body is
    // what it got.
    asio::awaitable<void> echo_origin(asio::ip::tcp::socket sock)
    {
        namespace http = boost::beast::http;
        asio::ssl::stream<asio::ip::tcp::socket> s(std::move(sock), origin_tls);
        auto [ec] = co_await s.async_handshake(asio::ssl::stream_base::server,
                                               asio::as_tuple(asio::use_awaitable));
        boost::beast::flat_buffer buf;
        while (!ec)
        {
            http::request_parser<http::string_body> p;
            p.header_limit(128 * 1024); // the proxy's cap (64 KiB) is what is tested
            p.body_limit(64 * 1024 * 1024);
            std::tie(ec, std::ignore) =
                co_await http::async_read_header(s, buf, p, asio::as_tuple(asio::use_awaitable));
            if (ec)
                break;
            if (p.get()[http::field::expect] == "100-continue")
            {
                static const std::string cont = "HTTP/1.1 100 Continue\r\n\r\n";
                co_await asio::async_write(s, asio::buffer(cont),
                                           asio::as_tuple(asio::use_awaitable));
            }
            std::tie(ec, std::ignore) =
                co_await http::async_read(s, buf, p, asio::as_tuple(asio::use_awaitable));
            if (ec)
                break;
            ++origin_requests;
            const auto& req = p.get();
            if (req.count(http::field::upgrade))
            {
                static const std::string up = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "
                                              "echo\r\nConnection: Upgrade\r\n\r\n";
                co_await asio::async_write(s, asio::buffer(up),
                                           asio::as_tuple(asio::use_awaitable));
                std::string raw(static_cast<const char*>(buf.data().data()), buf.size());
                for (std::array<char, 4096> b;;)
                {
                    if (!raw.empty())
                        std::tie(ec, std::ignore) = co_await asio::async_write(
                            s, asio::buffer(raw), asio::as_tuple(asio::use_awaitable));
                    std::size_t n = 0;
                    if (!ec)
                        std::tie(ec, n) = co_await s.async_read_some(
                            asio::buffer(b), asio::as_tuple(asio::use_awaitable));
                    if (ec)
                        co_return;
                    raw.assign(b.data(), n);
                }
            }
            if (co_await special_answer(s, req.target(), ec))
                continue;
            std::string text =
                std::string(req.method_string()) + " " + std::string(req.target()) + "\n";
            for (const auto& f : req)
                text.append(f.name_string()).append(": ").append(f.value()).append("\n");
            text += "body=" + std::to_string(req.body().size()) + "\n";
            if (req.method() == http::verb::head) // a head that says how long the body is
            {
                const std::string head =
                    "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(text.size()) +
                    "\r\n\r\n";
                std::tie(ec, std::ignore) = co_await asio::async_write(
                    s, asio::buffer(head), asio::as_tuple(asio::use_awaitable));
                continue;
            }
            http::response<http::string_body> res{http::status::ok, 11};
            res.body() = std::move(text);
            res.keep_alive(req.keep_alive());
            res.prepare_payload();
            std::tie(ec, std::ignore) =
                co_await http::async_write(s, res, asio::as_tuple(asio::use_awaitable));
            if (!req.keep_alive())
                break;
        }
        if (ec != asio::error::shut_down)
            co_await s.async_shutdown(asio::as_tuple(asio::use_awaitable));
    }
    std::vector<seen_request> requests_seen()
    {
        return on_loop([&] { return requests; });
    }
    // What `f` returns, called on the loop (where the proxy, the origin and the hooks run).
    template <class F> auto on_loop(F f) -> decltype(f())
    {
        std::promise<decltype(f())> p;
        asio::post(ioc, [&] { p.set_value(f()); });
        return p.get_future().get();
    }
    int origin_requests_seen()
    {
        return on_loop([&] { return origin_requests; });
    }
    // A body whose end is the connection's, then a TCP end with no close_notify: what an
    // attacker on the path to the origin can make of any close-delimited response.
    static asio::awaitable<void> cut_short(asio::ssl::stream<asio::ip::tcp::socket>& s)
    {
        auto [ec] = co_await s.async_handshake(asio::ssl::stream_base::server,
                                               asio::as_tuple(asio::use_awaitable));
        std::string head;
        if (!ec)
            std::tie(ec, std::ignore) = co_await asio::async_read_until(
                s, asio::dynamic_buffer(head), "\r\n\r\n", asio::as_tuple(asio::use_awaitable));
        static const std::string reply = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\npartial";
        if (!ec)
            co_await asio::async_write(s, asio::buffer(reply), asio::as_tuple(asio::use_awaitable));
        boost::system::error_code ignored;
        s.next_layer().close(ignored);
    }
    asio::awaitable<void> serve_proxy()
    {
        for (;;)
        {
            auto [ec, client] =
                co_await proxy_acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec)
                co_return;
            asio::co_spawn(ioc, tunnel(std::move(client)), asio::detached);
        }
    }
    asio::awaitable<void> tunnel(asio::ip::tcp::socket client)
    {
        asio::ip::tcp::socket origin(ioc);
        auto [ec] = co_await origin.async_connect(origin_acceptor.local_endpoint(),
                                                  asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;
        std::string first;
        if (peek_first) // as the proxy does: read the ClientHello, decide, hand it over
            peeks.push_back(co_await tls::read_client_hello(
                client, first, std::chrono::steady_clock::now() + std::chrono::seconds(10)));
        // Built in their own statements: GCC 12 mishandles braced temporaries in co_await.
        tls::leg from_client{std::move(client), std::move(first)};
        tls::leg to_origin{std::move(origin)};
        tls::http_tunnel http;
        http.policy = policy ? &*policy : nullptr;
        http.host = connect_host;
        http.port = proxy_acceptor.local_endpoint().port(); // what curl's Host names
        http.hooks = hooks ? &*hooks : nullptr;
        http.connection = ++tunnels_opened;
        http.body_cap = hook_body_cap;
        http.on_request = [this](bool allowed, std::string reason, sandbox::net_http_record h) {
            requests.push_back({allowed, std::move(reason), std::move(h)});
        };
        totals.push_back(co_await tls::inspect(std::move(from_client), std::move(to_origin),
                                               connect_host, *server, *origins, limits, http,
                                               &sessions));
    }
};

} // namespace

namespace {

// The egress proxy itself with inspection, in front of the rig's origin: curl goes through
// it with -x, as a command in a sandbox does through HTTPS_PROXY.
struct proxy_rig
{
    std::vector<net_record> records;
    std::shared_ptr<egress> gate;
    std::unique_ptr<egress_proxy> proxy;
    std::uint16_t port = 0;
    // With `via_upstream`: an HTTP CONNECT proxy in front of the origin (net_mode::proxy),
    // and the request heads it got (kept past the rig's loop, which its coroutines use).
    std::optional<asio::ip::tcp::acceptor> upstream;
    std::vector<std::string> upstream_heads;
    inspect_rig rig;
    tls::inspector* inspection = nullptr; // the proxy's (its CA and leaf cache)

    proxy_rig(std::vector<std::string> inspect, std::vector<std::string> exclude,
              std::chrono::milliseconds handshake_timeout = 10s, std::size_t max_inspected = 256,
              bool via_upstream = false,
              std::function<void(tls::inspection_options&, inspect_rig&)> tune = {},
              sni_mode sni = sni_mode::record, std::chrono::milliseconds client_hello = 10s)
        : rig("api.test", true)
    {
        const auto lo = asio::ip::make_address("127.0.0.1");
        net_policy p;
        p.mode = net_mode::allow_list;
        p.rules = {net_rule{net_action::allow, "127.0.0.1", 0},
                   net_rule{net_action::allow, "api.test", 0}};
        egress_config cfg;
        cfg.mode = net_mode::allow_list;
        cfg.rules = rule_set::compile(p).value();
        cfg.dns = std::make_shared<static_resolver>(
            std::map<std::string, std::vector<net::address>>{{"api.test", {lo}}}, nullptr);
        cfg.guard = address_guard{};
        cfg.on_record = [this](const net_record& r) { records.push_back(r); };
        cfg.sni = sni;
        cfg.limits.client_hello_timeout = client_hello;
        if (via_upstream)
        {
            upstream.emplace(rig.ioc, asio::ip::tcp::endpoint{lo, 0});
            cfg.mode = net_mode::proxy;
            cfg.has_allow_rules = true;
            cfg.upstream = parse_upstream("http://127.0.0.1:" +
                                          std::to_string(upstream->local_endpoint().port()))
                               .value();
            asio::co_spawn(rig.ioc, serve_upstream(), asio::detached);
        }
        tls::inspection_options io;
        io.hosts = std::move(inspect);
        io.exclude_hosts = std::move(exclude);
        io.origins.extra_roots_pem = {rig.origin_ca->certificate_pem()};
        io.limits.handshake_timeout = handshake_timeout;
        io.limits.max_tunnels = max_inspected;
        if (tune)
            tune(io, rig);
        auto in = tls::inspector::create(std::move(io));
        BOOST_TEST_REQUIRE(in.has_value());
        std::ofstream(rig.dir / "inspect-ca.pem") << (*in)->authority().certificate_pem();
        inspection = in->get();
        cfg.inspection = std::move(*in);
        gate = std::make_shared<egress>(rig.ioc.get_executor(), std::move(cfg));
        proxy = std::make_unique<egress_proxy>(gate);
        asio::ip::tcp::acceptor a(rig.ioc, {lo, 0});
        port = a.local_endpoint().port();
        proxy->add_listener(std::move(a));
        rig.start();
    }
    ~proxy_rig()
    {
        std::promise<void> drained;
        asio::post(rig.ioc, [&] {
            proxy->stop([&] { drained.set_value(); });
            upstream.reset(); // on the loop, while it runs
        });
        drained.get_future().wait();
    }
    std::string curl(const std::string& ca_file, const std::string& scheme = "https") const
    {
        return "curl -sS --max-time 10 --cacert " + (rig.dir / ca_file).string() +
               " -x http://127.0.0.1:" + std::to_string(port) + (scheme == "http" ? " -p " : " ") +
               scheme +
               "://api.test:" + std::to_string(rig.origin_acceptor.local_endpoint().port()) + "/";
    }
    // The upstream: each client's CONNECT head kept, then a connection to the rig's origin
    // whatever it names, relayed.
    asio::awaitable<void> serve_upstream()
    {
        for (;;)
        {
            auto [ec, s] = co_await upstream->async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec)
                co_return;
            asio::co_spawn(rig.ioc, upstream_tunnel(std::move(s)), asio::detached);
        }
    }
    asio::awaitable<void> upstream_tunnel(asio::ip::tcp::socket s)
    {
        std::string head;
        auto [ec, n] = co_await asio::async_read_until(s, asio::dynamic_buffer(head), "\r\n\r\n",
                                                       asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;
        upstream_heads.push_back(head.substr(0, n));
        asio::ip::tcp::socket to(rig.ioc);
        std::tie(ec) = co_await to.async_connect(rig.origin_acceptor.local_endpoint(),
                                                 asio::as_tuple(asio::use_awaitable));
        static const std::string ok = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (!ec)
            std::tie(ec, std::ignore) = co_await asio::async_write(
                s, asio::buffer(ok), asio::as_tuple(asio::use_awaitable));
        if (!ec)
            co_await relay(s, to, head.substr(n), {}, 30s);
    }
    // Leaves in the proxy's cache.
    std::size_t minted()
    {
        return rig.on_loop([&] { return inspection->authority().cached(); });
    }
    // The closed records so far, read on the loop.
    std::vector<net_record> closed(std::size_t n)
    {
        std::vector<net_record> out;
        for (int i = 0; i < 500; ++i)
        {
            std::promise<std::vector<net_record>> p;
            asio::post(rig.ioc, [&] {
                std::vector<net_record> c;
                for (const auto& r : records)
                    if (r.event == net_event::closed)
                        c.push_back(r);
                p.set_value(std::move(c));
            });
            out = p.get_future().get();
            if (out.size() >= n)
                break;
            std::this_thread::sleep_for(10ms);
        }
        return out;
    }
};

// Python's ssl through the proxy of `f`: a CONNECT to `connect_host` (the origin's port),
// the status line it got, then TLS with `sni` trusting `ca_file` (no name check when not
// `check_name`; no name sent when `sni` is empty), one `GET /` with Connection: close and
// every byte of the answer; or the handshake's error class and reason.
inline std::string through_proxy(const proxy_rig& f, const std::string& connect_host,
                                 const std::string& sni, const std::string& ca_file,
                                 bool check_name)
{
    const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
    return run("python3 -c \"import socket, ssl\n"
               "s = socket.create_connection(('127.0.0.1', " +
               std::to_string(f.port) +
               "))\n"
               "s.settimeout(20)\n"
               "s.sendall(b'CONNECT " +
               connect_host + ":" + origin + " HTTP/1.1\\r\\nHost: " + connect_host + ":" + origin +
               "\\r\\n\\r\\n')\n"
               "head = b''\n"
               "while not head.endswith(b'\\r\\n\\r\\n'):\n"
               "    head += s.recv(1)\n"
               "print(head.split(b'\\r\\n')[0].decode())\n"
               "ctx = ssl.create_default_context(cafile='" +
               (f.rig.dir / ca_file).string() +
               "')\nctx.check_hostname = " + (check_name ? "True" : "False") +
               "\n"
               "try:\n"
               "    t = ctx.wrap_socket(s, server_hostname=" +
               (sni.empty() ? std::string("None") : "'" + sni + "'") +
               ")\n"
               "except (ssl.SSLError, OSError) as e:\n"
               "    print('handshake failed', type(e).__name__, getattr(e, 'reason', ''))\n"
               "    raise SystemExit(0)\n"
               "t.sendall(b'GET / HTTP/1.1\\r\\nHost: api.test:" +
               origin +
               "\\r\\nConnection: close\\r\\n\\r\\n')\n"
               "data = b''\n"
               "try:\n"
               "    while d := t.recv(65536): data += d\n"
               "except (ssl.SSLError, OSError): pass\n"
               "print(data.decode(errors='replace').split('\\r\\n\\r\\n')[-1])\n\"")
        .out;
}

} // namespace
