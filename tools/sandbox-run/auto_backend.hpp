// tools/sandbox-run/auto_backend.hpp: `--backend auto` without a probe before the run. The
// command runs on bwrap; only when bwrap's own run showed that it cannot work here (bwrap
// failed before the command started, and its availability probe then said the host cannot)
// does the same request run on the local backend, after the warning, as the probe-first
// choice would have decided (cli::choose_backend). Nothing of the request is lost by the
// first try: the command never ran, and its stdin (/dev/null or --stdin-file, read by the
// command itself) was never read.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_AUTO_BACKEND_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_AUTO_BACKEND_HPP

#include "cli.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/runner.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sandbox::cli {

class auto_runner final : public sandbox::runner
{
public:
    /// `bwrap_only`: the flags of the command line only bwrap enforces (a fallback refuses
    /// them); `make_local` builds the fallback runner; `chosen` hears the fallback's
    /// decision (to print its warning and name the backend in the report).
    auto_runner(std::unique_ptr<sandbox::bwrap_runner> bwrap,
                std::function<std::unique_ptr<sandbox::runner>()> make_local,
                std::vector<std::string> bwrap_only,
                std::function<void(const backend_choice&)> chosen);

    executor_type get_executor() const noexcept override { return bwrap_->get_executor(); }
    boost::asio::awaitable<exec_outcome> try_exec(exec_request req) override;
    enforcement_report enforcement() const override;

    /// The bwrap runner it tries first.
    const sandbox::bwrap_runner& bwrap() const noexcept { return *bwrap_; }

private:
    std::unique_ptr<sandbox::bwrap_runner> bwrap_;
    std::function<std::unique_ptr<sandbox::runner>()> make_local_;
    std::vector<std::string> bwrap_only_;
    std::function<void(const backend_choice&)> chosen_;
    std::unique_ptr<sandbox::runner> local_{}; // once fallen back
};

/// The bwrap runner behind `r` (itself, or an auto_runner's), else null.
const sandbox::bwrap_runner* bwrap_behind(const sandbox::runner& r);

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_AUTO_BACKEND_HPP
