// test/unit/policy_test.cpp: exec policy checks, cpu budget, environment construction.
#include <sandbox/backend/environment.hpp>
#include <sandbox/exec_options.hpp>

#include <boost/test/unit_test.hpp>

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
