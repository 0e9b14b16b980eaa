// net/relay.cpp: the byte pump between a client and its destination.
//
// Each direction waits for readability with no buffer, then moves chunks inside the kernel
// with splice(2): source socket -> a pipe -> destination socket, the bytes never copied
// through the proxy's memory. The pipe is borrowed from the thread's pool when the source
// has bytes and given back as soon as it is empty, so an idle direction holds none; a
// stalled one holds its pipe (at most one pipe's bytes, kernel memory) and waits for the
// receiver to be writable, while the rest stays in the source's kernel buffer and TCP's
// flow control slows the sender. When no pipe can be had (descriptors exhausted), the
// direction copies instead: it peeks at what the source has into the thread's scratch
// buffer, writes what the receiver accepts now, and drops exactly that much from the
// source. A handler moves a few chunks before it lets the loop run others, so the loop it
// shares (the caller's) stays responsive.
// EOF on one side is passed on as shutdown(send) on the other (half-close per direction).
// One timer, re-armed only when it fires, closes a tunnel with no traffic either way.
#include "relay.hpp"

#include "exec/input_writer.hpp"

#include <sandbox/unique_fd.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sandbox::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t buffer_bytes = 256 * 1024;

/// The copy buffer of this thread: used only between two suspensions (a chunk is peeked,
/// written and dropped in one go), so one per thread serves every tunnel of the loop.
char* scratch_buffer()
{
    thread_local const std::unique_ptr<char[]> buf =
        std::make_unique_for_overwrite<char[]>(buffer_bytes);
    return buf.get();
}

struct relay_state
{
    tcp::socket& client;
    tcp::socket& server;
    clock_type::time_point last = clock_type::now();
    std::string reason{};
    bool stopping = false;
};

/// Ends every direction: the first reason wins; pending operations are cancelled.
void finish(relay_state& st, std::string_view reason)
{
    if (st.reason.empty())
        st.reason = std::string(reason);
    st.stopping = true;
    boost::system::error_code ignored;
    st.client.cancel(ignored);
    st.server.cancel(ignored);
}

/// The bytes a splice pipe holds: one chunk (a 64 KiB pipe cost 10-15 % more cpu per byte).
constexpr int pipe_bytes = 256 * 1024;

/// Whether this process is exempt from the user's pipe allowance (fs.pipe-user-pages-soft:
/// past it, every new pipe of the uid, the commands' own included, gets two pages): it holds
/// CAP_SYS_RESOURCE or CAP_SYS_ADMIN in its effective set. Not "euid 0": root in a container
/// without those capabilities is bound like anyone.
bool exempt_from_pipe_allowance()
{
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("CapEff:", 0) == 0)
        {
            const std::uint64_t eff = std::strtoull(line.c_str() + 7, nullptr, 16);
            constexpr std::uint64_t sys_admin = std::uint64_t{1} << 21;
            constexpr std::uint64_t sys_resource = std::uint64_t{1} << 24;
            return (eff & (sys_admin | sys_resource)) != 0;
        }
    return false;
}

/// Whether pipes may be enlarged past the kernel's default (64 KiB): only when that spends no
/// user's allowance.
bool may_enlarge_pipes()
{
    static const bool exempt = exempt_from_pipe_allowance();
    return exempt;
}

/// Pipes open for splicing in this process (in use or kept): at most a sixteenth of the
/// descriptor limit (a pipe is two descriptors; the tunnel budget counts two per tunnel and
/// leaves an eighth of the limit in reserve, and the pipes take at most half of that
/// reserve), so spawns, accepts and dials never find the table full because of them; and,
/// for a user the pipe allowance binds, at most a quarter of that allowance. Past it,
/// directions copy.
tunnel_budget& pipe_budget()
{
    static tunnel_budget budget([] {
        rlimit r{};
        const std::uint64_t nofile =
            ::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY ? 1024 : r.rlim_cur;
        std::uint64_t pipes = nofile / 32;
        std::uint64_t soft_pages = 0;
        if (!may_enlarge_pipes() &&
            (std::ifstream("/proc/sys/fs/pipe-user-pages-soft") >> soft_pages) && soft_pages > 0)
            pipes = std::min<std::uint64_t>(pipes, soft_pages / 4 / 16); // 16 pages a pipe
        return static_cast<std::size_t>(pipes);
    }());
    return budget;
}

/// A pipe that carries one direction's chunk from socket to socket inside the kernel,
/// counted in `pipe_budget()` while open.
class splice_pipe
{
public:
    /// A new pipe, or none (the budget spent, or the descriptors exhausted).
    static std::optional<splice_pipe> open()
    {
        if (!pipe_budget().try_acquire())
            return std::nullopt;
        int fds[2];
        if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
        {
            pipe_budget().release();
            return std::nullopt;
        }
        // Larger than the default when that spends no user's allowance (fewer system calls
        // per byte); the default works too.
        if (may_enlarge_pipes())
            (void)::fcntl(fds[1], F_SETPIPE_SZ, pipe_bytes);
        return splice_pipe(unique_fd(fds[0]), unique_fd(fds[1]));
    }

