// test/integration/policy_chain_test.cpp: the policy decorators. The reference's decorator,
// approval and compose tests run against a recording runner (pure logic); the rest runs real
// commands and sessions through the chain over the local runner: approval deadlines and
// cancellation, session starts, the audit trail.
#include <boost/test/unit_test.hpp>

#include "session_support.hpp"
#include "support.hpp"

#include <sandbox/local_runner.hpp>
#include <sandbox/policy.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace std::chrono_literals;
namespace asio = boost::asio;
using sandbox::errc;
using sandbox::exec_status;

namespace {

// Records every call and returns a fixed result; has no sessions. Pure logic: no process.
class recording_runner final : public sandbox::runner
{
public:
    explicit recording_runner(executor_type ex) : ex_(std::move(ex)) {}
    executor_type get_executor() const noexcept override { return ex_; }
    asio::awaitable<sandbox::exec_outcome> try_exec(sandbox::exec_request req) override
    {
        calls->push_back(req);
        sandbox::exec_outcome o;
        o.result.status = exec_status::exited;
        o.result.exit_code = 42;
        o.result.out.data = "from inner";
        co_return o;
    }
    sandbox::enforcement_report enforcement() const override
    {
        sandbox::enforcement_report e;
        e.memory_cap = true;
        e.tree_kill = true;
        return e;
    }
    std::shared_ptr<std::vector<sandbox::exec_request>> calls =
        std::make_shared<std::vector<sandbox::exec_request>>();

private:
    executor_type ex_;
};

// Keeps every record; the tests read them back.
struct memory_sink final : sandbox::audit_sink
{
    boost::system::error_code write(const sandbox::audit_record& r) noexcept override
    {
        records.push_back(r);
        return {};
    }
    std::vector<sandbox::audit_record> records;
};

// Refuses the records of one event (as a full disk would), keeps the others.
struct failing_sink final : sandbox::audit_sink
{
    explicit failing_sink(sandbox::audit_event e) : fails(e) {}
    boost::system::error_code write(const sandbox::audit_record& r) noexcept override
    {
        if (r.event == fails)
            return make_error_code(boost::system::errc::no_space_on_device);
        records.push_back(r);
        return {};
    }
    sandbox::audit_event fails;
    std::vector<sandbox::audit_record> records;
};

// An approver that answers `allow` and remembers what it was asked.
struct scripted_approver
{
    bool allow = true;
    std::shared_ptr<std::vector<sandbox::approval_request>> asked =
        std::make_shared<std::vector<sandbox::approval_request>>();
    sandbox::approver fn() const
    {
        return [asked = asked, allow = allow](sandbox::approval_request rq)
                   -> asio::awaitable<sandbox::approval_decision> {
            asked->push_back(rq);
            co_return allow ? sandbox::approval_decision::allowed("ok")
                            : sandbox::approval_decision::denied("not today");
        };
    }
};

sandbox::predicate always(std::string why = "always")
{
    return sandbox::make_predicate([](const sandbox::call_snapshot&) { return true; }, why);
}

struct chain_fixture
{
    asio::io_context ioc;
    std::unique_ptr<recording_runner> owned = std::make_unique<recording_runner>(ioc.get_executor());
    recording_runner* inner = owned.get();

    sandbox::exec_request request(std::string cmd, std::vector<std::string> args = {})
    {
        sandbox::exec_request r;
        r.command = std::move(cmd);
        r.args = std::move(args);
        return r;
    }
    sbx_test::run_outcome run(sandbox::runner& r, sandbox::exec_request req)
    {
        return sbx_test::run(ioc, r, std::move(req), 10s);
    }
};

void require_denied(const sbx_test::run_outcome& out, const char* rule, const std::string& text = {})
{
    BOOST_TEST(out.ec == errc::policy_denied);
    BOOST_TEST(out.result.status == exec_status::not_started);
    BOOST_TEST(out.result.diag.rule == rule);
    if (!text.empty())
        BOOST_TEST(out.result.diag.message.find(text) != std::string::npos,
                   "\"" << out.result.diag.message << "\" lacks \"" << text << "\"");
}

} // namespace

BOOST_AUTO_TEST_SUITE(policy_decorators)

BOOST_FIXTURE_TEST_CASE(allow_commands_passes_listed_commands_through, chain_fixture)
{
    auto gate = sandbox::allow_commands(std::move(owned), {"ls", "cat"});
    auto out = run(*gate, request("ls", {"-l"}));
    BOOST_TEST(!out.ec);
    BOOST_TEST(out.result.exit_code == 42);
    BOOST_TEST(out.result.out.data == "from inner");
    BOOST_TEST_REQUIRE(inner->calls->size() == 1u);
    BOOST_TEST(inner->calls->at(0).command == "ls");
    BOOST_TEST(inner->calls->at(0).args.at(0) == "-l");
}

BOOST_FIXTURE_TEST_CASE(allow_commands_refuses_the_rest_before_the_inner_runner, chain_fixture)
{
    auto gate = sandbox::allow_commands(std::move(owned), {"ls", "cat"});
    require_denied(run(*gate, request("rm", {"-rf", "/"})), "gate", "allow-list");
    // Exact mode: a path is another name.
    require_denied(run(*gate, request("/bin/ls")), "gate");
    BOOST_TEST(inner->calls->empty());
}

BOOST_FIXTURE_TEST_CASE(an_empty_allow_list_blocks_everything, chain_fixture)
{
    auto gate = sandbox::allow_commands(std::move(owned), {});
    require_denied(run(*gate, request("ls")), "gate");
    BOOST_TEST(inner->calls->empty());
}

BOOST_FIXTURE_TEST_CASE(base_name_mode_is_a_choice, chain_fixture)
{
    auto gate = sandbox::allow_commands(std::move(owned), {"ls"}, sandbox::command_match::base_name);
    BOOST_TEST(!run(*gate, request("/bin/ls")).ec);
    BOOST_TEST(!run(*gate, request("./ls")).ec);
    require_denied(run(*gate, request("/bin/lsblk")), "gate");
    BOOST_TEST(inner->calls->size() == 2u);
    // A name with a slash cannot be a base name: refused when the gate is built.
    BOOST_CHECK_EXCEPTION(
        sandbox::allow_commands(std::make_unique<recording_runner>(ioc.get_executor()),
                                {"/bin/ls"}, sandbox::command_match::base_name),
        sandbox::error, [](const sandbox::error& e) { return e.code() == errc::validation; });
    BOOST_CHECK_EXCEPTION(sandbox::allow_commands(nullptr, {"ls"}), sandbox::error,
                          [](const sandbox::error& e) { return e.code() == errc::validation; });
}

BOOST_FIXTURE_TEST_CASE(an_empty_command_is_a_validation_error, chain_fixture)
{
    auto gate = sandbox::allow_commands(std::move(owned), {"ls"});
    auto out = run(*gate, request(""));
    BOOST_TEST(out.ec == errc::validation);
    BOOST_TEST(inner->calls->empty());
}

