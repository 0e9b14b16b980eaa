// test/net/tls_test.cpp: TLS inspection (net/tls). The leaves are checked by OpenSSL's own
// verifier in strict mode (chain, host, purpose, key identifiers), the cache by its canonical
// keys, bound and renewal; the server context, the terminated tunnel and the egress proxy
// with inspection by real clients (curl, Python's ssl) against in-process TLS servers on
// loopback; the ClientHello reader against OpenSSL's own hello and broken ones.
#include "test/net/tls_rigs.hpp"

#include "net/tls/client_hello.hpp"

BOOST_AUTO_TEST_SUITE(tls_authority)

BOOST_AUTO_TEST_CASE(a_leaf_chains_to_the_ca_for_its_host_only)
{
    auto ca = make_ca();
    auto leaf = ca->mint(host("api.example.test"), tls::clock::now());
    BOOST_TEST_REQUIRE(leaf.has_value());
    X509* c = (*leaf)->cert;
    BOOST_TEST(verify(*ca, c, "api.example.test") == X509_V_OK,
               X509_verify_cert_error_string(verify(*ca, c, "api.example.test")));
    BOOST_TEST(verify(*ca, c, "other.example.test") == X509_V_ERR_HOSTNAME_MISMATCH);
    BOOST_TEST(verify(*ca, c, "example.test") == X509_V_ERR_HOSTNAME_MISMATCH);
    // The leaf certifies the shared leaf key, which is not the CA's.
    BOOST_TEST(X509_check_private_key(c, ca->leaf_key()) == 1);
    BOOST_TEST(X509_check_private_key(ca->certificate(), ca->leaf_key()) == 0);
    ERR_clear_error();
    // What strict verifiers want: AKI byte-equal to the CA's SKI, no SKI of the CA's on the
    // leaf, a leaf that is no CA, server auth, key usages marked critical.
    const ASN1_OCTET_STRING* aki = X509_get0_authority_key_id(c);
    const ASN1_OCTET_STRING* ski = X509_get0_subject_key_id(ca->certificate());
    BOOST_TEST_REQUIRE((aki && ski));
    BOOST_TEST(ASN1_OCTET_STRING_cmp(aki, ski) == 0);
    const ASN1_OCTET_STRING* leaf_ski = X509_get0_subject_key_id(c);
    BOOST_TEST((!leaf_ski || ASN1_OCTET_STRING_cmp(leaf_ski, ski) != 0));
    BOOST_TEST(X509_check_ca(c) == 0);
    BOOST_TEST(X509_check_ca(ca->certificate()) == 1);
    BOOST_TEST(X509_check_purpose(c, X509_PURPOSE_SSL_SERVER, 0) == 1);
    BOOST_TEST(critical(c, NID_key_usage));
    BOOST_TEST(critical(c, NID_basic_constraints));
    BOOST_TEST(critical(ca->certificate(), NID_basic_constraints));
    // The CA signs leaves only (pathlen 0).
    BOOST_TEST(X509_get_pathlen(ca->certificate()) == 0);
}

BOOST_AUTO_TEST_CASE(an_address_gets_an_ip_alt_name)
{
    auto ca = make_ca();
    for (std::string text : {"127.0.0.1", "[::1]", "2130706433"})
        BOOST_TEST_CONTEXT(text)
        {
            const auto h = host(text);
            auto leaf = ca->mint(h, tls::clock::now());
            BOOST_TEST_REQUIRE(leaf.has_value());
            BOOST_TEST(verify(*ca, (*leaf)->cert, h.text(), true) == X509_V_OK);
            BOOST_TEST(X509_check_ip_asc((*leaf)->cert, h.text().c_str(), 0) == 1);
            BOOST_TEST(X509_check_ip_asc((*leaf)->cert, h.ip->is_v4() ? "127.0.0.2" : "::2", 0) !=
                       1);
            BOOST_TEST(X509_check_host((*leaf)->cert, "localhost", 0, 0, nullptr) != 1);
        }
}

BOOST_AUTO_TEST_CASE(a_name_over_63_characters_is_in_a_critical_alt_name_only)
{
    auto ca = make_ca();
    const std::string name = std::string(40, 'a') + "." + std::string(40, 'b') + ".test";
    auto leaf = ca->mint(host(name), tls::clock::now());
    BOOST_TEST_REQUIRE(leaf.has_value());
    BOOST_TEST(X509_NAME_entry_count(X509_get_subject_name((*leaf)->cert)) == 0);
    BOOST_TEST(critical((*leaf)->cert, NID_subject_alt_name));
    BOOST_TEST(verify(*ca, (*leaf)->cert, name) == X509_V_OK);
    auto short_leaf = ca->mint(host("a.test"), tls::clock::now());
    BOOST_TEST(!critical((*short_leaf)->cert, NID_subject_alt_name));
}

BOOST_AUTO_TEST_CASE(validity_is_backdated_and_never_past_the_ca)
{
    const auto now = tls::clock::now();
    tls::authority_options o;
    o.lifetime = 2h;
    auto ca = make_ca(o, now);
    auto leaf = ca->mint(host("a.test"), now);
    BOOST_TEST_REQUIRE(leaf.has_value());
    BOOST_TEST(((*leaf)->not_after == ca->not_after()));
    BOOST_TEST(ASN1_TIME_compare(X509_get0_notAfter((*leaf)->cert),
                                 X509_get0_notAfter(ca->certificate())) == 0);
    const time_t hour_ago = tls::clock::to_time_t(now - 1h);
    BOOST_TEST(X509_cmp_time(X509_get0_notBefore((*leaf)->cert), nullptr) < 0);
    time_t before_backdate = hour_ago - 1;
    BOOST_TEST(X509_cmp_time(X509_get0_notBefore((*leaf)->cert), &before_backdate) > 0);
    // A long-lived CA caps nothing: the leaf gets its own 7 days.
    auto long_ca = make_ca({}, now);
    o = long_ca->options();
    BOOST_TEST(o.lifetime == std::chrono::seconds(24h));
}

BOOST_AUTO_TEST_CASE(the_cache_is_keyed_by_the_canonical_host_bounded_and_renewed)
{
    tls::authority_options o;
    o.cache_capacity = 2;
    o.lifetime = 30 * 24h;
    const auto now = tls::clock::now();
    auto ca = make_ca(o, now);
    bool hit = true;
    auto first = ca->leaf_for(host("API.Example.Test."), now, &hit);
    BOOST_TEST_REQUIRE(first.has_value());
    BOOST_TEST(!hit);
    auto again = ca->leaf_for(host("api.example.test"), now, &hit);
    BOOST_TEST(hit);
    BOOST_TEST(again->get() == first->get());
    // Bounded: a third host evicts the least recently used.
    ca->leaf_for(host("b.test"), now, &hit);
    ca->leaf_for(host("c.test"), now, &hit);
    BOOST_TEST(ca->cached() == 2u);
    ca->leaf_for(host("api.example.test"), now, &hit);
    BOOST_TEST(!hit);
    // Renewed: with less than an hour left the leaf is minted again, with a later end.
    const auto late = (*first)->not_after - 30min;
    auto renewed = ca->leaf_for(host("api.example.test"), late, &hit);
    BOOST_TEST(!hit);
    BOOST_TEST(((*renewed)->not_after > (*first)->not_after));
}

BOOST_AUTO_TEST_CASE(the_pem_holds_the_ca_certificate_and_no_key)
{
    auto ca = make_ca();
    const std::string pem = ca->certificate_pem();
    BOOST_TEST(pem.find("-----BEGIN CERTIFICATE-----") == 0u);
    BOOST_TEST(pem.find("PRIVATE") == std::string::npos);
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* back = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    BOOST_TEST_REQUIRE(back != nullptr);
    BOOST_TEST(X509_cmp(back, ca->certificate()) == 0);
    X509_free(back);
    // Two CAs never share keys or certificates.
    auto other = make_ca();
    BOOST_TEST(X509_cmp(other->certificate(), ca->certificate()) != 0);
    BOOST_TEST(X509_check_private_key(ca->certificate(), other->leaf_key()) == 0);
    ERR_clear_error();
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused)
{
    tls::authority_options o;
    o.name.clear();
    auto a = tls::certificate_authority::create(o);
    BOOST_TEST_REQUIRE(!a);
    BOOST_TEST(a.error().code == errc::validation);
    o = {};
    o.leaf_lifetime = 0s;
    auto b = tls::certificate_authority::create(o);
    BOOST_TEST_REQUIRE(!b);
    BOOST_TEST(b.error().diag.limit == "lifetime");
}

BOOST_AUTO_TEST_CASE(server_names_parse_strictly)
{
    const std::vector<unsigned char> ok{0, 11, 0, 0, 8, 'a', 'p', 'i', '.', 't', 'e', 's', 't'};
    BOOST_TEST(tls::parse_server_name(ok.data(), ok.size()).value_or("-") == "api.test");
    auto wrong_list = ok;
    wrong_list[1] = 12;
    BOOST_TEST(!tls::parse_server_name(wrong_list.data(), wrong_list.size()));
    auto too_long = ok;
    too_long[4] = 9;
    BOOST_TEST(!tls::parse_server_name(too_long.data(), too_long.size()));
    const std::vector<unsigned char> other_type{0, 4, 1, 0, 1, 'x'};
    BOOST_TEST(!tls::parse_server_name(other_type.data(), other_type.size()));
    const std::vector<unsigned char> empty_name{0, 3, 0, 0, 0};
    BOOST_TEST(!tls::parse_server_name(empty_name.data(), empty_name.size()));
    BOOST_TEST(!tls::parse_server_name(ok.data(), 1));
    // Two host names (the first would be read, a server may take the second): refused; so is
    // a host name followed by an entry of another type.
    const std::vector<unsigned char> two{0,   14, 0, 0, 4,   'a', '.', 't',
                                         'e', 0,  0, 4, 'b', '.', 't', 'e'};
    BOOST_TEST(!tls::parse_server_name(two.data(), two.size()));
    const std::vector<unsigned char> then_other{0, 11, 0, 0, 4, 'a', '.', 't', 'e', 1, 0, 1, 'x'};
    BOOST_TEST(!tls::parse_server_name(then_other.data(), then_other.size()));
}

