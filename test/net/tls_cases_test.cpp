// test/net/tls_cases_test.cpp: tls.md's adversarial cases that tls_test.cpp did not reach, each
// named by its case (docs/network.md, "The adversarial cases, one by one"): the SNI and the
// CONNECT host disagreeing both ways (T3, T4), absolute targets (T6), an expired origin (T12),
// odd spellings of the CONNECT host on the origin leg (T15), trailers (T26), the request id of
// the proxy's own answers (T29), protocol versions and groups (T36). Real curl and Python
// against the rigs' TLS origin on loopback, through the egress proxy where the case is about it.
#include "test/net/tls_rigs.hpp"

namespace {

// Python's ssl straight to the inspect rig's tunnel with `setup` applied to its context
// (protocol versions, groups): the protocol it got and the answer's first line, or why the
// handshake failed.
std::string with_context(const inspect_rig& rig, const std::string& setup)
{
    const std::string port = std::to_string(rig.proxy_acceptor.local_endpoint().port());
    return run("python3 -c \"import socket, ssl\n"
               "ctx = ssl.create_default_context(cafile='" +
               (rig.dir / "proxy-ca.pem").string() + "')\n" + setup +
               "\n"
               "try:\n"
               "    s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', " +
               port +
               ")), server_hostname='api.test')\n"
               "except (ssl.SSLError, OSError) as e:\n"
               "    print('handshake failed', getattr(e, 'reason', type(e).__name__))\n"
               "    raise SystemExit(0)\n"
               "s.settimeout(20)\n"
               "s.sendall(b'GET /v HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: "
               "close\\r\\n\\r\\n')\n"
               "data = b''\n"
               "try:\n"
               "    while d := s.recv(65536): data += d\n"
               "except (ssl.SSLError, OSError): pass\n"
               "print(s.version(), data.decode(errors='replace').split('\\r\\n')[0])\n\"")
        .out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tls_cases)

// T3: a CONNECT to a host that is not inspected stays an opaque tunnel to that host, even
// when its ClientHello names an inspected one: the client gets the origin's own certificate,
// the origin the client's SNI as sent, and the record has no TLS part; it names the SNI and
// the mismatch (sni_check record, the default; deny: sni_check_test.cpp).
BOOST_AUTO_TEST_CASE(t3_an_uninspected_connect_stays_opaque_whatever_its_sni)
{
    proxy_rig f({"other.test"}, {});
    const auto out = through_proxy(f, "api.test", "other.test", "origin-ca.pem", false);
    BOOST_TEST(out == "HTTP/1.1 200 Connection Established\nsni=other.test alpn=\n", out);
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(!c[0].tls.has_value());
    BOOST_TEST(c[0].sni.value_or("(none)") == "other.test");
    BOOST_TEST(c[0].sni_mismatch);
    BOOST_TEST(c[0].host == "api.test");
    BOOST_TEST((c[0].reason == "eof" || c[0].reason == "reset"), c[0].reason);
    BOOST_TEST(f.minted() == 0u);
}

// T4: exclusion is judged on the CONNECT host alone: a selected CONNECT whose SNI names an
// excluded host is still inspected, so the foreign name is refused (sni_mismatch) and the
// tunnel is never relayed as it is.
BOOST_AUTO_TEST_CASE(t4_an_excluded_sni_does_not_unselect_the_connect_host)
{
    proxy_rig f({"api.test"}, {"other.test"});
    const auto out = through_proxy(f, "api.test", "other.test", "origin-ca.pem", false);
    BOOST_TEST(out.find("HTTP/1.1 200 Connection Established\nhandshake failed SSLError") == 0u,
               out);
    BOOST_TEST(out.find("sni=") == std::string::npos, out); // the origin never answered
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].reason == "sni_mismatch");
    BOOST_TEST_REQUIRE(c[0].tls.has_value());
    BOOST_TEST(c[0].tls->sni == "other.test");
    BOOST_TEST(f.minted() == 0u);
}