BOOST_FIXTURE_TEST_CASE(with_defaults_merges_every_call_without_leaking_between_calls, chain_fixture)
{
    sandbox::exec_options d;
    d.timeout = 5s;
    d.env.allow = std::vector<std::string>{"PATH", "HOME"};
    d.env.inject = {{"ID", "default"}, {"REGION", "eu"}};
    d.net.mode = sandbox::net_mode::deny_all;
    d.limits.memory_bytes = 1 << 30;
    auto r = sandbox::with_defaults(std::move(owned), d);

    auto first = request("echo");
    first.options.timeout = 100s;
    first.options.env.inject = {{"ID", "caller"}, {"RUN_ID", "1"}};
    first.options.env.allow = std::vector<std::string>{"PATH", "SECRET"};
    first.options.limits.memory_bytes = 1 << 20; // narrower: kept
    BOOST_TEST(!run(*r, first).ec);
    auto second = request("echo");
    second.options.env.inject = {{"RUN_ID", "2"}};
    BOOST_TEST(!run(*r, second).ec);

    BOOST_TEST_REQUIRE(inner->calls->size() == 2u);
    const auto& a = inner->calls->at(0).options;
    BOOST_TEST(a.timeout == 5s);
    BOOST_TEST((a.env.allow == std::vector<std::string>{"PATH"}));
    BOOST_TEST(a.env.inject.at("ID") == "caller");
    BOOST_TEST(a.env.inject.at("REGION") == "eu");
    BOOST_TEST(a.net.mode == sandbox::net_mode::deny_all);
    BOOST_TEST(a.limits.memory_bytes == 1 << 20);
    const auto& b = inner->calls->at(1).options;
    BOOST_TEST(b.env.inject.at("RUN_ID") == "2");
    BOOST_TEST(b.env.inject.at("ID") == "default"); // the first call's value did not stick
    BOOST_TEST((b.env.allow == std::vector<std::string>{"PATH", "HOME"}));
    BOOST_TEST(b.limits.memory_bytes == 1 << 30);
}

BOOST_FIXTURE_TEST_CASE(default_input_never_joins_a_callers_own_stdin, chain_fixture)
{
    sandbox::exec_options d;
    d.input = "default stdin";
    auto r = sandbox::with_defaults(std::move(owned), d);
    BOOST_TEST(!run(*r, request("cat")).ec);
    auto with_fd = request("cat");
    with_fd.stdin_fd = std::make_shared<const sandbox::unique_fd>(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    BOOST_TEST(!run(*r, with_fd).ec);
    BOOST_TEST_REQUIRE(inner->calls->size() == 2u);
    BOOST_TEST((inner->calls->at(0).options.input == std::optional<std::string>("default stdin")));
    BOOST_TEST(!inner->calls->at(1).options.input.has_value());
}

BOOST_FIXTURE_TEST_CASE(defaults_compose_with_the_gate, chain_fixture)
{
    sandbox::exec_options d;
    d.timeout = 5s;
    auto r = sandbox::with_defaults(sandbox::allow_commands(std::move(owned), {"echo"}), d);
    require_denied(run(*r, request("rm")), "gate");
    BOOST_TEST(inner->calls->empty());
    BOOST_TEST(!run(*r, request("echo")).ec);
    BOOST_TEST_REQUIRE(inner->calls->size() == 1u);
    BOOST_TEST(inner->calls->at(0).options.timeout == 5s);
}

BOOST_FIXTURE_TEST_CASE(decorators_report_the_inner_enforcement_and_its_sessions, chain_fixture)
{
    const auto want = inner->enforcement();
    auto r = sandbox::with_approval(sandbox::with_defaults(std::move(owned), {}), {});
    BOOST_TEST((r->enforcement() == want));
    BOOST_TEST(r->sessions() == nullptr); // the inner runner has none: neither has the chain
    BOOST_TEST((r->get_executor() == ioc.get_executor()));
}

// A failed call is a value from the step that failed to the caller: try_exec hands back the
// code and the result (diagnostics in it) without throwing; exec throws it at the edge.
BOOST_FIXTURE_TEST_CASE(a_refusal_is_a_value_and_exec_throws_it_at_the_edge, chain_fixture)
{
    auto gate = sandbox::allow_commands(std::move(owned), {"ls"});
    bool threw_inside = false;
    sandbox::exec_outcome o;
    std::optional<sandbox::error> at_edge;
    sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {
        try
        {
            o = co_await gate->try_exec(request("rm"));
        }
        catch (...)
        {
            threw_inside = true;
        }
        try
        {
            co_await gate->exec(request("rm"));
        }
        catch (const sandbox::error& e)
        {
            at_edge.emplace(e);
        }
    });
    BOOST_TEST(!threw_inside);
    BOOST_TEST(o.ec == errc::policy_denied);
    BOOST_TEST(o.result.status == exec_status::not_started);
    BOOST_TEST(o.result.diag.rule == "gate");
    BOOST_TEST_REQUIRE(at_edge.has_value());
    BOOST_TEST(at_edge->code() == errc::policy_denied);
    BOOST_TEST(at_edge->diag().rule == "gate");
    BOOST_TEST(!at_edge->partial_result()); // nothing ran
    BOOST_TEST(inner->calls->empty());
}

namespace {
// A runner of a caller's that throws instead of returning its failure: `what` says which.
class throwing_runner final : public sandbox::runner
{
public:
    throwing_runner(executor_type ex, bool typed) : ex_(std::move(ex)), typed_(typed) {}
    executor_type get_executor() const noexcept override { return ex_; }
    asio::awaitable<sandbox::exec_outcome> try_exec(sandbox::exec_request) override
    {
        if (!typed_)
            throw std::runtime_error("the inner runner broke");
        sandbox::exec_result partial;
        partial.status = exec_status::timed_out;
        partial.out.data = "so far";
        sandbox::diagnostics d;
        d.message = "timed out after 1s";
        throw sandbox::error(make_error_code(errc::timeout), std::move(d), std::move(partial));
        co_return sandbox::exec_outcome{};
    }
    sandbox::enforcement_report enforcement() const override { return {}; }
    sandbox::process_manager* sessions() noexcept override { return &sessions_; }

private:
    // Its sessions throw the same way.
    class throwing_sessions final : public sandbox::process_manager
    {
    public:
        explicit throwing_sessions(const throwing_runner& r) : r_(r) {}
        executor_type get_executor() const noexcept override { return r_.ex_; }
        asio::awaitable<sandbox::outcome<std::shared_ptr<sandbox::session>>>
        try_start(sandbox::session_spec) override
        {
            if (!r_.typed_)
                throw std::runtime_error("the inner manager broke");
            sandbox::diagnostics d;
            d.message = "no room for another session";
            throw sandbox::error(make_error_code(errc::conflict), std::move(d));
            co_return nullptr;
        }
        std::vector<sandbox::session_info> list() const override { return {}; }
        std::shared_ptr<sandbox::session> find(std::string_view) const override { return {}; }
        asio::awaitable<sandbox::exec_result> terminate(std::string,
                                                        std::chrono::nanoseconds) override
        {
            co_return sandbox::exec_result{};
        }

