// test/integration/tls_bwrap_test.cpp: TLS inspection (`net.mitm`) on the real bwrap, with
// real clients inside that are given no flag of their own (curl, python3's urllib, git over
// HTTPS, pip) and an HTTPS origin on the host's loopback whose certificate chains to a CA
// only the proxy is told about: what they reach, they reach through a leaf the call's CA
// minted. Also what a command can find of that CA (T20), and what is refused.
#include <boost/test/unit_test.hpp>

#include "net_support.hpp"
#include "session_support.hpp"
#include "support.hpp"
#include "test/host_shell.hpp"

#include <sandbox/bwrap_runner.hpp>

#include <boost/json/serialize.hpp>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <unistd.h>

namespace {

namespace asio = boost::asio;
using namespace sbx_net_test;
using sandbox::errc;

std::string read_file(const std::string& path)
{
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// An HTTPS origin on 127.0.0.1 for files.test and other.test, self-signed (its own root:
// nothing in the system's bundle or the sandbox's trusts it), serving `files` with a git
// repository (repo.git, "inspected") and a package index (simple/sbxdemo).
struct tls_fixture : net_fixture
{
    std::string cert = (files.path() / "origin.pem").string();
    std::string key = (files.path() / "origin.key").string();
    std::string cert_pem;
    std::unique_ptr<host_server> origin;

    tls_fixture()
    {
        BOOST_REQUIRE(std::system(("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 "
                                   "-nodes -days 1 -subj /CN=origin-test-ca -addext "
                                   "subjectAltName=DNS:files.test,DNS:other.test -keyout " +
                                   key + " -out " + cert + " >/dev/null 2>&1")
                                      .c_str()) == 0);
        cert_pem = read_file(cert);
        bare_repo(files.path(), "inspected");
        BOOST_REQUIRE(std::system((std::string(python) + " " + files.file("index.py", index_py) +
                                   " " + files.path().string())
                                      .c_str()) == 0);
        origin = std::make_unique<host_server>(std::vector<std::string>{
            python, files.file("server.py", server_py), "https", files.path().string(), cert, key});
    }

    std::string base() const { return "https://files.test:" + origin->port_text(); }

    // allow_list to files.test, and files.test inspected, its origin verified with the
    // origin's own root.
    sandbox::exec_options inspected() const
    {
        sandbox::exec_options o = allow_files();
        o.net.mitm = sandbox::mitm_policy{};
        o.net.mitm->enabled = true;
        o.net.mitm->hosts = {"files.test"};
        o.net.mitm->origin_ca = {cert_pem};
        return o;
    }

    const sandbox::net_record* closed_record() const
    {
        return find(sandbox::net_event::closed, {}, "files.test");
    }
};

const char* const pip_download = " -m pip download -q --no-cache-dir --no-deps "
                                 "--disable-pip-version-check --retries 0 --timeout 10 -d got ";

// The SHA-256 of the bundle's last certificate (the call's CA).
const char* const last_ca_digest =
    "awk '/BEGIN CERT/{c=\"\"} {c=c $0 \"\\n\"} END{printf \"%s\", c}' "
    "/run/sandbox/ca-certificates.crt | sha256sum | cut -c1-64";

} // namespace

BOOST_AUTO_TEST_SUITE(tls_bwrap, *boost::unit_test::precondition(net_usable))

// The first "done when": curl, urllib, git and pip, no flags, through the proxy's
// leaves; the leaf curl sees is the call's CA's; the records have the CONNECT and its close.
BOOST_FIXTURE_TEST_CASE(curl_python_git_and_pip_trust_an_inspected_origin_with_no_flags,
                        tls_fixture)
{
    const std::string url = base();
    auto r = sh("curl -sS " + url + "/hello.txt && " + python +
                    " -c \"import urllib.request; print(urllib.request.urlopen('" + url +
                    "/hello.txt').read().decode().strip())\" && cd /tmp && git clone -q " + url +
                    "/repo.git cloned && cat cloned/file.txt && " + python + pip_download +
                    "--index-url " + url + "/simple/ sbxdemo && ls got && curl -sv -o /dev/null " +
                    url + "/hello.txt 2>&1 | grep -c 'issuer: .*CN=sandbox TLS inspection CA'",
                inspected());
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data == "hello from the host\nhello from the host\ninspected\n"
                                    "sbxdemo-1.0-py3-none-any.whl\n1\n",
               r.result.err.data);
    const auto* allowed =
        find(sandbox::net_event::decision, sandbox::net_verdict::allowed, "files.test");
    BOOST_REQUIRE(allowed);
    BOOST_TEST((allowed->protocol == sandbox::net_protocol::connect));
    const auto* closed = closed_record();
    BOOST_REQUIRE(closed);
    BOOST_TEST(closed->reason == "closed"); // an inspected tunnel's orderly end
    BOOST_TEST(closed->bytes_down > 20u);   // plaintext: the response and its body
    BOOST_REQUIRE(closed->tls);
    BOOST_TEST(closed->tls->sni == "files.test");
    BOOST_TEST(!closed->tls->leaf_from_cache); // the call's first tunnel minted the leaf
    BOOST_TEST(closed->tls->client_handshake.count() > 0);
    BOOST_TEST(closed->tls->origin_handshake.count() > 0);
    BOOST_TEST(closed->tls->detail.empty());
    std::size_t from_cache = 0;
    for (const auto& rec : records)
        from_cache += rec.tls && rec.tls->leaf_from_cache;
    BOOST_TEST(from_cache >= 4u); // urllib, git, pip, curl -v: the same leaf
    const auto j = sandbox::to_json(*closed);
    BOOST_TEST(j.at("tls").at("sni").as_string() == "files.test");
    BOOST_TEST(j.at("tls").at("origin_handshake_us").as_int64() > 0);
    BOOST_TEST(!j.at("tls").as_object().contains("detail"));
    // A tunnel not inspected has no tls part.
    records.clear();
    auto plain = sh("curl -sS -o /dev/null " + url + "/hello.txt 2>/dev/null; true");
    BOOST_TEST(!plain.ec, plain.result.diag);
    const auto* relayed = closed_record();
    BOOST_REQUIRE(relayed);
    BOOST_TEST(!relayed->tls);
}