// T15: an upper-case, dot-terminated CONNECT host is the canonical name on the origin leg: the
// origin is asked for `api.test` by SNI and verified for it, and the handshake succeeds.
BOOST_AUTO_TEST_CASE(t15_an_odd_spelling_of_the_connect_host_reaches_the_origin_canonical)
{
    proxy_rig f({"api.test"}, {});
    for (const char* spelled : {"API.Test.", "api.TEST"})
    {
        const auto out = through_proxy(f, spelled, "api.test", "inspect-ca.pem", true);
        BOOST_TEST(out == "HTTP/1.1 200 Connection Established\nsni=api.test alpn=http/1.1\n",
                   spelled << ": " << out);
    }
    const auto c = f.closed(2);
    BOOST_TEST_REQUIRE(c.size() == 2u);
    for (const auto& r : c)
    {
        BOOST_TEST(r.reason == "closed");
        BOOST_TEST(r.host == "api.test");
    }
    BOOST_TEST(c[0].requested_host == "API.Test.");
    BOOST_TEST(f.minted() == 1u); // one leaf, for the canonical name
}

// T12: an origin whose certificate expired gets no leaf minted and the client no handshake;
// the tunnel's end names the expiry.
BOOST_AUTO_TEST_CASE(t12_an_expired_origin_certificate_gets_no_leaf)
{
    inspect_rig rig("api.test", true, false, 48h);
    rig.start();
    rig.expect_untrusted_origin("expired");
}

// T6: an absolute target naming the tunnel's host goes to the origin as a path and query
// (what a server expects from a client); one naming another host is refused (421).
BOOST_AUTO_TEST_CASE(t6_an_absolute_target_reaches_the_origin_as_a_path)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    const std::string port = std::to_string(rig.proxy_acceptor.local_endpoint().port());
    for (const auto& [target, seen] : std::vector<std::pair<std::string, std::string>>{
             {"https://api.test:" + port + "/abs/x?q=1&r", "GET /abs/x?q=1&r\n"},
             {"https://API.test:" + port, "GET /\n"},
             {"https://api.test:" + port + "?only=query", "GET /?only=query\n"},
             {"OPTIONS https://api.test:" + port, "OPTIONS *\n"}, // the whole server
             {"OPTIONS https://api.test:" + port + "/x", "OPTIONS /x\n"}})
    {
        const std::string line = target.starts_with("OPTIONS ") ? target : "GET " + target;
        auto r = run(rig.python_raw("b'" + line +
                                    " HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: "
                                    "close\\r\\n\\r\\n'"));
        BOOST_TEST(r.out.find("HTTP/1.1 200 OK\r\n") == 0u, target << ": " << r.out);
        BOOST_TEST(r.out.find("\r\n\r\n" + seen) != std::string::npos, target << ": " << r.out);
    }
    auto other = run(rig.python_raw("b'GET https://other.test:" + port +
                                    "/x HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n'"));
    BOOST_TEST(other.out.find("HTTP/1.1 421") == 0u, other.out);
    rig.ended(6);
    BOOST_TEST(rig.origin_requests_seen() == 5);
}

// T26: without body hooks, trailers cross the tunnel as they came, both ways.
BOOST_AUTO_TEST_CASE(t26_trailers_pass_through_when_no_hook_sees_bodies)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.policy = tls::request_policy::compile({}, {}).value();
    rig.start();
    auto down = run(rig.python_raw(
        "b'GET /trailer HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n\\r\\n'"));
    BOOST_TEST(down.out.find("HTTP/1.1 200 OK\r\n") == 0u, down.out);
    BOOST_TEST(down.out.find("\r\n\r\n5\r\nhello\r\n0\r\nX-Checksum: 5d41402a\r\n\r\n") !=
                   std::string::npos,
               down.out);
    // The echoing origin lists the fields it got, the trailer among them (its parser adds a
    // trailer to the head).
    auto up = run(rig.python_raw(
        "b'POST /up HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n"
        "Transfer-Encoding: chunked\\r\\nTrailer: X-Sum\\r\\n\\r\\n3\\r\\nabc\\r\\n0\\r\\n"
        "X-Sum: 42\\r\\n\\r\\n'"));
    BOOST_TEST(up.out.find("HTTP/1.1 200 OK\r\n") == 0u, up.out);
    BOOST_TEST(up.out.find("\nX-Sum: 42\nbody=3\n") != std::string::npos, up.out);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    BOOST_TEST(seen[0].http.status == 200);
    BOOST_TEST(seen[1].http.request_body_bytes == 3u);
}

