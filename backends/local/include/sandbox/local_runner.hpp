// sandbox/local_runner.hpp: the "local" backend: host processes under a process group.
#ifndef SANDBOX_LOCAL_RUNNER_HPP
#define SANDBOX_LOCAL_RUNNER_HPP

#include <sandbox/backend/runner_options.hpp>
#include <sandbox/config.hpp>
#include <sandbox/process_manager.hpp>
#include <sandbox/runner.hpp>
#include <sandbox/sampler.hpp>
#include <sandbox/unique_fd.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace sandbox {

/// \brief Construction options of `local_runner`: the shared ones (root, default output
/// cap, sample interval, sessions), no more; the same type, so `{.root = "."}` works.
using local_runner_options = common_runner_options;

/// \brief Runs commands as host processes. No isolation: environment policy, work-dir
/// confinement at start, output caps, a timeout, and memory / cpu / process caps by the
/// shared /proc sampler. The whole process tree is killed on timeout, cancellation and exit.
///
/// Refuses (`errc::not_available`) any network mode but `inherit`, a disk quota, and
/// sampled caps when /proc cannot be read. Children are watched by the supervisor helper's
/// workers (their parent), so no pidfd is needed here.
class SANDBOX_DECL local_runner final : public runner
{
public:
    local_runner(executor_type ex, local_runner_options opts = {});
    ~local_runner() override;

    executor_type get_executor() const noexcept override { return ex_; }
    boost::asio::awaitable<exec_outcome> try_exec(exec_request req) override;
    enforcement_report enforcement() const override;
    /// Sessions with the same checks, caps and containment as `exec`.
    process_manager* sessions() noexcept override { return sessions_.get(); }
    /// An instance (`<sandbox/instance.hpp>`); see the class comment.
    boost::asio::awaitable<outcome<std::shared_ptr<instance>>>
    try_open(instance_spec spec) override;

    /// The canonical root.
    const std::string& root() const noexcept { return opts_.root; }

private:
    executor_type ex_;
    local_runner_options opts_;
    // The root, opened once (O_PATH): requests without a work dir run there without
    // re-resolving it. Empty when the root could not be opened (each call then reports why).
    unique_fd root_fd_;
    std::unique_ptr<session_registry> sessions_;
};

} // namespace sandbox

#endif // SANDBOX_LOCAL_RUNNER_HPP
