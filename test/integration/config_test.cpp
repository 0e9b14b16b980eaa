// test/integration/config_test.cpp: config registries on real processes: an entry's root and
// defaults (merged, never widened), the command gate, approval, roots and workspaces, backend
// factories and settings, the capability gate, failed builds and what they destroy, a bwrap
// entry, and sandbox-run --config / --check / --workspace.
#include <boost/test/unit_test.hpp>

#include "support.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/config/document.hpp>
#include <sandbox/config/registry.hpp>
#include <sandbox/error.hpp>
#include <sandbox/local_runner.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace cfg = sandbox::config;
namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sandbox::errc;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A document parsed, required to be good.
cfg::document parsed(const std::string& text)
{
    auto d = cfg::parse_document(text);
    BOOST_TEST_REQUIRE(d.has_value(), d.error().diag.message);
    return *d;
}

// One YAML entry: `name` on `backend` over `root`, with `body` (lines indented by 4).
std::string entry(const std::string& name, const std::string& backend, const std::string& root,
                  const std::string& body = "")
{
    return "  " + name + ":\n    backend: " + backend + "\n    root: \"" + root + "\"\n" + body;
}

std::string document_of(const std::string& entries) { return "version: v1\nsandboxes:\n" + entries; }

sandbox::exec_request call(std::string command, std::vector<std::string> args = {},
                           sandbox::exec_options o = {})
{
    sandbox::exec_request r;
    r.command = std::move(command);
    r.args = std::move(args);
    r.options = std::move(o);
    return r;
}

sandbox::exec_request sh_call(const std::string& script, sandbox::exec_options o = {})
{
    return call("/bin/sh", {"-c", script}, std::move(o));
}

// A build that must fail: its failure.
sandbox::failure refused(const sandbox::outcome<cfg::registry>& r)
{
    BOOST_TEST_REQUIRE(!r.has_value(), "the build was expected to fail");
    return r.error();
}

// Sets an environment variable of this process for the guard's lifetime.
struct env_var
{
    std::string name;
    env_var(std::string n, const char* value) : name(std::move(n)) { ::setenv(name.c_str(), value, 1); }
    ~env_var() { ::unsetenv(name.c_str()); }
};

// Runners that count their construction and destruction (each named after its entry).
struct lifecycle
{
    int made = 0, live = 0;
    std::vector<std::string> destroyed;
};

class counted_runner final : public sandbox::runner
{
public:
    counted_runner(executor_type ex, std::shared_ptr<lifecycle> l, std::string name)
        : ex_(std::move(ex)), l_(std::move(l)), name_(std::move(name))
    {
        ++l_->made, ++l_->live;
    }
    ~counted_runner() override { --l_->live, l_->destroyed.push_back(name_); }
    executor_type get_executor() const noexcept override { return ex_; }
    asio::awaitable<sandbox::exec_outcome> try_exec(sandbox::exec_request) override
    {
        sandbox::exec_outcome o;
        o.result.status = sandbox::exec_status::exited;
        o.result.exit_code = 0;
        o.result.out.data = "counted " + name_;
        co_return o;
    }
    sandbox::enforcement_report enforcement() const override { return {}; }

private:
    executor_type ex_;
    std::shared_ptr<lifecycle> l_;
    std::string name_;
};

// The entry name in a settings path `sandboxes["NAME"].settings`.
std::string name_in(const std::string& path)
{
    const auto a = path.find('"') + 1;
    return path.substr(a, path.find('"', a) - a);
}

// sandbox-run run as a real process (through a local runner), required to exit by itself.
struct cli_result
{
    int code = -1;
    std::string out, err;
    std::chrono::nanoseconds wall{};
};

cli_result run_cli(std::vector<std::string> args)
{
    asio::io_context ioc;
    sandbox::local_runner r(ioc.get_executor());
    auto o = sbx_test::run(ioc, r, call(SBX_SANDBOX_RUN, std::move(args), {.timeout = 30s}), 40s);
    BOOST_TEST_REQUIRE(!o.ec, o.ec.message() << " " << o.result.diag);
    BOOST_TEST_REQUIRE((o.result.status == sandbox::exec_status::exited));
    return {o.result.exit_code, o.result.out.data, o.result.err.data, o.result.wall_time};
}

// The host uid a root caller's bwrap commands run as (nobody), else the caller's own.
std::pair<uid_t, gid_t> bwrap_ids()
{
    if (::geteuid() != 0)
        return {::geteuid(), ::getegid()};
    const passwd* pw = ::getpwnam("nobody");
    return {pw ? pw->pw_uid : 65534, pw ? pw->pw_gid : 65534};
}

} // namespace

BOOST_AUTO_TEST_SUITE(config_registry)

