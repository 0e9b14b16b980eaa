// test/net/request_policy_test.cpp: TLS inspection's request rules and injected headers as
// text alone: the pattern parser, the canonical path forms, the glob, the verdicts (deny
// wins, allow rules close their host), the header checks, what a hook's answer decides.
// No I/O.
#include <boost/test/unit_test.hpp>

#include "host/request_pattern.hpp"
#include "net/tls/hook_call.hpp"
#include "net/tls/request_policy.hpp"

#include <sandbox/net_policy.hpp>

#include <string>
#include <vector>

namespace {

namespace tls = sandbox::net::tls;
namespace detail = sandbox::detail;
using sandbox::errc;
using sandbox::net_action;

sandbox::net::canonical_host name(const std::string& n)
{
    sandbox::net::canonical_host h;
    h.name = n;
    return h;
}

detail::canonical_path path(const std::string& target)
{
    auto p = detail::canonicalize_request_path(target);
    BOOST_TEST_REQUIRE(p.has_value(), target);
    return *p;
}

tls::request_policy compile(std::vector<sandbox::http_request_rule> rules,
                            std::vector<sandbox::header_injection> headers = {})
{
    auto p = tls::request_policy::compile(rules, headers);
    BOOST_TEST_REQUIRE(p.has_value(), (p ? "" : p.error().diag.message));
    return std::move(*p);
}

sandbox::http_request_rule allow(std::string p)
{
    return {net_action::allow, std::move(p)};
}
sandbox::http_request_rule deny(std::string p)
{
    return {net_action::deny, std::move(p)};
}

} // namespace

BOOST_AUTO_TEST_SUITE(request_rules)

BOOST_AUTO_TEST_CASE(patterns_parse_into_methods_host_and_glob)
{
    auto p = detail::parse_request_pattern("get,HEAD api.example.com/repos/acme/**");
    BOOST_TEST_REQUIRE(p.has_value());
    BOOST_TEST((p->methods == std::vector<std::string>{"GET", "HEAD"}));
    BOOST_TEST(p->host.host == "api.example.com");
    BOOST_TEST(p->path == "/repos/acme/**");
    auto any = detail::parse_request_pattern("*  *.example.com/%7Euser/*");
    BOOST_TEST_REQUIRE(any.has_value());
    BOOST_TEST(any->methods.empty());
    BOOST_TEST(any->path == "/~user/*"); // escapes decoded as paths are
    for (const char* bad :
         {"GET", "GET api.example.com", "GET api.example.com/a b", "G@T api.example.com/",
          "GET api.example.com/a?b", "GET api.example.com/a#b", "GET api.example.com/a/../b",
          "GET api.example.com/./b", "GET ,GET api.example.com/", "GET api.example.com/%zz",
          "GET bad..host/x", "GET api.example.com/%0a"})
    {
        auto r = detail::parse_request_pattern(bad);
        BOOST_TEST(!r.has_value(), bad);
        if (!r)
            BOOST_TEST((r.error().code == errc::validation));
    }
    auto long_glob = detail::parse_request_pattern("GET a.test/" + std::string(1100, 'x'));
    BOOST_TEST(!long_glob.has_value());
}

BOOST_AUTO_TEST_CASE(paths_are_judged_decoded_with_dot_segments_gone)
{
    BOOST_TEST(path("/a/b?x=1/../..").strict == "/a/b"); // the query is never looked at
    BOOST_TEST(path("/a/./b/../c").strict == "/a/c");
    BOOST_TEST(path("/a/%2e%2E/c").strict == "/c");
    BOOST_TEST(path("/a/b/").strict == "/a/b/");
    BOOST_TEST(path("/a/b/.").strict == "/a/b/");
    BOOST_TEST(path("/a/..").strict == "/");
    BOOST_TEST(path("/").strict == "/");
    BOOST_TEST(path("/%7euser").strict == "/~user");
    // %2F and %25 stay escaped in the strict form (a slash that is data is not a segment).
    BOOST_TEST(path("/g%2fp/x%25y").strict == "/g%2Fp/x%25y");
    // The loose form decodes them, merges slashes, takes \ for / and folds case.
    BOOST_TEST(path("/G%2fP//X\\Y%25").loose == "/g/p/x/y%");
    for (const char* bad : {"a/b", "", "/a/../..", "/%2e%2e", "/a%", "/a%4", "/a%g0", "/a%00",
                            "/a%0d%0a", "/a b", "/a\tb", "/a#frag"})
        BOOST_TEST(!detail::canonicalize_request_path(bad).has_value(), bad);
    BOOST_TEST(!detail::canonicalize_request_path("/" + std::string(9000, 'a')).has_value());
}

