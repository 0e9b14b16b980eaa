// The order in which the helper program is looked for (supervisor/program_lookup.hpp).
#include "supervisor/program_lookup.hpp"

#include <boost/test/unit_test.hpp>

using namespace sandbox::detail;

namespace {

const install_layout debian{"../../libexec/sandbox/sandbox-supervisor",
                            "../libexec/sandbox/sandbox-supervisor",
                            "/usr/libexec/sandbox/sandbox-supervisor"};

std::vector<std::string> paths(const std::vector<program_candidate>& cs)
{
    std::vector<std::string> out;
    for (const auto& c : cs)
        out.push_back(std::string(c.source) + "=" + c.path);
    return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(program_lookup)

BOOST_AUTO_TEST_CASE(an_explicit_choice_is_the_only_candidate)
{
    program_facts f;
    f.env = "/opt/x/sandbox-supervisor";
    f.package = "/p/libexec/sandbox/sandbox-supervisor";
    f.executable = "/usr/bin/sandbox-run";
    const auto got = paths(program_candidates(f, debian));
    const std::vector<std::string> want{"SANDBOX_SUPERVISOR=/opt/x/sandbox-supervisor"};
    BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_package_then_the_library_then_the_program_then_the_configured_path)
{
    program_facts f;
    f.package = "/moved/libexec/sandbox/sandbox-supervisor";
    f.library_file = "/moved/lib/x86_64-linux-gnu/libsandbox.so.0.1";
    f.executable = "/srv/app/bin/server";
    const auto got = paths(program_candidates(f, debian));
    const std::vector<std::string> want{
        "package=/moved/libexec/sandbox/sandbox-supervisor",
        "library=/moved/libexec/sandbox/sandbox-supervisor",
        "executable=/srv/app/libexec/sandbox/sandbox-supervisor",
        "configured=/usr/libexec/sandbox/sandbox-supervisor"};
    BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(unknown_facts_are_skipped)
{
    // A static library linked without the package config (pkg-config, a plain g++ line) and
    // no readable /proc/self/exe: only the configured path is left.
    const auto got = paths(program_candidates({}, debian));
    const std::vector<std::string> want{"configured=/usr/libexec/sandbox/sandbox-supervisor"};
    BOOST_TEST(got == want, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_build_tree_program_finds_the_helper_the_installed_way)
{
    program_facts f;
    f.executable = "/src/build/test/sandbox_integration_tests";
    const auto got = program_candidates(f, debian);
    BOOST_TEST_REQUIRE(got.size() == 2u);
    BOOST_TEST(got[0].path == "/src/build/libexec/sandbox/sandbox-supervisor");
}

BOOST_AUTO_TEST_SUITE_END()