// T16: roots configured for some hosts' origins vouch for those alone: the origin of api.test
// verifies with its CA scoped to api.test (or a pattern naming it), not with the same CA
// scoped to another host, and never leaves a leaf minted for it.
BOOST_AUTO_TEST_CASE(t16_roots_scoped_to_a_host_vouch_for_that_host_alone)
{
    struct scoping
    {
        std::string first; // an entry with an unrelated root, before the origin's
        std::string scope; // the origin's root's
        bool trusted;
    };
    for (const auto& [first, scope, trusted] : std::vector<scoping>{
             {"elsewhere.test", "api.test", true},
             {"elsewhere.test", "*.test", true},
             {"elsewhere.test", "other.test", false},
             {"api.test", "*.test", true}}) // both name api.test: it trusts both roots
    {
        proxy_rig f({"api.test"}, {}, 10s, 256, false,
                    [&](tls::inspection_options& io, inspect_rig& rig) {
                        io.origins.extra_roots_pem.clear();
                        io.scoped_origins = {
                            sandbox::scoped_origin_ca{first, make_ca()->certificate_pem()},
                            sandbox::scoped_origin_ca{scope, rig.origin_ca->certificate_pem()}};
                    });
        auto r = run(f.curl("inspect-ca.pem"));
        const auto c = f.closed(1);
        BOOST_TEST_REQUIRE(c.size() == 1u);
        if (trusted)
        {
            BOOST_TEST(r.out == "sni=api.test alpn=http/1.1", scope);
            BOOST_TEST(c[0].reason == "closed");
            BOOST_TEST(f.minted() == 1u);
        }
        else
        {
            BOOST_TEST(r.status == 35, scope);
            BOOST_TEST(c[0].reason == "origin_untrusted");
            BOOST_TEST_REQUIRE(c[0].tls.has_value());
            BOOST_TEST(c[0].tls->detail.find("issuer") != std::string::npos, c[0].tls->detail);
            BOOST_TEST(f.minted() == 0u);
        }
    }
}

// A scoped root is checked when the inspection is made: its pattern and its PEM.
BOOST_AUTO_TEST_CASE(t16_a_bad_scoped_root_is_refused_with_its_field)
{
    tls::inspection_options io;
    io.scoped_origins = {{"api.test", "-----BEGIN CERTIFICATE-----\nnot base64\n"}};
    auto in = tls::inspector::create(io);
    BOOST_TEST_REQUIRE(!in);
    BOOST_TEST(in.error().code == errc::validation);
    BOOST_TEST(in.error().diag.limit == "net.mitm.origin_ca_for[0]");
    io.scoped_origins = {{"bad host", make_ca()->certificate_pem()}};
    in = tls::inspector::create(io);
    BOOST_TEST_REQUIRE(!in);
    BOOST_TEST(in.error().diag.limit == "net.mitm.origin_ca_for[0].host");
    sandbox::net_policy p;
    p.mode = net_mode::allow_list;
    p.mitm.emplace();
    p.mitm->enabled = true;
    p.mitm->origin_ca_for = {{"a b", "x"}};
    auto v = p.validate();
    BOOST_TEST_REQUIRE(!v);
    BOOST_TEST(v.error().diag.limit == "net.mitm.origin_ca_for[0].host");
}