    splice_pipe(splice_pipe&& o) noexcept = default;
    splice_pipe& operator=(splice_pipe&&) = delete;
    ~splice_pipe()
    {
        if (read_end_)
            pipe_budget().release();
    }

    int read_end() const noexcept { return read_end_.get(); }
    int write_end() const noexcept { return write_end_.get(); }

private:
    splice_pipe(unique_fd r, unique_fd w) noexcept
        : read_end_(std::move(r)), write_end_(std::move(w))
    {}

    unique_fd read_end_;
    unique_fd write_end_;
};

/// Empty pipes kept for the directions of this thread's tunnels that become active: a pipe
/// is two descriptors and a few system calls to make, so an active direction borrows one
/// and an idle one gives it back. At most 32 are kept, and at most an eighth of the
/// process's pipe budget (other threads' relays need pipes too).
class pipe_pool
{
public:
    pipe_pool() : kept_(std::min<std::size_t>(32, pipe_budget().limit() / 8))
    {
        idle_.reserve(kept_);
    }

    std::optional<splice_pipe> take()
    {
        if (idle_.empty())
            return splice_pipe::open();
        splice_pipe p = std::move(idle_.back());
        idle_.pop_back();
        return p;
    }

    void give(splice_pipe p) noexcept
    {
        if (idle_.size() < kept_) // never reallocates: reserved
            idle_.push_back(std::move(p));
    }

    std::size_t size() const noexcept { return idle_.size(); }
    void clear() noexcept { idle_.clear(); }

private:
    std::size_t kept_;
    std::vector<splice_pipe> idle_;
};

pipe_pool& thread_pipes()
{
    thread_local pipe_pool pool;
    return pool;
}

/// One direction's pipe and the bytes in it not yet written on. An empty pipe goes back to
/// the pool when the direction waits for its source (`give_back`); one the direction still
/// holds when the relay ends is closed, with any bytes in it (as the sockets' kernel buffers
/// are). The destructor only closes: a frame destroyed after its thread's pool is gone
/// never touches the pool.
struct direction
{
    std::optional<splice_pipe> pipe{};
    std::size_t held = 0;

    void give_back() noexcept
    {
        if (pipe && held == 0)
            thread_pipes().give(std::move(*pipe));
        pipe.reset();
        held = 0;
    }
};

/// Writes `n` bytes: at once when the receiver has room (no wait, no post), else the rest
/// asynchronously. False when the relay must end. Only for `first`, which the relay already
/// holds (a request's pipelined bytes, an upstream's early bytes: at most a head's size).
asio::awaitable<bool> write_chunk(relay_state& st, tcp::socket& to, const char* data,
                                  std::size_t n, std::uint64_t& count)
{
    boost::system::error_code ec;
    const std::size_t now = to.write_some(asio::buffer(data, n), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again)
    {
        if (!st.stopping)
            finish(st, "reset");
        co_return false;
    }
    count += now;
    if (now == n)
        co_return true;
    auto [wec, written] = co_await asio::async_write(to, asio::buffer(data + now, n - now),
                                                     asio::as_tuple(asio::use_awaitable));
    count += written;
    if (wec)
    {
        if (!st.stopping)
            finish(st, "reset");
        co_return false;
    }
    co_return true;
}

/// Writes `first` (bytes already read for this direction). False when the relay must end.
asio::awaitable<bool> write_first(relay_state& st, tcp::socket& to, std::string first,
                                  std::uint64_t& count)
{
    bool ok = true;
    if (!first.empty())
    {
        // In its own statement: GCC 12 miscompiles this co_await as an if's condition here.
        ok = co_await write_chunk(st, to, first.data(), first.size(), count);
        st.last = clock_type::now();
    }
    co_return ok;
}

/// What a direction waits for next.
enum class next_wait
{
    readable, ///< `from` has nothing more now
    writable, ///< `to` is full: the bytes stay in `from`'s kernel buffer meanwhile
    yield,    ///< moved its share of this turn: let the loop run others
    ended,    ///< EOF passed on, an error, or the relay stopping
};

next_wait broken(relay_state& st)
{
    finish(st, "reset");
    return next_wait::ended;
}

/// Calls `call` (a system call: < 0 with errno on failure) again while it is interrupted.
template <class Call> ssize_t retrying(Call call)
{
    ssize_t n;
    while ((n = call()) < 0 && errno == EINTR)
    {}
    return n;
}

