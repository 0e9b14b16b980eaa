// kernel/cgroup_site.hpp: where a helper's cgroup tree goes, found the same way on both
// sides. The library reads it (read-only) for `enforcement()` and to know the tree of a helper
// it gives up on; the helper makes the tree there. Pure parsers plus one read-only lookup.
#ifndef SANDBOX_KERNEL_CGROUP_SITE_HPP
#define SANDBOX_KERNEL_CGROUP_SITE_HPP

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace sandbox::detail {

/// Controllers the cgroup path uses, as bits.
enum cgroup_controller : unsigned
{
    cgc_cpu = 1u << 0,
    cgc_memory = 1u << 1,
    cgc_pids = 1u << 2,
};

/// The bits of a `cgroup.controllers` or `cgroup.subtree_control` text ("cpu io memory pids").
unsigned parse_controllers(std::string_view text);
/// "cpu memory pids" for `bits` (in that order, space separated; "" for none).
std::string controller_names(unsigned bits);

/// The cgroup v2 path of a `/proc/PID/cgroup` text (its `0::/a/b` line): "/a/b"; nullopt when
/// there is no v2 line (a v1-only host).
std::optional<std::string> unified_path_of(std::string_view proc_cgroup);

/// The mount point of the cgroup2 filesystem in a `/proc/self/mountinfo` text:
/// "/sys/fs/cgroup" on a v2 host, "/sys/fs/cgroup/unified" on a hybrid one; nullopt when none
/// is mounted. (Mount points with octal escapes such as `\040` are decoded.)
std::optional<std::string> cgroup2_mount_of(std::string_view mountinfo);

/// The value of `key` in a flat-keyed cgroup file (`cgroup.events`, `memory.events`,
/// `pids.events`, `cpu.stat`: "key value" lines). nullopt when the key is missing or its
/// value is not a number.
std::optional<std::uint64_t> flat_keyed_value(std::string_view text, std::string_view key);

/// The name of a helper's tree directory below the site: "sbx-PID-STARTTIME" (the start time
/// of /proc/PID/stat field 22), so a stale tree (its helper gone, its pid reused) is told
/// from a live one.
std::string tree_name(pid_t helper, std::uint64_t starttime);
/// The pid and start time in a tree name; nullopt for any other name.
struct tree_owner
{
    pid_t pid = 0;
    std::uint64_t starttime = 0;
};
std::optional<tree_owner> parse_tree_name(std::string_view name);
/// The start time of process `pid` (/proc/PID/stat field 22), the second half of a tree's
/// name: 0 and `out`, or the errno (ENOENT: no such process; EINVAL: unreadable text).
int process_start_time(pid_t pid, std::uint64_t& out);

/// \brief Where a helper's tree would go for a request, and what the cgroup path offers there.
struct cgroup_site
{
    /// The absolute directory the tree is made in (the request's path, or for "auto" this
    /// process's own v2 cgroup under the cgroup2 mount). Empty when `why_not` is set.
    std::string parent{};
    /// Empty when usable; else why the cgroup path is not used ("off", "no cgroup2 mount",
    /// "/sys/fs/cgroup/x: not writable (EACCES)", "kernel 5.10 has no cgroup.kill", ...).
    std::string why_not{};
    /// Controllers the tree's exec cgroups can get: those the parent already enables for its
    /// children (its `cgroup.subtree_control`). The parent's files are never written: it is
    /// not ours (on a root cgroup that would change the whole machine).
    unsigned controllers = 0;
    /// `cgroup.kill` exists (Linux 5.14): otherwise kill = freeze, signal each, thaw.
    bool has_kill = false;
};

/// \brief Looks up the site for `request`: "off" (never), "auto" (this process's own v2
/// cgroup, when it is writable: a delegated one or root's), or an absolute directory of the
/// cgroup2 mount. Reads only: /proc/self/cgroup, /proc/self/mountinfo, access(2) and the
/// parent's control files. `root_for_tests`: a directory to use as the cgroup2 mount instead
/// of the real one (unit tests' stand-in tree); empty for the real one.
cgroup_site find_cgroup_site(std::string_view request, std::string_view root_for_tests = {});

/// Kills everything in a cgroup and below it by its path (`<path>/cgroup.kill`), from any
/// process allowed to write it: the library's last resort for a helper it gave up on (its
/// tree: `<site.parent>/<tree_name(...)>`). 0 or the errno (ENOENT: no such cgroup any more).
int kill_cgroup_path(const std::string& path);

/// Reads a small control file `name` below the directory `dir_fd` into `out` (replaced).
/// 0 or the errno.
int read_cgroup_file(int dir_fd, const char* name, std::string& out);
/// Writes `text` to the control file `name` below `dir_fd` in one write(2) (no O_CREAT, no
/// O_TRUNC: a cgroup file takes each write whole). 0 or the errno.
int write_cgroup_file(int dir_fd, const char* name, std::string_view text);

/// The names of the directories (child cgroups) below `dir_fd`, "." and ".." left out.
/// 0 or the errno.
int list_child_cgroups(int dir_fd, std::vector<std::string>& out);

/// Removes a cgroup and every cgroup below it, deepest first, retrying a cgroup that is
/// still busy (its killed processes not gone yet) until `wait` has passed. 0, or the errno of
/// the first cgroup that could not be removed (ENOENT for `path` itself counts as done).
int remove_cgroup_path(const std::string& path, std::chrono::milliseconds wait);

} // namespace sandbox::detail

#endif // SANDBOX_KERNEL_CGROUP_SITE_HPP