// T29: the proxy's own answers name the request (its tunnel's number and its own), as its
// record does, so what a command reports can be found in the audit: a hook's throw (403),
// its denial, a rule's refusal, a Host of another tunnel (421), each on its own request.
BOOST_AUTO_TEST_CASE(t29_the_proxys_answers_name_the_request_as_its_record_does)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.policy =
        tls::request_policy::compile({{sandbox::net_action::deny, "* api.test/ruled/**"}}, {})
            .value();
    rig.hooks.emplace();
    std::vector<std::uint64_t> numbers;
    rig.hooks->on_request =
        [&](const sandbox::http_request_info& i) -> asio::awaitable<sandbox::http_verdict> {
        numbers.push_back(i.connection * 100 + i.number);
        if (i.path == "/throw")
            throw std::runtime_error("the hook broke");
        if (i.path == "/deny")
            co_return sandbox::http_verdict::denied(403, "not this one");
        co_return sandbox::http_verdict::allowed();
    };
    rig.start();
    auto r =
        run(rig.python_client("c = http.client.HTTPSConnection('api.test', PORT, context=ctx)\n"
                              "c.sock = s\n"
                              "for path in ['/ok', '/throw', '/deny', '/ruled/x', '/ok']:\n"
                              "    c.request('GET', path)\n"
                              "    a = c.getresponse()\n"
                              "    print(a.status, a.getheader('X-Sandbox-Request'), "
                              "a.read().decode().splitlines()[0])\n"));
    BOOST_TEST(r.out == "200 None GET /ok\n"
                        "403 1.2 sandbox: blocked: the request hook failed (request 1.2)\n"
                        "403 1.3 sandbox: refused by the request hook: not this one (request 1.3)\n"
                        "403 1.4 sandbox: refused by request rule \"deny * api.test/ruled/**\" "
                        "(request 1.4)\n"
                        "200 None GET /ok\n",
               r.out);
    auto other = run(rig.python_raw(
        "b'GET /x HTTP/1.1\\r\\nHost: other.test\\r\\nConnection: close\\r\\n\\r\\n'"));
    BOOST_TEST(other.out.find("X-Sandbox-Request: 2.1\r\n") != std::string::npos, other.out);
    BOOST_TEST(other.out.find("(request 2.1)\n") != std::string::npos, other.out);
    rig.ended(2);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 6u);
    for (std::size_t i = 0; i < 5; ++i)
        BOOST_TEST(seen[i].http.number == i + 1);
    BOOST_TEST(seen[5].http.number == 1u);
    BOOST_TEST(seen[1].reason == "hook_error");
    BOOST_TEST(seen[2].reason == "hook_deny");
    BOOST_TEST(seen[5].reason == "host_mismatch");
    sandbox::net_record rec; // the audit's form of a record holds the number too
    rec.event = sandbox::net_event::request;
    rec.http = seen[1].http;
    const std::string json = boost::json::serialize(sandbox::to_json(rec));
    BOOST_TEST(json.find("\"number\":2") != std::string::npos, json);
    BOOST_TEST(rig.on_loop([&] { return numbers; }) ==
                   (std::vector<std::uint64_t>{101, 102, 103, 105}),
               boost::test_tools::per_element());
}

// T22: a request head past 64 KiB, however it is made (one long line, many lines, 10,000
// fields), is refused with 431 once the cap is passed, never held whole, never forwarded.
BOOST_AUTO_TEST_CASE(t22_heads_past_the_cap_get_431_before_the_origin)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    const std::vector<std::string> heads = {
        "b'GET / HTTP/1.1\\r\\nHost: api.test\\r\\nX: ' + b'a' * 200000 + b'\\r\\n\\r\\n'",
        "b'GET / HTTP/1.1\\r\\nHost: api.test\\r\\n' + (b'X-Long: ' + b'b' * 1000 + "
        "b'\\r\\n') * 70 + b'\\r\\n'",
        "b'GET / HTTP/1.1\\r\\nHost: api.test\\r\\n' + b''.join(b'X-%d: v\\r\\n' % i for "
        "i in range(10000)) + b'\\r\\n'",
    };
    for (const auto& head : heads)
    {
        auto r = run(rig.python_raw(head));
        BOOST_TEST(r.out.find("HTTP/1.1 431 Request Header Fields Too Large\r\n") == 0u,
                   head << " -> " << r.out.substr(0, 200));
    }
    // Under the cap: a 60 KiB head, and a small head sent with 200 KiB of its body in one
    // write (the body is not counted as head).
    auto big = run(rig.python_raw("b'POST /big HTTP/1.1\\r\\nHost: api.test\\r\\nX-Big: ' + "
                                  "b'c' * 61000 + b'\\r\\nContent-Length: 204800\\r\\n"
                                  "Connection: close\\r\\n\\r\\n' + b'd' * 204800"));
    BOOST_TEST(big.out.find("HTTP/1.1 200 OK\r\n") == 0u, big.out.substr(0, 200));
    BOOST_TEST(big.out.find("body=204800\n") != std::string::npos);
    rig.ended(heads.size() + 1);
    BOOST_TEST(rig.origin_requests_seen() == 1);
    auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == heads.size() + 1);
    seen.pop_back();
    for (const auto& q : seen)
    {
        BOOST_TEST(q.reason == "head_too_large");
        BOOST_TEST(q.http.status == 431);
    }
}

