// Config registries with real runners: an entry's defaults, gate and approval on real
// processes, roots, backends and settings, the capability gate, failed builds.
#include "support.hpp"

#include <sandbox/config/document.hpp>
#include <sandbox/config/registry.hpp>
#include <sandbox/error.hpp>
#include <sandbox/local_runner.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <fstream>

namespace cfg = sandbox::config;
namespace asio = boost::asio;
using sandbox::errc;
using sbx_test::temp_dir;

namespace {

cfg::document doc_of(const std::string& text)
{
    auto d = cfg::parse_document(text);
    BOOST_TEST_REQUIRE(d.has_value(), d.error().diag.message);
    return *d;
}

std::string one(const std::string& root, const std::string& body, const std::string& backend = "local")
{
    return "version: v1\nsandboxes:\n  x:\n    backend: " + backend + "\n    root: " + root + "\n" + body;
}

sandbox::exec_request sh_request(const std::string& script, sandbox::exec_options o = {})
{
    sandbox::exec_request r;
    r.command = "sh";
    r.args = {"-c", script};
    r.options = std::move(o);
    return r;
}

// Every problem's path in a failed build's message.
bool names(const sandbox::failure& f, const std::string& text)
{
    return f.diag.message.find(text) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(config_registry)

BOOST_AUTO_TEST_CASE(an_entry_runs_in_its_root_under_its_defaults)
{
    temp_dir root;
    asio::io_context ioc;
    auto reg = cfg::builder().build(
        ioc.get_executor(),
        doc_of(one(root.str(), "    defaults:\n      timeout: 2s\n      env: {allow: [PATH], inject: {CI: \"1\"}}\n"
                               "      resources: {max_output_bytes: 10}\n")));
    BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
    BOOST_TEST((reg->names() == std::vector<std::string>{"x"}));
    BOOST_TEST(reg->root("x") == root.str());
    auto& r = reg->get("x");
    auto out = sbx_test::run(ioc, r, sh_request("echo $CI; pwd; env | wc -l"));
    BOOST_TEST(!out.ec);
    BOOST_TEST(out.result.out.data == "1\n" + root.str().substr(0, 8)); // capped at 10 bytes
    BOOST_TEST(out.result.out.truncated);
    // The entry's 2 s timeout holds against a caller asking for an hour.
    sandbox::exec_options longer;
    longer.timeout = std::chrono::hours(1);
    const auto t = std::chrono::steady_clock::now();
    auto slow = sbx_test::run(ioc, r, sh_request("sleep 10", longer));
    BOOST_TEST((slow.ec == errc::timeout));
    BOOST_TEST((std::chrono::steady_clock::now() - t < std::chrono::seconds(8)));
    // A stricter caller narrows it.
    sandbox::exec_options shorter;
    shorter.timeout = std::chrono::milliseconds(200);
    auto quick = sbx_test::run(ioc, r, sh_request("sleep 10", shorter));
    BOOST_TEST((quick.ec == errc::timeout));
    BOOST_TEST((quick.result.wall_time < std::chrono::seconds(2)));
    BOOST_CHECK_THROW(reg->get("nope"), sandbox::error);
    BOOST_TEST(reg->find("nope") == nullptr);
}

BOOST_AUTO_TEST_CASE(the_command_gate_holds)
{
    temp_dir root;
    asio::io_context ioc;
    auto reg = cfg::builder().build(
        ioc.get_executor(),
        doc_of("version: v1\nsandboxes:\n  some: {backend: local, root: " + root.str() +
               ", allowed_commands: [sh]}\n  none: {backend: local, root: " + root.str() +
               ", allowed_commands: []}\n"));
    BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
    BOOST_TEST(!sbx_test::run(ioc, reg->get("some"), sh_request("true")).ec);
    sandbox::exec_request ls;
    ls.command = "ls";
    BOOST_TEST((sbx_test::run(ioc, reg->get("some"), ls).ec == errc::policy_denied));
    BOOST_TEST(
        (sbx_test::run(ioc, reg->get("none"), sh_request("true")).ec == errc::policy_denied));
}

BOOST_AUTO_TEST_CASE(approval_is_asked_and_fails_closed)
{
    temp_dir root;
    asio::io_context ioc;
    int asked = 0;
    std::string answer = "allow";
    cfg::build_options o;
    o.ask = [&](sandbox::approval_request) -> asio::awaitable<sandbox::approval_decision> {
        ++asked;
        if (answer == "silence")
        {
            asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::seconds(30));
            co_await t.async_wait(asio::use_awaitable);
        }
        co_return sandbox::approval_decision{answer == "allow", answer};
    };
    const auto doc = doc_of(one(root.str(), "    approval: {sensitive_commands: [\"rm*\"], deadline: 300ms}\n"));
    auto reg = cfg::builder().build(ioc.get_executor(), doc, o);
    BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
    sandbox::exec_request rm;
    rm.command = "rm";
    rm.args = {"-f", "nothing"};
    BOOST_TEST(!sbx_test::run(ioc, reg->get("x"), rm).ec);
    answer = "deny";
    BOOST_TEST((sbx_test::run(ioc, reg->get("x"), rm).ec == errc::policy_denied));
    answer = "silence";
    BOOST_TEST((sbx_test::run(ioc, reg->get("x"), rm).ec == errc::policy_denied));
    BOOST_TEST(
        !sbx_test::run(ioc, reg->get("x"), sh_request("true")).ec); // not sensitive: not asked
    BOOST_TEST(asked == 3);
    // Without an approver the entry cannot be built.
    auto none = cfg::builder().build(ioc.get_executor(), doc);
    BOOST_TEST_REQUIRE(!none.has_value());
    BOOST_TEST((none.error().code == errc::validation));
    BOOST_TEST(names(none.error(), "sandboxes[\"x\"].approval"));
}

BOOST_AUTO_TEST_CASE(roots_and_workspaces_are_checked)
{
    temp_dir root;
    asio::io_context ioc;
    std::ofstream(root.path() / "file") << "x";
    auto missing = cfg::builder().build(ioc.get_executor(), doc_of(one(root.str() + "/gone", "")));
    BOOST_TEST_REQUIRE(!missing.has_value());
    BOOST_TEST(names(missing.error(), "sandboxes[\"x\"].root"));
    auto file = cfg::builder().build(ioc.get_executor(), doc_of(one(root.str() + "/file", "")));
    BOOST_TEST_REQUIRE(!file.has_value());
    BOOST_TEST(names(file.error(), "is not a directory"));
    const auto ws = doc_of("version: v1\nsandboxes:\n  x: {backend: local, workspace: main}\n");
    auto unknown = cfg::builder().build(ioc.get_executor(), ws);
    BOOST_TEST_REQUIRE(!unknown.has_value());
    BOOST_TEST(names(unknown.error(), "unknown workspace \"main\""));
    cfg::build_options o;
    o.workspaces["main"] = root.str();
    auto known = cfg::builder().build(ioc.get_executor(), ws, o);
    BOOST_TEST_REQUIRE(known.has_value(), known.error().diag.message);
    BOOST_TEST(sbx_test::run(ioc, known->get("x"), sh_request("pwd")).result.out.data ==
               root.str() + "\n");
}

BOOST_AUTO_TEST_CASE(backends_and_their_settings)
{
    temp_dir root;
    asio::io_context ioc;
    auto unknown = cfg::builder().build(ioc.get_executor(), doc_of(one(root.str(), "", "teleport")));
    BOOST_TEST_REQUIRE(!unknown.has_value());
    BOOST_TEST(names(unknown.error(), "unknown backend \"teleport\""));
    cfg::builder b;
    int made = 0;
    b.register_backend("mine", [&](const cfg::backend_context& c) -> std::unique_ptr<sandbox::runner> {
        ++made;
        BOOST_TEST(c.settings.at("level").as_int64() == 3);
        return std::make_unique<sandbox::local_runner>(c.executor, sandbox::local_runner_options{.root = c.root});
    });
    b.register_backend("broken", [](const cfg::backend_context&) -> std::unique_ptr<sandbox::runner> {
        throw sandbox::error(sandbox::errc::not_available, sandbox::diagnostics{.message = "not here"});
    });
    auto mine = b.build(ioc.get_executor(), doc_of(one(root.str(), "    settings: {level: 3}\n", "mine")));
    BOOST_TEST_REQUIRE(mine.has_value(), mine.error().diag.message);
    BOOST_TEST(made == 1);
    BOOST_TEST(!sbx_test::run(ioc, mine->get("x"), sh_request("true")).ec);
    auto broken = b.build(ioc.get_executor(), doc_of(one(root.str(), "", "broken")));
    BOOST_TEST_REQUIRE(!broken.has_value());
    BOOST_TEST((broken.error().code == errc::not_available));
    BOOST_TEST(names(broken.error(), "not here"));
    BOOST_CHECK_THROW(b.register_backend("", cfg::backend_factory{}), sandbox::error);
    auto bad_local = cfg::builder().build(ioc.get_executor(), doc_of(one(root.str(), "    settings: {binary: /x}\n")));
    BOOST_TEST_REQUIRE(!bad_local.has_value());
    BOOST_TEST(names(bad_local.error(), "sandboxes[\"x\"].settings.binary"));
    auto escape = cfg::builder().build(ioc.get_executor(),
                                       doc_of(one(root.str(), "    settings: {writable_paths: [\"../up\"]}\n", "bwrap")));
    BOOST_TEST_REQUIRE(!escape.has_value());
    BOOST_TEST(names(escape.error(), "escapes the root"));
    BOOST_TEST(names(escape.error(), "sandboxes[\"x\"].settings.writable_paths[0]"));
}

BOOST_AUTO_TEST_CASE(the_capability_gate_refuses_what_the_backend_cannot_enforce)
{
    temp_dir root;
    asio::io_context ioc;
    cfg::builder b;
    b.register_backend("bare", [](const cfg::backend_context& c) -> std::unique_ptr<sandbox::runner> {
        return std::make_unique<sandbox::noop_runner>(c.executor); // enforces nothing
    });
    auto r = b.build(ioc.get_executor(),
                     doc_of(one(root.str(), "    defaults:\n      env: {allow: []}\n      net: {mode: deny_all}\n"
                                            "      resources: {memory_bytes: 1MiB}\n", "bare")));
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST((r.error().code == errc::not_available));
    for (const char* p : {".defaults.env.allow", ".defaults.net.mode", ".defaults.resources.memory_bytes"})
        BOOST_TEST(names(r.error(), std::string("sandboxes[\"x\"]") + p), p);
    auto local_net = cfg::builder().build(ioc.get_executor(),
                                          doc_of(one(root.str(), "    defaults: {net: {mode: deny_all}}\n")));
    BOOST_TEST_REQUIRE(!local_net.has_value());
    BOOST_TEST(names(local_net.error(), "network mode \"deny_all\""));
    const auto gate = cfg::capability_gate(sandbox::exec_options{.limits = {.disk_bytes = 1}},
                                           sandbox::enforcement_report{}, "sandboxes[\"y\"]");
    BOOST_TEST_REQUIRE(gate.size() == 1u);
    BOOST_TEST(gate[0].path == "sandboxes[\"y\"].defaults.resources.disk_bytes");
    // A SOCKS5 upstream in any spelling of its scheme needs the socks5 claim.
    sandbox::enforcement_report proxy_only;
    proxy_only.net_modes = {sandbox::net_mode::proxy};
    for (const char* url : {"socks5://127.0.0.1:1080", "SOCKS5://127.0.0.1", "socks5h://h:1"})
    {
        sandbox::exec_options o;
        o.net.mode = sandbox::net_mode::proxy;
        o.net.proxy = url;
        const auto refused = cfg::capability_gate(o, proxy_only, "sandboxes[\"z\"]");
        BOOST_TEST_REQUIRE(refused.size() == 1u, url);
        BOOST_TEST(refused[0].path == "sandboxes[\"z\"].defaults.net.proxy");
        o.net.proxy = "http://127.0.0.1:3128";
        BOOST_TEST(cfg::capability_gate(o, proxy_only, "sandboxes[\"z\"]").empty());
    }
}

BOOST_AUTO_TEST_CASE(a_failed_build_reports_every_entry_and_keeps_nothing)
{
    temp_dir root;
    asio::io_context ioc;
    auto r = cfg::builder().build(
        ioc.get_executor(),
        doc_of("version: v1\nsandboxes:\n  a: {backend: local, root: " + root.str() +
               "}\n  b: {backend: nope, root: " + root.str() + "}\n  c: {backend: local, root: /no/such}\n"));
    BOOST_TEST_REQUIRE(!r.has_value());
    BOOST_TEST(names(r.error(), "2 problems"));
    BOOST_TEST(names(r.error(), "sandboxes[\"b\"].backend"));
    BOOST_TEST(names(r.error(), "sandboxes[\"c\"].root"));
    BOOST_TEST(!names(r.error(), "sandboxes[\"a\"]"));
    // The good entry's runner was built and destroyed: no helper is left running for it.
    ioc.run();
    BOOST_TEST(sbx_test::helper_processes().empty());
}

// sandbox-run --config: run through an entry (the library runs sandbox-run, with no timeout of
// sandbox-run's own in the way).
struct cli_run
{
    int status = -1;
    std::string out, err;
};

cli_run sandbox_run_with(const std::vector<std::string>& args)
{
    asio::io_context ioc;
    sandbox::local_runner r(ioc.get_executor());
    sandbox::exec_request req;
    req.command = SBX_SANDBOX_RUN;
    req.args = args;
    req.options.timeout = std::chrono::seconds(30);
    auto o = sbx_test::run(ioc, r, std::move(req), std::chrono::seconds(40));
    BOOST_TEST_REQUIRE(!o.ec, o.ec.message());
    return {o.result.exit_code, o.result.out.data, o.result.err.data};
}

BOOST_AUTO_TEST_CASE(sandbox_run_runs_through_an_entry_and_checks_documents)
{
    temp_dir root;
    const auto file = (root.path() / "c.yaml").string();
    std::ofstream(file) << "version: v1\nsandboxes:\n  build:\n    backend: local\n    root: " << root.str()
                        << "\n    defaults:\n      timeout: 30s\n      env: {inject: {CI: \"yes\"}}\n"
                           "    allowed_commands: [sh, sleep]\n";
    auto ok = sandbox_run_with(
        {"--config", file, "--sandbox", "build", "--", "sh", "-c", "echo $CI; exit 4"});
    BOOST_TEST(ok.status == 4);
    BOOST_TEST(ok.out == "yes\n");
    auto gate = sandbox_run_with({"--config", file, "--sandbox", "build", "--", "ls"});
    BOOST_TEST(gate.status == 125);
    BOOST_TEST(gate.err.find("allow-list") != std::string::npos, gate.err);
    auto narrowed = sandbox_run_with(
        {"--config", file, "--sandbox", "build", "--timeout", "300ms", "--", "sleep", "5"});
    BOOST_TEST(narrowed.status == 124);
    auto check = sandbox_run_with({"--config", file, "--check"});
    BOOST_TEST(check.status == 0, check.err);
    BOOST_TEST(check.out.find("\"name\":\"build\"") != std::string::npos, check.out);
    BOOST_TEST(check.out.find("\"enforcement\":{") != std::string::npos, check.out);
    auto nope = sandbox_run_with({"--config", file, "--sandbox", "nope", "--", "true"});
    BOOST_TEST(nope.status == 125);
    BOOST_TEST(nope.err.find("it has: build") != std::string::npos, nope.err);
    auto backend = sandbox_run_with(
        {"--config", file, "--sandbox", "build", "--backend", "local", "--", "true"});
    BOOST_TEST(backend.status == 125);
    const auto bad = (root.path() / "bad.yaml").string();
    std::ofstream(bad) << "version: v1\nsandboxes:\n  build:\n    backend: local\n    root: " << root.str()
                       << "\n    defaults: {timeout: 30}\n";
    auto broken = sandbox_run_with({"--config", bad, "--check"});
    BOOST_TEST(broken.status == 125);
    BOOST_TEST(broken.err.find("sandboxes[\"build\"].defaults.timeout") != std::string::npos, broken.err);
    BOOST_TEST(broken.err.find("line 6") != std::string::npos, broken.err);
}

BOOST_AUTO_TEST_SUITE_END()