BOOST_AUTO_TEST_CASE(local_entry_applies_its_root_env_timeout_and_output_cap)
{
    sbx_test::temp_dir root;
    env_var host_only("SBX_CFG_HOST_ONLY", "leaked");
    asio::io_context ioc;
    auto reg = cfg::builder().build(
        ioc.get_executor(),
        parsed(document_of(
            entry("x", "local", root.str(),
                  "    defaults:\n      timeout: 1s\n      env:\n        allow: [PATH]\n"
                  "        inject: {CI: from-entry}\n") +
            entry("capped", "local", root.str(), "    defaults: {resources: {max_output_bytes: 100}}\n"))));
    BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
    BOOST_TEST((reg->names() == std::vector<std::string>{"capped", "x"}));
    BOOST_TEST(reg->root("x") == root.str());
    BOOST_TEST(reg->entry("x")->backend == "local");
    auto& x = reg->get("x");

    auto pwd = sbx_test::run(ioc, x, call("pwd"));
    BOOST_TEST(!pwd.ec, pwd.result.diag);
    BOOST_TEST(pwd.result.out.data == root.str() + "\n");

    auto env = sbx_test::run(ioc, x, call("/usr/bin/env"));
    BOOST_TEST(!env.ec, env.result.diag);
    BOOST_TEST(has(env.result.out.data, "CI=from-entry\n"), env.result.out.data);
    BOOST_TEST(has(env.result.out.data, "PATH="), env.result.out.data);
    BOOST_TEST(!has(env.result.out.data, "SBX_CFG_HOST_ONLY"), env.result.out.data);
    // A caller's allow-list cannot add a name the entry leaves out; a narrower one narrows.
    sandbox::exec_options wider;
    wider.env.allow = std::vector<std::string>{"PATH", "SBX_CFG_HOST_ONLY"};
    auto widened = sbx_test::run(ioc, x, call("/usr/bin/env", {}, wider));
    BOOST_TEST(!has(widened.result.out.data, "SBX_CFG_HOST_ONLY"), widened.result.out.data);
    BOOST_TEST(has(widened.result.out.data, "PATH="), widened.result.out.data);
    sandbox::exec_options narrower;
    narrower.env.allow = std::vector<std::string>{"HOME"};
    auto narrowed = sbx_test::run(ioc, x, call("/usr/bin/env", {}, narrower));
    BOOST_TEST(!has(narrowed.result.out.data, "PATH="), narrowed.result.out.data);
    BOOST_TEST(has(narrowed.result.out.data, "CI=from-entry"), narrowed.result.out.data);

    // The entry's 1 s timeout kills sleep 10, and a caller's hour does not widen it.
    for (auto caller : {0ns, std::chrono::nanoseconds(1h)})
    {
        auto slow = sbx_test::run(ioc, x, call("sleep", {"10"}, {.timeout = caller}));
        BOOST_TEST((slow.ec == errc::timeout), slow.ec.message());
        BOOST_TEST((slow.result.status == sandbox::exec_status::timed_out));
        BOOST_TEST((slow.result.wall_time >= 900ms && slow.result.wall_time < 5s),
                   slow.result.wall_time.count());
    }
    // A stricter caller narrows it.
    auto quick = sbx_test::run(ioc, x, call("sleep", {"10"}, {.timeout = 200ms}));
    BOOST_TEST((quick.ec == errc::timeout));
    BOOST_TEST((quick.result.wall_time < 800ms), quick.result.wall_time.count());

    // max_output_bytes: the entry's 100 caps; a caller's 10 narrows; a caller's 1 MiB does not widen.
    auto& capped = reg->get("capped");
    const std::vector<std::pair<std::int64_t, std::size_t>> caps{{0, 100}, {10, 10}, {1 << 20, 100}};
    for (auto [caller, expect] : caps)
    {
        sandbox::exec_options o;
        o.limits.max_output_bytes = caller;
        auto out = sbx_test::run(ioc, capped, sh_call("head -c 1000 /dev/zero", o));
        BOOST_TEST(out.result.out.data.size() == expect, "caller " << caller);
        BOOST_TEST(out.result.out.truncated);
    }
}

BOOST_AUTO_TEST_CASE(allowed_commands_gate_what_runs)
{
    sbx_test::temp_dir root;
    asio::io_context ioc;
    auto reg = cfg::builder().build(
        ioc.get_executor(),
        parsed(document_of(entry("listed", "local", root.str(), "    allowed_commands: [sh, /usr/bin/env]\n") +
                           entry("none", "local", root.str(), "    allowed_commands: []\n") +
                           entry("base", "local", root.str(),
                                 "    allowed_commands: [touch]\n    command_match: base_name\n"))));
    BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
    auto ok = sbx_test::run(ioc, reg->get("listed"), call("sh", {"-c", "echo ran"}));
    BOOST_TEST(!ok.ec, ok.result.diag);
    BOOST_TEST(ok.result.out.data == "ran\n");
    BOOST_TEST(!sbx_test::run(ioc, reg->get("listed"), call("/usr/bin/env")).ec);
    // Exact matching: /bin/sh is not "sh"; touch is not listed and does not run.
    const auto marker = root.path() / "marker";
    auto denied = sbx_test::run(ioc, reg->get("listed"), call("touch", {marker.string()}));
    BOOST_TEST((denied.ec == errc::policy_denied), denied.ec.message());
    BOOST_TEST(has(denied.result.diag.message, "allow-list"), denied.result.diag);
    BOOST_TEST((sbx_test::run(ioc, reg->get("listed"), call("/bin/sh", {"-c", "true"})).ec == errc::policy_denied));
    BOOST_TEST(!fs::exists(marker));
    // An empty list refuses everything.
    for (const char* c : {"sh", "/usr/bin/env", "true"})
        BOOST_TEST((sbx_test::run(ioc, reg->get("none"), call(c)).ec == errc::policy_denied), c);
    // base_name: any path to touch passes, other names do not.
    auto by_base = sbx_test::run(ioc, reg->get("base"), call("/usr/bin/touch", {marker.string()}));
    BOOST_TEST(!by_base.ec, by_base.result.diag);
    BOOST_TEST(fs::exists(marker));
    BOOST_TEST((sbx_test::run(ioc, reg->get("base"), call("/bin/true")).ec == errc::policy_denied));
}

