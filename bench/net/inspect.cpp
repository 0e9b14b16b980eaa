// bench/net/inspect.cpp: TLS inspection's tunnel figures against the plain CONNECT tunnel in
// the same run (tls.md M3, M4, M6, M8). Two proxies on io_context threads of their own, one
// inspecting origin.test, one relaying it; an OpenSSL origin on 127.0.0.1 (a leaf of a CA of
// its own, which the inspecting proxy is told to trust); blocking OpenSSL clients that trust
// both CAs, verify the name and never resume a session (full handshakes both legs).
//   inspected_setup_p50 / _p99   us for connect + CONNECT + TLS handshake; baseline: the
//                                same through the plain tunnel (the client's TLS then ends at
//                                the origin). Target M4: added p50 at most 1.5 ms, p99 5 ms
//   inspected_setup_added_p50    the difference at p50 (no baseline)
//   ..._origin_resumed           the same when the origin gives session tickets: the
//                                proxy's origin leg resumes (its clients never do)
//   inspected_setup_proxy_cpu    us of proxy thread cpu per setup (both handshakes; the leaf
//                                from the cache); baseline: the plain proxy's. Target M3:
//                                at most 1.3 ms added
//   inspected_throughput         MB/s client to origin, one HTTP upload (TLS both ends, 64 KiB
//                                writes; the inspecting proxy parses the HTTP);
//                                baseline: the plain tunnel. Target M6: ratio at least 0.5
//   idle_inspected_tunnel_memory KiB of RSS per idle inspected tunnel (client, proxy and
//                                origin in this process); baseline: per idle plain TLS tunnel
//   idle_inspected_tunnel_added_memory  the difference: what the proxy holds per inspected
//                                tunnel (two SSL objects and the pumps). Target M8: 64 KiB
//   inspected_request_p50        us per small GET on a kept connection (the answer read
//                                whole); baseline: the same through the plain tunnel
//   inspected_request_with_rules_p50 / _p99  the same with request rules (an allow, a deny)
//                                and an injected header
//   inspected_request_with_hooks_p50 / _p99  the same with a request hook (adds a header)
//                                and a response hook (allows), coroutines on the proxy's loop
//   inspected_throughput_with_hooks  inspected_throughput with those hooks (tls.md M6: "hooks
//                                present but header-only")
//   inspected_throughput_with_body_hooks  the same with body hooks too (each window of the
//                                upload shown, 64 KiB at most, and allowed); baseline: the
//                                header-only hooks in the same rounds. Target M7: ratio at
//                                least 0.8
//   inspected_setup_openssl_cpu  us of thread cpu OpenSSL itself spends on the proxy's two
//                                roles of one inspected setup, in memory (no socket, no
//                                loop): the client leg's server side (our server context, the
//                                leaf from its cache) and the origin leg's client side (our
//                                origin context, verifying), each against an OpenSSL peer
//                                whose work is not counted; baseline: inspected_setup_proxy_cpu
//                                of the same run minus the plain proxy's (what the proxy
//                                adds per setup). The ratio is the share of M3 that is
//                                OpenSSL's handshakes alone
//   opaque_setup_sni_record_p50  us for connect + CONNECT + TLS handshake through a tunnel
//                                that is not inspected, its ClientHello read and its name
//                                checked (sni_check record, the default); baseline: the same
//                                with the check off
//   opaque_setup_sni_record_proxy_cpu  us of proxy thread cpu per such setup; baseline: off
//   inspected_call_setup_p50     us to prepare a call's network with net.mitm (the egress
//                                config with its CA and contexts, the trust bundle's sealed
//                                file); baseline: the same config without inspection
#include "cases.hpp"
#include "rig.hpp"

#include "bench/common.hpp"
#include "host/canonical.hpp"
#include "net/tls/certificate_authority.hpp"
#include "net/tls/inspector.hpp"
#include "net/tls/trust.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>

