#pragma once
// Where the helper program `sandbox-supervisor` is found, wherever the package was installed.
//
// $SANDBOX_SUPERVISOR, when set, is the caller's explicit choice and the only one. Else, in
// order: the path the CMake package config compiled into the program that links a static
// libsandbox; the path beside a shared libsandbox (the relative way from the library
// directory to the libexec directory); the path beside the running program (bin to libexec:
// the installed sandbox-run and every program of the build tree); the install path configured
// at build time. Those must be trusted (see `untrusted_reason`): a program found by a
// relative way from /tmp must not be one another user planted there.

#include <string>
#include <string_view>
#include <vector>

namespace sandbox::detail {

/// What the lookup knows about this process; empty fields are unknown or do not apply.
struct program_facts
{
    std::string env;          // $SANDBOX_SUPERVISOR
    std::string package;      // from the CMake package config (static link)
    std::string library_file; // the shared libsandbox's own file (empty when linked statically)
    std::string executable;   // the running program (/proc/self/exe)
};

/// The relative ways and the configured path, fixed when the library was configured.
struct install_layout
{
    std::string_view from_library;    // e.g. "../libexec/sandbox/sandbox-supervisor"
    std::string_view from_executable; // e.g. "../libexec/sandbox/sandbox-supervisor"
    std::string_view configured;      // e.g. "/usr/local/libexec/sandbox/sandbox-supervisor"
};

struct program_candidate
{
    std::string path;
    std::string_view source; // "SANDBOX_SUPERVISOR", "package", "library", "executable", "configured"
};

/// The candidates in the order they are tried (pure: no file is read).
std::vector<program_candidate> program_candidates(const program_facts& facts,
                                                  const install_layout& layout);

/// Empty when `path` may be run as our helper: an executable regular file which, and every
/// directory above which, is owned by root or by our effective user and writable by nobody
/// else (a directory others may write must be sticky, as /tmp is). Else the reason.
std::string untrusted_reason(const std::string& path);

struct program_lookup
{
    std::string path;  // empty when no candidate is usable
    std::string tried; // every candidate passed over, with the reason ("; "-separated)
};

/// The lookup for this process (reads the environment and the files).
program_lookup find_supervisor_program();

} // namespace sandbox::detail
