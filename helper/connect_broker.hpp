// helper/connect_broker.hpp: the worker's side of the unix-socket policy. The tree runs under
// connect_filter.hpp's program, which sends every connect() to this broker instead of letting
// it go on; the broker makes the connection itself and answers with its result, so what the
// kernel connects is always what the broker checked (a thread of the tree that rewrites the
// address after the check changes nothing: the broker's copy is the one used).
//
// For each call, on a thread of its own (a connect may block; at most 64 at once, one more is
// answered EAGAIN):
//   1. the address is copied out of the task's memory (process_vm_readv), the task's ids read
//      from /proc/TID/status, and the notification checked to be still alive (the tid was not
//      reused meanwhile);
//   2. the socket is copied from its process (pidfd_getfd) and checked to be the one the
//      calling thread names (a thread may have a descriptor table of its own);
//   3. the thread takes the task's ids, groups and no capabilities, so that file permissions
//      are checked as for the task and the server's SO_PEERCRED shows the task's uid and gid;
//   4. a path-named AF_UNIX address is resolved as the task sees it (its root and working
//      directory, openat2 RESOLVE_IN_ROOT, no magic links) to an O_PATH descriptor of the
//      socket file; the connect is allowed when that file is one of the plan's sockets (by
//      device and inode, while its host path still names it, held open for the call: a
//      socket its service removed does not pass, even when another gets its inode number)
//      or is bound by a listening
//      socket of the task's own network
//      namespace (sock_diag: a socket the sandbox serves itself), and then made through
//      /proc/self/fd/N, so it reaches that very file; else it fails with EACCES;
//   5. any other address (IP, abstract and unnamed AF_UNIX: all in the task's network
//      namespace) is connected as given.
// The answer is the connect's own: 0, or its errno (EINPROGRESS for a non-blocking socket).
// A connect that blocks (a server whose queue is full) blocks the task as its own would; a
// watcher thread interrupts it (a signal of the worker's own) once the task is gone or the
// broker stopped, so no connection is made for a command that has ended and no thread stays
// blocked in the worker, which serves the next execution.
//
// The sock_diag socket of step 4 is made once per network namespace (entering it needs
// CAP_SYS_ADMIN, so before step 3, from the namespace descriptor opened while the task was
// known alive) and queried only for a file that is not listed; one whose dump was cut off
// (a signal, an error) is never asked again.
#ifndef SANDBOX_HELPER_CONNECT_BROKER_HPP
#define SANDBOX_HELPER_CONNECT_BROKER_HPP

#include "protocol/protocol.hpp"

#include <sandbox/unique_fd.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <linux/seccomp.h>
#include <sys/stat.h>
#include <sys/types.h>

namespace sandbox::detail {

/// A task's ids as /proc/TID/status gives them (in the reader's user namespace).
struct task_ids
{
    pid_t tgid = -1;
    std::uint32_t uid[4]{}, gid[4]{}; // real, effective, saved, file system
    std::vector<std::uint32_t> groups;
};

/// The ids of a /proc/TID/status text, or nothing when a line is missing or malformed.
std::optional<task_ids> parse_task_ids(std::string_view status);

/// The ids of task `tid` from /proc/TID/status, read whole (a read that fills the buffer
/// may be cut inside the Groups line, so it is read again, larger, up to 1 MiB: the kernel's
/// 65,536 groups fit). On failure nothing, and `err`: ESRCH when the task is gone, EPERM
/// when its status cannot be read whole or does not parse.
std::optional<task_ids> read_task_ids(pid_t tid, int& err);

/// Whether a sock_diag device number (the kernel's own encoding: major << 20 | minor) names
/// the same device as a stat()'s st_dev.
bool same_device(std::uint32_t kernel_dev, std::uint64_t st_dev);

/// A sock_diag socket in the network namespace `ns` (made on the calling thread, which
/// enters the namespace: a socket stays in the namespace it was made in).
backend::unique_fd diag_socket_in(int ns);

enum class served
{
    no,
    yes,
    broken ///< the dump did not end (an error, a signal): the socket is out of step
};

/// Whether a listening AF_UNIX socket of the diag socket's namespace is bound to the file
/// `st` (sock_diag gives the bound file's device and the low 32 bits of its inode).
served served_in_namespace(int diag, const struct stat& st);

class connect_broker
{
public:
    /// Serves `listener` (connect_filter.hpp's): with `receive`, on a receiving thread of its
    /// own; else the caller receives and hands each connect to `serve` (under a process cap
    /// the fork gate receives, and `listener` is a copy of its listener: the answers go
    /// there). Null when no thread or descriptor could be had.
    static std::shared_ptr<connect_broker> start(backend::unique_fd listener,
                                                 std::vector<proto::socket_file> allowed,
                                                 bool receive = true);
    /// Answers one received connect, on a thread of its own; never blocks. At most 64 are
    /// served at once; one more is answered EAGAIN at once.
    void serve(const seccomp_notif& n);
    ~connect_broker();
    /// The tree is gone (no call can come): calls still in flight are interrupted, and end
    /// on their own threads; never blocks on them.
    void stop();

    struct state;

private:
    explicit connect_broker(std::shared_ptr<state> s);
    std::shared_ptr<state> s_;
};

} // namespace sandbox::detail

#endif // SANDBOX_HELPER_CONNECT_BROKER_HPP