BOOST_AUTO_TEST_CASE(the_lru_bookkeeping_alone)
{
    using cache = tls::leaf_cache<int>;
    cache c(2, std::chrono::seconds(60));
    const auto t = cache::clock::now();
    c.insert("a", std::make_shared<int>(1), t + 1h);
    c.insert("b", std::make_shared<int>(2), t + 1h);
    BOOST_TEST(*c.find("a", t) == 1); // a is now the most recent
    c.insert("c", std::make_shared<int>(3), t + 1h);
    BOOST_TEST(!c.find("b", t));
    BOOST_TEST(*c.find("a", t) == 1);
    BOOST_TEST(!c.find("c", t + 1h - 30s)); // ends within a minute: gone
    BOOST_TEST(c.size() == 1u);
    c.insert("a", std::make_shared<int>(4), t + 2h);
    BOOST_TEST(*c.find("a", t) == 4);
    BOOST_TEST(c.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tls_handshake)

BOOST_AUTO_TEST_CASE(curl_trusts_a_leaf_for_the_connect_host_and_the_cache_serves_the_next)
{
    tls_server s("api.test");
    auto first = run(curl(s, "api.test"));
    BOOST_TEST(first.status == 0);
    BOOST_TEST(first.out == "ok");
    auto second = run(curl(s, "api.test"));
    BOOST_TEST(second.out == "ok");
    const auto states = s.seen();
    BOOST_TEST_REQUIRE(states.size() == 2u);
    BOOST_TEST(states[0].refused.empty());
    BOOST_TEST(states[0].sni == "api.test");
    BOOST_TEST(!states[0].leaf_from_cache);
    BOOST_TEST(states[1].leaf_from_cache);
}

BOOST_AUTO_TEST_CASE(a_client_naming_another_host_is_refused_before_any_leaf_is_made)
{
    tls_server s("api.test");
    auto r = run(curl(s, "other.test"));
    BOOST_TEST(r.status == 35); // CURLE_SSL_CONNECT_ERROR: the handshake failed
    BOOST_TEST(r.out.empty());
    const auto states = s.seen();
    BOOST_TEST_REQUIRE(states.size() == 1u);
    BOOST_TEST(states[0].refused == "sni_mismatch");
    BOOST_TEST(states[0].sni == "other.test");
    BOOST_TEST(!states[0].leaf);
    BOOST_TEST(s.cached() == 0u); // no signing oracle: nothing minted for other.test
}

BOOST_AUTO_TEST_CASE(without_the_bundle_the_leaf_is_not_trusted)
{
    tls_server s("api.test");
    auto r = run(curl(s, "api.test", false));
    BOOST_TEST(r.status == 60); // CURLE_PEER_FAILED_VERIFICATION
    BOOST_TEST(r.out.empty());
}

BOOST_AUTO_TEST_CASE(an_address_without_sni_gets_an_ip_leaf)
{
    tls_server s("127.0.0.1");
    auto r = run(curl(s, "127.0.0.1"));
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out == "ok");
    const auto states = s.seen();
    BOOST_TEST_REQUIRE(states.size() == 1u);
    BOOST_TEST(states[0].sni.empty()); // curl sends no SNI for an address
    BOOST_TEST(states[0].refused.empty());
}

BOOST_AUTO_TEST_CASE(python_gets_http11_and_an_h2_only_client_is_refused)
{
    tls_server s("api.test");
    const std::string script = "import socket, ssl, sys\n"
                               "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
                               "ctx.set_alpn_protocols(sys.argv[3].split(','))\n"
                               "raw = socket.create_connection(('127.0.0.1', int(sys.argv[2])))\n"
                               "try:\n"
                               "    c = ctx.wrap_socket(raw, server_hostname='api.test')\n"
                               "except ssl.SSLError as e:\n"
                               "    print('refused', e); sys.exit(3)\n"
                               "print(c.selected_alpn_protocol(), c.version())\n";
    std::ofstream(s.dir / "client.py") << script;
    const std::string base = "python3 " + (s.dir / "client.py").string() + " " + s.ca_file() + " " +
                             std::to_string(s.port()) + " ";
    auto both = run(base + "h2,http/1.1");
    BOOST_TEST(both.status == 0);
    BOOST_TEST(both.out.find("http/1.1 TLSv1.3") == 0u, both.out);
    auto h2 = run(base + "h2");
    BOOST_TEST(h2.status == 3);
    BOOST_TEST(h2.out.find("no application protocol") != std::string::npos, h2.out);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tls_inspect)

BOOST_AUTO_TEST_CASE(curl_reaches_a_verified_origin_through_both_terminated_legs)
{
    inspect_rig rig("api.test", true);
    rig.start();
    auto r = run(rig.curl("proxy-ca.pem"));
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out == "sni=api.test alpn=http/1.1"); // what the origin saw of our client leg
    rig.ended(1); // its tunnel's end first (the close waits for both peers' ends)
    // The client sees the proxy's leaf, not the origin's: trusting the origin's CA alone fails.
    auto direct = run(rig.curl("origin-ca.pem"));
    BOOST_TEST(direct.status == 60);
    const auto t = rig.ended(2);
    BOOST_TEST_REQUIRE(t.size() == 2u);
    BOOST_TEST(t[0].reason == "closed");
    BOOST_TEST(t[0].sni == "api.test");
    BOOST_TEST(t[0].origin_alpn == "http/1.1");
    BOOST_TEST(t[0].up > 0u);
    BOOST_TEST(t[0].down > r.out.size());
    BOOST_TEST(t[1].reason == "client_handshake"); // curl refused the leaf
    BOOST_TEST(t[1].leaf_from_cache);
}

// Many records through both legs, in order and whole (the pumps take a buffer per burst and
// let it go when the socket runs dry). (Uploads: net_bench --case inspect counts 512 MiB.)
BOOST_AUTO_TEST_CASE(a_large_body_crosses_both_legs_whole)
{
    inspect_rig rig("api.test", true);
    rig.body_bytes = 6 * 1024 * 1024 + 123;
    rig.start();
    auto r = run(rig.curl("proxy-ca.pem"));
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out.size() == rig.body_bytes);
    BOOST_TEST((r.out == pattern(rig.body_bytes)));
    const auto t = rig.ended(1);
    BOOST_TEST_REQUIRE(t.size() == 1u);
    BOOST_TEST(t[0].reason == "closed");
    BOOST_TEST(t[0].down > rig.body_bytes);
}

// The origin leg resumes the session the origin gave last time (tls.md M4): the second
// tunnel's origin sees a resumed handshake; the client leg is a full one each time.
BOOST_AUTO_TEST_CASE(the_origin_leg_resumes_its_last_session)
{
    inspect_rig rig("api.test", true);
    rig.report_reuse = true;
    rig.start();
    auto first = run(rig.curl("proxy-ca.pem"));
    auto second = run(rig.curl("proxy-ca.pem"));
    BOOST_TEST(first.out == "full");
    BOOST_TEST(second.out == "resumed");
    BOOST_TEST(rig.sessions.size() == 1u);
    const auto t = rig.ended(2);
    BOOST_TEST_REQUIRE(t.size() == 2u);
    BOOST_TEST(t[1].reason == "closed");
}

// An origin's stream cut without close_notify reaches the client as cut: no close_notify of
// ours vouches for it, so a strict client (Python with ragged ends reported) sees the
// truncation instead of a whole close-delimited body. (curl 7.88 accepts either.)
BOOST_AUTO_TEST_CASE(a_truncated_origin_is_never_vouched_for)
{
    inspect_rig rig("api.test", true);
    rig.truncate = true;
    rig.start();
    const std::string strict_client =
        rig.python_client("s.sendall(b'GET / HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n')\n"
                          "data = b''\n"
                          "try:\n"
                          "    while d := s.recv(4096): data += d\n"
                          "    print('whole', len(data))\n"
                          "except ssl.SSLEOFError:\n"
                          "    print('cut', data.endswith(b'partial'))\n",
                          ", suppress_ragged_eofs=False");
    auto r = run(strict_client);
    BOOST_TEST(r.out == "cut True\n");
    const auto t = rig.ended(1);
    BOOST_TEST_REQUIRE(t.size() == 1u);
    BOOST_TEST(t[0].reason == "truncated");
}

// The proxy reads the ClientHello to decide; TLS then gets those bytes first.
BOOST_AUTO_TEST_CASE(a_hello_read_ahead_is_handed_to_tls)
{
    inspect_rig rig("api.test", true);
    rig.peek_first = true;
    rig.start();
    auto r = run(rig.curl("proxy-ca.pem"));
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out == "sni=api.test alpn=http/1.1");
    std::promise<std::vector<tls::hello_peek>> p;
    asio::post(rig.ioc, [&] { p.set_value(rig.peeks); });
    const auto peeks = p.get_future().get();
    BOOST_TEST_REQUIRE(peeks.size() == 1u);
    BOOST_TEST((peeks[0].what == tls::hello_peek::verdict::tls));
    BOOST_TEST(peeks[0].sni == "api.test");
    BOOST_TEST(
        (std::find(peeks[0].alpn.begin(), peeks[0].alpn.end(), "http/1.1") != peeks[0].alpn.end()));
    const auto t = rig.ended(1);
    BOOST_TEST_REQUIRE(t.size() == 1u);
    BOOST_TEST(t[0].reason == "closed");
}

BOOST_AUTO_TEST_CASE(an_origin_that_does_not_verify_gets_no_leaf)
{
    inspect_rig rig("api.test", false); // its CA is not trusted: system roots only
    rig.start();
    rig.expect_untrusted_origin("issuer");
}

BOOST_AUTO_TEST_CASE(an_origin_certified_for_another_name_gets_no_leaf)
{
    inspect_rig rig("other.test", true);
    rig.start();
    rig.expect_untrusted_origin("hostname mismatch");
}

BOOST_AUTO_TEST_CASE(a_silent_origin_ends_at_the_handshake_deadline)
{
    inspect_rig rig("api.test", true, true);
    rig.limits.handshake_timeout = 300ms;
    rig.start();
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run(rig.curl("proxy-ca.pem"));
    BOOST_TEST(r.status == 35);
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 5s));
    const auto t = rig.ended(1);
    BOOST_TEST_REQUIRE(t.size() == 1u);
    BOOST_TEST(t[0].reason == "handshake_timeout");
    BOOST_TEST(rig.minted() == 0u);
}

