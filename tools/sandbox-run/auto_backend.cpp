// tools/sandbox-run/auto_backend.cpp: `--backend auto` that tries bwrap first (see
// auto_backend.hpp).
#include "auto_backend.hpp"

#include <sandbox/error.hpp>
#include <sandbox/exec_result.hpp>

#include <boost/system/system_error.hpp>

#include <optional>

namespace sandbox::cli {

namespace {

// bwrap failed before the command started (the runner's classification of a set-up that
// did not happen): the only outcome after which running elsewhere loses nothing.
bool never_started_on_bwrap(const exec_outcome& o)
{
    return o.ec == errc::not_available && o.result.status == exec_status::not_started &&
           o.result.diag.limit == "backend";
}

} // namespace

auto_runner::auto_runner(std::unique_ptr<sandbox::bwrap_runner> bwrap,
                         std::function<std::unique_ptr<sandbox::runner>()> make_local,
                         std::vector<std::string> bwrap_only,
                         std::function<void(const backend_choice&)> chosen)
    : bwrap_(std::move(bwrap)), make_local_(std::move(make_local)),
      bwrap_only_(std::move(bwrap_only)), chosen_(std::move(chosen))
{}

boost::asio::awaitable<exec_outcome> auto_runner::try_exec(exec_request req)
{
    if (local_)
        co_return co_await local_->try_exec(std::move(req));
    exec_request again = req; // the command never runs twice: see never_started_on_bwrap
    exec_outcome out = co_await bwrap_->try_exec(std::move(req));
    if (!never_started_on_bwrap(out))
        co_return out;
    // The runner asked its probe after that failure: this returns its verdict at once.
    std::optional<failure> verdict;
    try
    {
        verdict = co_await bwrap_->check();
    }
    catch (const boost::system::system_error&)
    {
        co_return out; // cancelled while another call's probe ran
    }
    if (!verdict || verdict->code != errc::not_available)
        co_return out; // bwrap works here; this sandbox could not be set up
    if (!local_)       // another call fell back meanwhile: its decision stands
    {
        const backend_choice c = choose_backend(verdict, bwrap_only_);
        chosen_(c);
        if (c.refusal)
            co_return not_run(c.refusal->code, c.refusal->diag);
        local_ = make_local_();
    }
    co_return co_await local_->try_exec(std::move(again));
}

enforcement_report auto_runner::enforcement() const
{
    return local_ ? local_->enforcement() : bwrap_->enforcement();
}

const sandbox::bwrap_runner* bwrap_behind(const sandbox::runner& r)
{
    if (const auto* a = dynamic_cast<const auto_runner*>(&r))
        return &a->bwrap();
    return dynamic_cast<const sandbox::bwrap_runner*>(&r);
}

} // namespace sandbox::cli