/// Moves one chunk without ever holding bytes the receiver did not take: peeks at what
/// `from` has (MSG_PEEK), writes what `to` takes now, then drops exactly that much from
/// `from` (MSG_TRUNC discards on TCP without a copy). Whatever `to` refuses stays in the
/// kernel's receive buffer of `from`, so a stalled direction holds no memory of ours, and
/// the sender is slowed by TCP's own flow control. The buffer is the thread's one scratch
/// buffer, never held across a suspension.
next_wait move_chunk(relay_state& st, tcp::socket& from, tcp::socket& to, std::uint64_t& count)
{
    char* buf = scratch_buffer();
    const int fd = from.native_handle();
    const ssize_t n =
        retrying([&] { return ::recv(fd, buf, buffer_bytes, MSG_PEEK | MSG_DONTWAIT); });
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return next_wait::readable;
    if (n == 0)
    {
        boost::system::error_code ec;
        to.shutdown(tcp::socket::shutdown_send, ec);
        return next_wait::ended;
    }
    if (n < 0)
        return broken(st);
    boost::system::error_code ec;
    const std::size_t wrote = to.write_some(asio::buffer(buf, static_cast<std::size_t>(n)), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again)
        return broken(st);
    if (wrote > 0)
    {
        const ssize_t dropped =
            retrying([&] { return ::recv(fd, nullptr, wrote, MSG_TRUNC | MSG_DONTWAIT); });
        if (dropped != static_cast<ssize_t>(wrote))
            return broken(st);
        count += wrote;
        st.last = clock_type::now();
    }
    return wrote < static_cast<std::size_t>(n) ? next_wait::writable : next_wait::yield;
}

constexpr unsigned int splice_flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;

/// Writes on what the pipe holds. Whatever `to` does not take now stays in the pipe. A
/// receiver that is gone fails the splice with EPIPE, never a SIGPIPE in the host process.
next_wait drain_pipe(relay_state& st, direction& d, tcp::socket& to, std::uint64_t& count)
{
    const ssize_t n =
        detail::splice_no_sigpipe(d.pipe->read_end(), to.native_handle(), d.held, splice_flags);
    if (n < 0)
        return errno == EAGAIN ? next_wait::writable : broken(st);
    if (n == 0) // a pipe holding bytes never reads as empty: give up rather than spin
        return broken(st);
    d.held -= static_cast<std::size_t>(n);
    count += static_cast<std::uint64_t>(n);
    st.last = clock_type::now();
    return d.held > 0 ? next_wait::writable : next_wait::yield;
}

/// recv(2) of one byte, peeking, without waiting: > 0 bytes wait, 0 the end, < 0 (errno) none.
ssize_t peek_one(tcp::socket& from)
{
    char c;
    return retrying([&] { return ::recv(from.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT); });
}

/// Moves one chunk through the direction's pipe: what the pipe still holds first, then what
/// `from` has, into the empty pipe. When the splice moves nothing, the pipe goes back to the
/// pool and one peek tells why: nothing there (wait for it), the end, or bytes behind urgent
/// data (MSG_OOB), where TCP's splice stops (saying EAGAIN, or 0 once the sender's FIN is
/// in) while a copy steps over the mark: the last two go to `move_chunk`, which passes the
/// end on or copies the chunk. Without a pipe to be had, the chunk is copied too.
next_wait splice_chunk(relay_state& st, direction& d, tcp::socket& from, tcp::socket& to,
                       std::uint64_t& count)
{
    if (d.held > 0)
        return drain_pipe(st, d, to, count);
    if (!d.pipe)
        if (auto p = thread_pipes().take())
            d.pipe.emplace(std::move(*p));
    if (!d.pipe)
        return move_chunk(st, from, to, count);
    const ssize_t n = retrying([&] {
        return ::splice(from.native_handle(), nullptr, d.pipe->write_end(), nullptr, pipe_bytes,
                        splice_flags);
    });
    if (n > 0)
    {
        d.held = static_cast<std::size_t>(n);
        return drain_pipe(st, d, to, count);
    }
    if (n < 0 && errno != EAGAIN)
        return broken(st);
    d.give_back();
    if (peek_one(from) >= 0)
        return move_chunk(st, from, to, count);
    return errno == EAGAIN || errno == EWOULDBLOCK ? next_wait::readable : broken(st);
}

/// Moves one chunk of what `from` has now, then lets the loop run others (`yield`: a post):
/// 256 KiB, tens of microseconds of splicing or copying, so the loop it shares stays
/// responsive. (Measured, net_bench: two chunks per turn moved no more bytes and doubled the
/// loop's p99 lateness.) Returns what to wait for.
next_wait move_ready(relay_state& st, direction& d, tcp::socket& from, tcp::socket& to,
                     std::uint64_t& count)
{
    return st.stopping ? next_wait::ended : splice_chunk(st, d, from, to, count);
}