BOOST_AUTO_TEST_CASE(a_broken_origin_root_is_refused)
{
    tls::origin_trust trust;
    trust.extra_roots_pem.push_back(
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    auto o = tls::origin_context::create(trust);
    BOOST_TEST_REQUIRE(!o);
    BOOST_TEST(o.error().code == errc::validation);
    BOOST_TEST(o.error().diag.limit == "net.mitm.origin_ca");
    trust.extra_roots_pem = {"no certificate here"};
    BOOST_TEST(!tls::origin_context::create(trust));
}

// Calls with the same origin trust share one context (parsing 140 roots is not per call);
// another trust gets its own; a broken one is refused, not cached.
BOOST_AUTO_TEST_CASE(origin_contexts_are_shared_per_trust)
{
    auto ca = make_ca();
    tls::origin_trust system_only;
    tls::origin_trust with_ca;
    with_ca.extra_roots_pem = {ca->certificate_pem()};
    auto a = tls::shared_origin_context(system_only);
    auto b = tls::shared_origin_context(system_only);
    auto c = tls::shared_origin_context(with_ca);
    BOOST_TEST_REQUIRE((a && b && c));
    BOOST_TEST(a->get() == b->get());
    BOOST_TEST(a->get() != c->get());
    BOOST_TEST(tls::shared_origin_context(with_ca)->get() == c->get());
    tls::origin_trust broken;
    broken.extra_roots_pem = {"no certificate here"};
    BOOST_TEST(!tls::shared_origin_context(broken));
    BOOST_TEST(!tls::shared_origin_context(broken));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tls_trust)

BOOST_AUTO_TEST_CASE(the_bundle_holds_the_system_roots_then_the_ca_and_nothing_else)
{
    auto ca = make_ca();
    auto other = make_ca();
    const auto dir =
        std::filesystem::temp_directory_path() / ("sbx-tls-trust-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        std::ofstream f(dir / "system.crt");
        f << "# a comment\n"
          << other->certificate_pem()
          << "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
          << other->certificate_pem();
    }
    auto roots = tls::system_roots((dir / "system.crt").string());
    auto b = tls::trust_bundle(*roots, ca->certificate_pem());
    BOOST_TEST_REQUIRE(b.has_value());
    BOOST_TEST(b->find("PRIVATE") == std::string::npos);
    BOOST_TEST(b->find("comment") == std::string::npos);
    auto count = [](const std::string& text) {
        std::size_t certs = 0;
        for (auto at = text.find("BEGIN CERTIFICATE"); at != std::string::npos;
             at = text.find("BEGIN CERTIFICATE", at + 1))
            ++certs;
        return certs;
    };
    BOOST_TEST(count(*b) == 3u);
    BOOST_TEST(b->rfind(ca->certificate_pem()) == b->size() - ca->certificate_pem().size());
    // Read once: the same text while the file stays; read again once it changes.
    BOOST_TEST(tls::system_roots((dir / "system.crt").string()) == roots);
    std::ofstream(dir / "system.crt", std::ios::app) << ca->certificate_pem();
    auto grown = tls::system_roots((dir / "system.crt").string());
    BOOST_TEST(grown != roots);
    BOOST_TEST(count(*grown) == 3u);
    // No system bundle: the CA alone. No CA: refused.
    auto none = tls::system_roots((dir / "missing.crt").string());
    BOOST_TEST(none->empty());
    auto alone = tls::trust_bundle(*none, ca->certificate_pem());
    BOOST_TEST((alone && *alone == ca->certificate_pem()));
    BOOST_TEST(!tls::trust_bundle(*roots, "not a certificate"));
    std::filesystem::remove_all(dir);
}

// curl and Python with no flags of their own: the variables alone make them trust the leaf.
BOOST_AUTO_TEST_CASE(clients_trust_the_leaf_through_the_variables_alone)
{
    tls_server s("127.0.0.1");
    auto bundle = tls::trust_bundle(*tls::system_roots(), s.ca->certificate_pem());
    BOOST_TEST_REQUIRE(bundle.has_value());
    const auto path = s.dir / "bundle.pem";
    std::ofstream(path) << *bundle;
    std::string env = "env";
    for (const auto& [name, value] : tls::trust_environment(path.string()))
        env += " " + name + "=" + value;
    BOOST_TEST(tls::trust_environment("x").size() == 11u);
    const std::string url = "https://127.0.0.1:" + std::to_string(s.port()) + "/";
    auto c = run(env + " curl -sS --max-time 10 --noproxy '*' " + url);
    BOOST_TEST(c.status == 0);
    BOOST_TEST(c.out == "ok");
    auto py = run(env +
                  " python3 -c \"import urllib.request,sys; "
                  "sys.stdout.write(urllib.request.urlopen('" +
                  url + "', timeout=10).read().decode())\"");
    BOOST_TEST(py.status == 0);
    BOOST_TEST(py.out == "ok");
    // Without them, neither trusts it.
    BOOST_TEST(run("curl -sS --max-time 10 --noproxy '*' " + url).status == 60);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

void put16(bytes& b, std::size_t v)
{
    b.push_back(static_cast<unsigned char>(v >> 8));
    b.push_back(static_cast<unsigned char>(v));
}

// An extension: its type, then its body with a 2-byte length.
bytes extension(std::size_t type, const bytes& body)
{
    bytes e;
    put16(e, type);
    put16(e, body.size());
    e.insert(e.end(), body.begin(), body.end());
    return e;
}

bytes sni_extension(const std::string& name)
{
    bytes list{0};
    put16(list, name.size());
    list.insert(list.end(), name.begin(), name.end());
    bytes body;
    put16(body, list.size());
    body.insert(body.end(), list.begin(), list.end());
    return extension(0, body);
}

// A minimal ClientHello message (type, 3-byte length, body) with `exts`.
bytes hello_message(const bytes& exts)
{
    bytes body{3, 3};
    body.insert(body.end(), 32, 7); // random
    body.push_back(0);              // no session id
    body.insert(body.end(), {0, 2, 0x13, 0x01, 1, 0});
    put16(body, exts.size());
    body.insert(body.end(), exts.begin(), exts.end());
    bytes m{1, 0};
    put16(m, body.size());
    m.insert(m.end(), body.begin(), body.end());
    return m;
}

// `message` in handshake records of at most `chunk` bytes each.
bytes records(const bytes& message, std::size_t chunk = 16384)
{
    bytes out;
    for (std::size_t at = 0; at < message.size(); at += chunk)
    {
        const std::size_t n = std::min(chunk, message.size() - at);
        out.insert(out.end(), {22, 3, 1});
        put16(out, n);
        out.insert(out.end(), message.begin() + static_cast<std::ptrdiff_t>(at),
                   message.begin() + static_cast<std::ptrdiff_t>(at + n));
    }
    return out;
}

tls::hello_peek peek(const bytes& b)
{
    return tls::peek_client_hello(b);
}

} // namespace

BOOST_AUTO_TEST_SUITE(tls_client_hello)

using verdict = tls::hello_peek::verdict;

BOOST_AUTO_TEST_CASE(openssl_s_hello_gives_its_name_and_protocols_and_every_prefix_asks_for_more)
{
    const bytes hello = openssl_client_hello("api.test");
    const auto p = peek(hello);
    BOOST_TEST_REQUIRE((p.what == verdict::tls));
    BOOST_TEST(p.sni == "api.test");
    BOOST_TEST((p.alpn == std::vector<std::string>{"h2", "http/1.1"}));
    BOOST_TEST(p.bytes == hello.size());
    for (std::size_t n = 0; n < hello.size(); ++n)
        if (peek(bytes(hello.begin(), hello.begin() + static_cast<std::ptrdiff_t>(n))).what !=
            verdict::need_more)
            BOOST_FAIL("a prefix of " << n << " bytes was judged");
    // Bytes after the ClientHello (a client that pipelines) are not counted.
    bytes more = hello;
    more.insert(more.end(), {23, 3, 3, 0, 1, 0});
    BOOST_TEST(peek(more).bytes == hello.size());
}

BOOST_AUTO_TEST_CASE(a_hello_over_several_records_is_read_whole)
{
    const bytes m = hello_message(sni_extension("split.test"));
    const auto p = peek(records(m, 7));
    BOOST_TEST_REQUIRE((p.what == verdict::tls));
    BOOST_TEST(p.sni == "split.test");
    BOOST_TEST(p.bytes == records(m, 7).size());
}

BOOST_AUTO_TEST_CASE(other_protocols_and_broken_hellos_are_classified)
{
    const auto text = [](std::string s) { return bytes(s.begin(), s.end()); };
    BOOST_TEST((peek(text("GET / HTTP/1.1\r\n\r\n")).what == verdict::not_tls));
    BOOST_TEST((peek(text("SSH-2.0-OpenSSH_9.2\r\n")).what == verdict::not_tls));
    // What a TLS stack would read as a record but is no ClientHello here: malformed, never
    // "not TLS" (which passes unjudged): another major version, an alert or data first.
    BOOST_TEST((peek(bytes{22, 2, 0, 0, 5}).what == verdict::malformed));
    BOOST_TEST((peek(bytes{22, 0, 1, 0, 5}).what == verdict::malformed));
    BOOST_TEST((peek(bytes{21, 3, 3, 0, 2, 1, 0}).what == verdict::malformed));
    BOOST_TEST((peek(bytes{23, 3, 3}).what == verdict::malformed));
    // Judged on the first byte that is not TLS's, not after five: a one-byte line of another
    // protocol is never held back waiting for more.
    BOOST_TEST((peek(text("x")).what == verdict::not_tls));
    BOOST_TEST((peek(bytes{22, 0x30}).what == verdict::not_tls));
    BOOST_TEST((peek(bytes{22}).what == verdict::need_more));
    BOOST_TEST((peek(bytes{22, 3, 9}).what == verdict::need_more));
    BOOST_TEST((peek(bytes{22, 3, 1, 0}).what == verdict::need_more));
    // A record version OpenSSL takes though no TLS names it (3.5): still read as a hello.
    bytes later = records(hello_message(sni_extension("a.test")));
    later[2] = 5;
    const auto read = peek(later);
    BOOST_TEST((read.what == verdict::tls));
    BOOST_TEST(read.sni == "a.test");
    BOOST_TEST((peek(bytes{22, 3, 1, 0, 0}).what == verdict::malformed));      // empty record
    BOOST_TEST((peek(bytes{22, 3, 1, 0x50, 0}).what == verdict::malformed));   // over 2^14 + 256
    BOOST_TEST((peek(records(bytes{2, 0, 0, 0})).what == verdict::malformed)); // a ServerHello
    // Extensions: duplicated, a server_name that does not parse, an empty ALPN name, bytes left.
    const bytes sni = sni_extension("a.test");
    bytes twice = sni;
    twice.insert(twice.end(), sni.begin(), sni.end());
    BOOST_TEST((peek(records(hello_message(twice))).what == verdict::malformed));
    BOOST_TEST((peek(records(hello_message(extension(0, {0, 1, 0})))).what == verdict::malformed));
    BOOST_TEST((peek(records(hello_message(extension(16, {0, 2, 1, 'x', 0})))).what ==
                verdict::malformed));
    BOOST_TEST((peek(records(hello_message(extension(16, {0, 1, 0})))).what == verdict::malformed));
    bytes left_over = hello_message(sni);
    left_over.push_back(0);
    left_over[3] = static_cast<unsigned char>(left_over[3] + 1);
    BOOST_TEST((peek(records(left_over)).what == verdict::malformed));
    // No extensions at all is a TLS 1.2 hello without a name.
    bytes bare = hello_message({});
    bare.resize(bare.size() - 2);
    bare[3] = static_cast<unsigned char>(bare[3] - 2);
    const auto b = peek(records(bare));
    BOOST_TEST((b.what == verdict::tls));
    BOOST_TEST(b.sni.empty());
}

BOOST_AUTO_TEST_CASE(a_hello_past_the_cap_is_refused_without_waiting_for_it)
{
    // The header alone says 20,000 bytes: refused at once, not after reading them.
    bytes head{22, 3, 1, 0, 4, 1, 0, 0x4e, 0x20};
    BOOST_TEST((tls::peek_client_hello(head).what == verdict::too_large));
    const bytes big = hello_message(extension(21, bytes(3000, 0))); // padding
    BOOST_TEST((tls::peek_client_hello(records(big), 1024).what == verdict::too_large));
    BOOST_TEST((tls::peek_client_hello(records(big)).what == verdict::tls));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tls_proxy)

BOOST_AUTO_TEST_CASE(a_selected_connect_host_is_inspected)
{
    proxy_rig f({"api.test"}, {});
    auto r = run(f.curl("inspect-ca.pem"));
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out == "sni=api.test alpn=http/1.1");
    f.closed(1); // its tunnel's end first (the close waits for both peers' ends)
    BOOST_TEST(run(f.curl("origin-ca.pem")).status == 60); // the client sees the proxy's leaf
    const auto c = f.closed(2);
    BOOST_TEST_REQUIRE(c.size() == 2u);
    BOOST_TEST(c[0].reason == "closed");
    BOOST_TEST(c[0].bytes_down > r.out.size());
}

