// sandbox/exec_request.hpp: one command to run, with its options.
#ifndef SANDBOX_EXEC_REQUEST_HPP
#define SANDBOX_EXEC_REQUEST_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_options.hpp>

#include <string>
#include <vector>

namespace sandbox {

/// \brief A command, its arguments and its options.
///
/// `command` is a bare name (looked up on the PATH the *child* will see) or a path (relative
/// paths are taken from the work directory). `args` excludes the command itself.
/// With GCC 12, build requests in their own statement, not as a braced temporary inside a
/// `co_await` expression (a compiler bug rejects the latter).
struct exec_request
{
    std::string command{};
    std::vector<std::string> args{};
    exec_options options{};
};

} // namespace sandbox

#endif // SANDBOX_EXEC_REQUEST_HPP
