// helper/cgroup.cpp: see cgroup.hpp. (Skeleton: filled in by the cgroup work.)
#include "helper/cgroup.hpp"

#include <cerrno>

namespace sandbox::detail {

int cgroup_leaf::make(int, std::string_view, const cgroup_limits&, unsigned, cgroup_leaf&,
                      std::string& why)
{
    why = "not built yet";
    return ENOSYS;
}
int cgroup_leaf::kill() { return ENOSYS; }
std::optional<cgroup_reading> cgroup_leaf::read() const { return std::nullopt; }
std::optional<std::chrono::microseconds> cgroup_leaf::cpu() const { return std::nullopt; }
void cgroup_leaf::clear_events() const {}
int cgroup_leaf::remove(int) { return ENOSYS; }

int cgroup_tree::open(const cgroup_site&, cgroup_tree&, std::string& why)
{
    why = "not built yet";
    return ENOSYS;
}
void cgroup_tree::tear_down(std::chrono::milliseconds) {}
int cgroup_tree::sweep_stale(const std::string&, std::chrono::milliseconds) { return 0; }

} // namespace sandbox::detail
