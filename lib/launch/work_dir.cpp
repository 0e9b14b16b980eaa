// lib/launch/work_dir.cpp: work-directory confinement with a descriptor, not a path.
#include <sandbox/backend/launch.hpp>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <unistd.h>

namespace sandbox::backend {

namespace fs = std::filesystem;

namespace {

bool inside(const std::string& path, const std::string& root)
{
    if (root == "/")
        return !path.empty() && path[0] == '/';
    return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                            path[root.size()] == '/');
}

failure escape(const std::string& requested, const std::string& resolved, const std::string& root)
{
    auto f = make_failure(errc::forbidden, "work dir \"" + requested + "\" resolves to \"" +
                                               resolved + "\", outside the root \"" + root + "\"",
                          "work_dir");
    f.diag.path = requested;
    return f;
}

} // namespace

std::string canonical_root(const std::string& root)
{
    std::error_code ec;
    fs::path abs = fs::absolute(root.empty() ? fs::path(".") : fs::path(root), ec);
    if (ec)
        return root;
    fs::path canon = fs::canonical(abs, ec);
    return (ec ? abs.lexically_normal() : canon).string();
}

outcome<backend::unique_fd> open_work_dir(const std::string& root, const std::string& work_dir)
{
    if (work_dir.find('\0') != std::string::npos)
        return make_failure(errc::validation, "work dir holds a NUL byte", "work_dir");
    if (root.find('\0') != std::string::npos)
        return make_failure(errc::validation, "root holds a NUL byte", "root");
    const std::string shown = work_dir.empty() ? root : work_dir;
    fs::path target = work_dir.empty()       ? fs::path(root)
                      : work_dir[0] == '/' ? fs::path(work_dir)
                                           : fs::path(root) / work_dir;
    target = target.lexically_normal();
    std::error_code ec;
    fs::path pre = fs::weakly_canonical(target, ec);
    std::string pre_s = (ec ? target : pre).string();
    if (pre_s.size() > 1 && pre_s.back() == '/')
        pre_s.pop_back();
    if (!inside(pre_s, root))
        return escape(shown, pre_s, root);

    backend::unique_fd fd(::open(target.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!fd)
    {
        int e = errno;
        errc code = errc_from_errno(e);
        std::string why = e == ENOENT    ? "does not exist"
                          : e == ENOTDIR ? "is not a directory"
                                         : std::strerror(e);
        const char* field = work_dir.empty() ? "root" : "work_dir";
        auto f = make_failure(code, std::string(work_dir.empty() ? "root" : "work dir") + " \"" +
                                        shown + "\" " + why,
                              field);
        f.diag.path = shown;
        f.diag.cause = boost::system::error_code(e, boost::system::system_category());
        return f;
    }
    char link[64];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd.get());
    char real[4096];
    ssize_t n = ::readlink(link, real, sizeof real - 1);
    if (n <= 0)
    {
        auto f = make_failure(errc::internal, "cannot read back the opened work dir", "work_dir");
        f.diag.path = shown;
        f.diag.cause = boost::system::error_code(errno, boost::system::system_category());
        return f;
    }
    std::string real_s(real, static_cast<std::size_t>(n));
    if (!inside(real_s, root))
        return escape(shown, real_s, root);
    return fd;
}

} // namespace sandbox::backend
