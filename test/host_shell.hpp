// test/host_shell.hpp: a shell command line run on the host by a test (curl, openssl,
// sandbox-run), its stdout captured; shared by the suites that drive real clients.
#ifndef SANDBOX_TEST_HOST_SHELL_HPP
#define SANDBOX_TEST_HOST_SHELL_HPP

#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <string>

#include <sys/wait.h>

namespace sbx_test {

/// What a command line printed (stdout) and its exit status (128 when a signal ended it).
struct shell_outcome
{
    int status = -1;
    std::string out;
};

/// Runs `line` with /bin/sh here and waits for it; stderr goes where the line says.
inline shell_outcome host_shell(const std::string& line)
{
    shell_outcome r;
    FILE* p = ::popen(line.c_str(), "r");
    BOOST_TEST_REQUIRE(p != nullptr);
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, p))
        r.out.append(buf, n);
    const int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return r;
}

} // namespace sbx_test

#endif // SANDBOX_TEST_HOST_SHELL_HPP
