// protocol/cgroup_site.cpp: see cgroup_site.hpp. (Skeleton: filled in by the cgroup work.)
#include "protocol/cgroup_site.hpp"

namespace sandbox::detail {

unsigned parse_controllers(std::string_view) { return 0; }
std::string controller_names(unsigned) { return {}; }
std::optional<std::string> unified_path_of(std::string_view) { return std::nullopt; }
std::optional<std::string> cgroup2_mount_of(std::string_view) { return std::nullopt; }
std::optional<std::uint64_t> flat_keyed_value(std::string_view, std::string_view)
{
    return std::nullopt;
}
std::string tree_name(pid_t, std::uint64_t) { return {}; }
std::optional<tree_owner> parse_tree_name(std::string_view) { return std::nullopt; }
cgroup_site find_cgroup_site(std::string_view, std::string_view)
{
    cgroup_site s;
    s.why_not = "not built yet";
    return s;
}
int kill_cgroup_path(const std::string&) { return 38; }
int remove_cgroup_path(const std::string&, std::chrono::milliseconds) { return 38; }

} // namespace sandbox::detail
