// lib/exec/helper_modes.cpp: the helper's parts besides supervising, for the backends
// (sandbox/backend/supervise.hpp): the status init a wrapped command runs under, the switch
// of a root caller's sandbox to its user (run-as), and access checks as another user.
#include <sandbox/backend/supervise.hpp>

#include "supervisor/client.hpp"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sandbox::backend {

namespace {

// The helper program, opened once it can be: a wrapper runs it from a descriptor
// (/proc/self/fd/N), so that it need not be visible to the user or inside the sandbox it
// runs as (a build tree under /tmp is not). It is the same program as the supervisor's, so
// it speaks its protocol. Null when it cannot be opened.
std::shared_ptr<const unique_fd> helper_program()
{
    static std::mutex m;
    static std::shared_ptr<const unique_fd> opened;
    std::lock_guard l(m);
    if (!opened)
    {
        const std::string path = detail::supervisor_program();
        unique_fd fd(path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (fd)
            opened = std::make_shared<const unique_fd>(std::move(fd));
    }
    return opened;
}

// The helper program could not be opened for a part it plays besides supervising (`role`).
failure helper_missing(const char* role)
{
    return make_failure(errc::not_available,
                        std::string("the supervisor helper sandbox-supervisor, which ") + role +
                            ", was not found or cannot be opened",
                        "supervisor");
}

} // namespace

outcome<status_init> make_status_init()
{
    // The wrapper runs the init from its fd 4 (/proc/self/fd/4).
    auto program = helper_program();
    if (!program)
        return helper_missing("also reports how a sandboxed command ended");
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
        return make_os_failure(errc::internal, "cannot create the status pipe", errno);
    status_init s;
    s.status = unique_fd(p[0]);
    s.fds = {std::make_shared<const unique_fd>(p[1]), program};
    s.argv = {"/proc/self/fd/4", "--init", "3", "--"};
    return s;
}

outcome<void> run_as_user(spawn_plan& plan, std::uint32_t uid, std::uint32_t gid)
{
    auto program = helper_program();
    if (!program)
        return helper_missing("switches a root caller's sandbox to its user");
    // The helper among the descriptors the plan hands over (the status init's), or one more.
    auto at = std::find(plan.extra_fds.begin(), plan.extra_fds.end(), program);
    if (at == plan.extra_fds.end())
        at = plan.extra_fds.insert(at, program);
    const auto fd = 3 + (at - plan.extra_fds.begin());
    std::vector<std::string> argv{"sandbox-supervisor", "--as", std::to_string(uid),
                                  std::to_string(gid),  "--",   plan.executable};
    if (!plan.argv.empty())
        argv.insert(argv.end(), plan.argv.begin() + 1, plan.argv.end());
    plan.argv = std::move(argv);
    plan.executable = "/proc/self/fd/" + std::to_string(fd);
    return {};
}

namespace {

// The helper's answers, one errno per line; empty unless there is one for each check.
std::vector<int> read_answers(int fd, std::size_t want)
{
    std::string text;
    char buf[512];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;)
        if (n > 0)
            text.append(buf, static_cast<std::size_t>(n));
        else if (errno != EINTR)
            return {};
    std::vector<int> got;
    for (std::size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
        got.push_back(std::atoi(text.c_str() + at));
    return got.size() == want ? got : std::vector<int>{};
}

} // namespace

std::vector<int> access_as(std::uint32_t uid, std::uint32_t gid,
                           const std::vector<access_check>& checks)
{
    const std::vector<int> result;
    auto program = helper_program();
    int out[2];
    if (!program || ::pipe2(out, O_CLOEXEC) != 0)
        return result;
    unique_fd read_end(out[0]);
    // Above 3, so that neither dup2 below overwrites the other's source.
    unique_fd write_end(::fcntl(out[1], F_DUPFD_CLOEXEC, 4));
    unique_fd helper(::fcntl(program->get(), F_DUPFD_CLOEXEC, 4));
    ::close(out[1]);
    if (!write_end || !helper)
        return result;
    std::vector<std::string> args{"sandbox-supervisor", "--access-as", std::to_string(uid),
                                  std::to_string(gid)};
    for (const auto& c : checks)
        args.insert(args.end(), {std::to_string(c.mode), c.path});
    std::vector<char*> argv;
    for (auto& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    char* envp[] = {nullptr};
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    int rc = ::posix_spawn_file_actions_adddup2(&fa, helper.get(), 3);
    rc = rc ? rc : ::posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    rc = rc ? rc : ::posix_spawn_file_actions_adddup2(&fa, write_end.get(), 1);
    rc = rc ? rc : ::posix_spawn_file_actions_addclosefrom_np(&fa, 4);
    pid_t pid = -1;
    rc = rc ? rc : ::posix_spawn(&pid, "/proc/self/fd/3", &fa, nullptr, argv.data(), envp);
    ::posix_spawn_file_actions_destroy(&fa);
    write_end.reset();
    if (rc != 0)
        return result;
    auto got = read_answers(read_end.get(), checks.size());
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR)
    {}
    return got;
}

} // namespace sandbox::backend
