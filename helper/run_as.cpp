// helper/run_as.cpp: the helper's `--as` mode (see run_as.hpp).
#include "helper/run_as.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char** environ;

namespace sandbox::detail {

namespace {

[[noreturn]] void refuse(const char* why, unsigned long uid = 0, unsigned long gid = 0)
{
    if (uid == 0 && gid == 0)
        std::fprintf(stderr, "sandbox-supervisor --as: %s\n", why);
    else
        std::fprintf(stderr, "sandbox-supervisor --as %lu %lu: %s\n", uid, gid, why);
    ::_exit(125);
}

// A decimal id below (uid_t)-1, which means "unchanged" to the set*id calls.
bool parse_id(const char* s, unsigned long& out)
{
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    char* end = nullptr;
    out = std::strtoul(s, &end, 10);
    return errno == 0 && *end == '\0' && out < 0xffffffffUL;
}

bool no_capabilities()
{
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (::syscall(SYS_capget, &hdr, data) != 0)
        return false;
    for (const auto& d : data)
        if (d.effective != 0 || d.permitted != 0)
            return false;
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap)
        if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, cap, 0, 0) == 1)
            return false;
    return true;
}

bool switched(uid_t uid, gid_t gid)
{
    uid_t r = 0, e = 0, s = 0;
    gid_t rg = 0, eg = 0, sg = 0;
    gid_t groups[2] = {};
    return ::getresuid(&r, &e, &s) == 0 && r == uid && e == uid && s == uid &&
           ::getresgid(&rg, &eg, &sg) == 0 && rg == gid && eg == gid && sg == gid &&
           ::getgroups(2, groups) == 1 && groups[0] == gid && no_capabilities();
}

// Switches to argv[2] (uid) and argv[3] (gid) as run_as.hpp says, or exits 125.
void switch_user(int argc, char** argv, const char* usage)
{
    unsigned long uid = 0, gid = 0;
    if (argc < 4 || !parse_id(argv[2], uid) || !parse_id(argv[3], gid))
        refuse(usage);
    if (uid == 0 || gid == 0)
        refuse("refused: commands must not run as root (uid or gid 0)", uid, gid);
    const auto u = static_cast<uid_t>(uid);
    const auto g = static_cast<gid_t>(gid);
    if (::setgroups(1, &g) != 0 || ::setresgid(g, g, g) != 0 || ::setresuid(u, u, u) != 0)
        refuse("cannot switch to this uid and gid (only a root caller can)", uid, gid);
    if (!switched(u, g))
        refuse("the switch left a privilege behind (an id, a group or a capability)", uid, gid);
}

} // namespace

void run_as_user(int argc, char** argv)
{
    // argv: sandbox-supervisor --as UID GID -- PROGRAM [ARG...]
    const char* usage = "usage: sandbox-supervisor --as UID GID -- PROGRAM [ARG...]";
    if (argc < 6 || std::strcmp(argv[4], "--") != 0)
        refuse(usage);
    switch_user(argc, argv, usage);
    ::execve(argv[5], argv + 5, environ);
    const int err = errno;
    std::fprintf(stderr, "sandbox-supervisor --as %s %s: cannot execute %s: %s\n", argv[2],
                 argv[3], argv[5], std::strerror(err));
    ::_exit(125);
}

void run_access_as(int argc, char** argv)
{
    // argv: sandbox-supervisor --access-as UID GID [MODE PATH]...
    const char* usage = "usage: sandbox-supervisor --access-as UID GID [MODE PATH]...";
    if (argc % 2 != 0)
        refuse(usage);
    switch_user(argc, argv, usage);
    for (int i = 4; i + 1 < argc; i += 2)
    {
        const int err = ::access(argv[i + 1], std::atoi(argv[i])) == 0 ? 0 : errno;
        std::printf("%d\n", err);
    }
    std::fflush(stdout);
    ::_exit(std::ferror(stdout) ? 125 : 0);
}

} // namespace sandbox::detail
