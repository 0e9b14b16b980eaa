// lib/supervisor/cap_watch.cpp: a cap watch (sandbox/backend/cap_watch.hpp) from the
// library's side: pin the process with a pidfd, hand it to an idle worker as a plan with
// proto::opt_watch, and wait on the caller's executor for the worker's one report.
#include "front_end.hpp"
#include "supervisor/client.hpp"

#include <sandbox/backend/cap_watch.hpp>

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include <sys/syscall.h>
#include <unistd.h>

namespace sandbox::backend {

namespace {

namespace asio = boost::asio;
namespace proto = sandbox::detail::proto;
using sandbox::detail::supervisor_service;

[[noreturn]] void fail(errc code, std::string message, std::string limit = {})
{
    throw_exception_from_error(make_failure(code, std::move(message), std::move(limit)),
                               BOOST_CURRENT_LOCATION);
}

[[noreturn]] void fail_os(errc code, const std::string& what, int err)
{
    throw_exception_from_error(make_os_failure(code, what, err), BOOST_CURRENT_LOCATION);
}

void check(pid_t pid, const cap_watch_options& o)
{
    if (pid < 1)
        fail(errc::validation, "a cap watch needs the pid of a process (got " +
                                   std::to_string(pid) + ")", "pid");
    if (!o.caps.any())
        fail(errc::validation, "a cap watch needs at least one cap", "caps");
    if (o.sample_interval < std::chrono::milliseconds(1))
        fail(errc::validation, "the sample interval of a cap watch is 1 ms at least",
             "sample_interval");
}

// A channel to an idle worker, on `ex` (the service may answer inline).
asio::awaitable<outcome<unique_fd>> acquire(supervisor_service& svc, asio::any_io_executor ex)
{
    co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&,
                                            void(outcome<unique_fd>)>(
        [&svc, ex](auto handler) {
            auto h = std::make_shared<decltype(handler)>(std::move(handler));
            svc.async_acquire(ex, [h, ex](outcome<unique_fd> got) {
                asio::post(ex, [h, got = std::move(got)]() mutable { (*h)(std::move(got)); });
            });
        },
        asio::use_awaitable);
}

// The worker's one answer to the plan: its exit report (and the text after it), or the
// errno of a refused plan.
struct answer
{
    proto::exit_report_msg report{};
    std::string failure;
    int refused = 0;
};

asio::awaitable<answer> read_answer(asio::posix::stream_descriptor& chan)
{
    for (;;)
    {
        co_await chan.async_wait(asio::posix::stream_descriptor::wait_read, asio::use_awaitable);
        proto::message m;
        bool eof = false;
        const int rc = proto::receive_message(chan.native_handle(), m, eof);
        if (rc == EAGAIN)
            continue;
        if (eof || rc != 0)
            fail(errc::internal, "the supervisor worker holding the caps was lost", "supervisor");
        answer a;
        if (m.head.type == proto::msg_type::spawn_failed)
        {
            proto::spawn_failed_msg f;
            a.refused = proto::from_bytes(m.payload, f) ? f.error : EPROTO;
            co_return a;
        }
        if (m.head.type == proto::msg_type::exit_report && proto::from_bytes(m.payload, a.report))
        {
            a.failure = m.payload.substr(sizeof(proto::exit_report_msg));
            co_return a;
        }
    }
}

cap_watch_result result_of(pid_t pid, const answer& a)
{
    const auto& r = a.report;
    if (r.reason == proto::end_reason::unenforceable)
        fail(errc::not_available,
             "the caps of process " + std::to_string(pid) +
                 " could not be held, so its tree was killed: " +
                 (a.failure.empty() ? std::string("sampling failed") : a.failure),
             "sampling");
    if (r.reason != proto::end_reason::natural && r.reason != proto::end_reason::budget)
        fail(errc::internal, "the supervisor worker holding the caps was lost", "supervisor");
    cap_watch_result out;
    if (r.reason == proto::end_reason::budget)
    {
        out.exceeded = static_cast<budget_kind>(r.budget_which);
        out.observed = r.observed;
        out.configured = r.configured;
    }
    out.peak_memory_bytes = r.peak_memory_bytes;
    out.cpu = std::chrono::nanoseconds(r.cpu_ns);
    out.samples = r.samples;
    out.killed = r.killed_after_exit;
    return out;
}

asio::awaitable<cap_watch_result> watch_body(pid_t pid, cap_watch_options o)
{
    check(pid, o);
    auto ex = co_await asio::this_coro::executor;
    auto& svc = asio::use_service<supervisor_service>(asio::query(ex, asio::execution::context));
    unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    if (!pidfd)
    {
        if (errno == ESRCH)
            fail(errc::not_found, "no process " + std::to_string(pid) + " to watch", "pid");
        fail_os(errc::internal, "cannot pin process " + std::to_string(pid), errno);
    }
    auto channel = co_await acquire(svc, ex);
    if (!channel)
        throw_exception_from_error(channel.error(), BOOST_CURRENT_LOCATION);
    proto::plan p;
    p.fixed.options = proto::opt_watch;
    p.fixed.caps = o.caps;
    p.fixed.sample_interval_ns = o.sample_interval.count();
    const int fds[1] = {pidfd.get()};
    if (int rc = proto::send_message(channel->get(), proto::msg_type::plan_chunk, proto::flag_last,
                                     proto::encode_plan(p), fds);
        rc != 0)
        fail_os(errc::internal, "cannot hand the process to a supervisor worker", rc);
    pidfd.reset();
    asio::posix::stream_descriptor chan(ex, channel->release());
    svc.on_capped_start();
    answer a;
    try
    {
        a = co_await read_answer(chan);
    }
    catch (...)
    {
        svc.on_capped_end(nullptr); // cancelled or lost: the channel closes, the worker goes
        throw;
    }
    svc.on_capped_end(a.refused == 0 ? &a.report : nullptr);
    if (a.refused == ESRCH)
        fail(errc::not_found, "process " + std::to_string(pid) + " ended before the watch began",
             "pid");
    if (a.refused != 0)
        fail_os(errc::internal, "the supervisor worker refused the watch", a.refused);
    auto out = result_of(pid, a);
    svc.release(unique_fd(chan.release())); // the worker is idle again
    co_return out;
}

} // namespace

namespace detail {

void async_watch_caps_impl(asio::any_io_executor ex, pid_t pid, cap_watch_options options,
                           sandbox::detail::diagnostics_sink sink,
                           sandbox::detail::value_handler<cap_watch_result> h)
{
    sandbox::detail::launch(ex, watch_body(pid, std::move(options)), std::move(sink),
                            std::move(h));
}

} // namespace detail

} // namespace sandbox::backend