namespace net_bench {

namespace {

namespace tls = sandbox::net::tls;
using steady = std::chrono::steady_clock;

constexpr const char* origin_name = "origin.test";

[[noreturn]] void die(const char* what)
{
    std::fprintf(stderr, "net_bench: %s\n", what);
    ERR_print_errors_fp(stderr);
    std::exit(1);
}

std::unique_ptr<tls::certificate_authority> make_ca(const char* name)
{
    tls::authority_options o;
    o.name = name;
    auto ca = tls::certificate_authority::create(o);
    if (!ca)
        die("cannot make a CA");
    return std::move(*ca);
}

// The origin: TLS on 127.0.0.1 for origin.test. Each connection handshakes in a thread of
// its own, then is held (idle tunnels) or drained to its end, counting into `received`.
class tls_origin
{
public:
    explicit tls_origin(const tls::certificate_authority& ca)
        : ctx_(SSL_CTX_new(TLS_server_method()))
    {
        auto leaf = ca.mint(*sandbox::net::canonicalize_host(origin_name), tls::clock::now());
        if (!leaf || SSL_CTX_use_certificate(ctx_, (*leaf)->cert) != 1 ||
            SSL_CTX_use_PrivateKey(ctx_, ca.leaf_key()) != 1)
            die("cannot set up the origin");
        SSL_CTX_set_mode(ctx_, SSL_MODE_RELEASE_BUFFERS);
    }
    ~tls_origin()
    {
        acceptor_.reset();
        while (serving_.load() > 0) // the connections' threads (detached) see their ends
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        release_held();
        SSL_CTX_free(ctx_);
    }
    std::uint16_t port() const { return acceptor_->port(); }
    void hold(bool on) { hold_ = on; }
    /// Answer HTTP requests (else: read and count until the end).
    void answer(bool on) { answer_ = on; }
    /// Session tickets for the connections to come (none: every handshake is a full one).
    void tickets(bool on) { SSL_CTX_set_num_tickets(ctx_, on ? 2 : 0); }
    std::size_t held() const
    {
        std::lock_guard lock(m_);
        return held_.size();
    }
    void release_held()
    {
        std::lock_guard lock(m_);
        for (SSL* s : held_)
        {
            ::close(SSL_get_fd(s));
            SSL_free(s);
        }
        held_.clear();
    }
    std::atomic<std::uint64_t> received{0};

private:
    void accepted(int fd)
    {
        ++serving_;
        std::thread([this, fd] {
            serve(fd);
            --serving_;
        }).detach();
    }
    void serve(int fd)
    {
        SSL* s = SSL_new(ctx_);
        SSL_set_fd(s, fd);
        if (SSL_accept(s) != 1)
        {
            SSL_free(s);
            ::close(fd);
            return;
        }
        if (hold_)
        {
            std::lock_guard lock(m_);
            held_.push_back(s);
            return;
        }
        if (answer_)
            return answer_requests(s, fd);
        std::vector<char> buf(1 << 16);
        for (int k; (k = SSL_read(s, buf.data(), static_cast<int>(buf.size()))) > 0;)
            received += static_cast<std::uint64_t>(k);
        SSL_free(s);
        ::close(fd);
    }

    // Each request head (no body) answered with a two-byte body, until the client ends.
    static void answer_requests(SSL* s, int fd)
    {
        static const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        std::string got;
        std::vector<char> buf(1 << 14);
        for (int k; (k = SSL_read(s, buf.data(), static_cast<int>(buf.size()))) > 0;)
        {
            got.append(buf.data(), static_cast<std::size_t>(k));
            for (std::size_t end; (end = got.find("\r\n\r\n")) != std::string::npos;)
            {
                got.erase(0, end + 4);
                if (SSL_write(s, ok.data(), static_cast<int>(ok.size())) <= 0)
                    break;
            }
        }
        SSL_free(s);
        ::close(fd);
    }

    SSL_CTX* ctx_;
    std::atomic<bool> hold_{false};
    std::atomic<bool> answer_{false};
    mutable std::mutex m_;
    std::vector<SSL*> held_;
    std::atomic<int> serving_{0};
    std::unique_ptr<loopback_acceptor> acceptor_ =
        std::make_unique<loopback_acceptor>([this](int fd) { accepted(fd); });
};

// A client that trusts both CAs, checks the name, offers http/1.1 and never resumes.
class tls_client
{
public:
    tls_client(const tls::certificate_authority& a, const tls::certificate_authority& b)
        : ctx_(SSL_CTX_new(TLS_client_method()))
    {
        X509_STORE* store = SSL_CTX_get_cert_store(ctx_);
        X509_STORE_add_cert(store, a.certificate());
        X509_STORE_add_cert(store, b.certificate());
        SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
        SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_mode(ctx_, SSL_MODE_RELEASE_BUFFERS);
        static const unsigned char h11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
        SSL_CTX_set_alpn_protos(ctx_, h11, sizeof h11);
    }
    ~tls_client() { SSL_CTX_free(ctx_); }

