// lib/policy/policy_runner.hpp: the one decorator behind allow_commands, with_defaults,
// with_approval, with_audit and compose_local: a runner (and a session manager) that judges
// each call in named steps (defaults, approval, gate) before it reaches the inner runner.
#ifndef SANDBOX_LIB_POLICY_POLICY_RUNNER_HPP
#define SANDBOX_LIB_POLICY_POLICY_RUNNER_HPP

#include <sandbox/instance.hpp>
#include <sandbox/policy/decorators.hpp>
#include <sandbox/process_manager.hpp>

#include "policy/trail.hpp"

#include <memory>
#include <atomic>
#include <optional>

namespace sandbox::detail {

/// The layers of one policy_runner; each one unset is skipped.
struct chain_layers
{
    std::optional<exec_options> defaults{};
    std::optional<approval_options> approval{};
    std::optional<std::vector<std::string>> allowed{};
    command_match match = command_match::exact;
    std::shared_ptr<audit_sink> audit{};
    /// The chain's name in its audit records (a config document's sandbox); may be empty.
    std::string name{};
    /// Calls are numbered from this counter when set (shared by several chains), else from
    /// the chain's own.
    std::shared_ptr<std::atomic<std::uint64_t>> call_numbers{};
};

/// The live parts of a call being judged: the request (or spec) itself, whose options the
/// defaults are merged into. Nothing is copied unless a predicate must look at it.
struct call_ref
{
    call_kind kind;
    const std::string& command;
    const std::vector<std::string>& args;
    exec_options& options;
    const std::optional<terminal_size>& tty;
    const std::string& session_id;
    /// The call brings its own stdin or cannot take one: the defaults' input does not apply.
    bool own_stdin;
    const std::optional<requester>& requested_by;
    /// The instance the call runs in (empty: none), named in its records.
    std::string instance_id{};
};

struct asked;

class policy_runner final : public runner
{
public:
    policy_runner(std::unique_ptr<runner> inner, chain_layers layers);
    ~policy_runner() override;

    executor_type get_executor() const noexcept override { return inner_->get_executor(); }
    boost::asio::awaitable<exec_outcome> try_exec(exec_request req) override;
    enforcement_report enforcement() const override { return inner_->enforcement(); }
    process_manager* sessions() noexcept override;
    /// The inner runner's instance, opened with the defaults merged in and recorded; each
    /// command in it goes through the chain's steps as an exec does.
    boost::asio::awaitable<outcome<std::shared_ptr<instance>>>
    try_open(instance_spec spec) override;

private:
    class gated_sessions;
    class gated_instance;

    boost::asio::awaitable<outcome<std::shared_ptr<instance>>> open_here(instance_spec spec);
    /// An exec judged by the chain, run by `target` (the inner runner, or an instance of it
    /// named `instance_id`). By value: a coroutine's reference would outlive a temporary.
    boost::asio::awaitable<exec_outcome> exec_here(exec_request req, runner& target,
                                                   std::string instance_id = {});
    /// Merges the defaults into `call.options`, opens the call's audit trail, then judges
    /// it: the gate, then approval. A refusal (recorded in the trail) is the failure.
    boost::asio::awaitable<outcome<trail>> admit(call_ref call);
    void apply_defaults(call_ref& call) const;
    /// Each step: the failure that refuses the call (recorded in `t`), or none.
    std::optional<failure> gate(const call_ref& call, trail& t) const;
    boost::asio::awaitable<std::optional<failure>> approve(const call_ref& call, trail& t);
    std::optional<failure> judge_answer(const call_ref& call, trail& t, const std::string& why,
                                        asked answer);
    trail open_trail(const call_ref& call);

    std::unique_ptr<runner> inner_;
    chain_layers layers_;
    std::uint64_t calls_ = 0;
    std::unique_ptr<gated_sessions> sessions_;
};

/// What became of asking an approver.
struct asked
{
    std::optional<approval_decision> decision{}; ///< unset: no answer
    std::string failure{};                       ///< why there is none (threw, late)
    bool cancelled = false;                      ///< the caller cancelled the call
};

/// Asks `ask` and waits at most `deadline`. When it is late or the caller cancels, the
/// approver gets a terminal cancellation and is not waited for.
boost::asio::awaitable<asked> ask_within(const approver& ask, approval_request rq,
                                                     std::chrono::nanoseconds deadline);

} // namespace sandbox::detail

#endif // SANDBOX_LIB_POLICY_POLICY_RUNNER_HPP
