// sandbox/local_runner.hpp: the "local" backend: host processes under a process group.
#ifndef SANDBOX_LOCAL_RUNNER_HPP
#define SANDBOX_LOCAL_RUNNER_HPP

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

/// \brief Construction options of `local_runner`.
struct local_runner_options
{
    /// The root that work directories are confined to. Made absolute and symlink-resolved.
    std::string root = ".";
    /// Per-stream output cap when the request sets none. Zero or negative: no cap.
    std::int64_t default_max_output_bytes = sandbox::default_max_output_bytes;
    /// How often the cap sampler reads the trees of this runner (see
    /// default_sample_interval for when it looks sooner or later).
    std::chrono::nanoseconds sample_interval = default_sample_interval;
    /// Retention and count bound of its sessions.
    session_registry_options sessions{};
};

/// \brief Runs commands as host processes. No isolation: environment policy, work-dir
/// confinement at start, output caps, a timeout, and memory / cpu / process caps by the
/// shared /proc sampler. The whole process tree is killed on timeout, cancellation and exit.
///
/// Refuses (`errc::not_available`) any network mode but `inherit`, a disk quota, and
/// sampled caps when /proc cannot be read. Needs pidfd (Linux 5.3+); without it every
/// execution fails with `errc::not_available` instead of falling back to SIGCHLD.
class SANDBOX_DECL local_runner final : public runner
{
public:
    local_runner(executor_type ex, local_runner_options opts = {});
    ~local_runner() override;

    executor_type get_executor() const noexcept override { return ex_; }
    boost::asio::awaitable<exec_result> exec(exec_request req) override;
    enforcement_report enforcement() const override;
    /// Sessions with the same checks, caps and containment as `exec`.
    process_manager* sessions() noexcept override { return sessions_.get(); }

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