    // A client SSL for origin.test with no socket yet (the caller gives it BIOs).
    SSL* fresh() const
    {
        SSL* s = SSL_new(ctx_);
        SSL_set_tlsext_host_name(s, origin_name);
        SSL_set1_host(s, origin_name);
        SSL_set_connect_state(s);
        return s;
    }
    // A TLS connection to origin.test through the proxy at `proxy_port`.
    SSL* open(std::uint16_t proxy_port, std::uint16_t origin_port) const
    {
        const int fd = dial(proxy_port);
        open_tunnel(fd, origin_port, origin_name);
        SSL* s = SSL_new(ctx_);
        SSL_set_fd(s, fd);
        SSL_set_tlsext_host_name(s, origin_name);
        SSL_set1_host(s, origin_name);
        if (SSL_connect(s) != 1)
            die("the client's handshake failed");
        return s;
    }
    static void close(SSL* s)
    {
        const int fd = SSL_get_fd(s);
        SSL_free(s);
        ::close(fd);
    }

private:
    SSL_CTX* ctx_;
};

struct rigs
{
    std::unique_ptr<tls::certificate_authority> origin_ca = make_ca("bench origin CA");
    tls_origin origin{*origin_ca};
    proxy_rig plain{loopback_config({origin_name})};
    std::unique_ptr<proxy_rig> inspecting;
    std::shared_ptr<tls::inspector> inspection;
    // A third proxy with request rules (an allow and a deny) and an injected header.
    std::unique_ptr<proxy_rig> ruled;
    std::shared_ptr<tls::inspector> ruled_inspection;
    // A fourth with the caller's hooks over requests and responses.
    std::unique_ptr<proxy_rig> hooked;
    std::shared_ptr<tls::inspector> hooked_inspection;
    // A fifth with those hooks and body hooks (streamed windows, each allowed).
    std::unique_ptr<proxy_rig> body_hooked;
    std::shared_ptr<tls::inspector> body_hooked_inspection;