BOOST_AUTO_TEST_CASE(approval_allows_denies_and_times_out)
{
    sbx_test::temp_dir root;
    asio::io_context ioc;
    std::string mode = "allow";
    std::vector<std::string> asked;
    cfg::build_options o;
    o.ask = [&](sandbox::approval_request rq) -> asio::awaitable<sandbox::approval_decision> {
        asked.push_back(rq.call.command + " " + (rq.call.args.empty() ? "" : rq.call.args.back()));
        if (mode == "silent")
        {
            asio::steady_timer t(co_await asio::this_coro::executor, 30s);
            co_await t.async_wait(asio::use_awaitable);
        }
        co_return mode == "allow" ? sandbox::approval_decision::allowed("fine")
                                  : sandbox::approval_decision::denied("not today");
    };
    const auto doc = parsed(document_of(
        entry("x", "local", root.str(), "    approval:\n      sensitive_commands: [\"rm*\"]\n      deadline: 200ms\n")));
    auto reg = cfg::builder().build(ioc.get_executor(), doc, o);
    BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
    auto& x = reg->get("x");
    const auto victim = root.path() / "victim";
    std::ofstream(victim) << "keep me";

    mode = "deny";
    auto denied = sbx_test::run(ioc, x, call("rm", {victim.string()}));
    BOOST_TEST((denied.ec == errc::policy_denied), denied.ec.message());
    BOOST_TEST(has(denied.result.diag.message, "not today"), denied.result.diag);
    BOOST_TEST(fs::exists(victim));

    mode = "silent";
    const auto t0 = std::chrono::steady_clock::now();
    auto silent = sbx_test::run(ioc, x, call("rmdir", {victim.string()}));
    const auto waited = std::chrono::steady_clock::now() - t0;
    BOOST_TEST((silent.ec == errc::policy_denied), silent.ec.message());
    BOOST_TEST((waited >= 180ms && waited < 5s), waited.count());
    BOOST_TEST(fs::exists(victim));

    mode = "allow";
    auto allowed = sbx_test::run(ioc, x, call("rm", {victim.string()}));
    BOOST_TEST(!allowed.ec, allowed.result.diag);
    BOOST_TEST(!fs::exists(victim));
    // Not sensitive: runs without asking.
    mode = "deny";
    BOOST_TEST(!sbx_test::run(ioc, x, call("ls")).ec);
    BOOST_TEST((asked == std::vector<std::string>{"rm " + victim.string(), "rmdir " + victim.string(),
                                                   "rm " + victim.string()}));

    // Without an approver the entry is not built.
    auto none = refused(cfg::builder().build(ioc.get_executor(), doc));
    BOOST_TEST((none.code == errc::validation));
    BOOST_TEST(has(none.diag.message, "sandboxes[\"x\"].approval:"), none.diag.message);
    BOOST_TEST(none.diag.rule == "sandboxes[\"x\"].approval");
}