    private:
        const throwing_runner& r_;
    };

    executor_type ex_;
    bool typed_;
    throwing_sessions sessions_{*this};
};
} // namespace

// The chain turns what such a runner throws into an outcome, partial result and diagnostics
// kept, and records it in the audit trail like any other end; the same for a session start.
BOOST_FIXTURE_TEST_CASE(an_inner_runner_or_manager_that_throws_becomes_a_value_and_is_audited,
                        chain_fixture)
{
    for (bool typed : {true, false})
        BOOST_TEST_CONTEXT("sandbox::error thrown: " << typed)
        {
            auto sink = std::make_shared<memory_sink>();
            auto chain = sandbox::with_audit(
                std::make_unique<throwing_runner>(ioc.get_executor(), typed), sink);
            bool threw_inside = false;
            sandbox::exec_outcome o;
            sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {
                try
                {
                    o = co_await chain->try_exec(request("ls"));
                }
                catch (...)
                {
                    threw_inside = true;
                }
            });
            BOOST_TEST(!threw_inside);
            BOOST_TEST_REQUIRE(!sink->records.empty());
            const auto& last = sink->records.back();
            if (typed)
            {
                BOOST_TEST(o.ec == errc::timeout);
                BOOST_TEST(o.result.status == exec_status::timed_out);
                BOOST_TEST(o.result.out.data == "so far");
                BOOST_TEST(o.result.diag.message == "timed out after 1s");
                BOOST_TEST(last.event == sandbox::audit_event::finished);
                BOOST_TEST(last.error == "timeout");
            }
            else
            {
                BOOST_TEST(o.ec == errc::internal);
                BOOST_TEST(o.result.status == exec_status::not_started);
                BOOST_TEST(o.result.diag.message == "the inner runner broke");
                BOOST_TEST(last.event == sandbox::audit_event::refused);
                BOOST_TEST(last.error == "internal");
            }
            // Its sessions pass failures the same way: try_start returns them, start throws.
            BOOST_TEST_REQUIRE(chain->sessions() != nullptr);
            threw_inside = false;
            std::optional<sandbox::failure> failed;
            boost::system::error_code at_edge;
            sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {
                try
                {
                    auto started = co_await chain->sessions()->try_start(sbx_test::shell("true"));
                    if (!started)
                        failed = started.error();
                }
                catch (...)
                {
                    threw_inside = true;
                }
                try
                {
                    co_await chain->sessions()->start(sbx_test::shell("true"));
                }
                catch (const sandbox::error& e)
                {
                    at_edge = e.code();
                }
            });
            BOOST_TEST(!threw_inside);
            BOOST_TEST_REQUIRE(failed.has_value());
            const auto code =
                typed ? make_error_code(errc::conflict) : make_error_code(errc::internal);
            BOOST_TEST(failed->code == code);
            BOOST_TEST(at_edge == code);
            BOOST_TEST(failed->diag.message ==
                       (typed ? "no room for another session" : "the inner manager broke"));
            BOOST_TEST_REQUIRE(!sink->records.empty());
            BOOST_TEST(sink->records.back().event == sandbox::audit_event::refused);
            BOOST_TEST(sink->records.back().error == (typed ? "conflict" : "internal"));
        }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(policy_approval)