// T24: an obs-fold is unfolded (the origin gets one line, the client's request is not
// refused for it), and bytes past a Content-Length are the next request, judged as one: the
// exchanges stay in step.
BOOST_AUTO_TEST_CASE(t24_folded_lines_and_bytes_past_a_length_stay_in_step)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    auto folded = run(rig.python_raw("b'GET /f HTTP/1.1\\r\\nHost: api.test\\r\\nX-Fold: one\\r\\n"
                                     " two\\r\\nConnection: close\\r\\n\\r\\n'"));
    // RFC 9112 5.2 lets a proxy refuse a fold or unfold it; this one unfolds (Beast's parser).
    BOOST_TEST(folded.out.find("HTTP/1.1 200 OK\r\n") == 0u, folded.out);
    BOOST_TEST((folded.out.find("\nX-Fold: one two\n") != std::string::npos ||
                folded.out.find("\nX-Fold: one  two\n") != std::string::npos),
               folded.out);
    BOOST_TEST(folded.out.find("\r\n two") == std::string::npos, folded.out);
    auto extra = run(rig.python_raw(
        "b'POST /first HTTP/1.1\\r\\nHost: api.test\\r\\nContent-Length: 3\\r\\n\\r\\n"
        "abcGET /second HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n\\r\\n'"));
    const auto first = extra.out.find("POST /first\n");
    const auto second = extra.out.find("GET /second\n");
    BOOST_TEST((first != std::string::npos && second != std::string::npos && first < second),
               extra.out);
    BOOST_TEST(extra.out.find("body=3\n") != std::string::npos, extra.out);
    auto smuggled = run(rig.python_raw(
        "b'POST /first HTTP/1.1\\r\\nHost: api.test\\r\\nContent-Length: 3\\r\\n\\r\\n"
        "abcGET /x HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n'"));
    BOOST_TEST(smuggled.out.find("HTTP/1.1 421") != std::string::npos, smuggled.out);
    rig.ended(3);
}

// T38: a server name that is not ASCII (a U-label's UTF-8, a NUL, a space) is refused before
// anything is minted; an upper-case, dot-terminated name is the CONNECT host's canonical one.
BOOST_AUTO_TEST_CASE(t38_odd_server_names_are_refused_or_canonical)
{
    for (const std::string& name :
         {std::string("b\xc3\xbc"
                      "cher.test"),
          std::string("a\0b.test", 8), std::string("a b.test"), std::string("a\tb.test")})
    {
        std::vector<unsigned char> ext{0, static_cast<unsigned char>(name.size() + 3), 0, 0,
                                       static_cast<unsigned char>(name.size())};
        ext.insert(ext.end(), name.begin(), name.end());
        BOOST_TEST(!tls::parse_server_name(ext.data(), ext.size()), name);
    }
    inspect_rig rig("api.test", true);
    rig.start();
    const std::string port = std::to_string(rig.proxy_acceptor.local_endpoint().port());
    const auto s_client = [&](const std::string& name) {
        return run("printf 'GET / HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n' | timeout 20 "
                   "openssl s_client -quiet -connect 127.0.0.1:" +
                   port + " -servername \"$(printf '" + name + "')\" -CAfile " +
                   (rig.dir / "proxy-ca.pem").string());
    };
    const auto u_label = s_client("b\\303\\274cher.test");
    BOOST_TEST(u_label.out.empty(), u_label.out);
    const auto dotted = s_client("API.Test.");
    BOOST_TEST(dotted.out.find("sni=api.test") != std::string::npos, dotted.out);
    const auto t = rig.ended(2);
    BOOST_TEST_REQUIRE(t.size() == 2u);
    BOOST_TEST(t[0].reason == "bad_sni");
    BOOST_TEST(t[1].sni == "API.Test.");
    BOOST_TEST(rig.minted() == 1u); // for api.test, by the second client only
    // Through the egress proxy the ClientHello is read before any TLS object exists: the
    // same name fails that reading, and the tunnel closes as a hello that does not parse.
    proxy_rig f({"api.test"}, {});
    const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
    const auto proxied = run("printf '' | timeout 20 openssl s_client -quiet -proxy 127.0.0.1:" +
                             std::to_string(f.port) + " -connect api.test:" + origin +
                             " -servername \"$(printf 'b\\303\\274cher.test')\"");
    BOOST_TEST(proxied.out.empty(), proxied.out);
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].reason == "bad_client_hello");
    BOOST_TEST(f.minted() == 0u);
}

