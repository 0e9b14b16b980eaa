// test/unit/policy_test.cpp: exec policy checks, cpu budget, environment construction.
#include <sandbox/backend/environment.hpp>
#include <sandbox/backend/request.hpp>
#include <sandbox/exec_options.hpp>

#include <boost/test/unit_test.hpp>

#include <limits>
#include <memory>

#include <unistd.h>

using namespace std::chrono_literals;
using sandbox::errc;

BOOST_AUTO_TEST_SUITE(exec_policy)

BOOST_AUTO_TEST_CASE(defaults_pass)
{
    BOOST_TEST(!sandbox::validate_exec_policy({}, false).has_error());
}

BOOST_AUTO_TEST_CASE(negative_values_are_validation_errors)
{
    auto check = [](auto mutate, const char* limit) {
        sandbox::exec_options o;
        mutate(o);
        auto r = sandbox::validate_exec_policy(o, true);
        BOOST_TEST_REQUIRE(r.has_error());
        BOOST_TEST(r.error().code == errc::validation);
        BOOST_TEST(r.error().diag.limit == limit);
    };
    check([](auto& o) { o.limits.memory_bytes = -1; }, "memory");
    check([](auto& o) { o.limits.cpu_millicores = -5; }, "cpu");
    check([](auto& o) { o.limits.disk_bytes = -1; }, "disk");
    check([](auto& o) { o.limits.max_output_bytes = -1; }, "output");
    check([](auto& o) { o.limits.max_processes = -1; }, "processes");
    check([](auto& o) { o.timeout = -1ms; }, "timeout");
    check([](auto& o) { o.kill_grace = -1ms; }, "kill_grace");
}

BOOST_AUTO_TEST_CASE(refusals_are_not_available)
{
    sandbox::exec_options o;
    o.limits.disk_bytes = 1 << 20;
    auto r = sandbox::validate_exec_policy(o, true);
    BOOST_TEST_REQUIRE(r.has_error());
    BOOST_TEST(r.error().code == errc::not_available);
    BOOST_TEST(r.error().diag.limit == "disk");

    o = {};
    o.limits.cpu_millicores = 100;
    r = sandbox::validate_exec_policy(o, true);
    BOOST_TEST_REQUIRE(r.has_error());
    BOOST_TEST(r.error().code == errc::not_available);
    o.timeout = 1s;
    BOOST_TEST(!sandbox::validate_exec_policy(o, true).has_error());

    for (int which = 0; which < 3; ++which)
    {
        o = {};
        o.timeout = 1s;
        (which == 0 ? o.limits.memory_bytes : which == 1 ? o.limits.cpu_millicores
                                                         : o.limits.max_processes) = 10;
        r = sandbox::validate_exec_policy(o, false);
        BOOST_TEST_REQUIRE(r.has_error());
        BOOST_TEST(r.error().code == errc::not_available);
        BOOST_TEST(!sandbox::validate_exec_policy(o, true).has_error());
    }
    // Output caps do not need the sampler.
    o = {};
    o.limits.max_output_bytes = 10;
    BOOST_TEST(!sandbox::validate_exec_policy(o, false).has_error());
}

BOOST_AUTO_TEST_CASE(cpu_budget_is_timeout_share)
{
    sandbox::exec_options o;
    o.timeout = 4s;
    o.limits.cpu_millicores = 250;
    BOOST_TEST(sandbox::cpu_budget(o).count() == std::chrono::nanoseconds(1s).count());
    o.limits.cpu_millicores = 0;
    BOOST_TEST(sandbox::cpu_budget(o).count() == 0);
    o.limits.cpu_millicores = 2000;
    o.timeout = std::chrono::nanoseconds::max();
    BOOST_TEST(sandbox::cpu_budget(o).count() == std::chrono::nanoseconds::max().count());
    o.timeout = 0s;
    BOOST_TEST(sandbox::cpu_budget(o).count() == 0);
}