BOOST_AUTO_TEST_CASE(roots_must_be_directories_and_workspaces_known)
{
    sbx_test::temp_dir dir;
    asio::io_context ioc;
    std::ofstream(dir.path() / "file") << "x";
    fs::create_directory(dir.path() / "real");
    fs::create_directory_symlink(dir.path() / "real", dir.path() / "link");
    for (const char* bad : {"/gone", "/file"})
    {
        auto f = refused(cfg::builder().build(ioc.get_executor(),
                                              parsed(document_of(entry("x", "local", dir.str() + bad)))));
        BOOST_TEST((f.code == errc::validation), bad);
        BOOST_TEST(f.diag.rule == "sandboxes[\"x\"].root", bad);
        BOOST_TEST(has(f.diag.message, "sandboxes[\"x\"].root: \"" + dir.str() + bad), f.diag.message);
    }
    // A root through a symlink is resolved, for the registry and for the factory.
    cfg::builder b;
    std::string seen;
    b.register_backend("local", [&](const cfg::backend_context& c) -> std::unique_ptr<sandbox::runner> {
        seen = c.root;
        return std::make_unique<sandbox::local_runner>(c.executor, sandbox::local_runner_options{.root = c.root});
    });
    auto linked = b.build(ioc.get_executor(), parsed(document_of(entry("x", "local", dir.str() + "/link"))));
    BOOST_TEST_REQUIRE(linked.has_value(), linked.error().diag.message);
    BOOST_TEST(seen == dir.str() + "/real");
    BOOST_TEST(linked->root("x") == dir.str() + "/real");
    BOOST_TEST(sbx_test::run(ioc, linked->get("x"), call("pwd")).result.out.data == dir.str() + "/real\n");

    const auto ws = parsed("version: v1\nsandboxes:\n  x: {backend: local, workspace: main}\n");
    cfg::build_options o;
    o.workspaces["other"] = dir.str();
    auto unknown = refused(cfg::builder().build(ioc.get_executor(), ws, o));
    BOOST_TEST((unknown.code == errc::validation));
    BOOST_TEST(unknown.diag.rule == "sandboxes[\"x\"].workspace");
    BOOST_TEST(has(unknown.diag.message, "unknown workspace \"main\""), unknown.diag.message);
    BOOST_TEST(cfg::builder().check(ioc.get_executor(), ws, o).size() == 1u);
    o.workspaces["main"] = dir.str() + "/real";
    auto known = cfg::builder().build(ioc.get_executor(), ws, o);
    BOOST_TEST_REQUIRE(known.has_value(), known.error().diag.message);
    BOOST_TEST(known->root("x") == dir.str() + "/real");
    BOOST_TEST(sbx_test::run(ioc, known->get("x"), call("pwd")).result.out.data == dir.str() + "/real\n");
    BOOST_TEST(cfg::builder().check(ioc.get_executor(), ws, o).empty());
}

BOOST_AUTO_TEST_CASE(backends_come_from_factories_and_settings_are_strict)
{
    sbx_test::temp_dir root;
    asio::io_context ioc;
    const auto build = [&](const cfg::builder& b, const std::string& backend, const std::string& body = "") {
        return b.build(ioc.get_executor(), parsed(document_of(entry("x", backend, root.str(), body))));
    };
    auto unknown = refused(build(cfg::builder(), "teleport"));
    BOOST_TEST((unknown.code == errc::validation));
    BOOST_TEST(unknown.diag.rule == "sandboxes[\"x\"].backend");
    BOOST_TEST(has(unknown.diag.message, "unknown backend \"teleport\""));

    cfg::builder b;
    std::string path;
    b.register_backend("dry", [&](const cfg::backend_context& c) -> std::unique_ptr<sandbox::runner> {
        path = c.path;
        BOOST_TEST(c.settings.at("level").as_int64() == 3);
        return std::make_unique<sandbox::noop_runner>(c.executor);
    });
    b.register_backend("broken", [](const cfg::backend_context&) -> std::unique_ptr<sandbox::runner> {
        throw sandbox::error(errc::not_available, sandbox::diagnostics{.message = "not on this host"});
    });
    b.register_backend("thrower", [](const cfg::backend_context&) -> std::unique_ptr<sandbox::runner> {
        throw std::runtime_error("bad level");
    });
    b.register_backend("nothing", [](const cfg::backend_context&) { return std::unique_ptr<sandbox::runner>(); });
    auto dry = build(b, "dry", "    settings: {level: 3}\n");
    BOOST_TEST_REQUIRE(dry.has_value(), dry.error().diag.message);
    BOOST_TEST(path == "sandboxes[\"x\"].settings");
    // The noop backend "runs" a command that does not exist: the factory's runner is the one used.
    auto ran = sbx_test::run(ioc, dry->get("x"), call("/no/such/program"));
    BOOST_TEST(!ran.ec, ran.result.diag);
    BOOST_TEST(ran.result.out.data.empty());
    BOOST_TEST(dynamic_cast<sandbox::noop_runner*>(dry->backend("x")) != nullptr);

    auto broken = refused(build(b, "broken"));
    BOOST_TEST((broken.code == errc::not_available));
    BOOST_TEST(has(broken.diag.message, "not on this host"));
    auto thrower = refused(build(b, "thrower"));
    BOOST_TEST((thrower.code == errc::validation));
    BOOST_TEST(has(thrower.diag.message, "sandboxes[\"x\"].settings: bad level"), thrower.diag.message);
    auto null = refused(build(b, "nothing"));
    BOOST_TEST(null.diag.rule == "sandboxes[\"x\"].backend");
    BOOST_CHECK_THROW(b.register_backend("", [](const cfg::backend_context&) { return std::unique_ptr<sandbox::runner>(); }),
                      sandbox::error);
    BOOST_CHECK_THROW(b.register_backend("empty", cfg::backend_factory{}), sandbox::error);

    // Settings: unknown keys (every one named), wrong types, paths leaving the root.
    auto local = refused(build(cfg::builder(), "local", "    settings: {binary: /x, sample_interval: 5}\n"));
    BOOST_TEST((local.code == errc::validation));
    BOOST_TEST(local.diag.rule == "sandboxes[\"x\"].settings.binary");
    BOOST_TEST(has(local.diag.message, "sandboxes[\"x\"].settings.sample_interval"), local.diag.message);
    auto bw = refused(build(cfg::builder(), "bwrap", "    settings: {writeable_paths: [a], read_deny: x}\n"));
    BOOST_TEST((bw.code == errc::validation));
    BOOST_TEST(has(bw.diag.message, "sandboxes[\"x\"].settings.writeable_paths"), bw.diag.message);
    BOOST_TEST(has(bw.diag.message, "sandboxes[\"x\"].settings.read_deny"), bw.diag.message);
    auto setup = refused(build(cfg::builder(), "bwrap", "    settings: {setup_timeout: 0s}\n"));
    BOOST_TEST(setup.diag.rule == "sandboxes[\"x\"].settings.setup_timeout", setup.diag);
    BOOST_TEST(has(setup.diag.message, "must be positive"), setup.diag.message);
    for (const char* warm : {"0", "17", "two"})
    {
        auto w = refused(
            build(cfg::builder(), "bwrap", std::string("    settings: {warm: ") + warm + "}\n"));
        BOOST_TEST(w.diag.rule == "sandboxes[\"x\"].settings.warm", warm << ": " << w.diag);
    }
    for (const char* escape : {"../escape", "a/../../escape"})
    {
        auto e = refused(build(cfg::builder(), "bwrap",
                               std::string("    settings: {writable_paths: [\"") + escape + "\"]}\n"));
        BOOST_TEST((e.code == errc::validation), escape);
        BOOST_TEST(e.diag.rule == "sandboxes[\"x\"].settings.writable_paths[0]", escape);
        BOOST_TEST(has(e.diag.message, "escapes the root"), e.diag.message);
    }
    fs::create_directory_symlink("/etc", root.path() / "out");
    auto via_link = refused(build(cfg::builder(), "bwrap", "    settings: {writable_paths: [out]}\n"));
    BOOST_TEST(has(via_link.diag.message, "escapes the root through a symlink"), via_link.diag.message);
    // A value bwrap_runner itself refuses is a validation problem at that setting, not a
    // backend that "cannot run here".
    auto root_user = refused(build(cfg::builder(), "bwrap", "    settings: {sandbox_user: root}\n"));
    BOOST_TEST(has(root_user.diag.message, "sandbox user \"root\""), root_user.diag.message);
    BOOST_TEST((root_user.code == errc::validation));
    BOOST_TEST(root_user.diag.rule == "sandboxes[\"x\"].settings.sandbox_user");
    auto missing = refused(build(cfg::builder(), "bwrap", "    settings: {writable_paths: [not-there]}\n"));
    BOOST_TEST((missing.code == errc::validation));
    BOOST_TEST(missing.diag.rule == "sandboxes[\"x\"].settings.writable_paths", missing.diag.message);
    BOOST_TEST(has(missing.diag.message, "must exist"), missing.diag.message);
}