BOOST_AUTO_TEST_CASE(a_socks5_connect_is_inspected_the_same_way)
{
    proxy_rig f({"api.test"}, {});
    auto line = f.curl("inspect-ca.pem");
    line.replace(line.find(" -x http://"), 11, " --socks5-hostname ");
    auto r = run(line);
    BOOST_TEST(r.status == 0, line);
    BOOST_TEST(r.out == "sni=api.test alpn=http/1.1");
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].reason == "closed");
}

BOOST_AUTO_TEST_CASE(an_excluded_host_is_relayed_as_it_is)
{
    proxy_rig f({}, {"api.test"});
    auto r = run(f.curl("origin-ca.pem"));
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out == "sni=api.test alpn=http/1.1");
    BOOST_TEST(run(f.curl("inspect-ca.pem")).status == 60); // the origin's own leaf
    const auto c = f.closed(2);
    BOOST_TEST_REQUIRE(c.size() == 2u);
    // A plain relay's end (the peers' own close: "eof", or "reset" when one closes with
    // bytes unread), never an inspected tunnel's ("closed").
    BOOST_TEST((c[0].reason == "eof" || c[0].reason == "reset"), c[0].reason);
}

BOOST_AUTO_TEST_CASE(plain_bytes_to_an_inspected_host_are_refused)
{
    proxy_rig f({"api.test"}, {});
    auto r = run(f.curl("inspect-ca.pem", "http"));
    BOOST_TEST(r.status != 0);
    BOOST_TEST(r.out.empty());
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].reason == "not_tls");
    BOOST_TEST(c[0].bytes_up == 0u);
}

// A client that opens an inspected tunnel and sends nothing is closed at the deadline.
BOOST_AUTO_TEST_CASE(a_tunnel_without_a_client_hello_ends_at_the_deadline)
{
    proxy_rig f({"api.test"}, {}, 300ms);
    const std::string port = std::to_string(f.port);
    const std::string origin = std::to_string(f.rig.origin_acceptor.local_endpoint().port());
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run(
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/" + port + "; printf \"CONNECT api.test:" + origin +
        " HTTP/1.1\\r\\nHost: api.test\\r\\n\\r\\n\" >&3; head -c 12 <&3; cat <&3 >/dev/null'");
    BOOST_TEST(r.out == "HTTP/1.1 200");
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < 5s));
    const auto c = f.closed(1);
    BOOST_TEST_REQUIRE(c.size() == 1u);
    BOOST_TEST(c[0].reason == "no_client_hello");
}

BOOST_AUTO_TEST_CASE(bad_selection_patterns_are_refused_with_their_field)
{
    tls::inspection_options io;
    io.exclude_hosts = {"bad host"};
    auto in = tls::inspector::create(io);
    BOOST_TEST_REQUIRE(!in);
    BOOST_TEST(in.error().code == errc::validation);
    BOOST_TEST(in.error().diag.limit == "net.mitm.exclude_hosts");
}

BOOST_AUTO_TEST_CASE(selection_uses_the_rules_host_forms)
{
    tls::inspection_options io;
    io.hosts = {"example.test", "*.wild.test", "10.0.0.0/8", "::1"};
    io.exclude_hosts = {"skip.example.test"};
    auto in = tls::inspector::create(io);
    BOOST_TEST_REQUIRE(in.has_value());
    auto& s = **in;
    BOOST_TEST(s.selects(host("example.test")));
    BOOST_TEST(s.selects(host("API.Example.Test.")));
    BOOST_TEST(!s.selects(host("skip.example.test")));
    BOOST_TEST(!s.selects(host("a.skip.example.test")));
    BOOST_TEST(!s.selects(host("notexample.test")));
    BOOST_TEST(!s.selects(host("wild.test")));
    BOOST_TEST(s.selects(host("a.b.wild.test")));
    BOOST_TEST(s.selects(host("10.200.3.4")));
    BOOST_TEST(!s.selects(host("11.0.0.1")));
    BOOST_TEST(s.selects(host("[::1]")));
    BOOST_TEST(!s.selects(host("127.0.0.1")));
}

BOOST_AUTO_TEST_SUITE_END()

// The HTTP inside an inspected tunnel (http_inside.cpp): requests judged one by one, headers
// added, bodies and upgrades carried, the proxy's own answers (400, 403, 421), and records.
BOOST_AUTO_TEST_SUITE(tls_http)

namespace {

std::vector<sandbox::header_injection> token_for_api(bool replace)
{
    return {{"api.test", "Authorization", "Bearer s3cret-token", replace}};
}

} // namespace

// Two requests on one connection (keep-alive), each judged and recorded; the origin sees
// the client's head as it was sent.
BOOST_AUTO_TEST_CASE(keep_alive_requests_are_relayed_and_recorded_one_by_one)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    const std::string port = std::to_string(rig.proxy_acceptor.local_endpoint().port());
    auto r = run(rig.curl_to("", "/one") + " 'https://api.test:" + port + "/two?q=1'");
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out.find("GET /one\nHost: api.test:" + port) == 0u, r.out);
    BOOST_TEST(r.out.find("GET /two?q=1\n") != std::string::npos, r.out);
    const auto t = rig.ended(1);
    BOOST_TEST_REQUIRE(t.size() == 1u); // one tunnel for both
    BOOST_TEST(t[0].reason == "closed");
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    for (const auto& q : seen)
    {
        BOOST_TEST(q.allowed);
        BOOST_TEST(q.reason == "no_rule");
        BOOST_TEST(q.http.method == "GET");
        BOOST_TEST(q.http.status == 200);
        BOOST_TEST(q.http.response_body_bytes > 20u);
    }
}

// Request rules: the allowed path gets through; another is refused with 403 naming why and
// never reaches the origin; a deny rule wins over the allow and catches other spellings.
BOOST_AUTO_TEST_CASE(request_rules_refuse_with_403_naming_the_rule)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    auto p = tls::request_policy::compile(
        {{sandbox::net_action::allow, "GET api.test/repos/acme/**"},
         {sandbox::net_action::deny, "* api.test/repos/acme/secret/**"}},
        {});
    BOOST_TEST_REQUIRE(p.has_value());
    rig.policy = std::move(*p);
    rig.start();
    auto ok = run(rig.curl_to("", "/repos/acme/readme"));
    BOOST_TEST(ok.out.find("GET /repos/acme/readme\n") == 0u, ok.out);
    auto other = run(rig.curl_to("-i", "/repos/other/readme"));
    BOOST_TEST(other.out.find("HTTP/1.1 403 Forbidden") == 0u, other.out);
    BOOST_TEST(other.out.find("no request rule allows") != std::string::npos, other.out);
    auto post = run(rig.curl_to("-i -X POST -d x=1", "/repos/acme/readme"));
    BOOST_TEST(post.out.find("HTTP/1.1 403") == 0u, post.out);
    auto secret = run(rig.curl_to("-i --path-as-is", "/repos/acme/x/../SECRET/key"));
    BOOST_TEST(secret.out.find("HTTP/1.1 403") == 0u, secret.out);
    BOOST_TEST(secret.out.find("X-Sandbox-Rule: deny * api.test/repos/acme/secret/**") !=
                   std::string::npos,
               secret.out);
    BOOST_TEST(rig.ended(4).size() == 4u);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 4u);
    BOOST_TEST(seen[0].allowed);
    BOOST_TEST(seen[0].http.rule == "allow GET api.test/repos/acme/**");
    BOOST_TEST(!seen[1].allowed);
    BOOST_TEST(seen[1].reason == "no_allow_rule");
    BOOST_TEST(seen[1].http.status == 403);
    BOOST_TEST(seen[2].http.method == "POST");
    BOOST_TEST(seen[3].reason == "rule");
    BOOST_TEST(seen[3].http.rule == "deny * api.test/repos/acme/secret/**");
    std::promise<int> answered;
    asio::post(rig.ioc, [&] { answered.set_value(rig.origin_requests); });
    BOOST_TEST(answered.get_future().get() == 1); // the refused never reached it
}

