// test/net/sni_check_test.cpp: the server name of tunnels the proxy does not inspect
// (net_policy::sni_check; tls.md T3). The judgement alone on OpenSSL's own ClientHellos; then
// the egress proxy with real Python clients through CONNECT and SOCKS5: a mismatch recorded
// and the tunnel kept (record), or closed before a byte reaches the destination (deny); a
// matching name, no name, bytes that are not TLS and a protocol where the server speaks first
// all pass; a ClientHello cut short is closed under deny only.
#include "test/net/tls_rigs.hpp"

#include "net/sni_check.hpp"

namespace {

using verdict = tls::hello_peek::verdict;

sni_judgement judge(const std::string& sni, const std::string& connect_host, sni_mode mode)
{
    const bytes hello = openssl_client_hello(sni);
    return judge_sni(tls::peek_client_hello(hello), host(connect_host), mode);
}

// Python's ssl through `f`'s HTTP proxy (`through_proxy`): CONNECT `connect_host` at the
// origin's port, then TLS naming `sni` (none when empty) and trusting the origin's CA without
// a name check; the origin's answer ("sni=... alpn=...") or why the handshake failed.
std::string tls_through(const proxy_rig& f, const std::string& connect_host, const std::string& sni)
{
    std::string out = through_proxy(f, connect_host, sni, "origin-ca.pem", false);
    out.erase(0, out.find('\n') + 1); // the CONNECT's status line
    if (!out.empty() && out.back() == '\n')
        out.pop_back();
    return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sni_check)

BOOST_AUTO_TEST_CASE(a_name_is_compared_canonically_with_the_tunnel_host)
{
    for (const char* sent : {"api.test", "API.Test", "api.test."})
    {
        const auto j = judge(sent, "api.test", sni_mode::deny);
        BOOST_TEST(j.sni.value_or("(none)") == sent);
        BOOST_TEST(!j.mismatch, sent);
        BOOST_TEST(j.refusal.empty(), sent);
    }
    const auto other = judge("other.test", "api.test", sni_mode::deny);
    BOOST_TEST(other.sni.value_or("(none)") == "other.test");
    BOOST_TEST(other.mismatch);
    BOOST_TEST(other.refusal == "sni_mismatch");
    // A subdomain is another host, and so is a name sent to an address.
    BOOST_TEST(judge("www.api.test", "api.test", sni_mode::deny).mismatch);
    BOOST_TEST(judge("api.test", "203.0.113.5", sni_mode::deny).mismatch);
    BOOST_TEST(!judge("203.0.113.5", "203.0.113.5", sni_mode::deny).mismatch);
}

BOOST_AUTO_TEST_CASE(record_keeps_a_mismatched_tunnel_and_off_judges_nothing)
{
    const auto kept = judge("other.test", "api.test", sni_mode::record);
    BOOST_TEST(kept.mismatch);
    BOOST_TEST(kept.refusal.empty());
    const auto off = judge("other.test", "api.test", sni_mode::off);
    BOOST_TEST(!off.sni.has_value());
    BOOST_TEST(!off.mismatch);
    BOOST_TEST(off.refusal.empty());
}

BOOST_AUTO_TEST_CASE(a_hello_without_a_name_passes_and_says_so)
{
    tls::hello_peek p;
    p.what = verdict::tls;
    const auto j = judge_sni(p, host("api.test"), sni_mode::deny);
    BOOST_TEST(j.sni.value_or("(none)") == "");
    BOOST_TEST(!j.mismatch);
    BOOST_TEST(j.refusal.empty());
}

BOOST_AUTO_TEST_CASE(only_deny_closes_what_is_no_sound_client_hello)
{
    const canonical_host h = host("api.test");
    for (const auto& [what, refusal] :
         std::vector<std::pair<verdict, std::string>>{{verdict::not_tls, ""},
                                                      {verdict::need_more, "no_client_hello"},
                                                      {verdict::malformed, "bad_client_hello"},
                                                      {verdict::too_large, "bad_client_hello"}})
    {
        tls::hello_peek p;
        p.what = what;
        const auto denied = judge_sni(p, h, sni_mode::deny);
        BOOST_TEST(denied.refusal == refusal);
        BOOST_TEST(!denied.sni.has_value());
        BOOST_TEST(!denied.mismatch);
        const auto recorded = judge_sni(p, h, sni_mode::record);
        BOOST_TEST(recorded.refusal.empty());
        BOOST_TEST(!recorded.sni.has_value());
    }
}

BOOST_AUTO_TEST_CASE(a_name_with_control_bytes_is_recorded_escaped)
{
    tls::hello_peek p;
    p.what = verdict::tls;
    p.sni = "a\x01.test"; // (the parser refuses such a name; the judgement escapes it anyway)
    const auto j = judge_sni(p, host("api.test"), sni_mode::record);
    BOOST_TEST(j.sni.value_or("(none)") == "a\\x01.test");
    BOOST_TEST(j.mismatch);
}

// record (the default): the tunnel to api.test whose ClientHello names other.test goes on as
// it is, and its record says so.
BOOST_AUTO_TEST_CASE(record_lets_a_mismatch_through_and_records_it)
{
    proxy_rig f({"other.test"}, {});
    BOOST_TEST(tls_through(f, "api.test", "other.test") == "sni=other.test alpn=");
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].sni.value_or("(none)") == "other.test");
    BOOST_TEST(c[0].sni_mismatch);
    BOOST_TEST(c[0].reason != "sni_mismatch");
    BOOST_TEST(c[0].bytes_up > 0u);
    const std::string json = boost::json::serialize(to_json(c[0]));
    BOOST_TEST(json.find("\"sni\":\"other.test\",\"sni_mismatch\":true") != std::string::npos,
               json);
}

