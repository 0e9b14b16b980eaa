// lib/launch/command_lookup.cpp: PATH search on the child's environment.
#include <sandbox/backend/launch.hpp>

#include <sandbox/backend/environment.hpp>

#include <cerrno>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::backend {

namespace {

enum class probe
{
    missing,
    not_executable,
    ok,
};

probe check(int dir_fd, const std::string& path)
{
    struct stat st;
    int at = path.empty() || path[0] == '/' ? AT_FDCWD : dir_fd;
    if (::fstatat(at, path.c_str(), &st, 0) != 0)
        return errno == EACCES ? probe::not_executable : probe::missing;
    if (!S_ISREG(st.st_mode) || ::faccessat(at, path.c_str(), X_OK, AT_EACCESS) != 0)
        return probe::not_executable;
    return probe::ok;
}

std::string default_path()
{
    std::size_t n = ::confstr(_CS_PATH, nullptr, 0);
    std::string s(n, '\0');
    if (n == 0 || ::confstr(_CS_PATH, s.data(), n) == 0)
        return "/bin:/usr/bin";
    s.resize(n - 1);
    return s;
}

failure lookup_failure(int err, const std::string& message, const std::string& command)
{
    auto f = make_failure(errc_from_errno(err), message, "command");
    f.diag.path = command;
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

} // namespace

outcome<std::string> find_command(const std::string& command, const std::vector<std::string>& env,
                                  int work_dir_fd)
{
    // A path is handed to exec as is: exec itself reports a missing file (not_found) or a
    // non-executable one (forbidden), so probing it here would only cost two syscalls.
    if (command.find('/') != std::string::npos)
        return command;
    const std::string* entry = backend::find_env(env, "PATH");
    std::string path = entry ? entry->substr(5) : default_path();
    bool saw_not_executable = false;
    std::size_t start = 0;
    while (start <= path.size())
    {
        std::size_t end = path.find(':', start);
        if (end == std::string::npos)
            end = path.size();
        std::string dir = path.substr(start, end - start);
        std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + command;
        switch (check(work_dir_fd, candidate))
        {
        case probe::ok: return candidate;
        case probe::not_executable: saw_not_executable = true; break;
        case probe::missing: break;
        }
        start = end + 1;
    }
    if (saw_not_executable)
        return lookup_failure(EACCES,
                              "\"" + command + "\" was found on the child's PATH but is not "
                                               "executable",
                              command);
    return lookup_failure(ENOENT,
                          "command \"" + command + "\" not found on the child's PATH (" + path +
                              ")",
                          command);
}

} // namespace sandbox::backend