// Only the selected hosts are inspected: without net.mitm, with another host selected, or
// with files.test excluded, the command meets the origin's own certificate, which nothing
// inside trusts (curl's 60); given that root itself, it gets through the plain tunnel.
BOOST_FIXTURE_TEST_CASE(hosts_not_selected_are_tunnelled_as_they_are, tls_fixture)
{
    const std::string curl = "curl -sS -o /dev/null " + base() + "/hello.txt 2>/dev/null; echo $?";
    sandbox::exec_options plain = allow_files();
    sandbox::exec_options other = inspected();
    other.net.mitm->hosts = {"other.test"};
    sandbox::exec_options excluded = inspected();
    excluded.net.mitm->hosts.clear();                  // every CONNECT...
    excluded.net.mitm->exclude_hosts = {"files.test"}; // ...but this one
    for (const auto& o : {plain, other, excluded})
    {
        auto r = sh(curl + " && curl -sS --cacert " + cert + " " + base() + "/hello.txt", o);
        BOOST_TEST(!r.ec, r.result.diag);
        BOOST_TEST(r.result.out.data == "60\nhello from the host\n", r.result.err.data);
    }
}

// T12-T16: an origin the proxy cannot verify (its root not given) gets no leaf: the client's
// handshake fails, nothing is relayed, and the close says why.
BOOST_FIXTURE_TEST_CASE(an_origin_the_proxy_cannot_verify_is_never_reached, tls_fixture)
{
    sandbox::exec_options o = inspected();
    o.net.mitm->origin_ca.clear();
    auto r = sh("curl -sS " + base() + "/hello.txt; echo exit=$?", o);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data.find("hello") == std::string::npos);
    BOOST_TEST(r.result.out.data != "exit=0\n");
    const auto* closed = closed_record();
    BOOST_REQUIRE(closed);
    BOOST_TEST(closed->reason == "origin_untrusted");
    BOOST_TEST(closed->bytes_down == 0u);
    BOOST_REQUIRE(closed->tls);
    BOOST_TEST(closed->tls->client_handshake.count() == 0); // no leaf, no client handshake
    BOOST_TEST(closed->tls->detail.find("certificate") != std::string::npos, closed->tls->detail);
}