BOOST_FIXTURE_TEST_CASE(no_match_passes_without_asking, chain_fixture)
{
    scripted_approver ap;
    auto r = sandbox::with_approval(std::move(owned),
                                    {{sandbox::command_patterns({"rm"})}, ap.fn()});
    auto out = run(*r, request("ls"));
    BOOST_TEST(!out.ec);
    BOOST_TEST(out.result.exit_code == 42);
    BOOST_TEST(ap.asked->empty());
    BOOST_TEST(inner->calls->size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(an_approved_call_runs_exactly_as_asked, chain_fixture)
{
    scripted_approver ap;
    auto r = sandbox::with_approval(std::move(owned),
                                    {{sandbox::command_patterns({"rm"})}, ap.fn()});
    auto req = request("rm", {"-f", "x"});
    req.options.work_dir = "sub";
    req.options.input = "in";
    req.options.timeout = 7s;
    req.options.env.allow = std::vector<std::string>{"PATH"};
    req.requested_by = sandbox::requester{1000, 1001, 4242};
    BOOST_TEST(!run(*r, req).ec);
    BOOST_TEST_REQUIRE(ap.asked->size() == 1u);
    BOOST_TEST(ap.asked->at(0).call.command == "rm");
    BOOST_TEST_REQUIRE(ap.asked->at(0).call.requested_by.has_value());
    BOOST_TEST(ap.asked->at(0).call.requested_by->uid == 1000u);
    BOOST_TEST(ap.asked->at(0).call.requested_by->gid == 1001u);
    BOOST_TEST(ap.asked->at(0).call.requested_by->pid == 4242);
    BOOST_TEST(!ap.asked->at(0).reason.empty());
    BOOST_TEST_REQUIRE(inner->calls->size() == 1u);
    const auto& got = inner->calls->at(0);
    BOOST_TEST(got.options.work_dir == "sub");
    BOOST_TEST((got.options.input == std::optional<std::string>("in")));
    BOOST_TEST(got.options.timeout == 7s);
    BOOST_TEST((got.options.env.allow == req.options.env.allow));
}

BOOST_FIXTURE_TEST_CASE(the_approver_cannot_change_what_runs, chain_fixture)
{
    sandbox::approver meddler = [](sandbox::approval_request rq)
        -> asio::awaitable<sandbox::approval_decision> {
        rq.call.command = "evil";
        rq.call.args.at(0) = "changed";
        rq.call.options.input->at(0) = 'X';
        rq.call.options.env.allow->at(0) = "SECRET";
        rq.call.options.env.inject["K"] = "changed";
        rq.call.options.net.allow_hosts.at(0) = "evil.example";
        rq.call.options.net.rules.at(0).host = "evil.example";
        rq.call.options.net.unix_sockets.at(0) = "/evil";
        rq.call.options.net.mitm->hosts.push_back("evil.example");
        rq.call.options.limits.memory_bytes = 0;
        co_return sandbox::approval_decision::allowed();
    };
    // A predicate that tries too (through a cast: it gets its own copy anyway).
    sandbox::predicate grabby = [](const sandbox::call_snapshot& c) -> std::optional<std::string> {
        const_cast<sandbox::call_snapshot&>(c).args.at(0) = "grabbed";
        return std::string("match");
    };
    auto r = sandbox::with_approval(std::move(owned), {{grabby}, meddler});
    auto req = request("rm", {"orig"});
    req.options.input = "in";
    req.options.env.allow = std::vector<std::string>{"PATH"};
    req.options.env.inject = {{"K", "v"}};
    req.options.net.allow_hosts = {"a.example"};
    req.options.net.rules = {{sandbox::net_action::allow, "b.example", 443}};
    req.options.net.unix_sockets = {"/run/ok.sock"};
    req.options.net.mitm = sandbox::mitm_policy{};
    req.options.limits.memory_bytes = 1 << 20;
    BOOST_TEST(!run(*r, req).ec);
    BOOST_TEST_REQUIRE(inner->calls->size() == 1u);
    const auto& got = inner->calls->at(0);
    BOOST_TEST(got.command == "rm");
    BOOST_TEST(got.args.at(0) == "orig");
    BOOST_TEST((got.options.input == std::optional<std::string>("in")));
    BOOST_TEST(got.options.env.allow->at(0) == "PATH");
    BOOST_TEST(got.options.env.inject.at("K") == "v");
    BOOST_TEST(got.options.net.allow_hosts.at(0) == "a.example");
    BOOST_TEST(got.options.net.rules.at(0).host == "b.example");
    BOOST_TEST(got.options.net.unix_sockets.at(0) == "/run/ok.sock");
    BOOST_TEST(got.options.net.mitm->hosts.empty());
    BOOST_TEST(got.options.limits.memory_bytes == 1 << 20);
}

BOOST_FIXTURE_TEST_CASE(a_denial_names_the_reason_and_runs_nothing, chain_fixture)
{
    scripted_approver ap;
    ap.allow = false;
    auto r = sandbox::with_approval(std::move(owned),
                                    {{sandbox::command_patterns({"rm"})}, ap.fn()});
    require_denied(run(*r, request("/bin/rm")), "approval", "sensitive pattern \"rm\"");
    auto again = run(*r, request("rm"));
    BOOST_TEST(again.result.diag.message.find("not today") != std::string::npos);
    BOOST_TEST(inner->calls->empty());
}

BOOST_FIXTURE_TEST_CASE(every_failure_of_the_approval_channel_denies, chain_fixture)
{
    // Throws inside the coroutine; throws before returning one; no approver; an empty
    // predicate; a predicate that throws.
    sandbox::approver throws_inside = [](sandbox::approval_request)
        -> asio::awaitable<sandbox::approval_decision> {
        throw std::runtime_error("channel down");
        co_return sandbox::approval_decision::allowed();
    };
    sandbox::approver throws_outside = [](sandbox::approval_request)
        -> asio::awaitable<sandbox::approval_decision> { throw std::runtime_error("no coroutine"); };
    sandbox::predicate thrower = [](const sandbox::call_snapshot&) -> std::optional<std::string> {
        throw std::runtime_error("predicate bug");
    };
    struct row
    {
        sandbox::approval_options opts;
        const char* text;
    };
    std::vector<row> rows;
    rows.push_back({{{always()}, throws_inside}, "channel down"});
    rows.push_back({{{always()}, throws_outside}, "no coroutine"});
    rows.push_back({{{always()}, {}}, "no approver configured"});
    rows.push_back({{{sandbox::predicate{}}, scripted_approver{}.fn()}, "empty predicate"});
    rows.push_back({{{sandbox::command_patterns({"zzz"}), sandbox::predicate{}},
                     scripted_approver{}.fn()},
                    "empty predicate"}); // even when no other predicate matches
    rows.push_back({{{thrower}, scripted_approver{}.fn()}, "predicate bug"});
    for (auto& row : rows)
    {
        auto rec = std::make_unique<recording_runner>(ioc.get_executor());
        auto calls = rec->calls;
        auto r = sandbox::with_approval(std::move(rec), row.opts);
        require_denied(run(*r, request("ls")), "approval", row.text);
        BOOST_TEST(calls->empty());
    }
}

BOOST_FIXTURE_TEST_CASE(only_the_first_matching_predicate_asks, chain_fixture)
{
    scripted_approver ap;
    auto r = sandbox::with_approval(std::move(owned), {{always("first"), always("second")}, ap.fn()});
    BOOST_TEST(!run(*r, request("ls")).ec);
    BOOST_TEST_REQUIRE(ap.asked->size() == 1u);
    BOOST_TEST(ap.asked->at(0).reason == "first");
}

BOOST_FIXTURE_TEST_CASE(a_silent_approver_is_denied_at_the_deadline_and_cancelled, chain_fixture)
{
    auto cancelled = std::make_shared<bool>(false);
    sandbox::approver silent = [cancelled](sandbox::approval_request)
        -> asio::awaitable<sandbox::approval_decision> {
        asio::steady_timer t(co_await asio::this_coro::executor, 1h);
        boost::system::error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        *cancelled = ec == asio::error::operation_aborted;
        co_return sandbox::approval_decision::allowed();
    };
    auto r = sandbox::with_approval(std::move(owned), {{always()}, silent, 50ms});
    require_denied(run(*r, request("ls")), "approval", "deadline");
    BOOST_TEST(*cancelled);
    BOOST_TEST(inner->calls->empty());
    BOOST_CHECK_EXCEPTION(
        sandbox::with_approval(std::make_unique<recording_runner>(ioc.get_executor()),
                               {{always()}, silent, 0s}),
        sandbox::error, [](const sandbox::error& e) { return e.code() == errc::validation; });
}

BOOST_FIXTURE_TEST_CASE(an_approver_that_ignores_cancellation_is_not_waited_for, chain_fixture)
{
    // It shields itself from cancellation and answers "allow" late: the call was denied at
    // the deadline, and the late answer runs nothing.
    auto answered = std::make_shared<bool>(false);
    sandbox::approver stubborn = [answered](sandbox::approval_request)
        -> asio::awaitable<sandbox::approval_decision> {
        co_await asio::this_coro::reset_cancellation_state(
            [](asio::cancellation_type) { return asio::cancellation_type::none; });
        asio::steady_timer t(co_await asio::this_coro::executor, 300ms);
        boost::system::error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        *answered = true;
        co_return sandbox::approval_decision::allowed();
    };
    auto calls = inner->calls; // the inner runner goes with the chain below
    std::unique_ptr<sandbox::runner> r =
        sandbox::with_approval(std::move(owned), {{always()}, stubborn, 20ms});
    bool done = false;
    boost::system::error_code got;
    sandbox::async_exec(*r, request("ls"), [&](boost::system::error_code ec, sandbox::exec_result) {
        done = true;
        got = ec;
        BOOST_TEST(!*answered); // completed before the approver answered
        r.reset(); // the runner goes while its approver still runs (ASan watches this)
    });
    ioc.run_for(5s);
    BOOST_TEST(!r);
    BOOST_TEST(done);
    BOOST_TEST(got == errc::policy_denied);
    BOOST_TEST(*answered);
    BOOST_TEST(calls->empty());
}

BOOST_FIXTURE_TEST_CASE(cancelling_the_caller_cancels_the_approval_and_runs_nothing, chain_fixture)
{
    auto asked = std::make_shared<bool>(false);
    auto cancelled = std::make_shared<bool>(false);
    sandbox::approver waiting = [asked, cancelled](sandbox::approval_request)
        -> asio::awaitable<sandbox::approval_decision> {
        *asked = true;
        asio::steady_timer t(co_await asio::this_coro::executor, 1h);
        boost::system::error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        *cancelled = ec == asio::error::operation_aborted;
        co_return sandbox::approval_decision::allowed();
    };
    auto sink = std::make_shared<memory_sink>();
    sandbox::local_policy p;
    p.approval = {{always()}, waiting};
    p.audit = sink;
    auto r = sandbox::compose_local(std::move(owned), std::move(p));
    for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial})
    {
        *asked = *cancelled = false;
        asio::cancellation_signal cancel;
        bool done = false;
        sandbox::exec_result res;
        boost::system::error_code got;
        sandbox::async_exec(*r, request("ls"),
                            asio::bind_cancellation_slot(
                                cancel.slot(), [&](boost::system::error_code ec, sandbox::exec_result x) {
                                    done = true;
                                    got = ec;
                                    res = std::move(x);
                                }));
        ioc.restart();
        while (!*asked && ioc.run_one_for(5s))
        {
        }
        BOOST_TEST_REQUIRE(*asked);
        cancel.emit(type);
        ioc.run_for(5s);
        BOOST_TEST(done);
        BOOST_TEST(got == asio::error::operation_aborted);
        BOOST_TEST(res.status == exec_status::not_started);
        BOOST_TEST(res.diag.rule == "approval");
        BOOST_TEST(*cancelled);
        BOOST_TEST_REQUIRE(!sink->records.empty());
        BOOST_TEST(sink->records.back().event == sandbox::audit_event::denied);
        BOOST_TEST(sink->records.back().error == "aborted");
    }
    BOOST_TEST(inner->calls->empty());
    BOOST_TEST(sink->records.size() == 2u); // one record per call, nothing "allowed"
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(policy_compose)

BOOST_FIXTURE_TEST_CASE(the_approver_sees_the_merged_options, chain_fixture)
{
    scripted_approver ap;
    sandbox::local_policy p;
    p.defaults.timeout = 3s;
    p.defaults.net.mode = sandbox::net_mode::deny_all;
    p.approval = {{sandbox::net_non_default()}, ap.fn()};
    auto r = sandbox::compose_local(std::move(owned), std::move(p));
    BOOST_TEST(!run(*r, request("curl")).ec);
    BOOST_TEST_REQUIRE(ap.asked->size() == 1u);
    BOOST_TEST(ap.asked->at(0).call.options.timeout == 3s);
    BOOST_TEST(ap.asked->at(0).call.options.net.mode == sandbox::net_mode::deny_all);
    BOOST_TEST_REQUIRE(inner->calls->size() == 1u);
    BOOST_TEST(inner->calls->at(0).options.timeout == 3s);
}

BOOST_FIXTURE_TEST_CASE(approval_cannot_pass_what_the_gate_refuses, chain_fixture)
{
    scripted_approver ap;
    sandbox::local_policy p;
    p.allowed_commands = std::vector<std::string>{"echo"};
    p.approval = {{always()}, ap.fn()};
    auto r = sandbox::compose_local(std::move(owned), std::move(p));
    require_denied(run(*r, request("rm")), "gate");
    BOOST_TEST(inner->calls->empty());
    BOOST_TEST(ap.asked->empty()); // nobody is asked about what the gate refuses
    BOOST_TEST(!run(*r, request("echo")).ec);
    BOOST_TEST(ap.asked->size() == 1u);
}

BOOST_FIXTURE_TEST_CASE(the_proxy_records_of_a_call_reach_the_audit_trail_and_the_caller,
                        chain_fixture)
{
    auto sink = std::make_shared<memory_sink>();
    sandbox::local_policy p;
    p.audit = sink;
    auto r = sandbox::compose_local(std::move(owned), std::move(p));
    std::vector<sandbox::net_record> mine;
    auto req = request("curl");
    req.on_net_record = [&mine](const sandbox::net_record& n) { mine.push_back(n); };
    BOOST_TEST(!run(*r, req).ec);
    BOOST_TEST(!run(*r, request("true")).ec); // a second call: its own number
    BOOST_TEST_REQUIRE(inner->calls->size() == 2u);
    // The backend gives the records to the handler the chain put in the request.
    const auto& handler = inner->calls->at(0).on_net_record;
    BOOST_TEST_REQUIRE(static_cast<bool>(handler));
    sandbox::net_record d;
    d.connection = 1;
    d.protocol = sandbox::net_protocol::connect;
    d.requested_host = "GitHub.com";
    d.host = "github.com";
    d.port = 443;
    d.rule = "allow github.com:443";
    d.verdict = sandbox::net_verdict::allowed;
    d.reason = "rule";
    d.dialed = "140.82.112.3:443";
    handler(d);
    sandbox::net_record c = d;
    c.event = sandbox::net_event::closed;
    c.bytes_up = 517;
    c.bytes_down = 4096;
    c.reason = "eof";
    handler(c);
    BOOST_TEST_REQUIRE(mine.size() == 2u); // the caller's own handler still gets them
    BOOST_TEST(mine[1].bytes_down == 4096u);
    std::vector<sandbox::audit_record> net;
    for (const auto& rec : sink->records)
        if (rec.net)
            net.push_back(rec);
    BOOST_TEST_REQUIRE(net.size() == 2u);
    BOOST_TEST(net[0].event == sandbox::audit_event::connection);
    BOOST_TEST(net[1].event == sandbox::audit_event::connection_closed);
    BOOST_TEST(net[0].call == 1u); // the call that made the connection, not the latest
    BOOST_TEST(net[0].command == "curl");
    BOOST_TEST(net[0].layer == "network");
    auto j = sandbox::to_json(net[1]);
    BOOST_TEST(j.at("event").as_string() == "connection_closed");
    const auto& n = j.at("net").as_object();
    BOOST_TEST(n.at("host").as_string() == "github.com");
    BOOST_TEST(n.at("requested_host").as_string() == "GitHub.com");
    BOOST_TEST(n.at("verdict").as_string() == "allowed");
    BOOST_TEST(n.at("bytes_up").as_uint64() == 517u);
    BOOST_TEST(n.at("dialed").as_string() == "140.82.112.3:443");
}

BOOST_FIXTURE_TEST_CASE(a_zero_policy_lets_everything_through_unchanged, chain_fixture)
{
    auto r = sandbox::compose_local(std::move(owned), {});
    auto req = request("anything");
    req.options.env.allow = std::vector<std::string>{}; // the empty allow-list stays empty
    req.options.limits.memory_bytes = 4096;
    BOOST_TEST(!run(*r, req).ec);
    BOOST_TEST_REQUIRE(inner->calls->size() == 1u);
    BOOST_TEST(inner->calls->at(0).options.env.allow.has_value());
    BOOST_TEST(inner->calls->at(0).options.env.allow->empty());
    BOOST_TEST(inner->calls->at(0).options.limits.memory_bytes == 4096);
}

BOOST_AUTO_TEST_CASE(default_local_policy_asks_about_the_three_boundaries)
{
    sbx_test::temp_dir root, elsewhere;
    auto p = sandbox::default_local_policy(root.path(), {}, {"rm"});
    BOOST_TEST_REQUIRE(p.approval.predicates.size() == 3u);
    BOOST_TEST(!p.allowed_commands.has_value());
    BOOST_TEST(sandbox::default_local_policy(root.path(), {}).approval.predicates.size() == 2u);
    auto matched = [&](const sandbox::call_snapshot& c) {
        for (const auto& pr : p.approval.predicates)
            if (pr(c))
                return true;
        return false;
    };
    sandbox::call_snapshot c;
    c.command = "ls";
    BOOST_TEST(!matched(c));
    c.options.work_dir = elsewhere.str();
    BOOST_TEST(matched(c));
    c.options.work_dir.clear();
    c.options.net.mode = sandbox::net_mode::deny_all;
    BOOST_TEST(matched(c));
    c.options.net.mode = sandbox::net_mode::inherit;
    c.command = "/bin/rm";
    BOOST_TEST(matched(c));
}

BOOST_AUTO_TEST_CASE(work_dir_outside_root_on_real_directories)
{
    sbx_test::temp_dir root, other;
    std::filesystem::create_directories(root.path() / "sub" / "dir");
    std::filesystem::create_directory_symlink(other.path(), root.path() / "link");
    auto p = sandbox::work_dir_outside_root(root.path());
    auto outside = [&](std::string wd) {
        sandbox::call_snapshot c;
        c.command = "ls";
        c.options.work_dir = std::move(wd);
        return p(c).has_value();
    };
    BOOST_TEST(!outside(""));
    BOOST_TEST(!outside("sub/dir"));
    BOOST_TEST(!outside("sub/../sub"));
    BOOST_TEST(!outside("missing/child"));
    BOOST_TEST(!outside((root.path() / "sub").string()));
    BOOST_TEST(!outside(root.str()));
    BOOST_TEST(outside(other.str()));
    BOOST_TEST(outside("link"));                       // a link inside pointing out
    BOOST_TEST(outside((root.path() / "link" / "x").string()));
    BOOST_TEST(outside(".."));                         // relative, climbing out
    BOOST_TEST(outside("sub/../../x"));
    BOOST_TEST(outside("sub/dir/../../../" + root.path().filename().string() + "x"));
    BOOST_TEST(!outside("sub/dir/../../../" + root.path().filename().string()));
    BOOST_TEST(outside("/"));
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// The chain over a real local runner in a fresh root.
struct real_fixture
{
    asio::io_context ioc;
    sbx_test::temp_dir root;
    std::unique_ptr<sandbox::runner> backend()
    {
        sandbox::local_runner_options o;
        o.root = root.str();
        return std::make_unique<sandbox::local_runner>(ioc.get_executor(), o);
    }
    ~real_fixture()
    {
        auto left = sbx_test::helper_processes();
        BOOST_CHECK_MESSAGE(left.empty(), "helper processes survived the test");
        for (pid_t p : left)
            ::kill(p, SIGKILL);
    }
};

sandbox::exec_request sh(std::string script)
{
    sandbox::exec_request r;
    r.command = "/bin/sh";
    r.args = {"-c", std::move(script)};
    r.options.timeout = 20s;
    return r;
}

std::vector<std::string> events_of(const memory_sink& s, std::uint64_t call)
{
    std::vector<std::string> out;
    for (const auto& r : s.records)
        if (r.call == call)
            out.push_back(std::string(sandbox::to_string(r.event)) + "/" + r.layer);
    return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(policy_chain_real)

BOOST_FIXTURE_TEST_CASE(real_commands_run_or_are_refused_before_they_start, real_fixture)
{
    scripted_approver ap;
    ap.allow = false;
    sandbox::local_policy p;
    p.allowed_commands = std::vector<std::string>{"/bin/sh", "/bin/touch"};
    p.approval = {{sandbox::command_patterns({"touch"})}, ap.fn()};
    auto r = sandbox::compose_local(backend(), std::move(p));
    BOOST_TEST(r->enforcement().tree_kill);

    auto ok = sbx_test::run(ioc, *r, sh("echo hello; touch made"));
    BOOST_TEST(!ok.ec);
    BOOST_TEST(ok.result.out.data == "hello\n");
    BOOST_TEST(std::filesystem::exists(root.path() / "made"));

    sandbox::exec_request touch;
    touch.command = "/bin/touch";
    touch.args = {"denied-by-approval"};
    require_denied(sbx_test::run(ioc, *r, touch), "approval");
    sandbox::exec_request rm;
    rm.command = "/bin/rm";
    rm.args = {"made"};
    require_denied(sbx_test::run(ioc, *r, rm), "gate");
    BOOST_TEST(!std::filesystem::exists(root.path() / "denied-by-approval"));
    BOOST_TEST(std::filesystem::exists(root.path() / "made"));
}

BOOST_FIXTURE_TEST_CASE(a_work_dir_climbing_out_needs_approval, real_fixture)
{
    scripted_approver ap;
    ap.allow = false;
    std::filesystem::create_directory(root.path() / "sub");
    auto r = sandbox::compose_local(backend(), sandbox::default_local_policy(root.path(), ap.fn()));
    auto inside = sh("pwd");
    inside.options.work_dir = "sub";
    BOOST_TEST(!sbx_test::run(ioc, *r, inside).ec);
    auto out = sh("touch escaped");
    out.options.work_dir = "sub/../..";
    require_denied(sbx_test::run(ioc, *r, out), "approval", "outside the root");
    BOOST_TEST_REQUIRE(ap.asked->size() == 1u);
    BOOST_TEST(ap.asked->at(0).call.options.work_dir == "sub/../..");
    BOOST_TEST(!std::filesystem::exists(root.path().parent_path() / "escaped"));
}

BOOST_FIXTURE_TEST_CASE(session_starts_go_through_the_same_checks, real_fixture)
{
    scripted_approver ap;
    ap.allow = false;
    sandbox::local_policy p;
    p.allowed_commands = std::vector<std::string>{"/bin/sh"};
    p.approval = {{sandbox::interactive()}, ap.fn()};
    p.defaults.timeout = 300ms;
    auto r = sandbox::compose_local(backend(), std::move(p));
    sandbox::process_manager* pm = r->sessions();
    BOOST_TEST_REQUIRE(pm != nullptr);
    sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {
        // Not on the list: refused, nothing started.
        sandbox::session_spec bash;
        bash.command = "/bin/bash";
        try
        {
            co_await pm->start(bash);
            BOOST_FAIL("bash was started");
        }
        catch (const sandbox::error& e)
        {
            BOOST_TEST(e.code() == errc::policy_denied);
            BOOST_TEST(e.diag().rule == "gate");
        }
        // A terminal session: the approver is asked (it sees the terminal) and says no.
        auto tty = sbx_test::shell("echo hi");
        tty.tty = sandbox::terminal_size{};
        try
        {
            co_await pm->start(tty);
            BOOST_FAIL("the terminal session was started");
        }
        catch (const sandbox::error& e)
        {
            BOOST_TEST(e.code() == errc::policy_denied);
            BOOST_TEST(e.diag().rule == "approval");
        }
        BOOST_TEST_REQUIRE(ap.asked->size() == 1u);
        BOOST_TEST(ap.asked->at(0).call.kind == sandbox::call_kind::session);
        BOOST_TEST(ap.asked->at(0).call.interactive());
        BOOST_TEST(ap.asked->at(0).call.options.timeout == 300ms);
        BOOST_TEST(pm->list().empty());
        // A pipe session passes, under the default timeout.
        auto s = co_await pm->start(sbx_test::shell("echo started; sleep 30"));
        BOOST_TEST(pm->list().size() == 1u);
        BOOST_TEST(pm->find(s->id()) == s);
        auto res = co_await s->wait();
        BOOST_TEST(res.status == exec_status::timed_out);
        co_await s->close();
    });
}

// A start cancelled while its approver is asked ends with operation_aborted, as a value
// through the chain and as the front end's code; nothing starts and the trail says so.
BOOST_FIXTURE_TEST_CASE(a_session_start_cancelled_during_approval_starts_nothing, real_fixture)
{
    auto sink = std::make_shared<memory_sink>();
    auto asked = std::make_shared<bool>(false);
    sandbox::approver silent =
        [asked](sandbox::approval_request) -> asio::awaitable<sandbox::approval_decision> {
        *asked = true;
        asio::steady_timer t(co_await asio::this_coro::executor, 1h);
        boost::system::error_code ec;
        co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        co_return sandbox::approval_decision::allowed();
    };
    sandbox::local_policy p;
    p.approval = {{always()}, silent, 1h};
    p.audit = sink;
    auto r = sandbox::compose_local(backend(), std::move(p));
    asio::cancellation_signal sig;
    std::optional<boost::system::error_code> got;
    std::shared_ptr<sandbox::session> s;
    sandbox::async_start(
        *r->sessions(), sbx_test::shell("touch started; sleep 30"),
        asio::bind_cancellation_slot(sig.slot(), [&](boost::system::error_code ec, auto started) {
            got = ec;
            s = std::move(started);
        }));
    while (!*asked)
        ioc.run_one();
    sig.emit(asio::cancellation_type::terminal);
    ioc.run_for(5s);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == asio::error::operation_aborted);
    BOOST_TEST(!s);
    BOOST_TEST(r->sessions()->list().empty());
    BOOST_TEST(!std::filesystem::exists(root.path() / "started"));
    BOOST_TEST_REQUIRE(!sink->records.empty());
    BOOST_TEST(sink->records.back().event == sandbox::audit_event::denied);
    BOOST_TEST(sink->records.back().error == "aborted");
}

BOOST_FIXTURE_TEST_CASE(the_audit_trail_records_every_decision, real_fixture)
{
    auto sink = std::make_shared<memory_sink>();
    scripted_approver ap;
    sandbox::local_policy p;
    p.allowed_commands = std::vector<std::string>{"/bin/sh", "/no/such/cmd"};
    p.approval = {{sandbox::command_patterns({"sh"})}, ap.fn()};
    p.audit = sink;
    p.defaults.work_dir = "sub";
    std::filesystem::create_directory(root.path() / "sub");
    auto r = sandbox::compose_local(backend(), std::move(p));

    auto ran = sh("exit 3");
    ran.options.env.inject = {{"TOKEN", "s3cr3t"}};
    auto out = sbx_test::run(ioc, *r, ran); // call 1: approved, allowed, finished
    BOOST_TEST(out.result.exit_code == 3);
    sandbox::exec_request missing;
    missing.command = "/no/such/cmd";
    BOOST_TEST(sbx_test::run(ioc, *r, missing).ec == errc::not_found); // call 2: refused
    sandbox::exec_request cat;
    cat.command = "cat";
    BOOST_TEST(sbx_test::run(ioc, *r, cat).ec == errc::policy_denied); // call 3: gate
    auto late = sh("sleep 5");
    late.options.timeout = 100ms;
    BOOST_TEST(sbx_test::run(ioc, *r, late).ec == errc::timeout); // call 4: finished, timeout
    sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {   // call 5: a session
        auto s = co_await r->sessions()->start(sbx_test::shell("exit 4"));
        co_await s->wait();
        co_await s->close();
    });
    sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {   // call 6: a session timing out
        auto spec = sbx_test::shell("sleep 30");
        spec.options.timeout = 100ms;
        auto s = co_await r->sessions()->start(spec);
        co_await s->wait();
        co_await s->close();
    });
    ioc.restart();
    ioc.poll(); // the sessions' end records

    using v = std::vector<std::string>;
    BOOST_TEST((events_of(*sink, 1) == v{"approved/approval", "allowed/chain", "finished/backend"}));
    BOOST_TEST((events_of(*sink, 2) == v{"allowed/chain", "refused/backend"}));
    BOOST_TEST((events_of(*sink, 3) == v{"denied/gate"}));
    BOOST_TEST((events_of(*sink, 4) == v{"approved/approval", "allowed/chain", "finished/backend"}));
    BOOST_TEST((events_of(*sink, 5) ==
                v{"approved/approval", "allowed/chain", "started/backend", "finished/backend"}));
    BOOST_TEST((events_of(*sink, 6) ==
                v{"approved/approval", "allowed/chain", "started/backend", "finished/backend"}));
    for (const auto& rec : sink->records)
    {
        BOOST_TEST(rec.work_dir == "sub"); // the effective work dir, from the defaults
        if (rec.call == 6 && rec.event == sandbox::audit_event::finished)
        {
            BOOST_TEST(rec.error == "timeout");
            BOOST_TEST((rec.status == exec_status::timed_out));
        }
        const auto line = boost::json::serialize(sandbox::to_json(rec));
        BOOST_TEST(line.find("s3cr3t") == std::string::npos, "a secret reached the trail");
        if (rec.call == 1 && rec.event == sandbox::audit_event::finished)
        {
            BOOST_TEST(rec.exit_code == 3);
            BOOST_TEST((rec.status == exec_status::exited));
            BOOST_TEST(rec.wall_time > 0ns);
            BOOST_TEST(rec.peak_memory_bytes > 0u);
        }
        if (rec.call == 1 && rec.event == sandbox::audit_event::approved)
            BOOST_TEST(rec.reason.find("sensitive pattern \"sh\"") != std::string::npos);
        if (rec.call == 2 && rec.event == sandbox::audit_event::refused)
            BOOST_TEST(rec.error == "not_found");
        if (rec.call == 3)
            BOOST_TEST(rec.error == "policy_denied");
        if (rec.call == 4 && rec.event == sandbox::audit_event::finished)
        {
            BOOST_TEST(rec.error == "timeout");
            BOOST_TEST((rec.status == exec_status::timed_out));
        }
        if (rec.call == 5 && rec.event == sandbox::audit_event::finished)
        {
            BOOST_TEST(rec.exit_code == 4);
            BOOST_TEST(rec.kind == sandbox::call_kind::session);
            BOOST_TEST(!rec.session_id.empty());
        }
    }
}

