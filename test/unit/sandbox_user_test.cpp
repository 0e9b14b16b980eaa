// test/unit/sandbox_user_test.cpp: whom a bwrap sandbox runs as (backends/bwrap/sandbox_user),
// over a made-up user database.
#include "sandbox_user.hpp"

#include <boost/test/unit_test.hpp>

#include <sandbox/error.hpp>

#include <map>

namespace {

using sandbox::errc;
using sandbox::bwrap::choose_sandbox_user;

// users: nobody 65534/65534, builder 1500/1600, root 0/0; groups: nogroup 65534, staff 50.
const sandbox::bwrap::user_db& fake_db(bool with_nobody = true)
{
    static auto make = [](bool nobody) {
        std::map<std::string, std::pair<std::uint32_t, std::uint32_t>> users{
            {"builder", {1500, 1600}}, {"root", {0, 0}}};
        std::map<std::string, std::uint32_t> groups{{"staff", 50}};
        if (nobody)
        {
            users["nobody"] = {65534, 65534};
            groups["nogroup"] = 65534;
        }
        return sandbox::bwrap::user_db{
            [users](const std::string& n) {
                auto it = users.find(n);
                return it == users.end() ? std::nullopt : std::optional(it->second);
            },
            [users](std::uint32_t uid) -> std::optional<std::uint32_t> {
                for (const auto& [name, ids] : users)
                    if (ids.first == uid)
                        return ids.second;
                return std::nullopt;
            },
            [groups](const std::string& n) -> std::optional<std::uint32_t> {
                auto it = groups.find(n);
                return it == groups.end() ? std::nullopt : std::optional(it->second);
            }};
    };
    static const auto full = make(true), bare = make(false);
    return with_nobody ? full : bare;
}

// The chosen uid:gid for a root caller, or the refusal's code.
std::string as_root(const std::string& spec, bool with_nobody = true)
{
    auto u = choose_sandbox_user(spec, 0, 0, fake_db(with_nobody));
    if (!u)
        return "error " + std::string(to_string(static_cast<errc>(u.error().code.value())));
    if (!*u)
        return "caller";
    return std::to_string((*u)->uid) + ":" + std::to_string((*u)->gid) + " " + (*u)->name;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sandbox_user)

BOOST_AUTO_TEST_CASE(a_root_caller_never_runs_commands_as_root)
{
    BOOST_TEST(as_root("") == "65534:65534 nobody (uid 65534, gid 65534)");
    BOOST_TEST(as_root("", false) == "65534:65534 nobody (uid 65534, gid 65534)"); // fallback
    BOOST_TEST(as_root("builder") == "1500:1600 builder (uid 1500, gid 1600)");
    BOOST_TEST(as_root("builder:staff") == "1500:50 builder (uid 1500, gid 50)");
    BOOST_TEST(as_root("1500") == "1500:1600 uid 1500, gid 1600");
    BOOST_TEST(as_root("4000:4001") == "4000:4001 uid 4000, gid 4001");
    BOOST_TEST(as_root("builder:77") == "1500:77 builder (uid 1500, gid 77)");
    for (const char* bad : {"root", "0", "0:50", "builder:0", "builder:root"})
        BOOST_TEST(as_root(bad) == "error validation", bad);
}

BOOST_AUTO_TEST_CASE(bad_specs_are_validation_errors)
{
    for (const char* bad : {"no-such-user", "4000", "builder:", ":50", "builder:no-such-group",
                            "4294967295:1", "1:4294967295", "99999999999", "a:b:c", "-1"})
        BOOST_TEST(as_root(bad) == "error validation", bad);
    auto r = choose_sandbox_user("4000", 0, 0, fake_db());
    BOOST_TEST_REQUIRE(!r);
    BOOST_TEST(r.error().diag.limit == "sandbox_user");
    BOOST_TEST(r.error().diag.message.find("4000:GID") != std::string::npos,
               r.error().diag.message);
}

BOOST_AUTO_TEST_CASE(other_callers_run_commands_as_themselves)
{
    auto own = choose_sandbox_user("", 1500, 1600, fake_db());
    BOOST_TEST_REQUIRE(own.has_value());
    BOOST_TEST(!own->has_value());
    auto named = choose_sandbox_user("builder", 1500, 1600, fake_db());
    BOOST_TEST_REQUIRE(named.has_value());
    BOOST_TEST(!named->has_value()); // itself, by name: no switch
    for (const char* other : {"nobody", "builder:staff", "1501:1600", "root"})
    {
        auto r = choose_sandbox_user(other, 1500, 1600, fake_db());
        BOOST_TEST_REQUIRE(!r, other);
        BOOST_TEST((r.error().code == errc::not_available), other);
        BOOST_TEST(r.error().diag.message.find("only a root caller") != std::string::npos);
    }
}

BOOST_AUTO_TEST_SUITE_END()