// T20: what a command can find of the CA: the bundle (certificates only, read-only, at the
// path the variables name), no key anywhere it can read, no descriptor of ours, not the
// caller's process; each call has a CA of its own.
BOOST_FIXTURE_TEST_CASE(the_ca_key_is_nowhere_a_command_can_reach, tls_fixture)
{
    const std::string b = "/run/sandbox/ca-certificates.crt";
    const std::string script =
        "for v in SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE NODE_EXTRA_CA_CERTS "
        "GIT_SSL_CAINFO PIP_CERT; do test \"${!v}\" = " +
        b +
        " || echo \"$v=${!v}\"; done; "
        "grep -c 'BEGIN CERTIFICATE' " +
        b +
        " >/dev/null && echo certificates; "
        "grep -rlsI 'PRIVATE KEY' /run /tmp /dev/shm /proc/self/environ; "
        "(echo x >> " +
        b +
        ") 2>/dev/null || echo read-only; "
        "(rm -f " +
        b + ") 2>/dev/null; test -s " + b +
        " && echo still-there; "
        "ls -l /proc/self/fd/ | grep -c memfd; "
        "test -e /proc/" +
        std::to_string(::getpid()) + "/mem && echo caller-visible; " + last_ca_digest;
    auto first = sh(script, inspected());
    BOOST_TEST(!first.ec, first.result.diag);
    const std::string& out = first.result.out.data;
    BOOST_TEST(out.substr(0, out.size() > 65 ? out.size() - 65 : 0) ==
                   "certificates\nread-only\nstill-there\n0\n",
               first.result.err.data);
    auto second = sh(last_ca_digest, inspected());
    BOOST_TEST(!second.ec, second.result.diag);
    BOOST_TEST(second.result.out.data.size() == 65u);
    BOOST_TEST(out.size() > 65u);
    BOOST_TEST(out.substr(out.size() - 65) != second.result.out.data); // a CA per call
}

// What the backend cannot do is refused before anything runs, with its field; it says it
// inspects.
BOOST_FIXTURE_TEST_CASE(what_cannot_be_inspected_is_refused_with_its_field, tls_fixture)
{
    BOOST_TEST(runner.enforcement().mitm);
    sandbox::exec_options bodies = inspected();
    bodies.net.mitm->inspect_bodies = true; // with no hook to show them to
    auto r = sh("echo ran", bodies);
    BOOST_TEST((r.ec == errc::validation));
    BOOST_TEST(r.result.diag.limit == "net.mitm.inspect_bodies");
    sandbox::exec_options bad_root = inspected();
    bad_root.net.mitm->origin_ca = {"-----BEGIN CERTIFICATE-----\nnot one\n"};
    r = sh("echo ran", bad_root);
    BOOST_TEST((r.ec == errc::validation));
    BOOST_TEST(r.result.diag.limit == "net.mitm.origin_ca");
    sandbox::exec_options deny = inspected();
    deny.net.mode = sandbox::net_mode::deny_all;
    deny.net.rules.clear();
    r = sh("echo ran", deny);
    BOOST_TEST((r.ec == errc::validation));
    BOOST_TEST(r.result.diag.limit == "net.mitm.enabled");
}