// T36: the client leg takes TLS 1.2 and 1.3 and any group OpenSSL offers (P-384 alone too, in
// TLS 1.3); a client that offers only TLS 1.0 / 1.1 is refused before any request, and so
// recorded. A TLS 1.2 client that offers P-384 alone cannot take the P-256 leaf (in 1.2 the
// groups a client offers bound its server's ECDSA key too): it fails, recorded as the others.
BOOST_AUTO_TEST_CASE(t36_old_protocols_are_refused_and_strict_clients_served)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    BOOST_TEST(with_context(rig, "ctx.minimum_version = ssl.TLSVersion.TLSv1_3") ==
               "TLSv1.3 HTTP/1.1 200 OK\n");
    BOOST_TEST(with_context(rig, "ctx.maximum_version = ssl.TLSVersion.TLSv1_2") ==
               "TLSv1.2 HTTP/1.1 200 OK\n");
    BOOST_TEST(with_context(rig, "ctx.set_ecdh_curve('secp384r1')") == "TLSv1.3 HTTP/1.1 200 OK\n");
    const auto p384_12 = with_context(rig, "ctx.maximum_version = ssl.TLSVersion.TLSv1_2\n"
                                           "ctx.set_ecdh_curve('secp384r1')");
    BOOST_TEST(p384_12 == "handshake failed SSLV3_ALERT_HANDSHAKE_FAILURE\n");
    // An old client, with OpenSSL's security level lowered so that it offers them at all.
    const auto old = with_context(rig, "ctx.minimum_version = ssl.TLSVersion.TLSv1\n"
                                       "ctx.maximum_version = ssl.TLSVersion.TLSv1_1\n"
                                       "ctx.set_ciphers('DEFAULT:@SECLEVEL=0')");
    BOOST_TEST(old.find("handshake failed") == 0u, old);
    BOOST_TEST((old.find("PROTOCOL_VERSION") != std::string::npos ||
                old.find("UNSUPPORTED_PROTOCOL") != std::string::npos),
               old);
    const auto t = rig.ended(5);
    BOOST_TEST_REQUIRE(t.size() == 5u);
    BOOST_TEST(t[3].reason == "client_handshake");
    BOOST_TEST(t[4].reason == "client_handshake");
    BOOST_TEST(rig.origin_requests_seen() == 3);
}