// T5: a Host (or an absolute target) naming another host than the CONNECT's is 421, and the
// origin never sees it.
BOOST_AUTO_TEST_CASE(a_host_that_is_not_the_tunnels_is_misdirected)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    auto fronted = run(rig.curl_to("-i -H 'Host: other.test'", "/"));
    BOOST_TEST(fronted.out.find("HTTP/1.1 421 Misdirected Request") == 0u, fronted.out);
    auto port = run(rig.curl_to("-i -H 'Host: api.test:1'", "/"));
    BOOST_TEST(port.out.find("HTTP/1.1 421") == 0u, port.out);
    auto absolute = run(rig.python_raw(
        "b'GET https://other.test/ HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\n\\\\r\\\\n'"));
    BOOST_TEST(absolute.out.find("HTTP/1.1 421") == 0u, absolute.out);
    auto two = run(rig.python_raw(
        "b'GET / HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\nHost: other.test\\\\r\\\\n\\\\r\\\\n'"));
    BOOST_TEST(two.out.find("HTTP/1.1 400") == 0u, two.out);
    auto same = run(rig.curl_to(
        "-H 'Host: API.test:" + std::to_string(rig.proxy_acceptor.local_endpoint().port()) + "'",
        "/"));
    BOOST_TEST(same.out.find("GET /\n") == 0u, same.out); // one host, spelled otherwise
    rig.ended(5);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 5u);
    BOOST_TEST(seen[0].reason == "host_mismatch");
    BOOST_TEST(seen[0].http.status == 421);
    BOOST_TEST(seen[3].reason == "bad_request");
}

// Secrets that never enter the sandbox: the origin gets the header, the client never sends
// it, the record names it without its value; a request carrying it is refused (or has it
// replaced, per rule).
BOOST_AUTO_TEST_CASE(an_injected_header_reaches_the_origin_and_is_never_recorded)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    auto p = tls::request_policy::compile({}, token_for_api(false));
    BOOST_TEST_REQUIRE(p.has_value());
    rig.policy = std::move(*p);
    rig.start();
    auto r = run(rig.curl_to("", "/whoami"));
    BOOST_TEST(r.out.find("Authorization: Bearer s3cret-token\n") != std::string::npos, r.out);
    auto own = run(rig.curl_to("-i -H 'Authorization: Bearer mine'", "/whoami"));
    BOOST_TEST(own.out.find("HTTP/1.1 403") == 0u, own.out);
    BOOST_TEST(own.out.find("carries Authorization") != std::string::npos, own.out);
    BOOST_TEST(own.out.find("s3cret") == std::string::npos);
    rig.ended(2);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    BOOST_TEST((seen[0].http.injected == std::vector<std::string>{"Authorization"}));
    BOOST_TEST(seen[1].reason == "header_present");
    for (const auto& q : seen)
    {
        sandbox::net_record rec;
        rec.event = sandbox::net_event::request;
        rec.http = q.http;
        const std::string json = boost::json::serialize(sandbox::to_json(rec));
        BOOST_TEST(json.find("s3cret") == std::string::npos, json);
        BOOST_TEST(json.find("whoami") == std::string::npos, json); // no path either
    }
}

BOOST_AUTO_TEST_CASE(a_replacing_rule_overwrites_the_clients_value)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    auto p = tls::request_policy::compile({}, token_for_api(true));
    BOOST_TEST_REQUIRE(p.has_value());
    rig.policy = std::move(*p);
    rig.start();
    auto r = run(rig.curl_to("-H 'authorization: Bearer mine'", "/whoami"));
    BOOST_TEST(r.out.find("Authorization: Bearer s3cret-token\n") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("mine") == std::string::npos, r.out);
}

// Bodies cross as they were framed: a Content-Length upload, a chunked one, one after
// 100-continue; the origin gets every byte and the records count them.
BOOST_AUTO_TEST_CASE(bodies_cross_whole_however_they_are_framed)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    const std::string file = rig.two_uploads();
    auto continued =
        run(rig.curl_to("--data-binary @" + file + " -H 'Expect: 100-continue'", "/up"));
    BOOST_TEST(continued.out.find("body=300000\n") != std::string::npos, continued.out);
    auto head = run(rig.curl_to("-I", "/"));
    BOOST_TEST(head.out.find("HTTP/1.1 200") == 0u, head.out);
    rig.ended(4);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 4u);
    for (int i = 0; i < 3; ++i)
    {
        BOOST_TEST(seen[i].http.request_body_bytes == 300000u);
        BOOST_TEST(seen[i].http.status == 200);
    }
    BOOST_TEST(seen[3].http.method == "HEAD");
    BOOST_TEST(seen[3].http.response_body_bytes == 0u);
}

// Requests that would mean one thing to the proxy and another to the origin are refused
// before a byte reaches it (T22-T26): both framings, a bad chunk size, a lone LF, HTTP/2's
// preface, bytes that are not HTTP.
BOOST_AUTO_TEST_CASE(ambiguous_or_broken_requests_are_refused_with_400)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    const std::vector<std::string> bad = {
        "b'POST / HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\nContent-Length: 3\\\\r\\\\n"
        "Transfer-Encoding: chunked\\\\r\\\\n\\\\r\\\\n0\\\\r\\\\n\\\\r\\\\n'",
        "b'POST / HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\nContent-Length: 3\\\\r\\\\n"
        "Content-Length: 4\\\\r\\\\n\\\\r\\\\nabcd'",
        "b'GET / HTTP/1.1\\\\nHost: api.test\\\\n\\\\n'",
        "b'PRI * HTTP/2.0\\\\r\\\\n\\\\r\\\\nSM\\\\r\\\\n\\\\r\\\\n'",
        "b'\\\\x16\\\\x03\\\\x01 not http at all\\\\r\\\\n\\\\r\\\\n'",
        "b'GET /a%00b HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\n\\\\r\\\\n'",
        "b'GET /../etc HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\n\\\\r\\\\n'",
    }; // (a head past 64 KiB: 431, tls_cases_test.cpp T22)
    for (const auto& request : bad)
    {
        auto r = run(rig.python_raw(request));
        BOOST_TEST(r.out.find("HTTP/1.1 400 Bad Request") == 0u, request << " -> " << r.out);
    }
    rig.ended(bad.size());
    std::promise<int> answered;
    asio::post(rig.ioc, [&] { answered.set_value(rig.origin_requests); });
    BOOST_TEST(answered.get_future().get() == 0);
    for (const auto& q : rig.requests_seen())
        BOOST_TEST(q.reason == "bad_request");
}

// Pipelined requests (two heads in one write) are answered in order, each judged.
BOOST_AUTO_TEST_CASE(pipelined_requests_are_answered_in_order)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    auto r = run(rig.python_raw("b'GET /first HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\n\\\\r\\\\n"
                                "GET /second HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\n"
                                "Connection: close\\\\r\\\\n\\\\r\\\\n'"));
    const auto first = r.out.find("GET /first\n");
    const auto second = r.out.find("GET /second\n");
    BOOST_TEST(first != std::string::npos, r.out);
    BOOST_TEST(second != std::string::npos, r.out);
    BOOST_TEST(first < second);
    rig.ended(1);
    BOOST_TEST(rig.requests_seen().size() == 2u);
}

// A hostile neighbour: 100 inspected connections that each send half a head and stall do
// not delay another client's request, and when they go their tunnels end and give back
// every descriptor.
BOOST_AUTO_TEST_CASE(stalled_half_heads_neither_block_others_nor_leak)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    const auto fds = [] {
        return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                             std::filesystem::directory_iterator{});
    };
    const auto before = fds();
    const std::string port = std::to_string(rig.proxy_acceptor.local_endpoint().port());
    const std::string stall =
        "python3 -c \"import socket, ssl, sys, time\n"
        "ctx = ssl.create_default_context(cafile='" +
        (rig.dir / "proxy-ca.pem").string() +
        "')\n"
        "held = []\n"
        "for i in range(100):\n"
        "    s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', " +
        port +
        ")), server_hostname='api.test')\n"
        "    s.sendall(b'GET / HTTP/1.1\\\\r\\\\nHost: api.test\\\\r\\\\nX-Slow: ')\n"
        "    held.append(s)\n"
        "print('stalled', flush=True)\n"
        "time.sleep(60)\n\"";
    const std::string out = (rig.dir / "stall.out").string();
    auto r = run(stall + " > " + out + " & p=$!; until grep -q stalled " + out +
                 "; do sleep 0.05; done; cat " + out + "; " + rig.curl_to("", "/fine") +
                 "; kill $p; wait $p");
    BOOST_TEST(r.out.find("stalled\nGET /fine\n") == 0u, r.out);
    // Every stalled tunnel ends once its client is gone (the curl's one too).
    const auto t = rig.ended(101);
    BOOST_TEST(t.size() == 101u);
    for (int i = 0; i < 300 && fds() > before; ++i)
        std::this_thread::sleep_for(10ms);
    BOOST_TEST(fds() <= before);
}

// A 101 hands the connection over: the bytes after it go both ways as they are.
BOOST_AUTO_TEST_CASE(an_upgraded_connection_is_relayed_as_it_is)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.start();
    auto r = run(rig.python_client(
        "s.settimeout(10)\n"
        "s.sendall(b'GET /ws HTTP/1.1\\r\\nHost: api.test\\r\\nUpgrade: echo\\r\\n"
        "Connection: Upgrade\\r\\n\\r\\nraw bytes, ')\n"
        "data = b''\n"
        "while b'\\r\\n\\r\\nraw bytes, ' not in data: data += s.recv(4096)\n"
        "s.sendall(b'no framing')\n"
        "while not data.endswith(b'no framing'): data += s.recv(4096)\n"
        "print(data.decode())\n"));
    BOOST_TEST(r.out.find("HTTP/1.1 101 Switching Protocols") == 0u, r.out);
    BOOST_TEST(r.out.find("raw bytes, no framing") != std::string::npos, r.out);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 1u);
    BOOST_TEST(seen[0].http.status == 101);
}

