// lib/exec/input_writer.hpp: writing to a command's stdin (a pipe or a terminal master) from
// the caller's process, as supervised execution and sessions both do: never blocking, never
// raising SIGPIPE.
#ifndef SANDBOX_LIB_EXEC_INPUT_WRITER_HPP
#define SANDBOX_LIB_EXEC_INPUT_WRITER_HPP

#include <sandbox/config.hpp>

#include <cstddef>
#include <string_view>

#include <sys/types.h>

namespace sandbox::detail {

/// write(2) that cannot raise SIGPIPE in the host process: SIGPIPE is blocked in this thread
/// for the call and one it caused is consumed. No process-wide handler is touched.
ssize_t write_no_sigpipe(int fd, const char* data, std::size_t len) noexcept;

/// splice(2) that cannot raise SIGPIPE in the host process (a splice into a socket whose
/// peer is gone would: splice has no MSG_NOSIGNAL), retried on EINTR. For the egress relay.
SANDBOX_DECL ssize_t splice_no_sigpipe(int in, int out, std::size_t len,
                                       unsigned int flags) noexcept;

/// \brief Writes `data` from `off` on to the non-blocking `fd` until it is all written or the
/// descriptor is full, advancing `off`. Returns 0 when all is written, EAGAIN when full (wait
/// until writable, then call again), else the errno that ended it (EPIPE: the reader is gone;
/// EIO: a terminal whose command is gone).
int write_input(int fd, std::string_view data, std::size_t& off) noexcept;

} // namespace sandbox::detail

#endif // SANDBOX_LIB_EXEC_INPUT_WRITER_HPP