// A session inspects the same way for its whole life: two requests some time apart, both
// through leaves of the session's one CA, both shown to its response hook.
BOOST_FIXTURE_TEST_CASE(a_session_inspects_for_its_whole_life, tls_fixture)
{
    auto spec = session("curl -sS " + base() + "/hello.txt; echo first; read go; curl -sS " +
                            base() + "/hello.txt; echo second; sleep 30",
                        inspected());
    int hooked = 0; // the session's hooks too, for its whole life
    spec.http.on_response =
        [&](const sandbox::http_response_info& i) -> asio::awaitable<sandbox::http_verdict> {
        hooked += i.status == 200 && i.request.path == "/hello.txt";
        co_return sandbox::http_verdict::allowed();
    };
    std::string seen;
    sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto s = co_await runner.sessions()->start(std::move(spec));
        std::uint64_t from = 0;
        seen = co_await sbx_test::read_until(*s, from, "first");
        co_await s->write("go\n");
        seen += co_await sbx_test::read_until(*s, from, "second");
        co_await s->terminate(2s);
    });
    const auto first = seen.find("hello from the host\nfirst\n");
    BOOST_TEST(first == 0u, seen);
    BOOST_TEST(seen.find("hello from the host\nsecond", first + 1) != std::string::npos, seen);
    ioc.restart();
    ioc.poll(); // the proxy's last records
    std::size_t inspected_closes = 0;
    for (const auto& r : records)
        inspected_closes += r.event == sandbox::net_event::closed && r.reason == "closed";
    BOOST_TEST(inspected_closes == 2u);
    BOOST_TEST(hooked == 2);
}

// sandbox-run's flags: --inspect, --origin-ca and --origin-ca-for (read from a file; the
// scoped root vouches for its hosts alone), the default policy otherwise; misuse is a usage
// error (125) that names the flag.
BOOST_FIXTURE_TEST_CASE(sandbox_run_inspects_with_its_flags, tls_fixture)
{
    const std::string cli = std::string(SBX_SANDBOX_RUN) + " --root " + root.str() +
                            " --allow-host files.test --allow-host 127.0.0.1 --resolve "
                            "files.test=127.0.0.1 ";
    auto ran = sbx_test::host_shell(cli + "--inspect files.test --origin-ca " + cert +
                                    " -- curl -sS " + base() + "/hello.txt 2>/dev/null");
    BOOST_TEST(ran.status == 0);
    BOOST_TEST(ran.out == "hello from the host\n");
    auto unverified = sbx_test::host_shell(cli + "--inspect files.test -- curl -sS " + base() +
                                           "/hello.txt 2>/dev/null");
    BOOST_TEST(unverified.status != 0); // the origin's root not given: no leaf, no body
    BOOST_TEST(unverified.out.empty());
    auto scoped =
        sbx_test::host_shell(cli + "--inspect files.test --origin-ca-for '*.test=" + cert +
                             "' -- curl -sS " + base() + "/hello.txt 2>/dev/null");
    BOOST_TEST(scoped.status == 0);
    BOOST_TEST(scoped.out == "hello from the host\n");
    auto elsewhere =
        sbx_test::host_shell(cli +
                             "--inspect files.test --origin-ca-for "
                             "'other.test=" +
                             cert + "' -- curl -sS " + base() + "/hello.txt 2>/dev/null");
    BOOST_TEST(elsewhere.status != 0); // scoped to another host: files.test's origin is refused
    BOOST_TEST(elsewhere.out.empty());
    for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
             {"--inspect files.test", "--inspect and the request flags need --net allow-list"},
             {"--exclude-inspect files.test",
              "--exclude-inspect, --origin-ca and --origin-ca-for need --inspect"},
             {"--allow-host x.test --inspect x.test --origin-ca-for x.test",
              "is not HOST_PATTERN=FILE"},
             {"--allow-host x.test --inspect x.test --origin-ca-for 'a b=" + cert + "'",
              "invalid host pattern"},
             {"--allow-host x.test --inspect x.test --origin-ca /nonexistent.pem",
              "cannot read --origin-ca \"/nonexistent.pem\": No such file or directory"}})
    {
        auto refused = sbx_test::host_shell(std::string(SBX_SANDBOX_RUN) + " " + flags +
                                            " -- true 2>&1 >/dev/null");
        BOOST_TEST(refused.status == 125, flags);
        BOOST_TEST(refused.out.find(message) != std::string::npos, refused.out);
    }
}