BOOST_AUTO_TEST_SUITE_END()

// The caller's hooks (`http_hooks`) over the requests of inspected tunnels: what they are
// shown, what their answers do, and how they fail closed.
BOOST_AUTO_TEST_SUITE(tls_hooks)

namespace {

using sandbox::http_header;
using sandbox::http_verdict;

bool has_header(const std::vector<http_header>& headers, const std::string& name)
{
    return std::any_of(headers.begin(), headers.end(),
                       [&](const http_header& h) { return boost::beast::iequals(h.name, name); });
}

// Waits on the loop for `d` (a hook taking its time); a cancellation is noted in `log`.
asio::awaitable<void> hook_sleep(std::chrono::milliseconds d, std::vector<std::string>& log)
{
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    log.push_back(ec == asio::error::operation_aborted ? "cancelled" : "slept");
}

} // namespace

// The request hook sees the CONNECT host, the canonical path, the target as sent and the
// client's headers (never the injected one); its edits reach the origin, the proxy's own
// header keeps the proxy's value; both requests on one connection are asked about.
BOOST_AUTO_TEST_CASE(a_request_hook_sees_the_request_and_changes_its_headers)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    auto p = tls::request_policy::compile({{sandbox::net_action::allow, "GET api.test/**"}},
                                          tls_http::token_for_api(false));
    BOOST_TEST_REQUIRE(p.has_value());
    rig.policy = std::move(*p);
    std::vector<sandbox::http_request_info> shown;
    rig.hooks.emplace();
    rig.hooks->on_request =
        [&](const sandbox::http_request_info& i) -> asio::awaitable<http_verdict> {
        shown.push_back(i);
        http_verdict v;
        v.set_headers = {{"X-Mode", "hook"}, {"X-Hook", "yes"}, {"authorization", "hook's own"}};
        v.remove_headers = {"x-drop"};
        co_return v;
    };
    rig.start();
    const std::string port = std::to_string(rig.proxy_acceptor.local_endpoint().port());
    auto r = run(rig.curl_to("--path-as-is -H 'X-Mode: client' -H 'X-Drop: 1'", "/a/./b%41?q=1") +
                 " 'https://api.test:" + port + "/two'");
    BOOST_TEST(r.status == 0);
    BOOST_TEST(r.out.find("GET /a/./b%41?q=1\n") == 0u, r.out);
    BOOST_TEST(r.out.find("X-Mode: hook\n") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("X-Mode: client") == std::string::npos, r.out);
    BOOST_TEST(r.out.find("X-Hook: yes\n") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("X-Drop") == std::string::npos, r.out);
    BOOST_TEST(r.out.find("Authorization: Bearer s3cret-token\n") != std::string::npos, r.out);
    BOOST_TEST(r.out.find("hook's own") == std::string::npos, r.out);
    rig.ended(1);
    const auto infos = rig.on_loop([&] { return shown; });
    BOOST_TEST_REQUIRE(infos.size() == 2u);
    const auto& i = infos[0];
    BOOST_TEST(i.host == "api.test");
    BOOST_TEST(i.port == rig.proxy_acceptor.local_endpoint().port());
    BOOST_TEST(i.method == "GET");
    BOOST_TEST(i.path == "/a/bA");
    BOOST_TEST(i.target == "/a/./b%41?q=1");
    BOOST_TEST(i.rule == "allow GET api.test/**");
    BOOST_TEST(has_header(i.headers, "X-Drop"));
    BOOST_TEST(!has_header(i.headers, "Authorization"));
    BOOST_TEST(infos[1].path == "/two");
    BOOST_TEST(infos[1].connection == i.connection); // one tunnel, kept alive
    BOOST_TEST(i.connection == 1u);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    BOOST_TEST(seen[0].allowed);
    BOOST_TEST(seen[0].http.request_hook == "modified");
    BOOST_TEST((seen[0].http.injected == std::vector<std::string>{"Authorization"}));
}

// A refusal: the client gets the hook's status and its reason (control bytes dropped, so no
// header can be smuggled in), the origin never hears of the request; a status outside
// 400-599 is taken as 403.
BOOST_AUTO_TEST_CASE(a_request_hook_refusal_never_reaches_the_origin)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.hooks.emplace();
    rig.hooks->on_request =
        [](const sandbox::http_request_info& i) -> asio::awaitable<http_verdict> {
        co_return http_verdict::denied(i.path == "/legal" ? 451 : 200, "not today\r\nX-Evil: 1");
    };
    rig.start();
    auto legal = run(rig.curl_to("-i", "/legal"));
    BOOST_TEST(legal.out.find("HTTP/1.1 451 Unavailable For Legal Reasons\r\n") == 0u, legal.out);
    BOOST_TEST(legal.out.find(
                   "sandbox: refused by the request hook: not todayX-Evil: 1 (request 1.1)\n") !=
                   std::string::npos,
               legal.out);
    BOOST_TEST(legal.out.find("\nX-Evil") == std::string::npos, legal.out);
    auto other = run(rig.curl_to("-i", "/other"));
    BOOST_TEST(other.out.find("HTTP/1.1 403 Forbidden\r\n") == 0u, other.out);
    rig.ended(2);
    BOOST_TEST(rig.origin_requests_seen() == 0);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    BOOST_TEST(!seen[0].allowed);
    BOOST_TEST(seen[0].reason == "hook_deny");
    BOOST_TEST(seen[0].http.request_hook == "denied");
    BOOST_TEST(seen[0].http.status == 451);
    BOOST_TEST(seen[1].http.status == 403);
}

// Fail closed: a hook that throws, one that asks for a framing header, one that sleeps past
// its deadline (cancelled, 504 at the deadline, not at its end); none of those requests
// reaches the origin. With allow_on_timeout the slow hook's request goes through.
BOOST_AUTO_TEST_CASE(a_failing_or_slow_request_hook_fails_closed)
{
    for (const bool allow_on_timeout : {false, true})
    {
        inspect_rig rig("api.test", true);
        rig.echo = true;
        std::vector<std::string> log;
        rig.hooks.emplace();
        rig.hooks->timeout = 300ms;
        rig.hooks->allow_on_timeout = allow_on_timeout;
        rig.hooks->on_request =
            [&](const sandbox::http_request_info& i) -> asio::awaitable<http_verdict> {
            if (i.path == "/throw")
                throw std::runtime_error("the hook's own failure");
            http_verdict v;
            if (i.path == "/framing")
                v.set_headers = {{"Content-Length", "0"}};
            if (i.path == "/line-break")
                v.set_headers = {{"X-Ok", "a\r\nX-Evil: 1"}};
            if (i.path == "/slow")
                co_await hook_sleep(30s, log);
            co_return v;
        };
        rig.start();
        for (const std::string path : {"/throw", "/framing", "/line-break"})
        {
            auto r = run(rig.curl_to("-i", path));
            BOOST_TEST(r.out.find("HTTP/1.1 403 Forbidden\r\n") == 0u, r.out);
            BOOST_TEST(r.out.find("blocked: the request hook") != std::string::npos, r.out);
        }
        const auto began = std::chrono::steady_clock::now();
        auto slow = run(rig.curl_to("-i", "/slow"));
        const auto took = std::chrono::steady_clock::now() - began;
        BOOST_TEST((took < 5s));
        if (allow_on_timeout)
            BOOST_TEST(slow.out.find("HTTP/1.1 200 OK\r\n") == 0u, slow.out);
        else
            BOOST_TEST(slow.out.find("HTTP/1.1 504 Gateway Timeout\r\n") == 0u, slow.out);
        rig.ended(4);
        BOOST_TEST(rig.origin_requests_seen() == (allow_on_timeout ? 1 : 0));
        BOOST_TEST((rig.on_loop([&] { return log; }) == std::vector<std::string>{"cancelled"}));
        const auto seen = rig.requests_seen();
        BOOST_TEST_REQUIRE(seen.size() == 4u);
        for (int k = 0; k < 3; ++k)
        {
            BOOST_TEST(seen[k].reason == "hook_error");
            BOOST_TEST(seen[k].http.request_hook == "error");
        }
        BOOST_TEST(seen[3].allowed == allow_on_timeout);
        BOOST_TEST(seen[3].reason == (allow_on_timeout ? "no_rule" : "hook_timeout"));
        BOOST_TEST(seen[3].http.request_hook == (allow_on_timeout ? "timeout_allowed" : "timeout"));
    }
}

// T28: a client that goes away while the hook runs cancels it; the request is never sent.
BOOST_AUTO_TEST_CASE(a_client_that_leaves_during_the_hook_cancels_it)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    std::vector<std::string> log;
    rig.hooks.emplace();
    rig.hooks->timeout = 20s;
    rig.hooks->on_request =
        [&](const sandbox::http_request_info&) -> asio::awaitable<http_verdict> {
        co_await hook_sleep(30s, log);
        co_return http_verdict::allowed();
    };
    rig.start();
    const auto began = std::chrono::steady_clock::now();
    auto r = run(rig.curl_to("--max-time 1", "/waits"));
    BOOST_TEST(r.status == 28); // curl's own timeout
    const auto t = rig.ended(1);
    BOOST_TEST((std::chrono::steady_clock::now() - began < 10s));
    BOOST_TEST_REQUIRE(t.size() == 1u);
    BOOST_TEST((rig.on_loop([&] { return log; }) == std::vector<std::string>{"cancelled"}));
    BOOST_TEST(rig.origin_requests_seen() == 0);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 1u);
    BOOST_TEST(!seen[0].allowed);
    BOOST_TEST(seen[0].reason == "client_gone");
    BOOST_TEST(seen[0].http.request_hook == "cancelled");
}

