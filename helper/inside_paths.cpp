// helper/inside_paths.cpp: see inside_paths.hpp.
#include "helper/inside_paths.hpp"

#include <cerrno>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::detail {

std::string path_of(const std::vector<std::string>& envp)
{
    for (const auto& e : envp)
        if (e.rfind("PATH=", 0) == 0)
            return e.substr(5);
    return "/bin:/usr/bin";
}

namespace {

bool goes_on(int e)
{
    return e == ENOENT || e == ENOTDIR || e == ESTALE || e == ENODEV || e == ETIMEDOUT ||
           e == ELOOP || e == ENAMETOOLONG;
}

std::string candidate_of(std::string_view dir, std::string_view file, const std::string& cwd)
{
    std::string full;
    if (dir.empty() || dir.front() != '/')
        full = cwd.empty() ? std::string(".") : cwd;
    if (!dir.empty())
    {
        if (!full.empty())
            full += '/';
        full += dir;
    }
    full += '/';
    full += file;
    return full;
}

} // namespace

std::string find_on_path(std::string_view file, std::string_view path, const std::string& cwd,
                         const std::function<int(const std::string&)>& probe, int& err)
{
    bool denied = false;
    for (;;)
    {
        const std::size_t colon = path.find(':');
        const std::string_view dir = path.substr(0, colon);
        std::string full = candidate_of(dir, file, cwd);
        const int e = probe(full);
        if (e == 0)
        {
            err = 0;
            return full;
        }
        if (e == EACCES)
            denied = true;
        else if (!goes_on(e))
        {
            err = e;
            return {};
        }
        if (colon == std::string_view::npos)
            break;
        path.remove_prefix(colon + 1);
    }
    err = denied ? EACCES : ENOENT;
    return {};
}

int probe_executable(const std::string& candidate)
{
    struct stat st
    {
    };
    if (::stat(candidate.c_str(), &st) != 0)
        return errno == EACCES ? ENOENT : errno; // a directory we cannot search: skipped
    if (!S_ISREG(st.st_mode))
        return EACCES; // execve says so for a directory, a fifo, a device
    return ::faccessat(AT_FDCWD, candidate.c_str(), X_OK, AT_EACCESS) == 0 ? 0 : errno;
}

} // namespace sandbox::detail
