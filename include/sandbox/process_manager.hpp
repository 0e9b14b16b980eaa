// sandbox/process_manager.hpp: starting, listing and ending sessions; the bookkeeping every
// backend shares (session_registry).
#ifndef SANDBOX_PROCESS_MANAGER_HPP
#define SANDBOX_PROCESS_MANAGER_HPP

#include <sandbox/backend/supervise.hpp>
#include <sandbox/config.hpp>
#include <sandbox/failure.hpp>
#include <sandbox/session.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox {

/// \brief Starts sessions and finds them again by id. A runner that has sessions returns
/// one from `runner::sessions()`; one that has none returns null (never a manager that
/// silently runs something else).
///
/// `start` and `terminate` (and their front ends) may be called from any executor: they run
/// on the manager's executor (the runner's). `list` and `find` read its books directly: call
/// them on that executor, or use `async_find` from elsewhere. The manager holds every
/// session it started until that session is closed (by `close()` or its retention) or the
/// manager is destroyed: dropping your handles does not end a session.
class SANDBOX_DECL process_manager
{
public:
    using executor_type = boost::asio::any_io_executor;

    virtual ~process_manager();
    virtual executor_type get_executor() const noexcept = 0;

    /// \brief Starts `spec`: the session once the command runs (its pid known), or why not.
    ///
    /// Failures are values: `errc::validation` (bad id, empty command, `input` set),
    /// `errc::conflict` (an id that a session not yet closed holds), every error exec
    /// reports before running (policy, not_found, forbidden, not_available), and
    /// `operation_aborted` when the start is cancelled (what it started is killed). This is
    /// what a manager implements (the policy chain and the backends do).
    virtual boost::asio::awaitable<outcome<std::shared_ptr<session>>>
    try_start(session_spec spec) = 0;

    /// \brief `try_start` for callers that prefer an exception: the session, or
    /// `sandbox::error` with the failure's code and diagnostics.
    boost::asio::awaitable<std::shared_ptr<session>> start(session_spec spec);

    /// Sessions not yet closed (running or ended), ordered by start time. On the manager's
    /// executor only.
    virtual std::vector<session_info> list() const = 0;

    /// The session with this id, or null (after its close). On the manager's executor only;
    /// `async_find` from anywhere.
    virtual std::shared_ptr<session> find(std::string_view id) const = 0;

    /// \brief `session::terminate` by id; returns with the exit recorded (`list()` shows it).
    /// `errc::not_found` for an unknown id; success when it had already ended.
    virtual boost::asio::awaitable<exec_result> terminate(
        std::string id, std::chrono::nanoseconds grace = std::chrono::seconds(2)) = 0;
};

namespace detail {
template <>
inline constexpr bool resumes_with_exception<std::shared_ptr<session>> = true;

SANDBOX_DECL void async_start_impl(process_manager* pm, session_spec spec, diagnostics_sink sink,
                                   value_handler<std::shared_ptr<session>> h);
SANDBOX_DECL void async_find_impl(process_manager* pm, std::string id, diagnostics_sink sink,
                                  value_handler<std::shared_ptr<session>> h);
} // namespace detail

/// \brief Completion-token front end of `process_manager::start`.
///
/// \par Completion signature
/// `void(boost::system::error_code, std::shared_ptr<session>)`; null on failure.
///
/// \par Default token
/// `with_diagnostics(boost::asio::deferred)`: `co_await async_start(pm, spec)` returns the
/// session or throws `sandbox::error` with the diagnostics (`diag.limit` names the refused
/// field or limit). Plain tokens get the pair; `with_diagnostics(token)` adds the exception.
///
/// \par Errors
/// As `process_manager::start`: `errc::validation`, `errc::conflict`, every error exec
/// reports before running; `operation_aborted` when cancelled.
///
/// \par Per-operation cancellation
/// `terminal` and `partial`: the start is abandoned and what it started is killed. `total`
/// is not supported.
///
/// \par Executor and threads
/// Runs on the manager's executor whatever executor initiates it; the handler runs on its
/// associated executor and never inside this function.
///
/// \par Object lifetimes
/// The manager must outlive the operation; the spec is moved into it.
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_start(process_manager& pm, session_spec spec, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, std::shared_ptr<session>)>(
        &detail::async_start_impl, std::forward<CompletionToken>(token), &pm, std::move(spec));
}

/// \brief `process_manager::find` from any executor: completes with
/// `void(boost::system::error_code, std::shared_ptr<session>)` on the handler's executor,
/// the session or null (never an error but `operation_aborted`). Default token, threads and
/// lifetimes as `async_start`.
template <class CompletionToken = with_diagnostics_t<boost::asio::deferred_t>>
[[nodiscard]] auto async_find(process_manager& pm, std::string id, CompletionToken&& token = {})
{
    return detail::initiate_erased<void(boost::system::error_code, std::shared_ptr<session>)>(
        &detail::async_find_impl, std::forward<CompletionToken>(token), &pm, std::move(id));
}

/// Options of `session_registry`.
struct session_registry_options
{
    /// How long a session whose command has ended stays (readable, listed) when no one
    /// closes it; then the registry closes it. Zero: until closed.
    std::chrono::nanoseconds retention = std::chrono::minutes(10);
    /// Largest number of sessions not yet closed; `start` beyond it is `errc::conflict`.
    std::size_t max_sessions = 4096;
};

/// \brief The shared bookkeeping of sessions: ids, conflicts, start order, retention.
///
/// A backend gives it a `starter` that turns a spec into a spawn plan after its policy
/// checks (the same checks as its exec); the registry runs the plan under the supervised
/// child core, so every backend's sessions behave alike. It holds each session until it is
/// closed; destroying the registry kills the trees of its sessions that still run.
class SANDBOX_DECL session_registry final : public process_manager
{
public:
    using starter = std::function<outcome<backend::spawn_plan>(const session_spec&)>;

    session_registry(executor_type ex, starter s, session_registry_options opts = {});
    ~session_registry() override;

    executor_type get_executor() const noexcept override;
    boost::asio::awaitable<outcome<std::shared_ptr<session>>> try_start(session_spec spec) override;
    std::vector<session_info> list() const override;
    std::shared_ptr<session> find(std::string_view id) const override;
    boost::asio::awaitable<exec_result> terminate(std::string id,
                                                  std::chrono::nanoseconds grace) override;

    struct state;

private:
    std::shared_ptr<state> st_;
};

/// \brief Starts `plan` as a session (the seam behind `session_registry`, for backends that
/// keep their own books). `id` must be valid and unique to the caller. Failures as
/// `process_manager::try_start`.
SANDBOX_DECL boost::asio::awaitable<outcome<std::shared_ptr<session>>>
start_session(boost::asio::any_io_executor ex, std::string id, std::vector<std::string> argv,
              backend::spawn_plan plan);

} // namespace sandbox

#endif // SANDBOX_PROCESS_MANAGER_HPP
