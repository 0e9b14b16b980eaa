// sandbox/exec_request.hpp: one command to run, with its options.
#ifndef SANDBOX_EXEC_REQUEST_HPP
#define SANDBOX_EXEC_REQUEST_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/unique_fd.hpp>

#include <memory>
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
    /// \brief A readable descriptor the command gets as its stdin, instead of
    /// `options.input`: an open file, a pipe, a FIFO or a device.
    ///
    /// The command reads it itself, so nothing is copied or buffered whatever its size,
    /// and a FIFO nobody writes to blocks the command, under its timeout, not the caller.
    /// Shared so that requests stay copyable: the descriptor is closed when the last copy
    /// of the request goes. The command shares its file offset. Setting both this and
    /// `options.input` is `errc::validation`.
    std::shared_ptr<const unique_fd> stdin_fd{};
};

} // namespace sandbox

#endif // SANDBOX_EXEC_REQUEST_HPP
