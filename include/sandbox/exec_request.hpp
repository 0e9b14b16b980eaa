// sandbox/exec_request.hpp: one command to run, with its options.
#ifndef SANDBOX_EXEC_REQUEST_HPP
#define SANDBOX_EXEC_REQUEST_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/http_hooks.hpp>
#include <sandbox/net_proxy.hpp>
#include <sandbox/unique_fd.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox {

/// The command's output streams.
enum class output_stream : int
{
    out = 1, ///< stdout
    err = 2, ///< stderr
    tty = 3, ///< a pseudo-terminal's output: stdout and stderr merged, as a terminal shows them
};

/// "stdout", "stderr", "tty" (the daemon's JSON and NDJSON spell streams so).
SANDBOX_DECL const char* to_string(output_stream s) noexcept;

/// \brief Receives output as it is read; returns false to stop the run. See
/// `exec_request::on_output`.
using output_handler = std::function<bool(output_stream, std::string_view)>;

/// \brief Given with each chunk to an `async_output_handler`: call it once, from any thread,
/// when the chunk is consumed: true to read on, false to stop the run.
using output_resume = std::function<void(bool)>;

/// \brief Receives output as it is read and takes its time to consume it. See
/// `exec_request::on_output_async`.
using async_output_handler =
    std::function<void(output_stream, std::string_view, output_resume)>;

/// The size of a terminal, in character cells.
struct terminal_size
{
    unsigned short rows = 24;
    unsigned short cols = 80;
};

/// \brief Who asked for a call, when a server runs calls for others (`sandboxd` sets it from
/// its client's socket credentials). The policy chain hands it to predicates and the approver
/// (`call_snapshot::requested_by`) and writes it into every audit record of the call; no
/// backend runs anything differently for it.
struct requester
{
    std::uint32_t uid = 0;
    std::uint32_t gid = 0;
    /// The requesting process, as the kernel named it when it connected (0: not known).
    std::int32_t pid = 0;
};

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
    /// \brief Streams the output as it is read, instead of capturing it.
    ///
    /// Called on the runner's executor with each chunk (at most 64 KiB) in the order read,
    /// from the first byte on; `exec_result::out` and `err` stay empty and
    /// `max_output_bytes` does not apply. It should not block the loop for long: the library
    /// does not read that stream again until it returns, so a slow handler slows the command
    /// (its pipe fills), never loses data. Return false (or throw) to stop the run: the tree
    /// is killed and the exec completes with `operation_aborted`, status `cancelled`,
    /// `diag.limit == "output"`; later output is read and discarded. Unset: capture.
    output_handler on_output{};
    /// \brief Streams the output with back-pressure, without holding the loop: as
    /// `on_output` (which is ignored when this is set), but the handler returns at once and
    /// calls `resume` when it has consumed the chunk (`true`) or wants the run stopped
    /// (`false`, as `on_output` returning false).
    ///
    /// `data` is valid only during the call: copy what is kept. That stream is not read again
    /// until `resume` is called, so a consumer slower than the command slows it (its pipe
    /// fills) and loses nothing, even after the command ended: the exec completes only once
    /// every chunk was resumed. The handler may be called for the other stream meanwhile.
    async_output_handler on_output_async{};
    /// \brief Run the command on a pseudo-terminal of this size instead of pipes.
    ///
    /// The command leads a new session with the terminal as its controlling terminal and as
    /// stdin, stdout and stderr: programs see `isatty()` true, and its stdout and stderr
    /// arrive merged, as a terminal shows them, in `exec_result::out` (or as
    /// `output_stream::tty` through `on_output`; `err` stays empty). Everything written
    /// before the tree ended is read before the exec completes. Input (`options.input`,
    /// `stdin_fd`) is refused with `errc::validation` for now; sessions will write to the
    /// terminal. Unset: pipes.
    std::optional<terminal_size> tty{};
    /// \brief Gets the egress proxy's records of this call (`net_mode::allow_list` and
    /// `proxy`): one per connection's decision, one per allowed connection's close. Called
    /// on the runner's executor; the policy chain sets it to write them to its audit trail.
    net_record_handler on_net_record{};
    /// \brief The caller's hooks over the HTTP requests of this call's inspected tunnels
    /// (`net.mitm`; `http_hooks`), run on the runner's executor.
    http_hooks http{};
    /// Who asked for this call, when it is asked on someone's behalf; unset: the caller.
    std::optional<requester> requested_by{};
};

} // namespace sandbox

#endif // SANDBOX_EXEC_REQUEST_HPP