// deny: the same tunnel is closed with nothing sent on; a matching name (any spelling) and
// no name pass.
BOOST_AUTO_TEST_CASE(deny_closes_a_mismatch_before_a_byte_goes_on)
{
    proxy_rig f({"other.test"}, {}, 10s, 256, false, {}, sni_mode::deny);
    BOOST_TEST(tls_through(f, "api.test", "other.test").find("handshake failed") == 0u);
    BOOST_TEST(tls_through(f, "api.test", "API.test") == "sni=API.test alpn=");
    BOOST_TEST(tls_through(f, "api.test", "") == "sni= alpn=");
    const auto c = f.closed(3);
    BOOST_TEST_REQUIRE(c.size() == 3u);
    BOOST_TEST(c[0].reason == "sni_mismatch");
    BOOST_TEST(c[0].sni_mismatch);
    BOOST_TEST(c[0].bytes_up == 0u);
    BOOST_TEST(!c[1].sni_mismatch);
    BOOST_TEST(c[1].sni.value_or("(none)") == "API.test");
    BOOST_TEST(c[1].reason != "sni_mismatch");
    BOOST_TEST(c[2].sni.value_or("(none)") == "");
    BOOST_TEST(!c[2].sni_mismatch);
    for (const auto& r : c)
        BOOST_TEST(!r.tls.has_value()); // never inspected
    BOOST_TEST(f.minted() == 0u);
}

// off: nothing is read or recorded; the mismatch goes through.
BOOST_AUTO_TEST_CASE(off_reads_nothing)
{
    proxy_rig f({"other.test"}, {}, 10s, 256, false, {}, sni_mode::off);
    BOOST_TEST(tls_through(f, "api.test", "other.test") == "sni=other.test alpn=");
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(!c[0].sni.has_value());
    BOOST_TEST(!c[0].sni_mismatch);
}

