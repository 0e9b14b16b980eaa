// lib/session/session.cpp: a session is the supervised-child core (lib/exec/supervision.hpp)
// with the output log as its sink, a stdin pipe (or the terminal) kept open for write(), and
// waiters parked on one timer that every change cancels.
#include <sandbox/process_manager.hpp>
#include <sandbox/session.hpp>

#include "front_end.hpp"
#include "session/session_state.hpp"
#include "session/watch_cursor.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>
#include <limits>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

namespace sandbox {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using detail::session_state;

namespace {

constexpr std::size_t watch_chunk = 64 * 1024;
constexpr auto close_bound = 5s;

using detail::throw_failure;

[[noreturn]] void throw_os(int err, const std::string& message)
{
    diagnostics d;
    d.message = message;
    d.cause = boost::system::error_code(err, boost::system::system_category());
    throw error(d.cause, std::move(d));
}

void check_open(const session_state& st)
{
    if (st.closed || st.closing)
        throw_failure(errc::session_closed, "session " + st.id + " is closed");
}

int signal_number(session_signal s)
{
    switch (s)
    {
    case session_signal::interrupt: return SIGINT;
    case session_signal::terminate: return SIGTERM;
    case session_signal::kill: return SIGKILL;
    case session_signal::hangup: return SIGHUP;
    case session_signal::user1: return SIGUSR1;
    case session_signal::user2: return SIGUSR2;
    }
    return 0;
}

// Types one control character of the terminal (VINTR, VEOF) into it.
boost::system::error_code type_control(int master, int which)
{
    termios t{};
    if (::tcgetattr(master, &t) != 0)
        return {errno, boost::system::system_category()};
    const char c = static_cast<char>(t.c_cc[which]);
    if (detail::write_no_sigpipe(master, &c, 1) != 1)
        return {errno, boost::system::system_category()};
    return {};
}

} // namespace

// ---- state -------------------------------------------------------------------------------

namespace detail {

void throw_failure(errc code, std::string message, std::string limit)
{
    failure f = make_failure(code, std::move(message), std::move(limit));
    throw error(f.code, std::move(f.diag));
}

void session_state::finish_close()
{
    if (closed)
        return;
    closed = true;
    closing = false;
    boost::system::error_code ignored;
    input.close(ignored);
    notify();
    on_exit_hook = nullptr;
    if (auto hook = std::move(on_close_hook))
        hook();
}

asio::awaitable<boost::system::error_code> session_state::next_change()
{
    boost::system::error_code ec;
    co_await changed.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
        co_return asio::error::operation_aborted;
    co_return boost::system::error_code{};
}

asio::awaitable<void> session_state::wait_change()
{
    if (auto ec = co_await next_change())
        throw boost::system::system_error(ec);
}

void session_state::on_output(output_stream s, std::string_view data)
{
    log.append(s, data);
    notify();
}

void session_state::on_done(boost::system::error_code ec, exec_result r)
{
    exited = true;
    if (pid == 0)
        start_error = ec ? ec : make_error_code(errc::internal);
    exit = std::move(r);
    boost::system::error_code ignored;
    input.close(ignored); // nothing can be written any more: give the descriptor back
    notify();
    if (on_exit_hook)
        on_exit_hook();
}

} // namespace detail

// ---- start -------------------------------------------------------------------------------

namespace {

// The stdin pipe: the command's end travels in the plan, ours stays for write().
outcome<void> open_input(session_state& st, backend::spawn_plan& plan)
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
    {
        failure f = make_failure(errc::internal, "cannot create the session's stdin pipe");
        f.diag.cause = {errno, boost::system::system_category()};
        return f;
    }
    plan.stdin_fd = std::make_shared<const unique_fd>(fds[0]);
    ::fcntl(fds[1], F_SETFL, ::fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    st.input.assign(fds[1]);
    return {};
}

void start_child(const std::shared_ptr<session_state>& st, backend::spawn_plan plan)
{
    std::weak_ptr<session_state> w = st;
    plan.on_output = [w](output_stream s, std::string_view data) {
        if (auto p = w.lock())
            p->on_output(s, data);
        return true;
    };
    st->child = detail::start_supervised(
        st->ex, std::move(plan),
        [w](int pid) {
            if (auto p = w.lock())
            {
                p->pid = pid;
                p->notify();
            }
        },
        [w](boost::system::error_code ec, exec_result r) {
            if (auto p = w.lock())
                p->on_done(ec, std::move(r));
        });
}

// Our own copy of the terminal's master for writes and resizes (reads stay with the core).
// Without it writes fail (broken_pipe) and resizes are not_available; nothing throws here.
void copy_terminal(session_state& st)
{
    const int master = st.child->terminal_fd();
    const int copy = master >= 0 ? ::fcntl(master, F_DUPFD_CLOEXEC, 3) : -1;
    if (copy < 0)
        return;
    boost::system::error_code ec;
    st.input.assign(copy, ec);
    if (ec)
        ::close(copy);
}

} // namespace

asio::awaitable<outcome<std::shared_ptr<session>>> start_session(asio::any_io_executor ex,
                                                                 std::string id,
                                                                 std::vector<std::string> argv,
                                                                 backend::spawn_plan plan)
{
    if (plan.input || plan.stdin_fd)
        co_return make_failure(errc::validation,
                               "a session takes its input through write(), not options", "input");
    if (plan.on_output || plan.on_output_async)
        co_return make_failure(
            errc::validation, "a session's output goes to its log (read, watch), not to a callback",
            "on_output");
    const std::uint64_t cap = std::min<std::uint64_t>(plan.max_output_bytes,
                                                      std::numeric_limits<std::size_t>::max());
    auto st = std::make_shared<session_state>(ex, static_cast<std::size_t>(cap));
    st->id = std::move(id);
    st->argv = std::move(argv);
    st->tty = plan.tty.has_value();
    st->started_at = std::chrono::system_clock::now();
    if (!st->tty)
        if (auto r = open_input(*st, plan); !r)
            co_return std::move(r).error();
    auto s = std::make_shared<session>(st); // from here on, dropping it kills the tree
    start_child(st, std::move(plan));
    while (st->pid == 0 && !st->exited)
        if (auto ec = co_await st->next_change()) // cancelled: dropping `s` kills the tree
        {
            failure f;
            f.code = ec;
            f.diag.message = "cancelled while the session started; what it started was killed";
            co_return f;
        }
    if (st->pid == 0)
        co_return failure{st->start_error, st->exit.diag};
    if (st->tty) // open by now (not before: a worker may come later, an instance's)
        copy_terminal(*st);
    co_return s;
}

// ---- session -----------------------------------------------------------------------------

session::session(std::shared_ptr<session_state> st) noexcept : st_(std::move(st)) {}

session::~session()
{
    if (!st_)
        return;
    if (!st_->exited && st_->child)
        st_->child->terminate(0ns); // nothing outlives its last handle
    st_->finish_close();            // watchers still waiting get their closed event
}

session::executor_type session::get_executor() const noexcept { return st_->ex; }
const std::string& session::id() const noexcept { return st_->id; }
int session::pid() const noexcept { return st_->pid; }
bool session::is_tty() const noexcept { return st_->tty; }
bool session::running() const noexcept { return !st_->exited; }
bool session::closed() const noexcept { return st_->closed; }
std::uint64_t session::output_end() const noexcept { return st_->log.end(); }

session_info session::info() const
{
    session_info i;
    i.id = st_->id;
    i.argv = st_->argv;
    i.tty = st_->tty;
    i.pid = st_->pid;
    i.started_at = st_->started_at;
    i.running = !st_->exited;
    if (st_->exited)
        i.exit = st_->exit;
    return i;
}

namespace {

boost::system::error_code close_input_of(session_state& st)
{
    if (st.closed)
        return errc::session_closed;
    if (st.exited || !st.input.is_open())
        return {};
    if (st.writing && !st.tty)
    {
        st.close_input_after_write = true; // after the write in progress, as issued
        return {};
    }
    if (st.tty)
        return type_control(st.input.native_handle(), VEOF);
    boost::system::error_code ignored;
    st.input.close(ignored);
    st.notify(); // a write parked on the pipe learns it is gone
    return {};
}

boost::system::error_code resize_of(session_state& st, terminal_size size)
{
    if (size.rows == 0 || size.cols == 0)
        return errc::validation;
    if (st.closed)
        return errc::session_closed;
    if (!st.tty || st.exited || !st.input.is_open())
        return errc::not_available;
    winsize ws{};
    ws.ws_row = size.rows;
    ws.ws_col = size.cols;
    if (::ioctl(st.input.native_handle(), TIOCSWINSZ, &ws) != 0)
        return {errno, boost::system::system_category()};
    return {};
}

boost::system::error_code signal_of(session_state& st, session_signal sig)
{
    const int signo = signal_number(sig);
    if (signo == 0)
        return errc::validation;
    if (st.closed)
        return errc::session_closed;
    if (st.exited || !st.child)
        return {ESRCH, boost::system::system_category()};
    if (sig == session_signal::interrupt && st.tty && st.input.is_open())
        return type_control(st.input.native_handle(), VINTR);
    if (!st.child->signal(signo))
        return {ESRCH, boost::system::system_category()}; // its worker already reported
    return {};
}

} // namespace

boost::system::error_code session::close_input() { return close_input_of(*st_); }
boost::system::error_code session::resize(terminal_size size) { return resize_of(*st_, size); }
boost::system::error_code session::signal(session_signal sig) { return signal_of(*st_, sig); }

// ---- operation bodies: each runs on the session's executor --------------------------------

namespace {

asio::awaitable<session_output> read_body(std::shared_ptr<session_state> st, std::uint64_t from,
                                          std::size_t max_bytes)
{
    if (max_bytes == 0)
        throw_failure(errc::validation, "read needs max_bytes > 0", "max_bytes");
    for (;;)
    {
        check_open(*st);
        auto pieces = st->log.read(from, max_bytes);
        if (!pieces)
            throw error(pieces.error().code, pieces.error().diag);
        session_output out;
        out.next = from;
        for (auto& p : *pieces)
        {
            out.next += p.data.size();
            out.chunks.push_back({p.stream, p.offset, std::move(p.data)});
        }
        out.eof = st->exited && out.next == st->log.end();
        if (!out.chunks.empty() || st->exited)
            co_return out;
        co_await st->wait_change();
    }
}

asio::awaitable<void> write_body(std::shared_ptr<session_state> st, std::string data)
{
    check_open(*st);
    if (data.empty())
        co_return;
    while (st->writing) // one write at a time, in the order issued
    {
        co_await st->wait_change();
        check_open(*st);
    }
    if (st->exited || !st->input.is_open())
        throw_os(EPIPE, st->exited ? "the command has ended" : "the session's input is closed");
    st->writing = true;
    struct release
    {
        session_state& s;
        ~release()
        {
            s.writing = false;
            if (std::exchange(s.close_input_after_write, false) && !s.tty)
            {
                boost::system::error_code ignored;
                s.input.close(ignored);
            }
            s.notify();
        }
    } guard{*st};
    std::size_t off = 0;
    while (off < data.size())
    {
        const int err = detail::write_input(st->input.native_handle(), data, off);
        if (err == 0)
            break;
        if (err != EAGAIN)
            // A terminal whose command has gone says EIO where a pipe says EPIPE.
            throw_os(st->tty && err == EIO ? EPIPE : err,
                     "writing to the command's input failed after " + std::to_string(off) +
                         " bytes");
        boost::system::error_code ec;
        co_await st->input.async_wait(asio::posix::stream_descriptor::wait_write,
                                      asio::redirect_error(asio::use_awaitable, ec));
        auto cs = co_await asio::this_coro::cancellation_state;
        if (cs.cancelled() != asio::cancellation_type::none)
            throw boost::system::system_error(asio::error::operation_aborted);
        check_open(*st);
        if (ec || !st->input.is_open())
            throw_os(EPIPE, "the session's input was closed after " + std::to_string(off) +
                                " bytes were written");
    }
}

asio::awaitable<exec_result> terminate_body(std::shared_ptr<session_state> st,
                                            std::chrono::nanoseconds grace)
{
    check_open(*st);
    if (!st->exited)
        st->child->terminate(std::max(grace, 0ns));
    while (!st->exited)
        co_await st->wait_change();
    co_return st->exit;
}

asio::awaitable<exec_result> wait_body(std::shared_ptr<session_state> st)
{
    while (!st->exited)
        co_await st->wait_change();
    co_return st->exit;
}

asio::awaitable<void> close_body(std::shared_ptr<session_state> st)
{
    if (st->closed)
        co_return;
    if (st->closing) // another close is under way: done when it is
    {
        while (!st->closed)
            co_await st->wait_change();
        co_return;
    }
    st->closing = true;
    try
    {
        if (!st->exited)
        {
            st->child->terminate(0ns);
            const auto deadline = std::chrono::steady_clock::now() + close_bound;
            asio::steady_timer bound(st->ex, deadline);
            bound.async_wait([w = std::weak_ptr<session_state>(st)](boost::system::error_code ec) {
                if (auto p = w.lock(); p && !ec)
                    p->notify();
            });
            while (!st->exited && std::chrono::steady_clock::now() < deadline)
                co_await st->wait_change();
        }
    }
    catch (...)
    {
        st->finish_close(); // cancelled: the kill is sent, the session is closed anyway
        throw;
    }
    st->finish_close();
}

} // namespace

namespace detail {

// A failed read or next() keeps where to resume: the one gap rule.
void fill_failed(session_output& o, const caught& c)
{
    if (c.code == errc::sequence_gap)
        o.next = static_cast<std::uint64_t>(c.diag.observed);
}

void fill_failed(session_event& e, const caught& c)
{
    if (c.code == errc::sequence_gap)
    {
        e.offset = static_cast<std::uint64_t>(c.diag.observed);
        e.missed_from = static_cast<std::uint64_t>(c.diag.configured);
    }
}

} // namespace detail

// ---- members: the thread rule (work on the session's executor, from any caller) ----------

using detail::on_executor;

asio::awaitable<session_output> session::read(std::uint64_t from, std::size_t max_bytes)
{
    return on_executor(st_->ex, read_body(st_, from, max_bytes));
}

asio::awaitable<void> session::write(std::string data)
{
    return on_executor(st_->ex, write_body(st_, std::move(data)));
}

asio::awaitable<exec_result> session::terminate(std::chrono::nanoseconds grace)
{
    return on_executor(st_->ex, terminate_body(st_, grace));
}

asio::awaitable<exec_result> session::wait() { return on_executor(st_->ex, wait_body(st_)); }

asio::awaitable<void> session::close() { return on_executor(st_->ex, close_body(st_)); }

session_watcher session::watch(std::uint64_t from)
{
    check_open(*st_);
    return session_watcher(st_, from, watch_chunk);
}

session_channel session::watch_channel(channel_options o)
{
    check_open(*st_);
    return session_channel(st_, o);
}

// ---- completion-token front ends (see session.hpp) ----------------------------------------

namespace detail {
namespace {

// A synchronous member, on the session's executor: its error code as an exception.
template <class Op>
asio::awaitable<void> checked(std::shared_ptr<session_state> st, Op op)
{
    if (auto ec = op(*st))
    {
        diagnostics d;
        d.message = ec.message();
        throw error(ec, std::move(d));
    }
    co_return;
}

} // namespace

void async_read_impl(session* s, std::uint64_t from, std::size_t max_bytes,
                     diagnostics_sink sink, value_handler<session_output> h)
{
    auto& st = session_access::state(*s);
    launch(st->ex, read_body(st, from, max_bytes), std::move(sink), std::move(h));
}

void async_write_impl(session* s, std::string data, diagnostics_sink sink, void_handler h)
{
    auto& st = session_access::state(*s);
    launch(st->ex, write_body(st, std::move(data)), std::move(sink), std::move(h));
}

void async_wait_impl(session* s, diagnostics_sink sink, value_handler<exec_result> h)
{
    auto& st = session_access::state(*s);
    launch(st->ex, wait_body(st), std::move(sink), std::move(h));
}

void async_terminate_impl(session* s, std::chrono::nanoseconds grace, diagnostics_sink sink,
                          value_handler<exec_result> h)
{
    auto& st = session_access::state(*s);
    launch(st->ex, terminate_body(st, grace), std::move(sink), std::move(h));
}

void async_close_impl(session* s, diagnostics_sink sink, void_handler h)
{
    auto& st = session_access::state(*s);
    launch(st->ex, close_body(st), std::move(sink), std::move(h));
}

void async_close_input_impl(session* s, diagnostics_sink sink, void_handler h)
{
    auto& st = session_access::state(*s);
    launch(st->ex, checked(st, close_input_of), std::move(sink), std::move(h));
}

void async_resize_impl(session* s, terminal_size size, diagnostics_sink sink, void_handler h)
{
    auto& st = session_access::state(*s);
    auto op = [size](session_state& x) { return resize_of(x, size); };
    launch(st->ex, checked(st, op), std::move(sink), std::move(h));
}

void async_signal_impl(session* s, session_signal sig, diagnostics_sink sink, void_handler h)
{
    auto& st = session_access::state(*s);
    auto op = [sig](session_state& x) { return signal_of(x, sig); };
    launch(st->ex, checked(st, op), std::move(sink), std::move(h));
}

} // namespace detail

} // namespace sandbox