BOOST_AUTO_TEST_CASE(cpu_budget_never_rounds_a_positive_share_to_none)
{
    sandbox::exec_options o;
    o.timeout = 1ns;
    o.limits.cpu_millicores = 1; // 0.001 ns
    BOOST_TEST(sandbox::cpu_budget(o).count() == 1);
    o.timeout = 1001ns; // 1.001 ns
    BOOST_TEST(sandbox::cpu_budget(o).count() == 2);
    o.timeout = 3ns;
    o.limits.cpu_millicores = 333; // 0.999 ns
    BOOST_TEST(sandbox::cpu_budget(o).count() == 1);
    o.timeout = 2s;
    o.limits.cpu_millicores = 1500; // exact: no rounding
    BOOST_TEST(sandbox::cpu_budget(o).count() == std::chrono::nanoseconds(3s).count());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(request_checks)

using sandbox::backend::check_request;

sandbox::exec_request valid_request()
{
    sandbox::exec_request r;
    r.command = "true";
    return r;
}

BOOST_AUTO_TEST_CASE(a_plain_request_passes)
{
    BOOST_TEST(!check_request(valid_request(), false).has_error());
}

BOOST_AUTO_TEST_CASE(each_bad_field_is_named)
{
    auto check = [](auto mutate, errc code, const char* field) {
        auto req = valid_request();
        mutate(req);
        auto r = check_request(req, true);
        BOOST_TEST_REQUIRE(r.has_error());
        BOOST_TEST(r.error().code == code);
        BOOST_TEST(r.error().diag.limit == field);
    };
    using req_t = sandbox::exec_request;
    check([](req_t& r) { r.command.clear(); }, errc::validation, "command");
    check([](req_t& r) { r.command = std::string("a\0b", 3); }, errc::validation, "command");
    check([](req_t& r) { r.args = {"ok", std::string("x\0", 2)}; }, errc::validation, "args");
    check([](req_t& r) { r.options.work_dir = std::string("d\0", 2); }, errc::validation,
          "work_dir");
    check(
        [](req_t& r) {
            r.options.input = "bytes";
            r.stdin_fd = std::make_shared<const sandbox::unique_fd>(::dup(0));
        },
        errc::validation, "input");
    check([](req_t& r) { r.stdin_fd = std::make_shared<const sandbox::unique_fd>(); },
          errc::validation, "input");
    check([](req_t& r) { r.options.env.inject["A=B"] = "x"; }, errc::validation, "env.inject");
    check([](req_t& r) { r.options.limits.memory_bytes = -1; }, errc::validation, "memory");
    check([](req_t& r) { r.options.limits.max_tasks = -1; }, errc::validation, "tasks");
    check([](req_t& r) { r.options.limits.disk_bytes = 1; }, errc::not_available, "disk");
}

BOOST_AUTO_TEST_CASE(sampled_caps_need_the_sampler)
{
    auto req = valid_request();
    req.options.limits.max_processes = 4;
    BOOST_TEST(check_request(req, false).error().code == errc::not_available);
    BOOST_TEST(!check_request(req, true).has_error());
    auto tasks = valid_request();
    tasks.options.limits.max_tasks = 4;
    BOOST_TEST(check_request(tasks, false).error().diag.limit == "tasks");
}

BOOST_AUTO_TEST_CASE(caps_and_output_cap_come_from_the_options)
{
    sandbox::exec_options o;
    o.timeout = 10s;
    o.limits.cpu_millicores = 500;
    o.limits.memory_bytes = 1 << 20;
    o.limits.max_processes = 7;
    auto c = sandbox::backend::caps_of(o);
    BOOST_TEST(c.memory_bytes == 1u << 20);
    BOOST_TEST(c.cpu.count() == std::chrono::nanoseconds(5s).count());
    BOOST_TEST(c.max_processes == 7u);
    BOOST_TEST(c.max_tasks == 0u);
    o.limits.max_tasks = 64;
    BOOST_TEST(sandbox::backend::caps_of(o).max_tasks == 64u);
    BOOST_TEST(c.any());
    BOOST_TEST(!sandbox::backend::caps_of({}).any());

    using sandbox::backend::output_cap;
    BOOST_TEST(output_cap(o, 100) == 100u); // the runner default when the request sets none
    o.limits.max_output_bytes = 5;
    BOOST_TEST(output_cap(o, 100) == 5u);
    o.limits.max_output_bytes = 0;
    BOOST_TEST(output_cap(o, 0) == std::numeric_limits<std::uint64_t>::max());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(environment)

using sandbox::backend::build_environment;
const std::vector<std::string> host{"PATH=/bin", "KEEP=yes", "DROP=no", "NOEQ", "=empty"};

BOOST_AUTO_TEST_CASE(unset_allow_inherits_everything_valid)
{
    auto env = build_environment({}, host);
    BOOST_TEST(env == (std::vector<std::string>{"PATH=/bin", "KEEP=yes", "DROP=no"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(empty_allow_inherits_nothing)
{
    BOOST_TEST(build_environment(sandbox::env_policy::empty(), host).empty());
    // Nothing allowed and nothing injected stays empty; it never falls back to inheriting.
    sandbox::env_policy p;
    p.allow = std::vector<std::string>{};
    BOOST_TEST(build_environment(p, host).empty());
}

BOOST_AUTO_TEST_CASE(allow_list_filters_case_sensitively)
{
    sandbox::env_policy p;
    p.allow = std::vector<std::string>{"PATH", "KEEP", "drop"};
    auto env = build_environment(p, host);
    BOOST_TEST(env == (std::vector<std::string>{"PATH=/bin", "KEEP=yes"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(inject_replaces_and_appends)
{
    sandbox::env_policy p;
    p.inject = {{"KEEP", "injected"}, {"NEW", "1"}};
    auto env = build_environment(p, host);
    BOOST_TEST(env == (std::vector<std::string>{"PATH=/bin", "DROP=no", "KEEP=injected", "NEW=1"}),
               boost::test_tools::per_element());
    p.allow = std::vector<std::string>{};
    env = build_environment(p, host);
    BOOST_TEST(env == (std::vector<std::string>{"KEEP=injected", "NEW=1"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(find_env_by_exact_name)
{
    auto env = build_environment({}, host);
    BOOST_REQUIRE(sandbox::backend::find_env(env, "KEEP"));
    BOOST_TEST(*sandbox::backend::find_env(env, "KEEP") == "KEEP=yes");
    BOOST_TEST(!sandbox::backend::find_env(env, "KEE"));
}

BOOST_AUTO_TEST_CASE(invalid_names_and_values)
{
    sandbox::env_policy p;
    p.allow = std::vector<std::string>{"A=B"};
    BOOST_TEST(sandbox::backend::validate_env_policy(p).error().code == errc::validation);
    p.allow = std::vector<std::string>{""};
    BOOST_TEST(sandbox::backend::validate_env_policy(p).has_error());
    p = {};
    p.inject = {{"X", std::string("a\0b", 3)}};
    BOOST_TEST(sandbox::backend::validate_env_policy(p).has_error());
    p.inject = {{"", "v"}};
    BOOST_TEST(sandbox::backend::validate_env_policy(p).has_error());
    p.inject = {{"OK", "v"}};
    BOOST_TEST(!sandbox::backend::validate_env_policy(p).has_error());
}

BOOST_AUTO_TEST_SUITE_END()