BOOST_AUTO_TEST_CASE(the_glob_matches_within_and_across_segments)
{
    BOOST_TEST(detail::path_matches("/repos/acme/**", "/repos/acme/x/y"));
    BOOST_TEST(detail::path_matches("/repos/acme/**", "/repos/acme"));
    BOOST_TEST(detail::path_matches("/repos/acme/**", "/repos/acme/"));
    BOOST_TEST(!detail::path_matches("/repos/acme/**", "/repos/acmex"));
    BOOST_TEST(!detail::path_matches("/repos/acme/**", "/repos/other/acme/x"));
    BOOST_TEST(detail::path_matches("/repos/*/issues", "/repos/acme/issues"));
    BOOST_TEST(!detail::path_matches("/repos/*/issues", "/repos/a/b/issues"));
    BOOST_TEST(detail::path_matches("/files/*.tar.gz", "/files/x-1.0.tar.gz"));
    BOOST_TEST(!detail::path_matches("/files/*.tar.gz", "/files/x.tar.gz.sig"));
    BOOST_TEST(detail::path_matches("/**", "/"));
    BOOST_TEST(detail::path_matches("/**/raw", "/a/b/raw"));
    BOOST_TEST(detail::path_matches("/exact", "/exact"));
    BOOST_TEST(!detail::path_matches("/exact", "/Exact"));
    // A long path against many stars stays a table walk (no backtracking blow-up).
    BOOST_TEST(!detail::path_matches("/*a*a*a*a*a*a*a*a*b", "/" + std::string(8000, 'a')));
}

BOOST_AUTO_TEST_CASE(deny_wins_and_allow_rules_close_their_host)
{
    auto p = compile({allow("GET,HEAD api.test/repos/acme/**"),
                      deny("* api.test/repos/acme/secret/**"), deny("DELETE other.test/**")});
    const auto api = name("api.test");
    auto v = p.judge(api, "GET", path("/repos/acme/x"));
    BOOST_TEST(v.allowed);
    BOOST_TEST(v.rule == "allow GET,HEAD api.test/repos/acme/**");
    BOOST_TEST(v.reason == "rule");
    BOOST_TEST(p.judge(api, "head", path("/repos/acme")).allowed); // methods without case
    v = p.judge(api, "POST", path("/repos/acme/x"));
    BOOST_TEST(!v.allowed);
    BOOST_TEST(v.reason == "no_allow_rule");
    BOOST_TEST(v.rule.empty());
    v = p.judge(api, "GET", path("/repos/acme/secret/k"));
    BOOST_TEST(!v.allowed);
    BOOST_TEST(v.rule == "deny * api.test/repos/acme/secret/**");
    // Spellings an origin may take for the denied path are denied too.
    for (const char* t :
         {"/repos/acme/SECRET/k", "/repos/acme/%73ecret/k", "/repos/acme/x/../secret/k",
          "/repos/acme//secret/k", "/repos/acme%2Fsecret/k", "/repos/acme/secret"})
        BOOST_TEST(!p.judge(api, "GET", path(t)).allowed, t);
    // A deny alone does not close its host; subdomains are the domain's.
    BOOST_TEST(p.judge(name("other.test"), "GET", path("/x")).allowed);
    BOOST_TEST(p.judge(name("other.test"), "GET", path("/x")).reason == "no_rule");
    BOOST_TEST(!p.judge(name("a.other.test"), "delete", path("/x")).allowed);
    BOOST_TEST(p.judge(name("third.test"), "DELETE", path("/x")).reason == "no_rule");
    // An allow rule names the exact case it was written in.
    BOOST_TEST(!p.judge(api, "GET", path("/REPOS/acme/x")).allowed);
}