    rigs()
    {
        inspection = make_inspector({}, {});
        auto cfg = loopback_config({origin_name});
        cfg.inspection = inspection;
        inspecting = std::make_unique<proxy_rig>(std::move(cfg));
        ruled_inspection = make_inspector(
            {{sandbox::net_action::allow, std::string("GET,HEAD ") + origin_name + "/api/**"},
             {sandbox::net_action::deny, std::string("* ") + origin_name + "/api/admin/**"}},
            {{origin_name, "Authorization", "Bearer bench-token", false}});
        auto ruled_cfg = loopback_config({origin_name});
        ruled_cfg.inspection = ruled_inspection;
        ruled = std::make_unique<proxy_rig>(std::move(ruled_cfg));
        hooked_inspection = make_inspector({}, {}, bench_hooks());
        auto hooked_cfg = loopback_config({origin_name});
        hooked_cfg.inspection = hooked_inspection;
        hooked = std::make_unique<proxy_rig>(std::move(hooked_cfg));
        body_hooked_inspection = make_inspector({}, {}, body_hooks());
        auto body_cfg = loopback_config({origin_name});
        body_cfg.inspection = body_hooked_inspection;
        body_hooked = std::make_unique<proxy_rig>(std::move(body_cfg));
    }
    static sandbox::http_hooks body_hooks()
    {
        sandbox::http_hooks h = bench_hooks();
        h.on_request_body =
            [](const sandbox::http_body_chunk&) -> boost::asio::awaitable<sandbox::http_verdict> {
            co_return sandbox::http_verdict::allowed();
        };
        h.on_response_body = h.on_request_body;
        return h;
    }
    static sandbox::http_hooks bench_hooks()
    {
        sandbox::http_hooks h;
        h.on_request =
            [](const sandbox::http_request_info&) -> boost::asio::awaitable<sandbox::http_verdict> {
            sandbox::http_verdict v;
            v.set_headers = {{"X-Checked", "bench"}};
            co_return v;
        };
        h.on_response = [](const sandbox::http_response_info&)
            -> boost::asio::awaitable<sandbox::http_verdict> {
            co_return sandbox::http_verdict::allowed();
        };
        return h;
    }
    std::shared_ptr<tls::inspector> make_inspector(std::vector<sandbox::http_request_rule> rules,
                                                   std::vector<sandbox::header_injection> headers,
                                                   sandbox::http_hooks hooks = {})
    {
        tls::inspection_options o;
        o.hosts = {origin_name};
        o.origins.system_roots = false;
        o.origins.extra_roots_pem = {origin_ca->certificate_pem()};
        o.requests = std::move(rules);
        o.inject_headers = std::move(headers);
        o.hooks = std::move(hooks);
        auto made = tls::inspector::create(std::move(o));
        if (!made)
            die("cannot make the inspector");
        return std::move(*made);
    }
    tls_client client() const { return tls_client(*origin_ca, inspection->authority()); }
    tls_client ruled_client() const
    {
        return tls_client(*origin_ca, ruled_inspection->authority());
    }
    tls_client hooked_client() const
    {
        return tls_client(*origin_ca, hooked_inspection->authority());
    }
    tls_client body_hooked_client() const
    {
        return tls_client(*origin_ca, body_hooked_inspection->authority());
    }
};

// Drives `ours` and `peer`, joined by a BIO pair, to the end of their handshake: the thread
// cpu spent in `ours` alone (seconds).
double handshake_cpu(SSL* ours, SSL* peer)
{
    BIO* a = nullptr;
    BIO* b = nullptr;
    if (BIO_new_bio_pair(&a, 0, &b, 0) != 1)
        die("cannot make a BIO pair");
    SSL_set_bio(ours, a, a);
    SSL_set_bio(peer, b, b);
    double cpu = 0;
    for (int turn = 0; turn < 20; ++turn)
    {
        const double c0 = thread_cpu();
        const int mine = SSL_do_handshake(ours);
        cpu += thread_cpu() - c0;
        const int theirs = SSL_do_handshake(peer);
        if (mine == 1 && theirs == 1)
            return cpu;
    }
    die("an in-memory handshake did not finish");
}

// OpenSSL's part of inspected_setup_proxy_cpu: `n` setups' two proxy roles in memory, with
// a fresh inspection's contexts (this thread's own), full handshakes; us per setup.
double openssl_setup_cpu(const tls::certificate_authority& origin_ca, int n)
{
    tls::inspection_options io;
    io.hosts = {origin_name};
    io.origins.system_roots = false;
    io.origins.extra_roots_pem = {origin_ca.certificate_pem()};
    auto in = tls::inspector::create(std::move(io));
    if (!in)
        die("cannot make the inspector");
    const tls_client client(origin_ca, (*in)->authority());
    SSL_CTX* origin = SSL_CTX_new(TLS_server_method());
    const auto host = *sandbox::net::canonicalize_host(origin_name);
    auto leaf = origin_ca.mint(host, tls::clock::now());
    if (!leaf || SSL_CTX_use_certificate(origin, (*leaf)->cert) != 1 ||
        SSL_CTX_use_PrivateKey(origin, origin_ca.leaf_key()) != 1)
        die("cannot set up the in-memory origin");
    SSL_CTX_set_num_tickets(origin, 0);
    double cpu = 0;
    for (int i = 0; i <= n; ++i) // the first one mints the leaf: not counted
    {
        tls::client_hello_state st;
        st.connect_host = host;
        SSL* server_side = (*in)->server().new_connection(st).value();
        SSL* client_peer = client.fresh();
        SSL* origin_leg = (*in)->origins().new_connection(host).value();
        SSL* origin_peer = SSL_new(origin);
        SSL_set_accept_state(server_side);
        SSL_set_accept_state(origin_peer);
        const double used =
            handshake_cpu(server_side, client_peer) + handshake_cpu(origin_leg, origin_peer);
        if (i > 0)
            cpu += used;
        for (SSL* s : {server_side, client_peer, origin_leg, origin_peer})
            SSL_free(s);
    }
    SSL_CTX_free(origin);
    return cpu / n * 1e6;
}

// `resumed`: the origin gives tickets, so the inspecting proxy's origin leg resumes (the
// client never does: every client leg is a full handshake); else full handshakes on both.
void run_setup(rigs& r, const options& o, bool resumed)
{
    r.origin.tickets(resumed);
    const tls_client c = r.client();
    tls_client::close(c.open(r.inspecting->port(), r.origin.port())); // the leaf; a session
    const int n = o.quick ? 10 : 300;
    std::vector<double> plain, inspected;
    double plain_cpu = 0, inspected_cpu = 0;
    for (int i = 0; i < n; ++i)
        for (proxy_rig* px : {&r.plain, r.inspecting.get()})
        {
            const double c0 = px->cpu();
            const auto t0 = steady::now();
            SSL* s = c.open(px->port(), r.origin.port());
            (px == &r.plain ? plain : inspected).push_back(micros_since(t0));
            tls_client::close(s);
            std::this_thread::sleep_for(std::chrono::milliseconds(1)); // the tunnel's end
            (px == &r.plain ? plain_cpu : inspected_cpu) += px->cpu() - c0;
        }
    const std::string at = resumed ? "_origin_resumed" : "";
    const double p50 = bench::percentile(inspected, 50), base50 = bench::percentile(plain, 50);
    bench::print_json(bench_name, "inspected_setup_p50" + at, p50, "us", base50);
    bench::print_json(bench_name, "inspected_setup_p99" + at, bench::percentile(inspected, 99),
                      "us", bench::percentile(plain, 99));
    bench::print_json(bench_name, "inspected_setup_added_p50" + at, p50 - base50, "us",
                      std::nullopt);
    bench::print_json(bench_name, "inspected_setup_proxy_cpu" + at, inspected_cpu / n * 1e6, "us",
                      plain_cpu / n * 1e6);
    if (!resumed)
        bench::print_json(bench_name, "inspected_setup_openssl_cpu",
                          openssl_setup_cpu(*r.origin_ca, n), "us",
                          (inspected_cpu - plain_cpu) / n * 1e6);
}

// The server-name check of uninspected tunnels (net_policy::sni_check record, the default):
// the plain proxy reads each ClientHello before it goes on; a proxy with the check off moves
// the same handshakes as they come.
void run_sni(rigs& r, const options& o)
{
    r.origin.tickets(false);
    auto cfg = loopback_config({origin_name});
    cfg.sni = sandbox::sni_mode::off;
    proxy_rig unchecked(std::move(cfg));
    const tls_client c = r.client();
    const int n = o.quick ? 10 : 300;
    std::vector<double> checked, off;
    double checked_cpu = 0, off_cpu = 0;
    for (int i = 0; i < n; ++i)
        for (proxy_rig* px : {&r.plain, &unchecked})
        {
            const double c0 = px->cpu();
            const auto t0 = steady::now();
            SSL* s = c.open(px->port(), r.origin.port());
            (px == &r.plain ? checked : off).push_back(micros_since(t0));
            tls_client::close(s);
            std::this_thread::sleep_for(std::chrono::milliseconds(1)); // the tunnel's end
            (px == &r.plain ? checked_cpu : off_cpu) += px->cpu() - c0;
        }
    bench::print_json(bench_name, "opaque_setup_sni_record_p50", bench::percentile(checked, 50),
                      "us", bench::percentile(off, 50));
    bench::print_json(bench_name, "opaque_setup_sni_record_proxy_cpu", checked_cpu / n * 1e6, "us",
                      off_cpu / n * 1e6);
}

// Seconds to move `total` bytes from a client through `px` into the origin.
double stream(rigs& r, const tls_client& c, proxy_rig& px, std::uint64_t total)
{
    SSL* s = c.open(px.port(), r.origin.port());
    const std::uint64_t start = r.origin.received.load();
    // One upload (the inspecting proxy parses HTTP): its head, then the body.
    const std::string head = "POST /upload HTTP/1.1\r\nHost: " + std::string(origin_name) + ":" +
                             std::to_string(r.origin.port()) +
                             "\r\nContent-Length: " + std::to_string(total) + "\r\n\r\n";
    std::vector<char> buf(1 << 16, 'x');
    const auto t0 = steady::now();
    if (SSL_write(s, head.data(), static_cast<int>(head.size())) <= 0)
        die("a write to the tunnel failed");
    for (std::uint64_t sent = 0; sent < total; sent += buf.size())
        if (SSL_write(s, buf.data(), static_cast<int>(buf.size())) <= 0)
            die("a write to the tunnel failed");
    while (r.origin.received.load() - start < total + head.size())
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    const double dt = std::chrono::duration<double>(steady::now() - t0).count();
    tls_client::close(s);
    return dt;
}

void run_throughput(rigs& r, const options& o)
{
    const tls_client c = r.client();
    const tls_client hc = r.hooked_client();
    const std::uint64_t total = o.quick ? (8ull << 20) : (512ull << 20);
    auto mbps = [&](const tls_client& client, proxy_rig& px) {
        return static_cast<double>(total) / stream(r, client, px, total) / 1e6;
    };
    auto rounds = bench::measure_rounds(o.quick ? 1 : 3, [&] {
        const double plain = mbps(c, r.plain);
        return std::pair{mbps(c, *r.inspecting), plain};
    });
    bench::print_json(bench_name, "inspected_throughput", rounds.ours_median(), "MB/s",
                      rounds.base_median());
    auto hooked = bench::measure_rounds(o.quick ? 1 : 3, [&] {
        const double plain = mbps(c, r.plain);
        return std::pair{mbps(hc, *r.hooked), plain};
    });
    bench::print_json(bench_name, "inspected_throughput_with_hooks", hooked.ours_median(), "MB/s",
                      hooked.base_median());
    const tls_client bc = r.body_hooked_client();
    auto body = bench::measure_rounds(o.quick ? 1 : 3, [&] {
        const double heads_only = mbps(hc, *r.hooked);
        return std::pair{mbps(bc, *r.body_hooked), heads_only};
    });
    bench::print_json(bench_name, "inspected_throughput_with_body_hooks", body.ours_median(),
                      "MB/s", body.base_median());
}

// KiB of RSS per tunnel for `n` idle TLS tunnels through `px` (each handshaken both ways).
double idle_memory(rigs& r, const tls_client& c, proxy_rig& px, std::size_t n,
                   std::vector<SSL*>& open)
{
    const std::size_t held0 = r.origin.held();
    const double before = rss_kib();
    for (std::size_t i = 0; i < n; ++i)
        open.push_back(c.open(px.port(), r.origin.port()));
    for (int i = 0; i < 10'000 && r.origin.held() < held0 + n; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return (rss_kib() - before) / static_cast<double>(n);
}

void run_memory(rigs& r, const options& o)
{
    const tls_client c = r.client();
    const std::size_t n = o.quick ? 10 : 400;
    r.origin.hold(true);
    std::vector<SSL*> open;
    // Plain first, inspected while those stay open: each figure is memory newly taken.
    const double plain = idle_memory(r, c, r.plain, n, open);
    const double inspected = idle_memory(r, c, *r.inspecting, n, open);
    for (SSL* s : open)
        tls_client::close(s);
    r.origin.release_held();
    r.origin.hold(false);
    bench::print_json(bench_name, "idle_inspected_tunnel_memory", inspected, "KiB", plain);
    bench::print_json(bench_name, "idle_inspected_tunnel_added_memory", inspected - plain, "KiB",
                      std::nullopt);
}

// What a call with net.mitm adds to preparing its network: the egress config with its
// inspection (a CA, both contexts) and the trust bundle's sealed file, against the same
// config without inspection.
void run_call_setup(const options& o)
{
    asio::io_context ioc;
    net_policy plain;
    plain.mode = net_mode::allow_list;
    plain.allow_hosts = {"api.example.com"};
    net_policy inspected = plain;
    inspected.mitm = mitm_policy{};
    inspected.mitm->enabled = true;
    const proxy_options po;
    const int n = o.quick ? 5 : 100;
    std::vector<double> ours, base;
    for (int i = 0; i < n; ++i)
    {
        auto t0 = steady::now();
        if (!net::make_egress_config(ioc.get_executor(), plain, po, nullptr))
            die("cannot make the egress config");
        base.push_back(micros_since(t0));
        t0 = steady::now();
        auto cfg = net::make_egress_config(ioc.get_executor(), inspected, po, nullptr);
        if (!cfg || !cfg->inspection)
            die("cannot make the inspecting egress config");
        auto bundle =
            tls::trust_bundle(*tls::system_roots(), cfg->inspection->authority().certificate_pem());
        if (!bundle || !tls::bundle_file(*bundle))
            die("cannot make the trust bundle");
        ours.push_back(micros_since(t0));
    }
    bench::print_json(bench_name, "inspected_call_setup_p50", bench::percentile(ours, 50), "us",
                      bench::percentile(base, 50));
}

// Microseconds per request on a kept connection through `px`: a small GET, a two-byte
// answer read whole.
std::vector<double> request_times(const tls_client& c, proxy_rig& px, std::uint16_t origin_port,
                                  int n)
{
    SSL* s = c.open(px.port(), origin_port);
    const std::string get =
        "GET /api/items/7?page=2 HTTP/1.1\r\nHost: " + std::string(origin_name) + ":" +
        std::to_string(origin_port) + "\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n";
    std::vector<double> times;
    std::array<char, 4096> buf;
    for (int i = 0; i < n; ++i)
    {
        const auto t0 = steady::now();
        if (SSL_write(s, get.data(), static_cast<int>(get.size())) <= 0)
            die("a request through the tunnel failed");
        std::string got;
        while (!got.ends_with("\r\n\r\nok"))
        {
            const int k = SSL_read(s, buf.data(), static_cast<int>(buf.size()));
            if (k <= 0)
                die("an answer through the tunnel failed");
            got.append(buf.data(), static_cast<std::size_t>(k));
        }
        times.push_back(micros_since(t0));
    }
    tls_client::close(s);
    return times;
}

// The HTTP layer's cost per request on a kept connection: inspected (parsed, Host checked)
// and inspected with rules and an injected header, against the plain tunnel, in turns.
void run_requests(rigs& r, const options& o)
{
    r.origin.answer(true);
    const tls_client c = r.client();
    const tls_client ruled = r.ruled_client();
    const tls_client hooked = r.hooked_client();
    const int n = o.quick ? 200 : 3000;
    std::vector<double> plain, inspected, with_rules, with_hooks;
    for (int round = 0; round < 3; ++round)
    {
        auto add = [](std::vector<double>& to, std::vector<double> t) {
            to.insert(to.end(), t.begin(), t.end());
        };
        add(plain, request_times(c, r.plain, r.origin.port(), n));
        add(inspected, request_times(c, *r.inspecting, r.origin.port(), n));
        add(with_rules, request_times(ruled, *r.ruled, r.origin.port(), n));
        add(with_hooks, request_times(hooked, *r.hooked, r.origin.port(), n));
    }
    r.origin.answer(false);
    const double base = bench::percentile(plain, 50);
    bench::print_json(bench_name, "inspected_request_p50", bench::percentile(inspected, 50), "us",
                      base);
    bench::print_json(bench_name, "inspected_request_with_rules_p50",
                      bench::percentile(with_rules, 50), "us", base);
    bench::print_json(bench_name, "inspected_request_with_rules_p99",
                      bench::percentile(with_rules, 99), "us", bench::percentile(plain, 99));
    bench::print_json(bench_name, "inspected_request_with_hooks_p50",
                      bench::percentile(with_hooks, 50), "us", base);
    bench::print_json(bench_name, "inspected_request_with_hooks_p99",
                      bench::percentile(with_hooks, 99), "us", bench::percentile(plain, 99));
}

} // namespace

void run_inspect(const options& o)
{
    // The origin's and the clients' OpenSSL write with write(2): a ticket sent to a client
    // that already closed would raise SIGPIPE in this program (the proxy's legs never do).
    ::signal(SIGPIPE, SIG_IGN);
    run_call_setup(o);
    rigs r;
    run_setup(r, o, false);
    run_setup(r, o, true);
    run_sni(r, o);
    run_throughput(r, o);
    run_requests(r, o);
    run_memory(r, o);
}

} // namespace net_bench