// tls.md T3 inside bwrap: sandbox-run --sni-check deny closes a tunnel (not inspected) whose
// ClientHello names another host than its CONNECT, before the origin gets a byte; the same
// name, and curl's own requests, pass; the audit file names the mismatch.
BOOST_FIXTURE_TEST_CASE(sandbox_run_denies_a_foreign_server_name, tls_fixture)
{
    const std::string audit = (files.path() / "audit.jsonl").string();
    const std::string cli = std::string(SBX_SANDBOX_RUN) + " --root " + root.str() +
                            " --allow-host files.test --resolve files.test=127.0.0.1 "
                            "--allow-host 127.0.0.1 --sni-check deny --audit " +
                            audit + " -- sh -c ";
    const std::string s_client = "openssl s_client -brief -proxy \"${HTTPS_PROXY#http://}\" "
                                 "-connect files.test:" +
                                 origin->port_text() + " -servername ";
    auto ran = sbx_test::host_shell(
        cli + "'" + s_client + "files.test </dev/null 2>&1 | grep -c \"CONNECTION ESTABLISHED\"; " +
        s_client + "other.test </dev/null 2>&1 | grep -c \"CONNECTION ESTABLISHED\"; curl -ksS " +
        base() + "/hello.txt' 2>/dev/null");
    BOOST_TEST(ran.out == "1\n0\nhello from the host\n", ran.out);
    const std::string records = read_file(audit);
    BOOST_TEST(records.find("\"reason\":\"sni_mismatch\"") != std::string::npos, records);
    BOOST_TEST(records.find("\"sni\":\"other.test\",\"sni_mismatch\":true") != std::string::npos,
               records);
    BOOST_TEST(records.find("\"sni\":\"files.test\",\"sni_mismatch\":false") != std::string::npos,
               records);
    auto refused = sbx_test::host_shell(std::string(SBX_SANDBOX_RUN) +
                                        " --sni-check deny -- true 2>&1 >/dev/null");
    BOOST_TEST(refused.status == 125);
    BOOST_TEST(refused.out.find("--sni-check needs --net allow-list or proxy") != std::string::npos,
               refused.out);
}

// The second "done when", inside bwrap: request rules and a header the command never
// sees. curl gets its allowed file; another path and another method get 403 naming why; the
// origin gets the token; nothing inside holds it (environment, files, /proc, the request
// curl sent); the records name the header, never its value or a path.
BOOST_FIXTURE_TEST_CASE(request_rules_and_a_secret_header_the_command_never_sees, tls_fixture)
{
    sandbox::exec_options o = inspected();
    o.net.mitm->requests = {{sandbox::net_action::allow, "GET files.test/hello.txt"},
                            {sandbox::net_action::allow, "GET files.test/echo-headers"}};
    o.net.mitm->inject_headers = {{"files.test", "X-Api-Token", "s3cret-4711", false}};
    const std::string url = base();
    auto r =
        sh("curl -sS " + url + "/hello.txt; curl -sS " + url +
               "/echo-headers | grep -i x-api-token; curl -sS -o /dev/null -w '%{http_code}\\n' " +
               url + "/repo.git/HEAD; curl -sS -X DELETE " + url + "/hello.txt; curl -sv " + url +
               "/echo-headers 2>&1 >/dev/null | "
               "grep -ci token; grep -rlsI s3cret-4711 /proc/[0-9]*/environ "
               "/proc/[0-9]*/cmdline /run /tmp /etc /home 2>/dev/null; env | grep -c s3cret-4711",
           o);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(
        r.result.out.data ==
            "hello from the host\nX-Api-Token: s3cret-4711\n403\n"
            "sandbox: no request rule allows this request to this host (request 4.1)\n0\n0\n",
        r.result.out.data + r.result.err.data);
    std::size_t allowed = 0, denied = 0;
    for (const auto& rec : records)
    {
        if (rec.event != sandbox::net_event::request)
            continue;
        BOOST_REQUIRE(rec.http);
        const std::string json = boost::json::serialize(sandbox::to_json(rec));
        BOOST_TEST(json.find("s3cret") == std::string::npos, json);
        BOOST_TEST(json.find("repo.git") == std::string::npos, json); // a path, never
        if (rec.verdict == sandbox::net_verdict::allowed)
        {
            ++allowed;
            BOOST_TEST((rec.http->injected == std::vector<std::string>{"X-Api-Token"}));
        }
        else
        {
            ++denied;
            BOOST_TEST(rec.reason == "no_allow_rule");
            BOOST_TEST(rec.http->status == 403);
        }
    }
    BOOST_TEST(allowed == 3u);
    BOOST_TEST(denied == 2u);
}

