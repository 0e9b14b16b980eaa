// lib/supervisor/program_lookup.cpp: where the helper program is (see program_lookup.hpp).
#include "supervisor/program_lookup.hpp"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

// A static libsandbox learns where its package sits from the program that links it: the
// package's CMake config compiles a weak definition of this array into that program, with
// the prefix known at find_package time. Weak here, so that a program built without it
// (pkg-config, a plain command line) links and falls through to the other ways.
#if !SANDBOX_LIBRARY_IS_SHARED
extern "C" {
__attribute__((weak)) extern const char sandbox_package_supervisor[];
}
#endif

namespace sandbox::detail {
namespace {

namespace fs = std::filesystem;

// `relative` taken from the directory of `file`, normalised; empty when either is.
std::string beside(const std::string& file, std::string_view relative)
{
    if (file.empty() || relative.empty())
        return {};
    return (fs::path(file).parent_path() / fs::path(relative)).lexically_normal().string();
}

std::string package_path()
{
#if SANDBOX_LIBRARY_IS_SHARED
    return {};
#else
    // Read through a volatile pointer: the address of an undefined weak symbol is null.
    const char* const volatile p = sandbox_package_supervisor;
    return p ? std::string(p) : std::string();
#endif
}

std::string library_file()
{
#if SANDBOX_LIBRARY_IS_SHARED
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&find_supervisor_program), &info) != 0 && info.dli_fname)
    {
        std::error_code ec;
        const fs::path p = fs::canonical(info.dli_fname, ec);
        return ec ? std::string() : p.string();
    }
#endif
    return {};
}

std::string executable_file()
{
    std::error_code ec;
    const fs::path p = fs::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.string();
}

// Why one file system object on the way to the helper cannot be trusted; empty when it can.
std::string untrusted_object(const std::string& path, const struct stat& st, bool is_file)
{
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
        return path + " is owned by uid " + std::to_string(st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (is_file || (st.st_mode & S_ISVTX) == 0))
        return path + " is writable by others";
    return {};
}

} // namespace

std::vector<program_candidate> program_candidates(const program_facts& facts,
                                                  const install_layout& layout)
{
    std::vector<program_candidate> out;
    auto add = [&](std::string path, std::string_view source) {
        if (!path.empty())
            out.push_back({std::move(path), source});
    };
    // The caller's explicit choice is the only one: a wrong path is an error, not a reason to
    // run another program.
    add(facts.env, "SANDBOX_SUPERVISOR");
    if (!out.empty())
        return out;
    add(facts.package, "package");
    add(beside(facts.library_file, layout.from_library), "library");
    add(beside(facts.executable, layout.from_executable), "executable");
    add(std::string(layout.configured), "configured");
    return out;
}

std::string untrusted_reason(const std::string& path)
{
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0)
        return path + ": " + std::strerror(errno);
    if (!S_ISREG(st.st_mode) || ::access(path.c_str(), X_OK) != 0)
        return path + " is not an executable file";
    if (std::string r = untrusted_object(path, st, true); !r.empty())
        return r;
    // Every directory above it, up to the root: whoever may rename one may swap the program.
    for (fs::path dir = fs::path(path).parent_path(); !dir.empty(); dir = dir.parent_path())
    {
        if (::stat(dir.c_str(), &st) != 0)
            return dir.string() + ": " + std::strerror(errno);
        if (std::string r = untrusted_object(dir.string(), st, false); !r.empty())
            return r;
        if (dir == dir.root_path())
            break;
    }
    return {};
}

program_lookup find_supervisor_program()
{
    program_facts facts;
    if (const char* e = std::getenv("SANDBOX_SUPERVISOR"); e && *e)
        facts.env = e;
    facts.package = package_path();
    facts.library_file = library_file();
    facts.executable = executable_file();
    const install_layout layout{SANDBOX_SUPERVISOR_FROM_LIBRARY, SANDBOX_SUPERVISOR_FROM_EXECUTABLE,
                                SANDBOX_SUPERVISOR_INSTALL_PATH};
    program_lookup found;
    for (const program_candidate& c : program_candidates(facts, layout))
    {
        // The caller's explicit choice is taken as given (tests point it at copies in /tmp).
        const std::string why = c.source == "SANDBOX_SUPERVISOR"
                              ? (::access(c.path.c_str(), X_OK) == 0 ? std::string()
                                                                      : c.path + " is not executable")
                              : untrusted_reason(c.path);
        if (why.empty())
        {
            found.path = c.path;
            return found;
        }
        found.tried += (found.tried.empty() ? "" : "; ") + std::string(c.source) + ": " + why;
    }
    return found;
}

} // namespace sandbox::detail
