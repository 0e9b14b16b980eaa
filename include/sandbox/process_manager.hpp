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
class SANDBOX_DECL process_manager
{
public:
    using executor_type = boost::asio::any_io_executor;

    virtual ~process_manager();
    virtual executor_type get_executor() const noexcept = 0;

    /// \brief Starts `spec`; returns once the command runs (its pid known).
    ///
    /// `errc::validation` (bad id, empty command, `input` set), `errc::conflict` (an id
    /// that a session not yet closed holds), and every error exec reports before running
    /// (policy, not_found, forbidden, not_available). Cancelling the start kills what was
    /// started.
    virtual boost::asio::awaitable<std::shared_ptr<session>> start(session_spec spec) = 0;

    /// Sessions not yet closed (running or ended), ordered by start time.
    virtual std::vector<session_info> list() const = 0;

    /// The session with this id, or null.
    virtual std::shared_ptr<session> find(std::string_view id) const = 0;

    /// \brief `session::terminate` by id; returns with the exit recorded (`list()` shows it).
    /// `errc::not_found` for an unknown id; success when it had already ended.
    virtual boost::asio::awaitable<exec_result> terminate(
        std::string id, std::chrono::nanoseconds grace = std::chrono::seconds(2)) = 0;
};

/// \brief Completion-token front end of `process_manager::start`: completes with
/// `void(std::exception_ptr, std::shared_ptr<session>)` (see the session front ends).
template <class CompletionToken = boost::asio::deferred_t>
auto async_start(process_manager& pm, session_spec spec, CompletionToken&& token = {})
{
    return boost::asio::co_spawn(pm.get_executor(), detail::accept_partial(pm.start(std::move(spec))),
                                 std::forward<CompletionToken>(token));
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
/// child core, so every backend's sessions behave alike. Destroying the registry kills
/// the trees of its sessions that still run.
class SANDBOX_DECL session_registry final : public process_manager
{
public:
    using starter = std::function<outcome<backend::spawn_plan>(const session_spec&)>;

    session_registry(executor_type ex, starter s, session_registry_options opts = {});
    ~session_registry() override;

    executor_type get_executor() const noexcept override;
    boost::asio::awaitable<std::shared_ptr<session>> start(session_spec spec) override;
    std::vector<session_info> list() const override;
    std::shared_ptr<session> find(std::string_view id) const override;
    boost::asio::awaitable<exec_result> terminate(std::string id,
                                                  std::chrono::nanoseconds grace) override;

    struct state;

private:
    std::shared_ptr<state> st_;
};

/// \brief Starts `plan` as a session (the seam behind `session_registry`, for backends that
/// keep their own books). `id` must be valid and unique to the caller.
SANDBOX_DECL boost::asio::awaitable<std::shared_ptr<session>> start_session(
    boost::asio::any_io_executor ex, std::string id, std::vector<std::string> argv,
    backend::spawn_plan plan);

} // namespace sandbox

#endif // SANDBOX_PROCESS_MANAGER_HPP