BOOST_AUTO_TEST_CASE(injections_are_per_host_and_checked)
{
    auto p = compile({}, {{"api.test", "Authorization", "Bearer t0ken", false},
                          {"*.api.test", "X-Key", "k", true},
                          {"api.test", "authorization", "second", true}});
    auto for_api = p.injections_for(name("api.test"));
    BOOST_TEST_REQUIRE(for_api.size() == 1u); // each name once: the first rule's
    BOOST_TEST(for_api[0]->value == "Bearer t0ken");
    BOOST_TEST(p.injections_for(name("v2.api.test")).size() == 2u);
    BOOST_TEST(p.injections_for(name("other.test")).empty());
    const std::vector<sandbox::header_injection> bad = {
        {"api.test", "Host", "x", false},
        {"api.test", "Content-Length", "1", false},
        {"api.test", "transfer-encoding", "x", false},
        {"api.test", "Bad Name", "x", false},
        {"api.test", "X", "a\r\nInjected: 1", false},
        {"api.test", "X", "", false},
        {"api.test", "X", " padded", false},
        {"bad..host", "X", "x", false}};
    for (std::size_t i = 0; i < bad.size(); ++i)
    {
        auto r = tls::request_policy::compile({}, {bad[i]});
        BOOST_TEST_REQUIRE(!r.has_value(), i);
        BOOST_TEST(r.error().diag.limit == "net.mitm.inject_headers[0]");
        BOOST_TEST(r.error().diag.message.find("Injected") == std::string::npos);
    }
    // The validation of the policy says the same, and never quotes a value.
    sandbox::net_policy np;
    np.mode = sandbox::net_mode::allow_list;
    np.mitm = sandbox::mitm_policy{};
    np.mitm->enabled = true;
    np.mitm->inject_headers = {{"api.test", "X-Token", "s3cret\n", false}};
    auto v = np.validate();
    BOOST_TEST_REQUIRE(!v.has_value());
    BOOST_TEST(v.error().diag.limit == "net.mitm.inject_headers[0]");
    BOOST_TEST(v.error().diag.message.find("s3cret") == std::string::npos);
    np.mitm->inject_headers.clear();
    np.mitm->requests = {allow("GET api.test/ok"), allow("GET api.test")};
    v = np.validate();
    BOOST_TEST_REQUIRE(!v.has_value());
    BOOST_TEST(v.error().diag.limit == "net.mitm.requests[1]");
}

BOOST_AUTO_TEST_SUITE_END()

// What a hook's answer does to the message (net/tls/hook_call.hpp): fail closed, edits the
// proxy will not make counted as the hook's failure, the hook's status and reason kept safe.
BOOST_AUTO_TEST_SUITE(hook_decisions)

