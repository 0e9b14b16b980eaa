// test/unit/cgroup_site_test.cpp: the pure parsers of kernel/cgroup_site (control files,
// /proc/PID/cgroup, /proc/self/mountinfo, tree names).
#include "kernel/cgroup_site.hpp"

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace sd = sandbox::detail;

namespace {

// An optional as text, for comparing with readable failures.
template <class T> std::string show(const std::optional<T>& v)
{
    if (!v)
        return "(none)";
    if constexpr (std::is_same_v<T, std::string>)
        return '"' + *v + '"';
    else
        return std::to_string(*v);
}

} // namespace

BOOST_AUTO_TEST_SUITE(cgroup_site)

BOOST_AUTO_TEST_CASE(controllers_are_whole_words)
{
    struct row
    {
        const char* text;
        unsigned bits;
    };
    const row rows[] = {
        {"", 0},
        {"\n", 0},
        {"cpuset cpu io memory hugetlb pids rdma misc\n",
         sd::cgc_cpu | sd::cgc_memory | sd::cgc_pids},
        {"hugetlb\n", 0},
        {"cpuset\n", 0}, // not "cpu"
        {"cpuacct memoryx pid", 0},
        {"memory", sd::cgc_memory},
        {"  pids\tcpu  ", sd::cgc_cpu | sd::cgc_pids},
        {"+cpu", 0}, // a subtree_control write, not a listing
        {"memory memory", sd::cgc_memory},
    };
    for (const auto& r : rows)
        BOOST_TEST(sd::parse_controllers(r.text) == r.bits, "text \"" << r.text << '"');
}

BOOST_AUTO_TEST_CASE(controller_names_in_order)
{
    BOOST_TEST(sd::controller_names(0) == "");
    BOOST_TEST(sd::controller_names(sd::cgc_pids) == "pids");
    BOOST_TEST(sd::controller_names(sd::cgc_pids | sd::cgc_cpu) == "cpu pids");
    BOOST_TEST(sd::controller_names(sd::cgc_cpu | sd::cgc_memory | sd::cgc_pids) ==
               "cpu memory pids");
    BOOST_TEST(sd::controller_names(1u << 7) == ""); // an unknown bit
    for (unsigned bits = 0; bits < 8; ++bits)
        BOOST_TEST(sd::parse_controllers(sd::controller_names(bits)) == bits);
}

BOOST_AUTO_TEST_CASE(unified_path_is_the_zero_line)
{
    struct row
    {
        const char* text;
        std::optional<std::string> path;
    };
    const row rows[] = {
        {"0::/\n", "/"},
        {"0::/user.slice/user-1000.slice/session-2.scope\n",
         "/user.slice/user-1000.slice/session-2.scope"},
        // A hybrid host: v1 lines around the v2 one.
        {"9:name=systemd:/\n8:pids:/\n4:memory:/a/b\n1:cpu:/\n0::/svc.service\n", "/svc.service"},
        {"0::/a b\n", "/a b"}, // no trimming inside the path
        {"0::/last-line-without-newline", "/last-line-without-newline"},
        {"4:memory:/a\n1:cpu:/\n", std::nullopt}, // v1 only
        {"", std::nullopt},
        {"0::\n", std::nullopt}, // no path
        {"0::relative\n", std::nullopt},
        {"10::/not-zero\n", std::nullopt},
        {"0:cpu:/v1-line-with-hierarchy-zero\n", std::nullopt},
        {" 0::/leading-space\n", std::nullopt},
    };
    for (const auto& r : rows)
        BOOST_TEST(show(sd::unified_path_of(r.text)) == show(r.path), "text \"" << r.text << '"');
}

BOOST_AUTO_TEST_CASE(cgroup2_mount_from_mountinfo)
{
    const std::string hybrid =
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "30 22 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
        "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw\n"
        "41 30 0:38 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n";
    BOOST_TEST(show(sd::cgroup2_mount_of(hybrid)) ==
               show(std::optional<std::string>("/sys/fs/cgroup/unified")));

    const std::string v2 = "25 1 259:2 / / rw - ext4 /dev/nvme0n1p2 rw\n"
                           "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev shared:4 master:1 - "
                           "cgroup2 cgroup2 rw,nsdelegate\n";
    BOOST_TEST(show(sd::cgroup2_mount_of(v2)) ==
               show(std::optional<std::string>("/sys/fs/cgroup")));

    // No optional fields at all, and a mount point with escaped space, tab and backslash.
    BOOST_TEST(show(sd::cgroup2_mount_of(
                   "50 1 0:40 / /mnt/my\\040cg\\011x\\134y rw - cgroup2 none rw\n")) ==
               show(std::optional<std::string>("/mnt/my cg\tx\\y")));
    // A backslash that starts no escape stays.
    BOOST_TEST(show(sd::cgroup2_mount_of("50 1 0:40 / /mnt/a\\9 rw - cgroup2 none rw")) ==
               show(std::optional<std::string>("/mnt/a\\9")));

    const char* none[] = {
        "",
        "41 30 0:38 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n",
        // "cgroup2" as a source or an option is not the type.
        "41 30 0:38 / /x rw - tmpfs cgroup2 rw\n",
        "41 30 0:38 / /x rw shared:1 - cgroup2x none rw\n",
        // Truncated lines.
        "41 30 0:38 / /x rw shared:1\n",
        "41 30 0:38 / /x rw -\n",
        "41 30 0:38\n",
    };
    for (const char* text : none)
        BOOST_TEST(!sd::cgroup2_mount_of(text).has_value(), "text \"" << text << '"');
}