BOOST_AUTO_TEST_CASE(capability_gate_lists_every_field_the_backend_cannot_enforce)
{
    sbx_test::temp_dir root;
    asio::io_context ioc;
    cfg::builder b;
    b.register_backend("bare", [](const cfg::backend_context& c) -> std::unique_ptr<sandbox::runner> {
        return std::make_unique<sandbox::noop_runner>(c.executor);
    });
    auto f = refused(b.build(ioc.get_executor(),
                             parsed(document_of(entry("x", "bare", root.str(),
                                                      "    defaults:\n      resources: {memory_bytes: 64MiB}\n"
                                                      "      net: {mode: deny_all}\n      env: {allow: [PATH]}\n")))));
    BOOST_TEST((f.code == errc::not_available));
    BOOST_TEST(has(f.diag.message, "3 problems"), f.diag.message);
    for (const char* p : {"env.allow", "net.mode", "resources.memory_bytes"})
        BOOST_TEST(has(f.diag.message, std::string("sandboxes[\"x\"].defaults.") + p + ": "), p);
    BOOST_TEST(has(f.diag.message, "(line 3"), f.diag.message); // the entry's line
    // Without those defaults, the same backend builds.
    BOOST_TEST(b.build(ioc.get_executor(), parsed(document_of(entry("x", "bare", root.str())))).has_value());

    // The local backend cannot isolate the network.
    auto local = refused(cfg::builder().build(
        ioc.get_executor(), parsed(document_of(entry("x", "local", root.str(), "    defaults: {net: {mode: deny_all}}\n")))));
    BOOST_TEST((local.code == errc::not_available));
    BOOST_TEST(local.diag.rule == "sandboxes[\"x\"].defaults.net.mode");
    BOOST_TEST(has(local.diag.message, "deny_all"), local.diag.message);

    // A backend that says it cannot run here: that one reason, at `backend`.
    sandbox::enforcement_report gone;
    gone.unavailable = "no kernel support";
    const auto p = cfg::capability_gate(sandbox::exec_options{.limits = {.memory_bytes = 1}}, gone, "sandboxes[\"y\"]");
    BOOST_TEST_REQUIRE(p.size() == 1u);
    BOOST_TEST(p[0].path == "sandboxes[\"y\"].backend");
    BOOST_TEST((p[0].code == errc::not_available));
}