namespace {

tls::hook_answer said(sandbox::http_verdict v)
{
    tls::hook_answer a;
    a.verdict = std::move(v);
    return a;
}

tls::hook_answer ended(tls::hook_answer::kind k)
{
    tls::hook_answer a;
    a.what = k;
    return a;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_missed_deadline_or_a_throw_refuses)
{
    using kind = tls::hook_answer::kind;
    auto late = tls::decide(ended(kind::timed_out), false, "request");
    BOOST_TEST(!late.pass);
    BOOST_TEST(late.status == 504);
    BOOST_TEST(late.reason == "hook_timeout");
    BOOST_TEST(late.word == "timeout");
    BOOST_TEST(late.why == "the request hook did not answer in time");
    auto let = tls::decide(ended(kind::timed_out), true, "request");
    BOOST_TEST(let.pass);
    BOOST_TEST(!let.edits);
    BOOST_TEST(let.word == "timeout_allowed");
    auto threw = tls::decide(ended(kind::threw), true, "response");
    BOOST_TEST(!threw.pass);
    BOOST_TEST(threw.status == 403);
    BOOST_TEST(threw.reason == "hook_error");
    BOOST_TEST(threw.why == "blocked: the response hook failed");
}

BOOST_AUTO_TEST_CASE(a_refusal_keeps_an_error_status_and_a_printable_reason)
{
    auto legal = tls::decide(said(sandbox::http_verdict::denied(451, "law")), false, "request");
    BOOST_TEST(!legal.pass);
    BOOST_TEST(legal.status == 451);
    BOOST_TEST(legal.reason == "hook_deny");
    BOOST_TEST(legal.word == "denied");
    BOOST_TEST(legal.why == "refused by the request hook: law");
    for (int status : {0, 200, 302, 399, 600})
        BOOST_TEST(
            tls::decide(said(sandbox::http_verdict::denied(status, "")), false, "request").status ==
                403,
            status);
    BOOST_TEST(tls::decide(said(sandbox::http_verdict::denied(599, "")), false, "x").status == 599);
    auto odd = tls::decide(
        said(sandbox::http_verdict::denied(403, "a\r\nb\x7f\tc" + std::string(300, 'z'))), false,
        "request");
    BOOST_TEST(odd.why ==
               "refused by the request hook: ab" + std::string("c") + std::string(197, 'z'));
    auto none = tls::decide(said(sandbox::http_verdict::denied(403, "\n")), false, "request");
    BOOST_TEST(none.why == "refused by the request hook");
}

BOOST_AUTO_TEST_CASE(edits_the_proxy_will_not_make_count_as_a_failure)
{
    const auto decided = [](std::vector<sandbox::http_header> set,
                            std::vector<std::string> remove) {
        sandbox::http_verdict v;
        v.set_headers = std::move(set);
        v.remove_headers = std::move(remove);
        const tls::hook_answer a = said(std::move(v));
        const tls::hook_decision d = tls::decide(a, false, "request");
        return d.pass ? d.word : d.reason;
    };
    BOOST_TEST(decided({}, {}) == "allowed");
    BOOST_TEST(decided({{"X-A", "1"}}, {"x-b"}) == "modified");
    BOOST_TEST(decided({{"Content-Length", "0"}}, {}) == "hook_error");
    BOOST_TEST(decided({{"X-A", "1"}}, {"Transfer-Encoding"}) == "hook_error");
    BOOST_TEST(decided({{"X-A", "1\r\nX-B: 2"}}, {}) == "hook_error");
    BOOST_TEST(decided({{"X A", "1"}}, {}) == "hook_error");
    BOOST_TEST(decided({{"X-A", ""}}, {}) == "hook_error");
    BOOST_TEST(decided({}, {"HOST"}) == "hook_error");
}

// A body hook answers allow or refuse: header edits cannot apply to a body, so they are its
// failure; the rest is decided as for a head hook, named after the body's hook.
BOOST_AUTO_TEST_CASE(a_body_hook_cannot_edit_headers)
{
    sandbox::http_verdict v;
    v.set_headers = {{"X-A", "1"}};
    const tls::hook_answer edits = said(std::move(v));
    const auto edited = tls::decide_body(edits, false, "request body");
    BOOST_TEST(!edited.pass);
    BOOST_TEST(edited.reason == "hook_error");
    BOOST_TEST(edited.word == "error");
    BOOST_TEST(edited.why == "blocked: the request body hook answered with header changes");
    BOOST_TEST(!tls::decide_body(said(sandbox::http_verdict{}), false, "x").edits);
    BOOST_TEST(tls::decide_body(said(sandbox::http_verdict{}), false, "x").word == "allowed");
    const auto denied =
        tls::decide_body(said(sandbox::http_verdict::denied(502, "key")), false, "response body");
    BOOST_TEST(denied.status == 502);
    BOOST_TEST(denied.why == "refused by the response body hook: key");
    using kind = tls::hook_answer::kind;
    BOOST_TEST(tls::decide_body(ended(kind::timed_out), true, "x").pass);
    BOOST_TEST(tls::decide_body(ended(kind::timed_out), false, "x").status == 504);
}

BOOST_AUTO_TEST_CASE(kept_by_compares_names_without_case)
{
    sandbox::http_verdict v;
    v.set_headers = {{"X-Set", "1"}};
    v.remove_headers = {"x-gone"};
    BOOST_TEST(tls::kept_by(nullptr, "X-Set"));
    BOOST_TEST(!tls::kept_by(&v, "x-set"));
    BOOST_TEST(!tls::kept_by(&v, "X-GONE"));
    BOOST_TEST(tls::kept_by(&v, "X-Other"));
}

BOOST_AUTO_TEST_SUITE_END()