// The caller's hooks, run on its own executor, over the requests of a command inside bwrap:
// the request hook adds a header the origin sees and refuses a path; the response hook
// marks what it let through. Hooks without inspection, or on the local backend, are refused.
BOOST_FIXTURE_TEST_CASE(the_callers_hooks_judge_and_edit_the_commands_requests, tls_fixture)
{
    std::vector<std::string> asked;
    sandbox::http_hooks hooks;
    hooks.on_request =
        [&](const sandbox::http_request_info& i) -> asio::awaitable<sandbox::http_verdict> {
        asked.push_back(i.method + " " + i.host + " " + i.path);
        if (i.path == "/hello.txt")
            co_return sandbox::http_verdict::denied(403, "not this one");
        sandbox::http_verdict v;
        v.set_headers = {{"X-Api-Token", "from-the-hook"}};
        co_return v;
    };
    hooks.on_response =
        [&](const sandbox::http_response_info& i) -> asio::awaitable<sandbox::http_verdict> {
        asked.push_back("response " + std::to_string(i.status));
        sandbox::http_verdict v;
        v.set_headers = {{"X-Checked", "by-the-caller"}};
        co_return v;
    };
    auto r = sh("curl -sS " + base() + "/hello.txt; echo; curl -sS -D - " + base() +
                    "/echo-headers | grep -i -e x-api-token -e x-checked",
                inspected(), hooks);
    BOOST_TEST(!r.ec, r.result.diag);
    BOOST_TEST(r.result.out.data ==
                   "sandbox: refused by the request hook: not this one (request 1.1)\n\n"
                   "X-Checked: by-the-caller\r\nX-Api-Token: from-the-hook\n",
               r.result.out.data + r.result.err.data);
    BOOST_TEST((asked == std::vector<std::string>{"GET files.test /hello.txt",
                                                  "GET files.test /echo-headers", "response 200"}));
    std::size_t hooked = 0;
    for (const auto& rec : records)
        if (rec.event == sandbox::net_event::request)
        {
            ++hooked;
            BOOST_REQUIRE(rec.http);
            const std::string json = boost::json::serialize(sandbox::to_json(rec));
            BOOST_TEST(json.find("from-the-hook") == std::string::npos, json);
            BOOST_TEST(json.find("request_hook") != std::string::npos, json);
        }
    BOOST_TEST(hooked == 2u);

    // Bodies too: the request hook sees what curl posts, whole.
    sandbox::exec_options with_bodies = inspected();
    with_bodies.net.mitm->inspect_bodies = true;
    std::string posted;
    sandbox::http_hooks body_hooks;
    body_hooks.on_request =
        [&](const sandbox::http_request_info& i) -> asio::awaitable<sandbox::http_verdict> {
        posted += i.method + " " + i.body + ";";
        co_return sandbox::http_verdict::allowed();
    };
    auto post = sh("curl -sS -o /dev/null -d 'field=value' " + base() + "/echo-headers",
                   with_bodies, body_hooks);
    BOOST_TEST(!post.ec, post.result.diag);
    BOOST_TEST(posted == "POST field=value;");

    // Streamed: the body hooks see what curl posts and what it downloads, window by window,
    // and a refused window cuts the download short inside the sandbox.
    std::string streamed;
    sandbox::http_hooks stream_hooks;
    stream_hooks.on_request_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<sandbox::http_verdict> {
        streamed += "up " + std::string(c.data) + (c.last ? " (end);" : ";");
        co_return sandbox::http_verdict::allowed();
    };
    stream_hooks.on_response_body =
        [&](const sandbox::http_body_chunk& c) -> asio::awaitable<sandbox::http_verdict> {
        if (c.data.find("hello") != std::string_view::npos)
            co_return sandbox::http_verdict::denied(403, "no greetings");
        streamed += c.last ? "down (end);" : "down;";
        co_return sandbox::http_verdict::allowed();
    };
    auto both = sh("curl -sS -o /dev/null -d 'field=value' " + base() +
                       "/echo-headers && curl -sS " + base() + "/hello.txt; echo \" curl=$?\"",
                   inspected(), stream_hooks);
    BOOST_TEST(!both.ec, both.result.diag);
    BOOST_TEST(streamed.find("up field=value (end);down") == 0u, streamed);
    BOOST_TEST(both.result.out.data.find("hello") == std::string::npos, both.result.out.data);
    BOOST_TEST(both.result.out.data.find(" curl=0") == std::string::npos, both.result.out.data);

    auto plain = sh("echo ran", allow_files(), hooks);
    BOOST_TEST((plain.ec == errc::validation));
    BOOST_TEST(plain.result.diag.limit == "http");
    sandbox::http_hooks no_time = hooks;
    no_time.timeout = std::chrono::milliseconds(0);
    auto zero = sh("echo ran", inspected(), no_time);
    BOOST_TEST((zero.ec == errc::validation));
    BOOST_TEST(zero.result.diag.limit == "http.timeout");
}