// deny over SOCKS5: the same check, the same close.
BOOST_AUTO_TEST_CASE(deny_holds_for_socks5_tunnels_too)
{
    proxy_rig f({"other.test"}, {}, 10s, 256, false, {}, sni_mode::deny);
    const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
    const auto out = run("python3 -c \"import socket, ssl\n"
                         "s = socket.create_connection(('127.0.0.1', " +
                         std::to_string(f.port) +
                         "))\n"
                         "s.settimeout(20)\n"
                         "s.sendall(b'\\x05\\x01\\x00')\n"
                         "assert s.recv(2) == b'\\x05\\x00'\n"
                         "s.sendall(b'\\x05\\x01\\x00\\x03\\x08api.test' + (" +
                         origin +
                         ").to_bytes(2, 'big'))\n"
                         "reply = s.recv(10)\n"
                         "print('rep', reply[1])\n"
                         "ctx = ssl.create_default_context(cafile='" +
                         (f.rig.dir / "origin-ca.pem").string() +
                         "')\n"
                         "ctx.check_hostname = False\n"
                         "try:\n"
                         "    ctx.wrap_socket(s, server_hostname='other.test')\n"
                         "    print('handshake done')\n"
                         "except (ssl.SSLError, OSError) as e:\n"
                         "    print('handshake failed')\n\"")
                         .out;
    BOOST_TEST(out == "rep 0\nhandshake failed\n");
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].protocol == net_protocol::socks5);
    BOOST_TEST(c[0].reason == "sni_mismatch");
    BOOST_TEST(c[0].bytes_up == 0u);
}

// deny does not get in the way of what is not TLS: a protocol whose server speaks first (its
// banner reaches the client while the proxy still waits for the client's first bytes), then
// the client's plain line.
BOOST_AUTO_TEST_CASE(deny_lets_a_server_first_protocol_through)
{
    proxy_rig f({"other.test"}, {}, 10s, 256, false, {}, sni_mode::deny);
    const auto out = run("python3 -c \"import socket, threading\n"
                         "srv = socket.create_server(('127.0.0.1', 0))\n"
                         "def serve():\n"
                         "    c, _ = srv.accept()\n"
                         "    c.sendall(b'220 banner\\r\\n')\n"
                         "    c.sendall(b'got ' + c.recv(100))\n"
                         "    c.close()\n"
                         "t = threading.Thread(target=serve)\n"
                         "t.start()\n"
                         "s = socket.create_connection(('127.0.0.1', " +
                         std::to_string(f.port) +
                         "))\n"
                         "s.settimeout(20)\n"
                         "s.sendall(b'CONNECT 127.0.0.1:%d HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' % "
                         "srv.getsockname()[1])\n"
                         "data = b''\n"
                         "while b'banner' not in data:\n"
                         "    d = s.recv(100)\n"
                         "    if not d: break\n"
                         "    data += d\n"
                         "s.sendall(b'QUIT\\r\\n')\n"
                         "while d := s.recv(100): data += d\n"
                         "t.join()\n"
                         "srv.close()\n"
                         "print(data.decode().split('\\r\\n\\r\\n')[1], end='')\n\"")
                         .out;
    BOOST_TEST(out == "220 banner\r\ngot QUIT\r\n");
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(!c[0].sni.has_value());
    BOOST_TEST(!c[0].sni_mismatch);
    BOOST_TEST(c[0].bytes_up == 6u);
}

// A TLS record cut short by the client's end: closed under deny (nothing sent on), passed on
// under record.
BOOST_AUTO_TEST_CASE(a_client_hello_cut_short_is_closed_under_deny_only)
{
    for (const sni_mode mode : {sni_mode::deny, sni_mode::record})
    {
        proxy_rig f({"other.test"}, {}, 10s, 256, false, {}, mode);
        const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
        run("python3 -c \"import socket\n"
            "s = socket.create_connection(('127.0.0.1', " +
            std::to_string(f.port) +
            "))\n"
            "s.settimeout(20)\n"
            "s.sendall(b'CONNECT api.test:" +
            origin +
            " HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
            "head = b''\n"
            "while not head.endswith(b'\\r\\n\\r\\n'):\n"
            "    head += s.recv(1)\n"
            "s.sendall(b'\\x16\\x03\\x01\\x01\\x00\\x01\\x00\\x00\\xfc\\x03\\x03')\n"
            "s.shutdown(socket.SHUT_WR)\n"
            "try:\n"
            "    while s.recv(100): pass\n"
            "except OSError: pass\n\"");
        const auto c = f.closed(1);
        BOOST_TEST_REQUIRE(c.size() == 1u);
        BOOST_TEST(!c[0].sni.has_value());
        if (mode == sni_mode::deny)
        {
            BOOST_TEST(c[0].reason == "no_client_hello");
            BOOST_TEST(c[0].bytes_up == 0u);
        }
        else
            BOOST_TEST(c[0].bytes_up == 11u);
    }
}