BOOST_AUTO_TEST_CASE(failed_build_reports_every_bad_entry_and_destroys_the_good_ones)
{
    sbx_test::temp_dir root;
    asio::io_context ioc;
    auto life = std::make_shared<lifecycle>();
    cfg::builder b;
    b.register_backend("counted", [life](const cfg::backend_context& c) -> std::unique_ptr<sandbox::runner> {
        return std::make_unique<counted_runner>(c.executor, life, name_in(c.path));
    });
    const auto bad = parsed(document_of(entry("a", "counted", root.str()) + entry("b", "nope", root.str()) +
                                        entry("c", "counted", root.str() + "/missing") +
                                        entry("d", "counted", root.str())));
    auto f = refused(b.build(ioc.get_executor(), bad));
    BOOST_TEST(has(f.diag.message, "2 problems"), f.diag.message);
    BOOST_TEST(has(f.diag.message, "sandboxes[\"b\"].backend"), f.diag.message);
    BOOST_TEST(has(f.diag.message, "sandboxes[\"c\"].root"), f.diag.message);
    BOOST_TEST(!has(f.diag.message, "sandboxes[\"a\"]"));
    BOOST_TEST(f.diag.rule == "sandboxes[\"b\"].backend"); // the first problem's
    BOOST_TEST(life->made == 2); // a and d were built...
    BOOST_TEST(life->live == 0); // ...and destroyed, in reverse order
    BOOST_TEST((life->destroyed == std::vector<std::string>{"d", "a"}));
    // check(): the same problems, nothing kept.
    BOOST_TEST(b.check(ioc.get_executor(), bad).size() == 2u);
    BOOST_TEST(life->live == 0);

    // A good build keeps them until the registry goes, then destroys them in reverse.
    *life = {};
    {
        auto reg = b.build(ioc.get_executor(), parsed(document_of(entry("c", "counted", root.str()) +
                                                                  entry("a", "counted", root.str()) +
                                                                  entry("b", "counted", root.str()))));
        BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
        BOOST_TEST((reg->names() == std::vector<std::string>{"a", "b", "c"}));
        BOOST_TEST(life->live == 3);
        auto out = sbx_test::run(ioc, reg->get("b"), call("anything"));
        BOOST_TEST(out.result.out.data == "counted b");
        auto moved = std::move(*reg);
        BOOST_TEST(life->live == 3);
    }
    BOOST_TEST(life->live == 0);
    BOOST_TEST((life->destroyed == std::vector<std::string>{"c", "b", "a"}));
}