/// Waits for what `w` names. False when the relay is ending.
asio::awaitable<bool> wait_for(relay_state& st, next_wait w, tcp::socket& from, tcp::socket& to)
{
    if (w == next_wait::yield)
    {
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        co_return !st.stopping;
    }
    tcp::socket& s = w == next_wait::readable ? from : to;
    const auto what = w == next_wait::readable ? tcp::socket::wait_read : tcp::socket::wait_write;
    auto [ec] = co_await s.async_wait(what, asio::as_tuple(asio::use_awaitable));
    if (ec)
    {
        if (!st.stopping && ec != asio::error::operation_aborted)
            finish(st, "reset");
        co_return false;
    }
    co_return !st.stopping;
}

/// Runs `check` on the first bytes of `from` (added to `first`): false when it ended the
/// relay, or the relay is ending.
asio::awaitable<bool> judge_first(relay_state& st, tcp::socket& from, std::string& first,
                                  const first_flight& check)
{
    if (!check)
        co_return true;
    if (st.stopping)
        co_return false;
    const std::string refusal = co_await check(from, first, st.stopping);
    if (!refusal.empty() && !st.stopping)
        finish(st, refusal);
    co_return !st.stopping;
}

/// One direction, until EOF (passed on), an error or the relay stopping; `check` first.
asio::awaitable<void> pump(relay_state& st, tcp::socket& from, tcp::socket& to, std::string first,
                           std::uint64_t& count, const first_flight& check = {})
{
    if (!co_await judge_first(st, from, first, check))
        co_return;
    if (!co_await write_first(st, to, std::move(first), count))
        co_return;
    direction d;
    next_wait w = next_wait::readable;
    while (co_await wait_for(st, w, from, to))
    {
        w = move_ready(st, d, from, to, count);
        if (w == next_wait::ended)
            co_return;
    }
}

/// Returns when the tunnel was idle for `timeout` (ending the relay), or when cancelled.
asio::awaitable<void> watch_idle(relay_state& st, std::chrono::milliseconds timeout)
{
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (!st.stopping)
    {
        timer.expires_at(st.last + timeout);
        auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        if (ec)
            co_return;
        if (clock_type::now() >= st.last + timeout)
        {
            finish(st, "idle_timeout");
            co_return;
        }
    }
}

void close_sockets(relay_state& st, bool close_client)
{
    boost::system::error_code ignored;
    if (close_client)
        st.client.close(ignored);
    st.server.close(ignored);
}

/// Runs `directions` against the idle watch and works out why it ended.
template <class Directions>
asio::awaitable<std::string> run_relay(relay_state& st, Directions directions,
                                       std::chrono::milliseconds idle_timeout, bool close_client)
{
    using namespace asio::experimental::awaitable_operators;
    bool thrown = false;
    try
    {
        co_await (std::move(directions) || watch_idle(st, idle_timeout));
    }
    catch (const boost::system::system_error&)
    {
        thrown = true;
    }
    const auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
        st.reason = "stopped";
    else if (thrown && st.reason.empty())
        st.reason = "reset";
    else if (st.reason.empty())
        st.reason = "eof";
    close_sockets(st, close_client);
    co_return st.reason;
}

void make_non_blocking(tcp::socket& s)
{
    boost::system::error_code ignored;
    if (!s.non_blocking()) // no system call when it is already
        s.non_blocking(true, ignored);
}

} // namespace

asio::awaitable<relay_totals> relay(tcp::socket& client, tcp::socket& server, std::string to_server,
                                    std::string to_client, std::chrono::milliseconds idle_timeout,
                                    first_flight check)
{
    using namespace asio::experimental::awaitable_operators;
    relay_totals t;
    relay_state st{client, server};
    make_non_blocking(client);
    make_non_blocking(server);
    t.reason = co_await run_relay(st,
                                  pump(st, client, server, std::move(to_server), t.up, check) &&
                                      pump(st, server, client, std::move(to_client), t.down),
                                  idle_timeout, true);
    co_return t;
}

asio::awaitable<relay_totals> relay_one_way(tcp::socket& from, tcp::socket& to,
                                            std::string first,
                                            std::chrono::milliseconds idle_timeout)
{
    relay_totals t;
    relay_state st{to, from};
    make_non_blocking(from);
    make_non_blocking(to); // its writes are tried at once: a full receiver must not block
    t.reason = co_await run_relay(st, pump(st, from, to, std::move(first), t.down), idle_timeout,
                                  false);
    co_return t;
}

std::size_t relay_pipes_borrowed() noexcept
{
    return pipe_budget().in_use() - thread_pipes().size();
}

void relay_drop_kept_pipes() noexcept
{
    thread_pipes().clear();
}

} // namespace sandbox::net
