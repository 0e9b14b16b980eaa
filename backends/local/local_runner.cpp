// backends/local/local_runner.cpp: request → checks → spawn plan → shared supervisor.
#include <sandbox/local_runner.hpp>

#include <sandbox/backend/environment.hpp>
#include <sandbox/backend/instance.hpp>
#include <sandbox/backend/request.hpp>
#include <sandbox/backend/supervise.hpp>

#include <sandbox/backend/launch.hpp>

namespace sandbox {

namespace asio = boost::asio;

namespace {

outcome<backend::spawn_plan> prepare(exec_request& req, const local_runner_options& opts,
                                     int root_fd)
{
    const exec_options& o = req.options;
    const bool sampler_ok = !o.limits.has_sampled_caps() || sampler_usable();
    if (auto r = backend::check_request(req, sampler_ok); !r)
        return r.error();
    if (o.net.mode != net_mode::inherit)
        return make_failure(errc::not_available,
                            std::string("the local backend cannot isolate the network (mode ") +
                                to_string(o.net.mode) + ")",
                            "net.mode");

    backend::spawn_plan plan;
    if (o.work_dir.empty() && root_fd >= 0)
    {
        plan.borrowed_work_dir_fd = root_fd;
    }
    else
    {
        auto dir = backend::open_work_dir(opts.root, o.work_dir);
        if (!dir)
            return dir.error();
        plan.work_dir = std::move(*dir);
    }
    int dir_fd = plan.work_dir ? plan.work_dir.get() : plan.borrowed_work_dir_fd;
    plan.envp = backend::build_environment(o.env, backend::host_environment());
    auto exe = backend::find_command(req.command, plan.envp, dir_fd);
    if (!exe)
        return exe.error();
    plan.executable = std::move(*exe);
    plan.argv.reserve(req.args.size() + 1);
    plan.argv.push_back(req.command);
    plan.argv.insert(plan.argv.end(), req.args.begin(), req.args.end());
    backend::take_pass_through(req, opts.default_max_output_bytes, "local", plan);
    plan.sample_interval = opts.sample_interval;
    plan.cgroup = opts.cgroup;
    return plan;
}

} // namespace

local_runner::local_runner(executor_type ex, local_runner_options opts)
    : ex_(std::move(ex)), opts_(std::move(opts))
{
    opts_.root = backend::canonical_root(opts_.root);
    if (auto fd = backend::open_work_dir(opts_.root, {}))
        root_fd_ = std::move(*fd);
    sessions_ = std::make_unique<session_registry>(
        ex_,
        [this](const session_spec& spec) {
            exec_request req = backend::request_of(spec);
            return backend::with_backend_name(prepare(req, opts_, root_fd_.get()), "local");
        },
        opts_.sessions);
}

local_runner::~local_runner() = default; // the registry kills the sessions still running

enforcement_report local_runner::enforcement() const
{
    return backend::supervised_enforcement(opts_.cgroup);
}

// The host is this backend's sandbox: an instance keeps nothing between commands, so each
// command runs as a cold exec would (backend::open_forwarding_instance).
asio::awaitable<outcome<std::shared_ptr<instance>>> local_runner::try_open(instance_spec spec)
{
    co_return backend::open_forwarding_instance(*this, std::move(spec));
}

asio::awaitable<exec_outcome> local_runner::try_exec(exec_request req)
{
    co_return co_await backend::exec_plan(ex_, prepare(req, opts_, root_fd_.get()), "local");
}

} // namespace sandbox
