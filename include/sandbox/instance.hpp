// sandbox/instance.hpp: a sandbox opened once that runs many commands (`runner::try_open`).
#ifndef SANDBOX_INSTANCE_HPP
#define SANDBOX_INSTANCE_HPP

#include <sandbox/config.hpp>
#include <sandbox/exec_options.hpp>
#include <sandbox/http_hooks.hpp>
#include <sandbox/net_proxy.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/awaitable.hpp>

#include <memory>
#include <string>

namespace sandbox {

/// \brief What an instance is opened with: the sandbox every command in it shares.
///
/// `options.net` (the network, its egress proxy and TLS inspection are set up once, at
/// open), `options.limits` (held over the whole instance: all its commands together; the
/// memory cap also bounds its private /tmp), `options.env` and `options.work_dir` (the
/// defaults of its commands). `options.timeout` bounds the instance's life (zero: none);
/// `input` is refused.
struct instance_spec
{
    exec_options options{};
    /// Records of the instance's network, for all its commands (`exec_request::on_net_record`).
    net_record_handler on_net_record{};
    /// Hooks of the instance's inspected requests (`exec_request::http`).
    http_hooks http{};
};

/// \brief A sandbox kept open: each `try_exec` runs one command in it.
///
/// Every command gets what a cold exec gets of its own: a supervisor of its own (inside the
/// sandbox), its timeout, caps (`limits` held on its tree alone, besides the instance's),
/// exit classification, `cpu_time`, and the kill of its whole tree when it ends, so no
/// process, descriptor or environment variable of one command reaches the next. What the
/// commands share is the sandbox: its private /tmp, what they write to its writable
/// directories, its network. One instance is one trust domain: its commands run as one user
/// and may signal each other while they run (see docs/security.md).
///
/// A command's options may narrow the instance's, never widen them: its `net` must be the
/// instance's (or left default); per-command network hooks are refused (`errc::validation`).
/// A command may have a terminal (`tty`). `sessions()` starts sessions inside the instance
/// (each one a command of it, narrowed the same way); it lists and finds only those.
///
/// `close()`, the destruction of the last handle, the end of the runner's `io_context`
/// and the death of the calling process each kill everything in the instance. A command
/// running then completes with `errc::instance_closed`; later calls complete with it at
/// once. Use an instance on its runner's executor only.
class SANDBOX_DECL instance : public runner
{
public:
    /// Unique within the process ("i-1", "i-2", ...).
    virtual const std::string& id() const noexcept = 0;
    /// False once closed, or once its sandbox ended by itself (its `limits` tripped, its
    /// timeout ran out); `ended()` then says how.
    virtual bool is_open() const noexcept = 0;
    /// How the instance's own tree ended (after `close()`: cancelled); null while open.
    virtual const exec_outcome* ended() const noexcept = 0;
    /// \brief Kills everything in the instance and returns once its whole tree is gone.
    /// Idempotent; never fails.
    virtual boost::asio::awaitable<void> close() = 0;
};

namespace detail {
template <> inline constexpr bool resumes_with_exception<std::shared_ptr<instance>> = true;

SANDBOX_DECL void async_open_impl(runner* r, instance_spec spec, diagnostics_sink sink,
                                  value_handler<std::shared_ptr<instance>> h);
} // namespace detail

/// \brief Completion-token front end of `runner::open`.
///
/// \par Completion signature
/// `void(boost::system::error_code, std::shared_ptr<instance>)`; null on failure.
///
/// \par Default token
/// `with_diagnostics(boost::asio::deferred)`: `co_await async_open(r, spec)` returns the
/// instance or throws `sandbox::error` with the diagnostics.
///
/// \par Errors
/// `errc::not_available` (a runner without instances, or one that cannot set its sandbox
/// up here), `errc::validation`, `errc::timeout` (the set-up bound), every error exec
/// reports before running; `operation_aborted` when cancelled (what was started is killed).
///
/// \par Per-operation cancellation
/// `terminal` and `partial`: the open is abandoned and its sandbox killed. `total` is not
/// supported.
///
/// \par Executor and threads
/// Runs on the runner's executor; the handler runs on its associated executor and never
/// inside this function.
///
/// \par Object lifetimes
/// The runner must outlive the operation and the instance.
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_open(runner& r, instance_spec spec, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, std::shared_ptr<instance>)>(
        &detail::async_open_impl, std::forward<CompletionToken>(token), &r, std::move(spec));
}

} // namespace sandbox

#endif // SANDBOX_INSTANCE_HPP