// sandbox-run: --allow-request and --inject-header (the value from sandbox-run's own
// environment, which the command then does not inherit even when asked to).
BOOST_FIXTURE_TEST_CASE(sandbox_run_takes_request_rules_and_headers_as_flags, tls_fixture)
{
    const std::string cli = "SBX_TOKEN=s3cret-4711 " + std::string(SBX_SANDBOX_RUN) + " --root " +
                            root.str() +
                            " --allow-host files.test --allow-host 127.0.0.1 --resolve "
                            "files.test=127.0.0.1 --origin-ca " +
                            cert + " --env-allow SBX_TOKEN --env-allow PATH ";
    auto ran = sbx_test::host_shell(
        cli +
        "--allow-request 'GET files.test/echo-headers' --inject-header 'files.test: "
        "X-Api-Token=@env:SBX_TOKEN' -- sh -c 'curl -sS " +
        base() + "/echo-headers | grep -i token; curl -sS " + base() +
        "/hello.txt; echo; env | grep -c SBX_TOKEN' 2>/dev/null");
    BOOST_TEST(ran.status == 1); // grep -c found none: the exit of the last command
    BOOST_TEST(ran.out == "X-Api-Token: s3cret-4711\nsandbox: no request rule allows this "
                          "request to this host (request 2.1)\n\n0\n");
    for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
             {"--allow-host x.test --inject-header 'x.test: X-T=plain'",
              "the value comes from @env:VAR or @file:PATH"},
             {"--allow-host x.test --inject-header 'x.test: X-T=@env:SBX_NOT_SET'",
              "the environment has no SBX_NOT_SET"},
             {"--allow-host x.test --inject-header 'x.test: Host=@file:/etc/hostname'",
              "frames or routes the request"},
             {"--allow-host x.test --allow-request 'GET x.test'", "a path is required"},
             {"--allow-request 'GET x.test/a'", "need --net allow-list or proxy"}})
    {
        auto refused = sbx_test::host_shell(std::string(SBX_SANDBOX_RUN) + " " + flags +
                                            " -- true 2>&1 >/dev/null");
        BOOST_TEST(refused.status == 125, flags);
        BOOST_TEST(refused.out.find(message) != std::string::npos, flags << ": " << refused.out);
    }
}

BOOST_AUTO_TEST_SUITE_END()