// A Python script that opens a CONNECT to api.test through `f`, the origin's port, with
// `first` (Python bytes) sent in the same write as the request, then `then` (Python
// statements with `s`, the socket, and `hello(name)`, a ClientHello naming `name` made
// with Python's ssl in memory); it prints what comes back until the end.
std::string connect_script(const proxy_rig& f, const std::string& first, const std::string& then)
{
    const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
    return "python3 -c \"import socket, ssl, time\n"
           "def hello(name):\n"
           "    ctx = ssl.create_default_context()\n"
           "    ctx.check_hostname = False\n"
           "    ctx.verify_mode = ssl.CERT_NONE\n"
           "    i, o = ssl.MemoryBIO(), ssl.MemoryBIO()\n"
           "    t = ctx.wrap_bio(i, o, server_hostname=name)\n"
           "    try: t.do_handshake()\n"
           "    except ssl.SSLWantReadError: pass\n"
           "    return o.read()\n"
           "s = socket.create_connection(('127.0.0.1', " +
           std::to_string(f.port) +
           "))\n"
           "s.settimeout(20)\n"
           "s.sendall(b'CONNECT api.test:" +
           origin + " HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' + " + first + ")\n" + then +
           "data = b''\n"
           "try:\n"
           "    while d := s.recv(65536): data += d\n"
           "except OSError: pass\n"
           "print(len(data))\n\"";
}

// The limit starts at the client's first byte: a client silent for longer than it (waiting
// for the server, say) is served; one that stops mid-hello is closed at the limit.
BOOST_AUTO_TEST_CASE(the_limit_starts_at_the_first_byte)
{
    proxy_rig f({"other.test"}, {}, 10s, 256, false, {}, sni_mode::deny, 300ms);
    run(connect_script(f, "b''",
                       "time.sleep(0.8)\n"
                       "s.sendall(hello('api.test'))\n"
                       "time.sleep(0.3)\n"
                       "s.shutdown(socket.SHUT_WR)\n"));
    const auto t0 = std::chrono::steady_clock::now();
    run(connect_script(f, "b''", "s.sendall(hello('api.test')[:20])\n"));
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 5s));
    const auto c = f.closed(2);
    BOOST_TEST_REQUIRE(c.size() == 2u);
    BOOST_TEST(c[0].sni.value_or("(none)") == "api.test");
    BOOST_TEST(c[0].reason != "no_client_hello");
    BOOST_TEST(c[0].bytes_up > 0u);
    BOOST_TEST(c[1].reason == "no_client_hello");
    BOOST_TEST(c[1].bytes_up == 0u);
}

// What a client sends with its CONNECT is judged as what it sends after; a client that ends
// without a byte is not judged at all; an alert in front of the hello (which some servers
// skip) is no way around the check.
BOOST_AUTO_TEST_CASE(pipelined_empty_and_alert_first_flights)
{
    proxy_rig f({"other.test"}, {}, 10s, 256, false, {}, sni_mode::deny);
    run(connect_script(f, "hello('other.test')", ""));
    run(connect_script(f, "b''", "s.shutdown(socket.SHUT_WR)\n"));
    run(connect_script(f, "b'\\x15\\x03\\x03\\x00\\x02\\x01\\x00' + hello('other.test')", ""));
    const auto c = f.closed(3);
    BOOST_TEST_REQUIRE(c.size() == 3u);
    BOOST_TEST(c[0].reason == "sni_mismatch");
    BOOST_TEST(c[0].sni.value_or("(none)") == "other.test");
    BOOST_TEST(c[0].bytes_up == 0u);
    BOOST_TEST(c[1].reason == "eof");
    BOOST_TEST(!c[1].sni.has_value());
    BOOST_TEST(c[2].reason == "bad_client_hello");
    BOOST_TEST(c[2].bytes_up == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