BOOST_AUTO_TEST_CASE(bwrap_entry_runs_as_the_sandbox_user_and_denies_the_network)
{
    if (::access("/usr/bin/bwrap", X_OK) != 0 && std::system("command -v bwrap >/dev/null 2>&1") != 0)
    {
        BOOST_TEST_MESSAGE("skipped: bwrap is not installed");
        return;
    }
    sbx_test::temp_dir root;
    const auto [uid, gid] = bwrap_ids();
    BOOST_TEST_REQUIRE(::chown(root.path().c_str(), uid, gid) == 0);
    asio::io_context ioc;
    auto reg = cfg::builder().build(
        ioc.get_executor(),
        parsed(document_of(entry("box", "bwrap", root.str(), "    defaults: {timeout: 20s}\n") +
                           entry("sealed", "bwrap", root.str(),
                                 "    defaults: {timeout: 20s, net: {mode: deny_all}}\n"))));
    if (!reg && reg.error().code == errc::not_available)
    {
        BOOST_TEST_MESSAGE("skipped: bwrap is not usable here: " << reg.error().diag.message);
        return;
    }
    BOOST_TEST_REQUIRE(reg.has_value(), reg.error().diag.message);
    auto* bw = dynamic_cast<sandbox::bwrap_runner*>(reg->backend("box"));
    BOOST_TEST_REQUIRE(bw != nullptr);
    std::optional<sandbox::failure> why;
    asio::co_spawn(ioc, bw->check(), [&](std::exception_ptr, std::optional<sandbox::failure> f) { why = f; });
    ioc.run();
    if (why && !std::getenv("CI"))
    {
        BOOST_TEST_MESSAGE("skipped: bwrap is not usable here: " << why->diag.message);
        return;
    }
    BOOST_TEST(!why.has_value());

    auto id = sbx_test::run(ioc, reg->get("box"), call("id", {"-u"}));
    BOOST_TEST(!id.ec, id.result.diag);
    BOOST_TEST(id.result.out.data == std::to_string(uid) + "\n");
    BOOST_TEST(reg->get("box").enforcement().command_uid.value_or(~0u) == uid);
    const std::string outside = "/var/tmp/sbx-cfg-outside-" + std::to_string(::getpid());
    auto write = sbx_test::run(
        ioc, reg->get("box"),
        sh_call("echo made > made.txt && echo x > " + outside + " 2>/dev/null; echo $?"));
    BOOST_TEST(!write.ec, write.result.diag);
    BOOST_TEST(write.result.out.data != "0\n"); // the host outside the root is read-only
    BOOST_TEST(!fs::exists(outside));
    ::unlink(outside.c_str()); // had the write gone through
    std::string line;
    BOOST_TEST((std::getline(std::ifstream(root.path() / "made.txt"), line) && line == "made"));
    struct stat st{};
    BOOST_TEST_REQUIRE(::stat((root.path() / "made.txt").c_str(), &st) == 0);
    BOOST_TEST(st.st_uid == uid);

    // deny_all: the host's loopback listener is out of reach (bash and curl); the entry
    // without it reaches the same listener.
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOST_TEST_REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    BOOST_TEST_REQUIRE(::listen(l, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
    const std::string port = std::to_string(ntohs(a.sin_port));
    const std::string probe = "bash -c 'echo > /dev/tcp/127.0.0.1/" + port +
                              "' 2>/dev/null && echo connected || echo refused";
    auto sealed = sbx_test::run(ioc, reg->get("sealed"), sh_call(probe));
    auto open = sbx_test::run(ioc, reg->get("box"), sh_call(probe));
    std::optional<sbx_test::run_outcome> curl;
    if (::access("/usr/bin/curl", X_OK) == 0)
        curl = sbx_test::run(ioc, reg->get("sealed"),
                             call("/usr/bin/curl", {"-sS", "--max-time", "3", "http://127.0.0.1:" + port + "/"}));
    ::close(l);
    BOOST_TEST(!sealed.ec, sealed.result.diag);
    BOOST_TEST(sealed.result.out.data == "refused\n");
    BOOST_TEST(open.result.out.data == "connected\n"); // the probe itself works
    if (curl) // 7: could not connect
        BOOST_TEST(curl->result.exit_code == 7, curl->result.err.data);
}

BOOST_AUTO_TEST_CASE(sandbox_run_config_check_and_workspace)
{
    sbx_test::temp_dir dir;
    fs::create_directory(dir.path() / "ws");
    const auto file = (dir.path() / "c.yaml").string();
    std::ofstream(file) << document_of(
        entry("build", "local", dir.str(),
              "    defaults:\n      timeout: 30s\n      env: {inject: {CI: injected-42}}\n"
              "    allowed_commands: [sh, sleep]\n") +
        "  lint:\n    backend: local\n    workspace: main\n");
    const std::vector<std::string> build{"--config", file, "--sandbox", "build"};
    const auto with = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
        a.insert(a.end(), more);
        return a;
    };

    auto ok = run_cli(with(build, {"--", "sh", "-c", "echo $CI"}));
    BOOST_TEST(ok.code == 0, ok.err);
    BOOST_TEST(ok.out == "injected-42\n");
    BOOST_TEST(run_cli(with(build, {"--", "sh", "-c", "exit 3"})).code == 3);
    auto gate = run_cli(with(build, {"--", "ls"}));
    BOOST_TEST(gate.code == 125);
    BOOST_TEST(has(gate.err, "allow-list"), gate.err);
    auto narrowed = run_cli(with(build, {"--timeout", "1", "--", "sleep", "5"}));
    BOOST_TEST(narrowed.code == 124, narrowed.err);
    BOOST_TEST((narrowed.wall < 4s), narrowed.wall.count());
    auto backend = run_cli(with(build, {"--backend", "local", "--", "sh", "-c", "true"}));
    BOOST_TEST(backend.code == 125);
    BOOST_TEST(has(backend.err, "--backend"), backend.err);
    auto nope = run_cli({"--config", file, "--sandbox", "nope", "--", "true"});
    BOOST_TEST(nope.code == 125);
    BOOST_TEST(has(nope.err, "build, lint"), nope.err);
    BOOST_TEST(run_cli({"--config", file, "--", "true"}).code == 125);  // no --sandbox
    BOOST_TEST(run_cli({"--sandbox", "build", "--", "true"}).code == 125); // no --config

    // The workspace entry: resolved from --workspace; without it the entry is refused.
    auto ws = run_cli({"--config", file, "--sandbox", "lint", "--workspace", "main=" + dir.str() + "/ws", "--", "pwd"});
    BOOST_TEST(ws.code == 0, ws.err);
    BOOST_TEST(ws.out == dir.str() + "/ws\n");
    auto no_ws = run_cli({"--config", file, "--sandbox", "lint", "--", "pwd"});
    BOOST_TEST(no_ws.code == 125);
    BOOST_TEST(has(no_ws.err, "sandboxes[\"lint\"].workspace"), no_ws.err);

    // --check: one JSON line per entry.
    auto check = run_cli({"--config", file, "--check", "--workspace", "main=" + dir.str() + "/ws"});
    BOOST_TEST(check.code == 0, check.err);
    std::istringstream lines(check.out);
    std::vector<std::string> names;
    for (std::string line; std::getline(lines, line);)
    {
        boost::system::error_code ec;
        auto v = boost::json::parse(line, ec);
        BOOST_TEST_REQUIRE(!ec, line);
        BOOST_TEST_REQUIRE(v.is_object(), line);
        BOOST_TEST(v.as_object().contains("enforcement"), line);
        names.emplace_back(v.at("name").as_string());
    }
    BOOST_TEST((names == std::vector<std::string>{"build", "lint"}), check.out);
    auto check_no_ws = run_cli({"--config", file, "--check"});
    BOOST_TEST(check_no_ws.code == 125);
    BOOST_TEST(check_no_ws.out.empty());
    BOOST_TEST(run_cli({"--config", file, "--check", "--sandbox", "build"}).code == 125);

    // A document with errors: every path with its line; a capability problem too.
    const auto bad = (dir.path() / "bad.yaml").string();
    std::ofstream(bad) << document_of(entry("build", "local", dir.str(),
                                            "    defaults:\n      timeout: 30\n    allowed_commands: [sh, true]\n"));
    auto broken = run_cli({"--config", bad, "--check"});
    BOOST_TEST(broken.code == 125);
    BOOST_TEST(broken.out.empty());
    BOOST_TEST(has(broken.err, "sandboxes[\"build\"].defaults.timeout"), broken.err);
    BOOST_TEST(has(broken.err, "line 7"), broken.err);
    BOOST_TEST(has(broken.err, "sandboxes[\"build\"].allowed_commands[1]"), broken.err);
    BOOST_TEST(run_cli({"--config", bad, "--sandbox", "build", "--", "sh", "-c", "true"}).code == 125);
    // One pass (issue 33, item 12): a parse problem in one entry does not hide the build
    // problem of another (a root that does not exist) nor the gate's in a third.
    const auto both = (dir.path() / "both.yaml").string();
    std::ofstream(both) << document_of(
        entry("build", "local", dir.str(), "    defaults:\n      timeout: 30\n") +
        entry("gone", "local", dir.str() + "/no-such-root") +
        entry("gated", "local", dir.str(), "    defaults: {net: {mode: deny_all}}\n"));
    auto one_pass = run_cli({"--config", both, "--check"});
    BOOST_TEST(one_pass.code == 125);
    BOOST_TEST(one_pass.out.empty());
    BOOST_TEST(has(one_pass.err, "sandboxes[\"build\"].defaults.timeout"), one_pass.err);
    BOOST_TEST(has(one_pass.err, "sandboxes[\"gone\"]"), one_pass.err);
    BOOST_TEST(has(one_pass.err, "no-such-root"), one_pass.err);
    BOOST_TEST(has(one_pass.err, "sandboxes[\"gated\"].defaults.net.mode"), one_pass.err);
    const auto net = (dir.path() / "net.yaml").string();
    std::ofstream(net) << document_of(entry("build", "local", dir.str(), "    defaults: {net: {mode: deny_all}}\n"));
    auto gated = run_cli({"--config", net, "--check"});
    BOOST_TEST(gated.code == 125);
    BOOST_TEST(has(gated.err, "sandboxes[\"build\"].defaults.net.mode"), gated.err);
    auto missing = run_cli({"--config", (dir.path() / "none.yaml").string(), "--check"});
    BOOST_TEST(missing.code == 125);
}

// A document made in code skips parse_document's checks: what the chain refuses is a problem
// of the build (the other entries still checked), not an exception.
BOOST_AUTO_TEST_CASE(a_document_made_in_code_is_refused_not_thrown)
{
    sbx_test::temp_dir root;
    asio::io_context ioc;
    cfg::sandbox_entry gate;
    gate.name = "gate";
    gate.backend = "local";
    gate.root = root.str();
    gate.allowed_commands = std::vector<std::string>{"/bin/sh"}; // a '/' under base_name
    gate.match = sandbox::command_match::base_name;
    cfg::sandbox_entry ask = gate;
    ask.name = "ask";
    ask.allowed_commands.reset();
    ask.approval.sensitive_commands = {"rm"};
    ask.approval.deadline = {}; // not positive
    cfg::sandbox_entry gone = ask;
    gone.name = "gone";
    gone.root = root.str() + "/missing";
    cfg::document d;
    d.version = "v1";
    d.sandboxes = {ask, gate, gone};
    cfg::build_options o;
    o.ask = [](sandbox::approval_request) -> asio::awaitable<sandbox::approval_decision> {
        co_return sandbox::approval_decision{};
    };
    std::optional<sandbox::outcome<cfg::registry>> r;
    BOOST_CHECK_NO_THROW(r.emplace(cfg::builder().build(ioc.get_executor(), d, o)));
    BOOST_TEST_REQUIRE(r.has_value());
    auto f = refused(*r);
    BOOST_TEST((f.code == errc::validation));
    BOOST_TEST(has(f.diag.message, "3 problems"), f.diag.message);
    BOOST_TEST(has(f.diag.message, "sandboxes[\"ask\"]: the approval deadline must be positive"), f.diag.message);
    BOOST_TEST(has(f.diag.message, "sandboxes[\"gate\"]: allowed command \"/bin/sh\""), f.diag.message);
    BOOST_TEST(has(f.diag.message, "sandboxes[\"gone\"].root"), f.diag.message);
}

BOOST_AUTO_TEST_SUITE_END()