// The response hook sees the origin's status and headers with the request it answers; its
// edits reach the client; a refusal withholds the origin's response (502 from the proxy).
BOOST_AUTO_TEST_CASE(a_response_hook_edits_or_withholds_the_response)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    std::vector<std::string> log;
    rig.hooks.emplace();
    rig.hooks->on_response =
        [&](const sandbox::http_response_info& i) -> asio::awaitable<http_verdict> {
        log.push_back(i.request.path + " " + std::to_string(i.status) + " " +
                      (has_header(i.headers, "Content-Length") ? "length" : "none"));
        if (i.request.path == "/hide")
            co_return http_verdict::denied(502, "withheld");
        http_verdict v;
        v.set_headers = {{"X-Checked", "yes"}};
        co_return v;
    };
    rig.start();
    auto shown = run(rig.curl_to("-i", "/show"));
    BOOST_TEST(shown.out.find("HTTP/1.1 200 OK\r\n") == 0u, shown.out);
    BOOST_TEST(shown.out.find("\r\nX-Checked: yes\r\n") != std::string::npos, shown.out);
    BOOST_TEST(shown.out.find("GET /show\n") != std::string::npos, shown.out);
    auto hidden = run(rig.curl_to("-i", "/hide"));
    BOOST_TEST(hidden.out.find("HTTP/1.1 502 Bad Gateway\r\n") == 0u, hidden.out);
    BOOST_TEST(hidden.out.find("refused by the response hook: withheld") != std::string::npos,
               hidden.out);
    BOOST_TEST(hidden.out.find("GET /hide") == std::string::npos, hidden.out);
    rig.ended(2);
    BOOST_TEST(rig.origin_requests_seen() == 2);
    BOOST_TEST((rig.on_loop([&] { return log; }) ==
                std::vector<std::string>{"/show 200 length", "/hide 200 length"}));
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    BOOST_TEST(seen[0].allowed);
    BOOST_TEST(seen[0].http.response_hook == "modified");
    BOOST_TEST(!seen[1].allowed);
    BOOST_TEST(seen[1].reason == "hook_deny");
    BOOST_TEST(seen[1].http.response_hook == "denied");
    BOOST_TEST(seen[1].http.status == 502);
}

// With bodies on (net.mitm.inspect_bodies): each hook sees its body whole and decoded
// (chunked too) before anything of the message goes on; a body over the cap is refused (413
// for a request, 502 for a response) and never forwarded; a client waiting for 100 Continue
// gets ours.
BOOST_AUTO_TEST_CASE(hooks_see_bodies_whole_and_refuse_them_over_the_cap)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.hook_body_cap = 1024;
    std::vector<std::string> log;
    rig.hooks.emplace();
    rig.hooks->on_request =
        [&](const sandbox::http_request_info& i) -> asio::awaitable<http_verdict> {
        log.push_back("request " + i.path + " [" + i.body + "]");
        co_return http_verdict::allowed();
    };
    rig.hooks->on_response =
        [&](const sandbox::http_response_info& i) -> asio::awaitable<http_verdict> {
        log.push_back("response " + i.request.path + " " + i.body.substr(0, i.body.find('\n')));
        co_return http_verdict::allowed();
    };
    rig.start();
    auto plain = run(rig.curl_to("-d 'hello body'", "/submit"));
    BOOST_TEST(plain.out.find("POST /submit\n") == 0u, plain.out);
    BOOST_TEST(plain.out.find("body=10\n") != std::string::npos, plain.out);
    auto chunked = run(rig.curl_to("-H 'Transfer-Encoding: chunked' -H 'Expect: 100-continue' "
                                   "-d 'in chunks'",
                                   "/chunked"));
    BOOST_TEST(chunked.out.find("body=9\n") != std::string::npos, chunked.out);
    const std::string big(2000, 'b');
    auto large = run(rig.curl_to("-i -d '" + big + "'", "/large"));
    BOOST_TEST(large.out.find("HTTP/1.1 413 Payload Too Large\r\n") == 0u, large.out);
    auto long_answer = run(rig.curl_to("-i -H 'X-Long: " + big + "'", "/long-answer"));
    BOOST_TEST(long_answer.out.find("HTTP/1.1 502 Bad Gateway\r\n") == 0u, long_answer.out);
    BOOST_TEST(long_answer.out.find(big) == std::string::npos); // nothing of the origin's
    rig.ended(4);
    BOOST_TEST(rig.origin_requests_seen() == 3); // the 413 never reached it
    BOOST_TEST((rig.on_loop([&] {
        return log;
    }) == std::vector<std::string>{"request /submit [hello body]", "response /submit POST /submit",
                                   "request /chunked [in chunks]",
                                   "response /chunked POST /chunked", "request /long-answer []"}));
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 4u);
    BOOST_TEST(seen[2].reason == "body_too_large");
    BOOST_TEST(seen[2].http.status == 413);
    BOOST_TEST(seen[3].reason == "body_too_large");
    BOOST_TEST(seen[3].http.status == 502);
}

// A chunked body's trailers arrive after the hook would have judged the head: with bodies
// inspected, a request that has any is refused (400) before the origin hears of it, so no
// trailer (a second Host, an Upgrade) can ride into the head the proxy sends. A client that
// leaves inside its body is recorded as gone.
BOOST_AUTO_TEST_CASE(inspected_bodies_refuse_trailers_and_note_a_client_that_left)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.hook_body_cap = 1024;
    int asked = 0;
    rig.hooks.emplace();
    rig.hooks->on_request =
        [&](const sandbox::http_request_info&) -> asio::awaitable<http_verdict> {
        ++asked;
        co_return http_verdict::allowed();
    };
    rig.start();
    auto r = run(rig.python_raw(
        "b'POST /ok HTTP/1.1\\r\\nHost: api.test\\r\\nConnection: close\\r\\n"
        "Transfer-Encoding: chunked\\r\\n\\r\\n"
        "3\\r\\nabc\\r\\n0\\r\\nHost: other.test\\r\\nUpgrade: websocket\\r\\n\\r\\n'"));
    BOOST_TEST(r.out.find("HTTP/1.1 400 Bad Request\r\n") == 0u, r.out);
    BOOST_TEST(r.out.find("trailers") != std::string::npos, r.out);
    run(rig.python_client(
        "s.sendall(b'POST /ok HTTP/1.1\\r\\nHost: api.test\\r\\nContent-Length: 100\\r\\n\\r\\n"
        "only this')\n"
        "time.sleep(0.2)\n"
        "s.close()\n"));
    rig.ended(2);
    BOOST_TEST(rig.origin_requests_seen() == 0);
    BOOST_TEST(rig.on_loop([&] { return asked; }) == 0);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 2u);
    BOOST_TEST(seen[0].reason == "bad_request");
    BOOST_TEST(seen[1].reason == "client_gone");
    BOOST_TEST(seen[1].http.request_body_bytes == 9u);
}

// T27: a request the proxy refuses (a hook's denial, a hook's missed deadline, a request
// rule) leaves the tunnel to the client's next request on the same connection: a refused
// body is read and dropped, the answer does not say `Connection: close`, the origin sees
// only the request that passed. A client waiting for `100 Continue` gets its refusal with
// `Connection: close` (it may or may not send its body next).
BOOST_AUTO_TEST_CASE(a_refused_request_leaves_the_tunnel_for_the_next)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    auto p = tls::request_policy::compile({{sandbox::net_action::deny, "* api.test/ruled/**"}}, {});
    BOOST_TEST_REQUIRE(p.has_value());
    rig.policy = std::move(*p);
    std::vector<std::string> log;
    rig.hooks.emplace();
    rig.hooks->timeout = 300ms;
    rig.hooks->on_request =
        [&](const sandbox::http_request_info& i) -> asio::awaitable<http_verdict> {
        if (i.path == "/slow")
            co_await hook_sleep(30s, log);
        if (i.path == "/deny")
            co_return http_verdict::denied(403, "not this one");
        co_return http_verdict::allowed();
    };
    rig.start();
    auto r = run(rig.python_client(
        "c = http.client.HTTPSConnection('api.test', PORT, context=ctx)\n"
        "c.sock = s\n"
        "h = {'Host': 'api.test:%d' % PORT}\n"
        "for m, path, body in [('POST', '/deny', b'x' * 300000), ('GET', '/slow', None),\n"
        "                      ('GET', '/ruled/x', None), ('GET', '/ok', None)]:\n"
        "    c.request(m, path, body=body, headers=h)\n"
        "    a = c.getresponse()\n"
        "    print(a.status, a.getheader('Connection'), a.read().decode().splitlines()[0])\n"));
    BOOST_TEST(r.out ==
                   "403 None sandbox: refused by the request hook: not this one (request 1.1)\n"
                   "504 None sandbox: the request hook did not answer in time (request 1.2)\n"
                   "403 None sandbox: refused by request rule \"deny * api.test/ruled/**\" "
                   "(request 1.3)\n"
                   "200 None GET /ok\n",
               r.out);
    auto waiting = run(rig.curl_to("-i -H 'Expect: 100-continue' -d 'some body'", "/deny"));
    BOOST_TEST(waiting.out.find("HTTP/1.1 403 Forbidden\r\n") == 0u, waiting.out);
    BOOST_TEST(waiting.out.find("\r\nConnection: close\r\n") != std::string::npos, waiting.out);
    rig.ended(2);
    BOOST_TEST(rig.on_loop([&] { return rig.tunnels_opened; }) == 2u); // one per client
    BOOST_TEST(rig.origin_requests_seen() == 1);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 5u);
    BOOST_TEST(seen[0].reason == "hook_deny");
    BOOST_TEST(seen[1].reason == "hook_timeout");
    BOOST_TEST(seen[2].reason == "rule");
    BOOST_TEST(seen[3].allowed);
    BOOST_TEST(seen[4].reason == "hook_deny");
}

namespace {

// What a body hook was shown: each window's size, its offset and whether it was the last,
// and the bytes whole.
struct shown_body
{
    std::vector<std::string> windows;
    std::string data;
    std::uint64_t next = 0; // the offset the next window must have
    bool gaps = false;
    std::size_t too_wide = 0;
    int lasts = 0;

    void add(const sandbox::http_body_chunk& c)
    {
        windows.push_back(std::string(c.data) + (c.last ? "|last" : ""));
        gaps = gaps || c.offset != next;
        next = c.offset + c.data.size();
        too_wide += c.data.size() > sandbox::http_body_window ? 1 : 0;
        lasts += c.last ? 1 : 0;
        data.append(c.data);
    }
};

} // namespace

