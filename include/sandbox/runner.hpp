// sandbox/runner.hpp: the polymorphic runner and its completion-token front end.
#ifndef SANDBOX_RUNNER_HPP
#define SANDBOX_RUNNER_HPP

#include <sandbox/config.hpp>
#include <sandbox/enforcement.hpp>
#include <sandbox/error.hpp>
#include <sandbox/exec_request.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/with_diagnostics.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/deferred.hpp>

#include <memory>

namespace sandbox {

class process_manager;
class instance;
struct instance_spec;

/// \brief Runs one command under policy. Backends and policy decorators implement it.
///
/// A runner is an I/O object bound to one executor. Distinct runners may be used from
/// different threads; one runner may run many executions at once, but is not thread-safe:
/// when the io_context runs on several threads, give the runner a strand.
class SANDBOX_DECL runner
{
public:
    using executor_type = boost::asio::any_io_executor;

    runner() = default;
    runner(const runner&) = delete;            // polymorphic and owns resources: not copyable
    runner& operator=(const runner&) = delete;
    virtual ~runner();

    virtual executor_type get_executor() const noexcept = 0;

    /// \brief Runs `req` and returns when the whole process tree is gone; a failure throws.
    ///
    /// `try_exec` with its failure thrown: `sandbox::error`, whose `partial_result()` holds
    /// what was captured before the failure (timeouts, budget kills, cancellation) or is null
    /// when nothing ran (validation, policy, spawn errors). A non-zero exit code is a result.
    /// Cancellation as for `try_exec`; a cancelled call throws `operation_aborted`.
    boost::asio::awaitable<exec_result> exec(exec_request req);

    /// \brief Runs `req` and returns when the whole process tree is gone, failures as values.
    ///
    /// Backends and decorators implement it; nothing in the library throws for a failed
    /// run (the diagnostics travel in `result.diag`, moved, from the step that failed to the
    /// caller). `exec` and the throwing tokens of `async_exec` throw at the edge.
    ///
    /// \par Per-operation cancellation
    /// The coroutine's cancellation state decides which types arrive. `terminal`: the tree
    /// is killed with SIGKILL and the outcome is `operation_aborted` with the partial
    /// result. `partial` (if the caller's filter lets it through): SIGTERM to the tree, then
    /// SIGKILL after `exec_options::kill_grace`. `total` is not honoured once the process is
    /// spawned (cancelling then has side effects).
    virtual boost::asio::awaitable<exec_outcome> try_exec(exec_request req) = 0;

    /// What this runner enforces on this host, honestly.
    virtual enforcement_report enforcement() const = 0;

    /// \brief Its sessions (`<sandbox/process_manager.hpp>`), or null when it has none: a
    /// caller that needs sessions refuses then (`errc::not_available`), it never falls back.
    /// Sessions go through the same policy checks as `exec`.
    virtual process_manager* sessions() noexcept { return nullptr; }

    /// \brief Opens a sandbox that runs many commands (`<sandbox/instance.hpp>`): the
    /// instance once it is set up, or why not, as a value. The default refuses
    /// (`errc::not_available`): a runner without instances never falls back to something
    /// else. The local backend and bwrap have them; so does the policy chain above them.
    ///
    /// \par Per-operation cancellation
    /// `terminal` and `partial`: the open is abandoned (`operation_aborted`) and what it
    /// started is killed.
    virtual boost::asio::awaitable<outcome<std::shared_ptr<instance>>> try_open(instance_spec spec);

    /// `try_open` for callers that prefer an exception (`sandbox::error`).
    boost::asio::awaitable<std::shared_ptr<instance>> open(instance_spec spec);
};

/// \brief A runner that runs nothing: every call succeeds with an empty result (exit code 0)
/// and it enforces nothing. For tests and dry runs.
class SANDBOX_DECL noop_runner final : public runner
{
public:
    explicit noop_runner(executor_type ex) : ex_(std::move(ex)) {}
    executor_type get_executor() const noexcept override { return ex_; }
    boost::asio::awaitable<exec_outcome> try_exec(exec_request req) override;
    enforcement_report enforcement() const override { return {}; }

private:
    executor_type ex_;
};

namespace detail {
using exec_handler =
    boost::asio::any_completion_handler<void(boost::system::error_code, exec_result)>;
SANDBOX_DECL void async_exec_impl(runner* r, exec_request req, diagnostics_sink sink,
                                  exec_handler handler);
} // namespace detail

/// \brief Completion-token front end of `runner::exec`, for callbacks, futures, `as_tuple`,
/// `deferred` and coroutines alike.
///
/// \par Completion signature
/// `void(boost::system::error_code, exec_result)`. On failure the result is the partial
/// result (status `not_started` when nothing ran) and `result.diag` says why.
///
/// \par Default token
/// `with_diagnostics(boost::asio::deferred)`: `co_await async_exec(r, req)` returns the
/// result or throws `sandbox::error` whose `partial_result()` and `diag()` keep the output
/// captured before a timeout, budget kill or cancellation, as `runner::exec` does. With a
/// token of your own, `(ec, result)` arrive as they are (`as_tuple(use_awaitable)`, a
/// callback); wrap it in `with_diagnostics(...)` to get the exception instead.
///
/// \par Errors
/// `errc::validation`, `errc::not_available`, `errc::forbidden`, `errc::not_found`
/// (nothing ran); `errc::timeout`, `errc::budget_exceeded`, `errc::not_available` with
/// status `unenforceable` (the tree was killed); `operation_aborted` (cancelled); OS errors.
///
/// \par Per-operation cancellation
/// `terminal`: SIGKILL to the whole tree, completes with `operation_aborted` and the partial
/// result. `partial`: SIGTERM to the tree, SIGKILL after `exec_options::kill_grace`, then the
/// same completion. `total`: not supported (the process is spawned at once, so cancelling
/// always has side effects).
///
/// \par Executor and threads
/// All work runs on the runner's executor; the handler runs on its associated executor and
/// is never called from inside this function. No threads are created.
///
/// \par Object lifetimes
/// The runner must outlive the operation. The request is moved into the operation.
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_exec(runner& r, exec_request req, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, exec_result)>(
        &detail::async_exec_impl, std::forward<CompletionToken>(token), &r, std::move(req));
}

} // namespace sandbox

#endif // SANDBOX_RUNNER_HPP