BOOST_AUTO_TEST_CASE(flat_keyed_values)
{
    const std::string cpu_stat = "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n"
                                 "nr_periods 0\ncore_sched.force_idle_usec 0\n";
    BOOST_TEST(show(sd::flat_keyed_value(cpu_stat, "usage_usec")) ==
               show(std::optional<std::uint64_t>(1234567)));
    BOOST_TEST(show(sd::flat_keyed_value(cpu_stat, "system_usec")) ==
               show(std::optional<std::uint64_t>(234567)));
    BOOST_TEST(show(sd::flat_keyed_value(cpu_stat, "nr_periods")) ==
               show(std::optional<std::uint64_t>(0)));
    BOOST_TEST(!sd::flat_keyed_value(cpu_stat, "usage").has_value()); // a prefix is not a key
    BOOST_TEST(!sd::flat_keyed_value(cpu_stat, "usec").has_value());
    BOOST_TEST(!sd::flat_keyed_value(cpu_stat, "").has_value());

    const std::string events = "populated 1\nfrozen 0";
    BOOST_TEST(show(sd::flat_keyed_value(events, "populated")) ==
               show(std::optional<std::uint64_t>(1)));
    BOOST_TEST(show(sd::flat_keyed_value(events, "frozen")) ==
               show(std::optional<std::uint64_t>(0)));

    const std::string mem = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 1\n";
    BOOST_TEST(show(sd::flat_keyed_value(mem, "oom")) == show(std::optional<std::uint64_t>(1)));
    BOOST_TEST(show(sd::flat_keyed_value(mem, "oom_kill")) ==
               show(std::optional<std::uint64_t>(2)));
    BOOST_TEST(show(sd::flat_keyed_value(mem, "max")) == show(std::optional<std::uint64_t>(3)));

    BOOST_TEST(show(sd::flat_keyed_value("max 18446744073709551615\n", "max")) ==
               show(std::optional<std::uint64_t>(UINT64_MAX)));
    const char* malformed[] = {
        "max\n",     // no value
        "max max\n", // a word
        "max -1\n",  // a sign
        "max +1\n",
        "max 12x\n",                  // trailing junk
        "max 1 2\n",                  // two values
        "max 18446744073709551616\n", // overflow
        "",
    };
    for (const char* text : malformed)
        BOOST_TEST(!sd::flat_keyed_value(text, "max").has_value(), "text \"" << text << '"');
}

BOOST_AUTO_TEST_CASE(tree_names_round_trip)
{
    BOOST_TEST(sd::tree_name(4242, 987654) == "sbx-4242-987654");
    BOOST_TEST(sd::tree_name(1, 0) == "sbx-1-0");
    auto o = sd::parse_tree_name(sd::tree_name(4242, 987654));
    BOOST_TEST_REQUIRE(o.has_value());
    BOOST_TEST(o->pid == 4242);
    BOOST_TEST(o->starttime == 987654u);
    auto big = sd::parse_tree_name(sd::tree_name(2147483647, UINT64_MAX));
    BOOST_TEST_REQUIRE(big.has_value());
    BOOST_TEST(big->pid == 2147483647);
    BOOST_TEST(big->starttime == UINT64_MAX);
    auto zero_start = sd::parse_tree_name("sbx-7-0");
    BOOST_TEST_REQUIRE(zero_start.has_value());
    BOOST_TEST(zero_start->starttime == 0u);
}

BOOST_AUTO_TEST_CASE(other_names_are_not_trees)
{
    const char* rejected[] = {
        "",
        "sbx-",
        "sbx--",
        "sbx-1",
        "sbx-1-",
        "sbx--5",
        "sbx-0-5",  // pid 0 is no process
        "sbx--1-5", // a sign
        "sbx-+1-5",
        "sbx-1-+5",
        "sbx-1--5",
        "sbx- 1-5", // spaces
        "sbx-1-5 ",
        "sbx-1 -5",
        "sbx-1-5-6",
        "sbx-01-5", // not the form tree_name writes
        "sbx-1-05",
        "sbx-2147483648-5",           // pid overflow
        "sbx-1-18446744073709551616", // start time overflow
        "sbx-1-5x",
        "SBX-1-5",
        "xsbx-1-5",
        "supervisor",
        "x-4242-1",
    };
    for (const char* name : rejected)
        BOOST_TEST(!sd::parse_tree_name(name).has_value(), "name \"" << name << '"');
}

BOOST_AUTO_TEST_CASE(off_is_never_used)
{
    auto s = sd::find_cgroup_site("off");
    BOOST_TEST(s.why_not == "off");
    BOOST_TEST(s.parent.empty());
    BOOST_TEST(s.controllers == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