BOOST_FIXTURE_TEST_CASE(an_audit_trail_that_cannot_record_stops_the_call, real_fixture)
{
    // /dev/full takes no byte: the `allowed` record, written before the run, fails, so the
    // call fails (internal, with the reason) and the command never runs, for an exec and a
    // session start alike. Before, the sink swallowed the failure and the command ran.
    auto full = std::make_shared<sandbox::audit_file>("/dev/full");
    auto r = sandbox::with_audit(backend(), full);
    auto out = sbx_test::run(ioc, *r, sh("touch made"));
    BOOST_TEST(out.ec == errc::internal);
    BOOST_TEST(out.result.status == exec_status::not_started);
    BOOST_TEST(out.result.diag.message.find("the audit trail cannot record the call") !=
                   std::string::npos,
               out.result.diag.message);
    BOOST_TEST(out.result.diag.message.find("No space left on device") != std::string::npos,
               out.result.diag.message);
    BOOST_TEST(full->failures() >= 1u);
    boost::system::error_code start_ec;
    sbx_test::run_coro(ioc, [&]() -> asio::awaitable<void> {
        try
        {
            auto s = co_await r->sessions()->start(sbx_test::shell("touch made-by-session"));
            co_await s->wait();
        }
        catch (const sandbox::error& e)
        {
            start_ec = e.code();
        }
    });
    BOOST_TEST(start_ec == errc::internal);
    BOOST_TEST(!std::filesystem::exists(root.path() / "made"));
    BOOST_TEST(!std::filesystem::exists(root.path() / "made-by-session"));

    // An `approved` record is written before the run too.
    auto sink = std::make_shared<failing_sink>(sandbox::audit_event::approved);
    scripted_approver ap;
    sandbox::local_policy p;
    p.approval = {{sandbox::command_patterns({"sh"})}, ap.fn()};
    p.audit = sink;
    auto approved = sandbox::compose_local(backend(), std::move(p));
    BOOST_TEST(sbx_test::run(ioc, *approved, sh("touch made")).ec == errc::internal);
    BOOST_TEST(ap.asked->size() == 1u);
    BOOST_TEST(!std::filesystem::exists(root.path() / "made"));
    for (const auto& rec : sink->records)
        BOOST_TEST(rec.event != sandbox::audit_event::allowed);
}

