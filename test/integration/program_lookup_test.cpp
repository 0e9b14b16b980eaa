// Where programs find the helper (lib/supervisor/program_lookup.cpp), with real files: an
// installed layout copied anywhere works by itself, and a helper another user could have
// planted on the way is refused, never run.
#include "support.hpp"

#include "supervisor/program_lookup.hpp"

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using sandbox::detail::untrusted_reason;

namespace {

// A prefix in a fresh temp dir: bin/sandbox-run and libexec/sandbox/sandbox-supervisor,
// copies of the build's, as `cmake --install --prefix` lays them out.
struct prefix_fixture : sbx_test::local_fixture
{
    fs::path bin = root.path() / "bin";
    fs::path libexec = root.path() / "libexec";
    fs::path helper = libexec / "sandbox" / "sandbox-supervisor";

    prefix_fixture()
    {
        fs::create_directories(bin);
        fs::create_directories(helper.parent_path());
        fs::copy_file(SBX_SANDBOX_RUN, bin / "sandbox-run");
        fs::copy_file(SBX_SUPERVISOR, helper);
        sbx_test::count_as_helper(helper.string());
    }

    // The copied sandbox-run, without $SANDBOX_SUPERVISOR: it must find its helper itself.
    sandbox::exec_result run_copy()
    {
        sandbox::exec_request req;
        req.command = (bin / "sandbox-run").string();
        req.args = {"--backend", "local", "--cgroup", sbx_test::cgroup_setting(), "--",
                    "/bin/echo", "found"};
        req.options.timeout = 25s;
        req.options.env.allow = std::vector<std::string>{"PATH"}; // no $SANDBOX_SUPERVISOR
        auto out = run(std::move(req), 30s);
        BOOST_REQUIRE_MESSAGE(!out.ec, out.result.diag);
        return std::move(out.result);
    }
};

bool refused_for(const std::string& reason, const std::string& err)
{
    return err.find("supervisor helper sandbox-supervisor was not found") != std::string::npos &&
           err.find(reason) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(program_lookup)

BOOST_AUTO_TEST_CASE(an_installed_layout_finds_its_helper_wherever_it_is_copied)
{
    prefix_fixture f;
    const auto r = f.run_copy();
    BOOST_TEST(r.exit_code == 0, r.err.data);
    BOOST_TEST(r.out.data == "found\n");
}

BOOST_AUTO_TEST_CASE(a_helper_in_a_directory_another_user_owns_is_not_run)
{
    // As if another user had made libexec/ beside a program in a shared directory: the
    // program must not run what they put there.
    prefix_fixture f;
    BOOST_TEST_REQUIRE(::chown(f.libexec.c_str(), 65534, 65534) == 0);
    const auto r = f.run_copy();
    BOOST_TEST(r.exit_code == 125);
    BOOST_TEST(r.out.data.empty());
    BOOST_TEST(refused_for(f.libexec.string() + " is owned by uid 65534", r.err.data), r.err.data);
}

BOOST_AUTO_TEST_CASE(a_helper_others_may_replace_is_not_run)
{
    prefix_fixture f;
    fs::permissions(f.helper.parent_path(), fs::perms::others_write, fs::perm_options::add);
    const auto r = f.run_copy();
    BOOST_TEST(r.exit_code == 125);
    BOOST_TEST(refused_for(f.helper.parent_path().string() + " is writable by others",
                           r.err.data),
               r.err.data);
}

BOOST_AUTO_TEST_CASE(trust_follows_owner_mode_and_sticky_bit)
{
    sbx_test::temp_dir d;
    const fs::path dir = d.path() / "shared";
    fs::create_directories(dir);
    const fs::path prog = dir / "prog";
    fs::copy_file("/bin/true", prog);
    BOOST_TEST(untrusted_reason(prog.string()).empty(), untrusted_reason(prog.string()));

    fs::permissions(prog, fs::perms::group_write, fs::perm_options::add);
    BOOST_TEST(untrusted_reason(prog.string()) == prog.string() + " is writable by others");
    fs::permissions(prog, fs::perms::group_write, fs::perm_options::remove);

    // A directory all may write is fine only when sticky (as /tmp): then nobody else may
    // rename or remove what we put in it.
    fs::permissions(dir, fs::perms::others_all, fs::perm_options::add);
    BOOST_TEST(untrusted_reason(prog.string()) == dir.string() + " is writable by others");
    fs::permissions(dir, fs::perms::sticky_bit, fs::perm_options::add);
    BOOST_TEST(untrusted_reason(prog.string()).empty(), untrusted_reason(prog.string()));

    BOOST_TEST_REQUIRE(::chown(prog.c_str(), 65534, 65534) == 0);
    BOOST_TEST(untrusted_reason(prog.string()) == prog.string() + " is owned by uid 65534");

    fs::permissions(prog, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::remove);
    BOOST_TEST(untrusted_reason(prog.string()) == prog.string() + " is not an executable file");
    BOOST_TEST(untrusted_reason((dir / "none").string()) ==
               (dir / "none").string() + ": No such file or directory");
}

BOOST_AUTO_TEST_SUITE_END()
