// test/header/forms.cpp: every form of the front ends that docs/api.md shows compiles (Boost
// 1.81 included, where `co_await` of a `void(std::exception_ptr, T)` operation needs the fix
// in with_diagnostics.hpp). Compiled and linked, never run: the integration tests run them.
#include <sandbox/backend/cap_watch.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/session.hpp>
#include <sandbox/with_diagnostics.hpp>
#include <sandbox/worker_pool.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <array>
#include <future>

namespace asio = boost::asio;
using boost::system::error_code;
using sandbox::exec_result;
using sandbox::session;
using sandbox::session_event;
using sandbox::session_output;

namespace sbx_forms {

// The default token: `co_await` returns the value or throws sandbox::error.
asio::awaitable<void> default_tokens(sandbox::runner& r, sandbox::process_manager& pm,
                                     sandbox::session_spec spec, sandbox::exec_request req)
{
    exec_result res = co_await sandbox::async_exec(r, req);
    std::shared_ptr<session> s = co_await sandbox::async_start(pm, spec);
    session_output o = co_await sandbox::async_read(*s, 0, 4096);
    co_await sandbox::async_write(*s, "ls\n");
    co_await sandbox::async_close_input(*s);
    const sandbox::terminal_size size{40, 120};
    co_await sandbox::async_resize(*s, size);
    co_await sandbox::async_signal(*s, sandbox::session_signal::interrupt);
    auto w = s->watch();
    session_event ev = co_await sandbox::async_next(w);
    std::shared_ptr<session> found = co_await sandbox::async_find(pm, "id");
    res = co_await sandbox::async_terminate(*s, std::chrono::seconds(2));
    res = co_await sandbox::async_wait(*s);
    co_await sandbox::async_close(*s);
    (void)o;
    (void)ev;
    (void)found;
}

// The awaitable members, callable from any executor.
asio::awaitable<void> members(sandbox::runner& r, sandbox::process_manager& pm,
                              sandbox::session_spec spec, sandbox::exec_request req)
{
    exec_result res = co_await r.exec(req);
    std::shared_ptr<session> s = co_await pm.start(spec);
    session_output o = co_await s->read(0, 4096);
    co_await s->write("ls\n");
    auto w = s->watch();
    session_event ev = co_await w.next();
    res = co_await pm.terminate(s->id(), std::chrono::seconds(0));
    res = co_await s->terminate();
    res = co_await s->wait();
    co_await s->close();
    (void)o;
    (void)ev;
}

// Explicit tokens in a coroutine: the (error_code, T) pair, or the exception with diagnostics.
asio::awaitable<void> coroutine_tokens(sandbox::runner& r, session& s, sandbox::exec_request req)
{
    auto [ec, o] = co_await sandbox::async_read(s, 0, 4096, asio::as_tuple(asio::use_awaitable));
    auto [ec2, o2] = co_await sandbox::async_read(s, 0, 4096, asio::as_tuple(asio::deferred));
    o = co_await sandbox::async_read(s, 0, 4096, asio::use_awaitable);
    o = co_await sandbox::async_read(s, 0, 4096, asio::deferred);
    o = co_await sandbox::async_read(s, 0, 4096, sandbox::with_diagnostics(asio::use_awaitable));
    auto [ep, o3] = co_await sandbox::async_read(
        s, 0, 4096, sandbox::with_diagnostics(asio::as_tuple(asio::use_awaitable)));
    co_await sandbox::async_write(s, "x", asio::use_awaitable);
    co_await sandbox::async_write(s, "x", sandbox::with_diagnostics(asio::use_awaitable));
    auto [ec3] = co_await sandbox::async_write(s, "x", asio::as_tuple(asio::deferred));
    auto [ec4, res] = co_await sandbox::async_exec(r, req, asio::as_tuple(asio::use_awaitable));
    (void)ec, (void)ec2, (void)ec3, (void)ec4, (void)ep, (void)o2, (void)o3, (void)res;
}

// Callbacks, futures, cancellation slots, a deferred operation started later, parallel groups.
void callbacks(sandbox::process_manager& pm, sandbox::session_spec spec, session& s,
               sandbox::session_watcher& w, asio::cancellation_signal& sig)
{
    sandbox::async_start(pm, spec, [](error_code, std::shared_ptr<session>) {});
    sandbox::async_read(s, 0, 4096, [](error_code, session_output) {});
    sandbox::async_read(s, 0, 4096,
                        sandbox::with_diagnostics([](std::exception_ptr, session_output) {}));
    sandbox::async_read(s, 0, 4096,
                        asio::bind_cancellation_slot(sig.slot(), [](error_code, session_output) {}));
    sandbox::async_write(s, "x", [](error_code) {});
    sandbox::async_close(s, [](error_code) {});
    sandbox::async_next(w, [](error_code, session_event) {});
    sandbox::async_wait(s, [](error_code, exec_result) {});
    std::future<session_output> f1 = sandbox::async_read(s, 0, 4096, asio::use_future);
    std::future<session_output> f2 =
        sandbox::async_read(s, 0, 4096, sandbox::with_diagnostics(asio::use_future));
    std::future<void> f3 = sandbox::async_write(s, "x", sandbox::with_diagnostics(asio::use_future));
    auto later = sandbox::async_read(s, 0, 4096); // the default token: deferred
    std::move(later)([](std::exception_ptr, session_output) {});
    asio::experimental::make_parallel_group(sandbox::async_read(s, 0, 4096, asio::deferred),
                                            sandbox::async_wait(s, asio::deferred))
        .async_wait(asio::experimental::wait_for_one(),
                    [](std::array<std::size_t, 2>, error_code, session_output, error_code,
                       exec_result) {});
    (void)f1, (void)f2, (void)f3;
}

// The cap watch's sample in docs/api.md ("Caps for a process you started").
asio::awaitable<void> cap_watch(asio::any_io_executor ex, pid_t child_pid)
{
    sandbox::backend::cap_watch_options o;
    o.caps.memory_bytes = 512ull << 20; // any of memory_bytes, cpu, max_processes, max_tasks
    o.caps.cpu = std::chrono::seconds(10);
    auto w = co_await sandbox::backend::async_watch_caps(ex, child_pid, o);
    if (w.exceeded != sandbox::budget_kind::none)
        (void)sandbox::to_string(w.exceeded);
    auto [ec, r] = co_await sandbox::backend::async_watch_caps(ex, child_pid, o,
                                                               asio::as_tuple(asio::use_awaitable));
    (void)ec;
    (void)r;
}

// The worker pool's sample in docs/api.md ("Idle workers").
void worker_pool(asio::io_context& ioc)
{
    sandbox::set_worker_pool_options(
        ioc, {.keep_idle = 8, .max_idle = 64, .retire_after = std::chrono::seconds(30)});
    auto st = sandbox::get_worker_pool_stats(ioc.get_executor()); // idle_workers, retired_workers
    (void)st;
}

} // namespace sbx_forms