BOOST_AUTO_TEST_CASE(the_audit_file_never_blocks_and_refuses_fifos)
{
    // A FIFO nobody reads: open(2) used to wait for a reader forever. Now refused at once.
    // (Opened on a thread: should it block again, a reader set up after 2 s releases it.)
    sbx_test::temp_dir dir;
    const auto fifo = dir.path() / "fifo";
    BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto start = std::chrono::steady_clock::now();
    auto opened = std::async(std::launch::async, [&fifo]() -> boost::system::error_code {
        try
        {
            sandbox::audit_file f(fifo);
            return {};
        }
        catch (const sandbox::error& e)
        {
            BOOST_TEST(e.diag().message.find("FIFO") != std::string::npos, e.diag().message);
            return e.code();
        }
    });
    if (opened.wait_for(2s) != std::future_status::ready)
    {
        BOOST_ERROR("opening the audit FIFO blocked");
        ::close(::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    }
    BOOST_TEST(opened.get() == errc::validation);
    // With a reader it opens, and is refused all the same (the reader could stall us).
    const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    BOOST_TEST_REQUIRE(reader >= 0);
    BOOST_CHECK_EXCEPTION(sandbox::audit_file{fifo}, sandbox::error,
                          [](const sandbox::error& e) { return e.code() == errc::validation; });
    ::close(reader);
    BOOST_TEST((std::chrono::steady_clock::now() - start < 2s));
    // Character devices are accepted; a write that fails is reported and counted.
    sandbox::audit_file full("/dev/full");
    BOOST_TEST(full.write(sandbox::audit_record{}) == boost::system::errc::no_space_on_device);
    BOOST_TEST(full.failures() == 1u);
    sandbox::audit_file null("/dev/null");
    BOOST_TEST(!null.write(sandbox::audit_record{}));
}

// A call asked on someone's behalf names them in every record, and in the JSON line.
BOOST_FIXTURE_TEST_CASE(every_record_names_the_requester, chain_fixture)
{
    auto sink = std::make_shared<memory_sink>();
    auto r = sandbox::with_audit(std::move(owned), sink);
    auto req = request("ls");
    req.requested_by = sandbox::requester{65534, 65533, 77};
    BOOST_TEST(!run(*r, req).ec);
    BOOST_TEST_REQUIRE(sink->records.size() >= 2u);
    for (const auto& rec : sink->records)
    {
        BOOST_TEST_REQUIRE(rec.requested_by.has_value());
        BOOST_TEST(rec.requested_by->uid == 65534u);
        BOOST_TEST(rec.requested_by->pid == 77);
    }
    const auto o = sandbox::to_json(sink->records.front());
    BOOST_TEST(o.at("requested_by").as_object().at("gid").to_number<std::int64_t>() == 65533);
    // The caller's own call names nobody.
    sink->records.clear();
    BOOST_TEST(!run(*r, request("ls")).ec);
    BOOST_TEST_REQUIRE(!sink->records.empty());
    BOOST_TEST(!sink->records.front().requested_by.has_value());
    BOOST_TEST(!sandbox::to_json(sink->records.front()).contains("requested_by"));
}

BOOST_AUTO_TEST_CASE(the_audit_file_appends_and_classifies_open_failures)
{
    sbx_test::temp_dir dir;
    const auto path = dir.path() / "audit.jsonl";
    std::ofstream(path) << "earlier line\n";
    {
        sandbox::audit_file f(path);
        sandbox::audit_record r;
        r.command = "x";
        BOOST_TEST(!f.write(r));
        BOOST_TEST(!f.write(r));
        BOOST_TEST(f.failures() == 0u);
    }
    std::ifstream in(path);
    std::string first, line;
    std::getline(in, first);
    BOOST_TEST(first == "earlier line"); // never truncated
    int n = 0;
    while (std::getline(in, line))
    {
        BOOST_TEST(boost::json::parse(line).as_object().at("command").as_string() == "x");
        ++n;
    }
    BOOST_TEST(n == 2);
    BOOST_CHECK_EXCEPTION(sandbox::audit_file(dir.path() / "missing" / "a"), sandbox::error,
                          [](const sandbox::error& e) {
                              return e.code() == errc::not_found && !e.diag().path.empty();
                          });
    BOOST_CHECK_EXCEPTION(sandbox::audit_file(dir.path()), sandbox::error,
                          [](const sandbox::error& e) { return e.code() == errc::validation; });
}

BOOST_AUTO_TEST_SUITE_END()