// T34: a call's inspected tunnels have a cap of their own: the CONNECT past it gets 503 with
// Retry-After (HTTP) or REP 01 (SOCKS5) and a record, before anything is dialled, while a
// tunnel that is not inspected still opens; once an inspected tunnel ends, the next gets its
// place.
BOOST_AUTO_TEST_CASE(t34_inspected_tunnels_past_their_cap_get_503_and_retry_after)
{
    proxy_rig f({"api.test"}, {}, 10s, 1);
    const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
    auto r = run("python3 -c \"import socket, ssl, struct, time\n"
                 "P, O = " +
                 std::to_string(f.port) + ", " + origin +
                 "\n"
                 "def connect(host):\n"
                 "    s = socket.create_connection(('127.0.0.1', P))\n"
                 "    s.settimeout(20)\n"
                 "    s.sendall(b'CONNECT %s:%d HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' % (host, O))\n"
                 "    head = b''\n"
                 "    while not head.endswith(b'\\r\\n\\r\\n'):\n"
                 "        d = s.recv(1)\n"
                 "        if not d: break\n"
                 "        head += d\n"
                 "    return s, head.decode()\n"
                 "def socks(host):\n"
                 "    s = socket.create_connection(('127.0.0.1', P))\n"
                 "    s.settimeout(20)\n"
                 "    s.sendall(b'\\x05\\x01\\x00')\n"
                 "    s.recv(2)\n"
                 "    s.sendall(b'\\x05\\x01\\x00\\x03' + bytes([len(host)]) + host + "
                 "struct.pack('>H', O))\n"
                 "    return s, s.recv(2)[1]\n"
                 "a, h = connect(b'api.test')\n"
                 "print(h.split(chr(13))[0])\n"
                 "ctx = ssl.create_default_context(cafile='" +
                 (f.rig.dir / "inspect-ca.pem").string() +
                 "')\n"
                 "t = ctx.wrap_socket(a, server_hostname='api.test')\n"
                 "b, h = connect(b'api.test')\n"
                 "print(h.replace(chr(13) + chr(10), '|'))\n"
                 "print('socks', socks(b'api.test')[1])\n"
                 "c, h = connect(b'127.0.0.1')\n"
                 "print(h.split(chr(13))[0])\n"
                 "t.close()\n"
                 "for i in range(100):\n"
                 "    d, h = connect(b'api.test')\n"
                 "    if h.startswith('HTTP/1.1 200'): break\n"
                 "    time.sleep(0.05)\n"
                 "print(h.split(chr(13))[0])\n\"");
    BOOST_TEST(r.out == "HTTP/1.1 200 Connection Established\n"
                        "HTTP/1.1 503 Service Unavailable|Retry-After: 1|Content-Type: "
                        "text/plain|Content-Length: 44|Connection: close||\n"
                        "socks 1\n"
                        "HTTP/1.1 200 Connection Established\n"
                        "HTTP/1.1 200 Connection Established\n",
               r.out);
    BOOST_TEST(f.closed(3).size() >= 3u); // the tunnels that opened, not the refused ones
    // The refusals are decisions made before anything is dialled.
    const auto capped = f.rig.on_loop([&] {
        return std::count_if(f.records.begin(), f.records.end(), [](const net_record& x) {
            return x.event == net_event::decision && x.verdict == net_verdict::failed &&
                   x.reason == "tunnel_cap" && x.rule == "max_inspected_tunnels 1";
        });
    });
    BOOST_TEST(capped >= 2); // the 503 and the SOCKS refusal (and retries that came early)
    const auto dialled = f.rig.on_loop([&] {
        return std::count_if(f.records.begin(), f.records.end(), [](const net_record& x) {
            return x.event == net_event::decision && x.verdict == net_verdict::allowed;
        });
    });
    BOOST_TEST(dialled == 3); // the first, the opaque one, the one after the first ended
}

// T35: under net_mode::proxy the origin leg of an inspected tunnel goes through the upstream,
// by the same dialler as a plain CONNECT: the upstream is asked for the CONNECT host, the
// origin is verified by that name through it. The guard still judges what it can here (an
// address the client names: a link-local one never reaches the upstream); a name goes to the
// upstream unresolved, so what it resolves to is the upstream's to judge (network.md).
BOOST_AUTO_TEST_CASE(t35_an_inspected_origin_is_reached_through_the_upstream)
{
    proxy_rig f({"api.test"}, {}, 10s, 256, true);
    auto r = run(f.curl("inspect-ca.pem"));
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out == "sni=api.test alpn=http/1.1");
    const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
    auto metadata =
        run("curl -sS -o /dev/null -w '%{http_connect}' --max-time 10 -x http://127.0.0.1:" +
            std::to_string(f.port) + " -p https://169.254.169.254:" + origin + "/");
    BOOST_TEST(metadata.out == "403", metadata.out);
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].reason == "closed");
    BOOST_TEST(c[0].tls.has_value());
    const auto heads = f.rig.on_loop([&] { return f.upstream_heads; });
    BOOST_TEST_REQUIRE(heads.size() == 1u); // the link-local address never got there
    BOOST_TEST(heads[0].find("CONNECT api.test:" + origin + " HTTP/1.1\r\n") == 0u, heads[0]);
    const auto denied = f.rig.on_loop([&] {
        return std::count_if(f.records.begin(), f.records.end(), [](const net_record& x) {
            return x.event == net_event::decision && x.reason == "link_local";
        });
    });
    BOOST_TEST(denied == 1);
}

BOOST_AUTO_TEST_SUITE_END()