// Body hooks see every body as it streams, window by window (at most 64 KiB, offsets
// without a gap, the end once), decoded whatever the framing: a sized and a chunked upload,
// a large download; a server-sent stream's first event is shown (and goes on) before its
// second is sent. A message without a body is not shown.
BOOST_AUTO_TEST_CASE(body_hooks_see_each_window_as_it_streams)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    std::map<std::string, shown_body> shown; // by "request N" / "response N"
    int exchange = 0;
    rig.hooks.emplace();
    rig.hooks->on_request =
        [&](const sandbox::http_request_info&) -> asio::awaitable<http_verdict> {
        ++exchange;
        co_return http_verdict::allowed();
    };
    rig.hooks->on_request_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<http_verdict> {
        shown[(c.request ? "request " : "misrouted ") + std::to_string(exchange)].add(c);
        co_return http_verdict::allowed();
    };
    rig.hooks->on_response_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<http_verdict> {
        shown[(c.request ? "misrouted " : "response ") + std::to_string(exchange)].add(c);
        co_return http_verdict::allowed();
    };
    rig.start();
    const std::string file = rig.two_uploads();
    auto large = run(rig.curl_to("", "/pattern/200000"));
    BOOST_TEST((large.out == pattern(200000)));
    auto stream = run(rig.curl_to("-N", "/stream"));
    BOOST_TEST(stream.out == "event 1event 2");
    rig.ended(4);
    const auto got = rig.on_loop([&] { return shown; });
    for (const char* key : {"request 1", "request 2"})
    {
        const shown_body& b = got.at(key);
        BOOST_TEST((b.data == pattern(300000)), key);
        BOOST_TEST(!b.gaps);
        BOOST_TEST(b.too_wide == 0u);
        BOOST_TEST(b.lasts == 1);
        BOOST_TEST(b.windows.size() >= 5u); // 300000 bytes take five windows at least
    }
    BOOST_TEST((got.at("response 3").data == pattern(200000)));
    BOOST_TEST(got.at("response 3").lasts == 1);
    BOOST_TEST(got.at("response 3").too_wide == 0u);
    BOOST_TEST(!got.at("response 3").gaps);
    const shown_body& events = got.at("response 4");
    BOOST_TEST_REQUIRE(events.windows.size() >= 2u);
    BOOST_TEST(events.windows[0] == "event 1"); // shown before the second was sent
    BOOST_TEST(events.data == "event 1event 2");
    BOOST_TEST(got.count("request 3") == 0u); // GETs have no body
    BOOST_TEST(got.count("request 4") == 0u);
    BOOST_TEST(got.size() == 6u); // each echo of 1 and 2 too
}

// A body hook's refusal stops the message where it stands: a request's client gets the
// refusal (the origin never answers it); a response is cut short (the client never gets it
// whole) and the tunnel closes. A body hook that throws or answers with header edits fails
// closed the same way.
BOOST_AUTO_TEST_CASE(a_body_hook_refusal_stops_the_message)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.hooks.emplace();
    rig.hooks->on_request_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<http_verdict> {
        if (c.data.find("edit me") != std::string_view::npos)
        {
            http_verdict v;
            v.set_headers = {{"X-Nope", "1"}};
            co_return v;
        }
        if (c.offset + c.data.size() > 100000)
            co_return http_verdict::denied(403, "too much");
        co_return http_verdict::allowed();
    };
    rig.hooks->on_response_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<http_verdict> {
        if (c.offset >= 65536)
            throw std::runtime_error("no more");
        co_return http_verdict::allowed();
    };
    rig.start();
    const std::string file = (rig.dir / "upload.bin").string();
    std::ofstream(file) << pattern(300000);
    auto up = run(rig.curl_to("-i --data-binary @" + file + " -H 'Expect:'", "/up"));
    BOOST_TEST(up.out.find("HTTP/1.1 403 Forbidden\r\n") == 0u, up.out);
    BOOST_TEST(up.out.find("refused by the request body hook: too much") != std::string::npos,
               up.out);
    auto edit = run(rig.curl_to("-i -d 'edit me'", "/edit"));
    BOOST_TEST(edit.out.find("HTTP/1.1 403 Forbidden\r\n") == 0u, edit.out);
    auto down = run(rig.curl_to("-o " + (rig.dir / "down.bin").string(), "/pattern/300000"));
    BOOST_TEST(down.status != 0); // curl: the transfer ended short
    BOOST_TEST(std::filesystem::file_size(rig.dir / "down.bin") < 300000u);
    rig.ended(3);
    BOOST_TEST(rig.origin_requests_seen() == 1); // only the download was answered
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 3u);
    BOOST_TEST(!seen[0].allowed);
    BOOST_TEST(seen[0].reason == "hook_deny");
    BOOST_TEST(seen[0].http.request_hook == "denied");
    BOOST_TEST(seen[0].http.status == 403);
    BOOST_TEST(seen[1].reason == "hook_error");
    BOOST_TEST(seen[1].http.request_hook == "error");
    BOOST_TEST(!seen[2].allowed);
    BOOST_TEST(seen[2].reason == "hook_error");
    BOOST_TEST(seen[2].http.response_hook == "error");
    BOOST_TEST(seen[2].http.status == 200); // the origin's, whose body was cut
}

// What a body hook must never miss: the last window of a body whose length fills whole
// windows waits for the hook like any (a refusal of the last alone still cuts it); a
// close-delimited response cut by a hook ends without close_notify, so a strict client
// sees the cut; a chunk extension or a trailer (bytes no hook sees) fails the message.
BOOST_AUTO_TEST_CASE(a_body_hook_judges_every_byte_before_it_goes)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    int lasts = 0;
    rig.hooks.emplace();
    rig.hooks->on_response_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<http_verdict> {
        lasts += c.last ? 1 : 0;
        if (c.last || c.offset >= 150000) // 131072 bytes: refused at their end only
            co_return http_verdict::denied(403, "no");
        co_return http_verdict::allowed();
    };
    rig.hooks->on_request_body =
        [&](const sandbox::http_body_chunk&) -> asio::awaitable<http_verdict> {
        co_return http_verdict::allowed();
    };
    rig.start();
    auto whole = run(rig.curl_to("-o " + (rig.dir / "w.bin").string(), "/pattern/131072"));
    BOOST_TEST(whole.status != 0);
    BOOST_TEST(std::filesystem::file_size(rig.dir / "w.bin") < 131072u);
    const std::string strict =
        rig.python_client("s.sendall(b'GET /close-delimited/200000 HTTP/1.1\\\\r\\\\nHost: "
                          "api.test\\\\r\\\\n\\\\r\\\\n')\n"
                          "data = b''\n"
                          "try:\n"
                          "    while d := s.recv(65536): data += d\n"
                          "    print('whole', len(data))\n"
                          "except (ssl.SSLEOFError, ConnectionResetError):\n"
                          "    print('cut', len(data) < 200000)\n",
                          ", suppress_ragged_eofs=False");
    BOOST_TEST(run(strict).out == "cut True\n");
    auto extended = run(rig.curl_to("-i", "/extended"));
    BOOST_TEST(extended.out.find("hello") == std::string::npos, extended.out);
    auto trailer = run(rig.python_raw(
        "b'POST /up HTTP/1.1\\r\\nHost: api.test\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
        "3\\r\\nabc\\r\\n0\\r\\nX-Secret: 1\\r\\n\\r\\n'"));
    BOOST_TEST(trailer.out.find("body=") == std::string::npos, trailer.out);
    auto ext_up = run(rig.python_raw(
        "b'POST /up HTTP/1.1\\r\\nHost: api.test\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n"
        "3;leak=1\\r\\nabc\\r\\n0\\r\\n\\r\\n'"));
    BOOST_TEST(ext_up.out.find("body=") == std::string::npos, ext_up.out);
    rig.ended(5);
    BOOST_TEST(rig.origin_requests_seen() == 3);         // the two uploads never completed there
    BOOST_TEST(rig.on_loop([&] { return lasts; }) >= 1); // the 131072 bytes' end was shown
    const auto t = rig.ended(5);
    int cut = 0;
    for (const auto& e : t)
        cut += e.reason == "cut" ? 1 : 0;
    BOOST_TEST(cut == 2, cut);
}

// T27 with a HEAD (whose refusal has no body, so the next answer is read from its first
// byte) and a client that had a 100 Continue from the origin before its request body hook
// refused: it still gets the refusal (the 1xx went whole; no final answer had begun).
BOOST_AUTO_TEST_CASE(a_refused_head_keeps_the_tunnel_and_a_1xx_leaves_room_for_a_refusal)
{
    inspect_rig rig("api.test", true);
    rig.echo = true;
    rig.hooks.emplace();
    rig.hooks->on_request =
        [&](const sandbox::http_request_info& i) -> asio::awaitable<http_verdict> {
        if (i.path == "/deny")
            co_return http_verdict::denied(403, "not this one");
        co_return http_verdict::allowed();
    };
    rig.hooks->on_request_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<http_verdict> {
        if (c.offset + c.data.size() > 100000)
            co_return http_verdict::denied(403, "too much");
        co_return http_verdict::allowed();
    };
    rig.start();
    auto r =
        run(rig.python_client("c = http.client.HTTPSConnection('api.test', PORT, context=ctx)\n"
                              "c.sock = s\n"
                              "h = {'Host': 'api.test:%d' % PORT}\n"
                              "for m, path in [('HEAD', '/deny'), ('GET', '/ok')]:\n"
                              "    c.request(m, path, headers=h)\n"
                              "    a = c.getresponse()\n"
                              "    print(a.status, repr(a.read()[:6]))\n"));
    BOOST_TEST(r.out == "403 b''\n200 b'GET /o'\n", r.out);
    const std::string file = (rig.dir / "upload.bin").string();
    std::ofstream(file) << pattern(300000);
    auto up = run(rig.curl_to("-i --data-binary @" + file + " -H 'Expect: 100-continue'", "/up"));
    BOOST_TEST(up.out.find("HTTP/1.1 100 Continue\r\n") == 0u, up.out);
    BOOST_TEST(up.out.find("refused by the request body hook: too much") != std::string::npos,
               up.out);
    rig.ended(2);
    const auto seen = rig.requests_seen();
    BOOST_TEST_REQUIRE(seen.size() == 3u);
    BOOST_TEST(seen[2].reason == "hook_deny");
    BOOST_TEST(seen[2].http.status == 403);
    BOOST_TEST(seen[2].http.request_body_bytes <= 100000u); // only what the hook allowed
}

BOOST_AUTO_TEST_SUITE_END()
