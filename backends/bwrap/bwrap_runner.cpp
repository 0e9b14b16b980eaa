// backends/bwrap/bwrap_runner.cpp: request → checks → the bwrap command line → the shared
// supervisor (which owns bwrap and everything below it).
#include <sandbox/bwrap_runner.hpp>

#include <sandbox/backend/environment.hpp>
#include <sandbox/backend/request.hpp>
#include <sandbox/backend/supervise.hpp>

#include "bwrap_args.hpp"
#include "instance.hpp"
#include "net/bridge.hpp"
#include "net/tls/inspector.hpp"
#include "net/tls/trust.hpp"
#include "runner_state.hpp"
#include "sandbox_user.hpp"
#include "warm_pool.hpp"
#include "write_deny.hpp"
#include <sandbox/backend/launch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

std::string fd_path(int fd)
{
    char buf[4096];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// Sets `name` in `envp`, replacing what the host's environment gave it.
void set_variable(std::vector<std::string>& envp, const std::string& name, const std::string& value)
{
    const std::string prefix = name + "=";
    std::erase_if(envp, [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
    envp.push_back(prefix + value);
}

// The host's TMPDIR names a host directory the command cannot write; /tmp is its own.
void set_tmpdir(std::vector<std::string>& envp)
{
    set_variable(envp, "TMPDIR", "/tmp");
}

// A root caller's sandbox user cannot use the caller's home (/root: git warns it cannot read
// its config, tools cannot write their caches): its HOME is the sandbox's private /tmp. An
// environment without HOME keeps none.
void set_home(std::vector<std::string>& envp)
{
    for (auto& e : envp)
        if (e.rfind("HOME=", 0) == 0)
            e = "HOME=/tmp";
}

// What a command's tree keeps on the host while it may run: the lease on its write-deny
// stand-ins, and its network (the egress proxy serving the sandbox's listeners).
struct tree_hold
{
    std::shared_ptr<void> lease;
    std::shared_ptr<net::sandbox_network> network;
};

// A call's network under allow_list or proxy: the egress (its rules compiled, its upstream
// parsed: bad input is refused here, before anything runs) serving on `ex`, and the init's
// end of the hand-off socket. Other modes: nothing.
struct call_network
{
    std::shared_ptr<net::sandbox_network> host;
    unique_fd init_end;
    /// The call's TLS inspection (`net.mitm`), when on: its CA is what the command trusts.
    std::shared_ptr<net::tls::inspector> inspection;
};

outcome<call_network> prepare_network(const asio::any_io_executor& ex, exec_request& req,
                                      const bwrap_runner_options& opts)
{
    const net_policy& p = req.options.net;
    if (p.mode != net_mode::allow_list && p.mode != net_mode::proxy)
        return call_network{};
    auto cfg = net::make_egress_config(ex, p, opts.proxy, req.on_net_record, req.http);
    if (!cfg)
        return cfg.error();
    auto ends = net::sandbox_network::make_ends();
    if (!ends)
        return ends.error();
    auto inspection = cfg->inspection;
    auto gate = std::make_shared<net::egress>(ex, std::move(*cfg));
    return call_network{
        std::make_shared<net::sandbox_network>(std::move(gate), std::move(ends->host_end)),
        std::move(ends->init_end), std::move(inspection)};
}

// What an inspecting call's command trusts (net::tls::sandbox_trust_for): the system's roots
// and the call's CA in a sealed memory file that bwrap copies to
// net::tls::bundle_path_inside (read-only); and the variables that point common tools at it,
// unless the call sets one itself.
void set_trust_environment(std::vector<std::string>& envp,
                           const std::vector<std::pair<std::string, std::string>>& trust,
                           const env_policy& env)
{
    for (const auto& [name, value] : trust)
        if (!env.inject.count(name))
            set_variable(envp, name, value);
}

// A call's `net.unix_sockets`, each resolved: an existing socket (`errc::not_found` when
// missing, `errc::validation` when not a socket), outside the writable directories (there a
// command could swap it for a link to anything before bwrap binds it).
outcome<std::vector<std::string>> call_sockets(const std::vector<std::string>& paths,
                                               const bwrap_runner::state& st)
{
    std::vector<std::string> out;
    for (std::size_t i = 0; i < paths.size(); ++i)
    {
        const std::string field = "net.unix_sockets[" + std::to_string(i) + "]";
        const std::string c = canonical_or_empty(paths[i]);
        struct stat sb{};
        errc code = errc::validation;
        const char* why = nullptr;
        if (c.empty() || ::stat(c.c_str(), &sb) != 0)
            code = errc::not_found, why = " does not exist";
        else if (!S_ISSOCK(sb.st_mode))
            why = " is not a socket";
        else if (bwrap::inside_any(c, st.dirs))
            why = " lies in a writable directory (the command could replace it)";
        if (why)
        {
            failure f = make_failure(code, field + ": unix socket " + paths[i] + why, field);
            f.diag.path = paths[i];
            return f;
        }
        out.push_back(c);
    }
    return out;
}

bool holds_unix_socket_policy(const bwrap_runner_options& opts)
{
    return opts.hold_unix_socket_policy && backend::unix_socket_policy_usable();
}

// The sockets bound for a call, as the unix-socket policy names them (device and inode: the
// same inside, where each is bound at its own path).
outcome<std::vector<backend::socket_file>> socket_files(const std::vector<std::string>& paths)
{
    std::vector<backend::socket_file> out;
    for (const auto& p : paths)
    {
        struct stat sb = {};
        if (::stat(p.c_str(), &sb) != 0 || !S_ISSOCK(sb.st_mode))
        {
            failure f =
                make_failure(errc::not_found, "unix socket " + p + " is gone", "net.unix_sockets");
            f.diag.path = p;
            return f;
        }
        out.push_back(
            {static_cast<std::uint64_t>(sb.st_dev), static_cast<std::uint64_t>(sb.st_ino), p});
    }
    return out;
}

// The plan that runs the command under the helper's status init, which looks it up on the
// PATH inside the sandbox and reports how it ended (see backend::make_status_init), with what
// the tree holds until it is gone (the write-deny lease, the call's network).
// With `inst`, the plan of an instance's tree instead (instance.hpp): the init serves on
// the control socket's end `inst->init_end` (passed last) and the trust variables are kept
// for the instance's commands.
outcome<backend::spawn_plan> wrapped_plan(const asio::any_io_executor& ex, exec_request& req,
                                          const bwrap_runner_options& opts,
                                          const bwrap_runner::state& st, bwrap::sandbox_view& v,
                                          call_network& network, std::shared_ptr<void> lease,
                                          bwrap::instance_parts* inst)
{
    const exec_options& o = req.options;
    auto init = backend::make_status_init();
    if (!init)
        return init.error();
    if (network.host)
        init->argv.insert(init->argv.end() - 1, // before "--"
                          {"--net-bridge", std::to_string(3 + init->fds.size())});
    net::tls::sandbox_trust trust;
    if (network.inspection) // its descriptor follows the bridge's
    {
        auto made = net::tls::sandbox_trust_for(*network.inspection);
        if (!made)
            return made.error();
        trust = std::move(*made);
        v.data_files.emplace_back(static_cast<int>(4 + init->fds.size()),
                                  std::string(net::tls::bundle_path_inside));
    }
    std::string command = req.command;
    std::vector<std::string> args = req.args;
    if (inst) // "--serve FD" in place of "-- COMMAND": the control socket comes last
    {
        init->argv.pop_back();
        command = "--serve";
        args = {std::to_string(3 + init->fds.size() + (network.host ? 1 : 0) +
                               (trust.bundle.get() >= 0 ? 1 : 0))};
        inst->bridged = network.host != nullptr;
        inst->trust_env = trust.environment;
    }
    v.init = std::move(init->argv);
    backend::spawn_plan plan;
    plan.envp = backend::build_environment(o.env, backend::host_environment());
    if (!o.env.inject.count("TMPDIR"))
        set_tmpdir(plan.envp);
    if (st.user && !o.env.inject.count("HOME"))
        set_home(plan.envp);
    plan.executable = st.bwrap;
    plan.argv = bwrap::build_args(v, command, args);
    plan.extra_fds = std::move(init->fds);
    if (network.host) // the init's end of the hand-off socket: fd 5, after the status pipe
        plan.extra_fds.push_back(std::make_shared<const unique_fd>(std::move(network.init_end)));
    if (trust.bundle.get() >= 0)
    {
        plan.extra_fds.push_back(std::make_shared<const unique_fd>(std::move(trust.bundle)));
        set_trust_environment(plan.envp, trust.environment, o.env);
    }
    if (inst)
        plan.extra_fds.push_back(std::make_shared<const unique_fd>(std::move(inst->init_end)));
    plan.inner_status = std::move(init->status);
    plan.inner_command = req.command;
    backend::take_pass_through(req, opts.default_max_output_bytes, "bwrap", plan);
    plan.sample_interval = opts.sample_interval;
    plan.setup_timeout = opts.setup_timeout;
    plan.cgroup = opts.cgroup;
    auto hold = std::make_shared<tree_hold>(tree_hold{std::move(lease), std::move(network.host)});
    if (hold->lease || hold->network)
        plan.settle = [hold, ex](std::function<void()> done) {
            // The stand-ins first, one per turn of the loop (never a long hold of it), then
            // the network's records: the result comes after both, as before.
            bwrap::release_in_turns(hold->lease, ex, [hold, done = std::move(done)]() mutable {
                if (hold->network)
                    hold->network->settle(std::move(done));
                else
                    done();
            });
        };
    plan.tree_resources = hold;
    if (v.isolate_network && holds_unix_socket_policy(opts))
    {
        auto files = socket_files(v.sockets);
        if (!files)
            return files.error();
        plan.unix_socket_policy = std::move(*files);
    }
    if (st.user)
        if (auto r = backend::run_as_user(plan, st.user->uid, st.user->gid); !r)
            return r.error();
    return plan;
}

failure bwrap_missing()
{
    return make_failure(errc::not_available,
                        "bubblewrap (bwrap) was not found; install the Debian package "
                        "bubblewrap or set bwrap_runner_options::bwrap_path",
                        "backend");
}

outcome<backend::spawn_plan> prepare(const asio::any_io_executor& ex, exec_request& req,
                                     const bwrap_runner_options& opts,
                                     const bwrap_runner::state& st,
                                     bwrap::instance_parts* inst = nullptr)
{
    if (st.setup_error)
        return *st.setup_error;
    if (st.unusable)
        return *st.unusable;
    if (st.bwrap.empty())
        return bwrap_missing();
    const exec_options& o = req.options;
    const bool sampler_ok = !o.limits.has_sampled_caps() || sampler_usable();
    if (auto r = backend::check_request(req, sampler_ok); !r)
        return r.error();
    auto network = prepare_network(ex, req, opts);
    if (!network)
        return network.error();
    auto sockets = call_sockets(o.net.unix_sockets, st);
    if (!sockets)
        return sockets.error();
    auto dir = backend::open_work_dir(opts.root, o.work_dir);
    if (!dir)
        return dir.error();
    bwrap::sandbox_view v;
    v.root = opts.root;
    v.writable = st.writable;
    v.read_deny = st.masked;
    v.sockets = st.sockets;
    v.sockets.insert(v.sockets.end(), sockets->begin(), sockets->end());
    v.extra_flags = opts.extra_flags;
    auto protect = bwrap::resolve_write_deny(st.write_deny, st.dirs);
    if (!protect)
        return protect.error();
    v.protect = std::move(protect->paths);
    v.isolate_network = o.net.mode != net_mode::inherit;
    v.tmpfs_bytes = o.limits.memory_bytes; // files there are memory the cap does not see
    v.work_dir = fd_path(dir->get());
    if (v.work_dir.empty())
        return make_failure(errc::internal, "cannot name the work directory", "work_dir");
    return wrapped_plan(ex, req, opts, st, v, *network, std::move(protect->lease), inst);
}

} // namespace

namespace bwrap {

outcome<backend::spawn_plan> prepare_instance_tree(const asio::any_io_executor& ex,
                                                   exec_request& req,
                                                   const bwrap_runner_options& opts,
                                                   const bwrap_runner::state& st,
                                                   instance_parts& parts)
{
    return prepare(ex, req, opts, st, &parts);
}

std::vector<std::string>
command_environment(const exec_options& o, bool sandbox_user,
                    const std::vector<std::pair<std::string, std::string>>& trust_env)
{
    auto envp = backend::build_environment(o.env, backend::host_environment());
    if (!o.env.inject.count("TMPDIR"))
        set_tmpdir(envp);
    if (sandbox_user && !o.env.inject.count("HOME"))
        set_home(envp);
    set_trust_environment(envp, trust_env, o.env);
    return envp;
}

std::string path_of_fd(int fd)
{
    return fd_path(fd);
}

} // namespace bwrap

namespace {

// Sessions wait for the probe like exec does, then go to the shared registry.
class bwrap_sessions final : public process_manager
{
public:
    bwrap_sessions(bwrap_runner& r, std::unique_ptr<session_registry> reg,
                   std::function<asio::awaitable<boost::system::error_code>()> probe)
        : r_(r), reg_(std::move(reg)), probe_(std::move(probe))
    {
    }
    executor_type get_executor() const noexcept override { return r_.get_executor(); }
    asio::awaitable<outcome<std::shared_ptr<session>>> try_start(session_spec spec) override
    {
        if (auto ec = co_await probe_()) // cancelled while another call's probe ran
        {
            failure f;
            f.code = ec;
            f.diag.message =
                "cancelled while waiting for bubblewrap's availability probe; nothing ran";
            f.diag.backend = "bwrap";
            co_return f;
        }
        co_return co_await reg_->try_start(std::move(spec));
    }
    std::vector<session_info> list() const override { return reg_->list(); }
    std::shared_ptr<session> find(std::string_view id) const override { return reg_->find(id); }
    asio::awaitable<exec_result> terminate(std::string id,
                                           std::chrono::nanoseconds grace) override
    {
        return reg_->terminate(std::move(id), grace);
    }

private:
    bwrap_runner& r_;
    std::unique_ptr<session_registry> reg_;
    std::function<asio::awaitable<boost::system::error_code>()> probe_;
};

} // namespace

bwrap_runner::bwrap_runner(executor_type ex, bwrap_runner_options opts)
    : ex_(std::move(ex)), opts_(std::move(opts)), st_(std::make_shared<state>())
{
    opts_.root = backend::canonical_root(opts_.root);
    if (!opts_.proxy.sandbox_budget)
        opts_.proxy.sandbox_budget = std::make_shared<tunnel_budget>(
            opts_.proxy.limits.max_sandbox_tunnels
                ? opts_.proxy.limits.max_sandbox_tunnels
                : std::max<std::size_t>(process_tunnel_budget().limit() / 4, 64));
    prepare_state(*st_, opts_);
    auto reg = std::make_unique<session_registry>(
        ex_,
        [this](const session_spec& spec) {
            exec_request req = backend::request_of(spec);
            return backend::with_backend_name(prepare(ex_, req, opts_, *st_), "bwrap");
        },
        opts_.sessions);
    sessions_ = std::make_unique<bwrap_sessions>(*this, std::move(reg),
                                                 [this] { return ensure_usable(); });
    if (opts_.warm > 0 && bwrap::pool_usable(opts_.warm_net))
        pool_ = std::make_shared<bwrap::warm_pool>(ex_, opts_.warm, opts_, st_);
}

bwrap_runner::~bwrap_runner() = default;

std::size_t bwrap_runner::warm_ready() const noexcept
{
    return pool_ ? pool_->ready() : 0;
}

namespace {

// A probe's verdict: decided (usable, or not with why), or undecided: it could not run for
// want of resources the host has now and may have again (a fork refused, memory, its
// timeout on a loaded host) or was cut short, which says nothing about bwrap.
struct probe_verdict
{
    bool decided = true;
    std::optional<failure> unusable{};
};

bool for_want_of_resources(const boost::system::error_code& ec, const exec_result& r,
                           std::string_view err)
{
    if (ec == std::errc::resource_unavailable_try_again || ec == std::errc::not_enough_memory ||
        ec == std::errc::no_space_on_device || ec == std::errc::too_many_files_open ||
        ec == std::errc::too_many_files_open_in_system)
        return true;
    // Cut short (its timeout, a signal, the caller cancelling): bwrap did not say.
    if (ec == asio::error::operation_aborted || r.status == exec_status::timed_out ||
        r.status == exec_status::signaled || r.status == exec_status::cancelled)
        return true;
    for (std::string_view what : {"Resource temporarily unavailable", "Cannot allocate memory",
                                  "No space left on device", "Too many open files", "Cannot fork"})
        if (err.find(what) != std::string_view::npos)
            return true;
    return false;
}

probe_verdict judge_probe(const boost::system::error_code& ec, const exec_result& r)
{
    if (!ec && r.status == exec_status::exited && r.exit_code == 0)
        return {};
    std::string why = r.err.data.substr(0, 300);
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r'))
        why.pop_back();
    if (for_want_of_resources(ec, r, why))
        return {false, std::nullopt};
    return {true, make_failure(
                      errc::not_available,
                      "bwrap cannot create its namespaces on this host (user namespaces "
                      "may be disabled): " +
                          (why.empty() ? (ec ? ec.message() : "exit " + std::to_string(r.exit_code))
                                       : why),
                      "backend")};
}

// Runs bwrap once, with the namespaces every command gets, on /bin/true.
asio::awaitable<probe_verdict> probe_once(bwrap_runner::executor_type ex,
                                          const bwrap_runner_options& opts,
                                          std::shared_ptr<bwrap_runner::state> st)
{
    if (st->bwrap.empty())
        co_return probe_verdict{true, bwrap_missing()};
    backend::spawn_plan plan;
    bwrap::sandbox_view v;
    v.root = "/tmp";
    v.work_dir = "/";
    plan.executable = st->bwrap;
    plan.argv = bwrap::build_args(v, "/bin/true", {});
    plan.envp = {"PATH=/usr/bin:/bin"};
    plan.max_output_bytes = 4096;
    plan.timeout = std::chrono::seconds(10);
    plan.backend_name = "bwrap";
    // The probe is often the context's first execution, and the first one decides where the
    // helper keeps its trees: without the runner's setting the helper would start with none.
    plan.cgroup = opts.cgroup;
    if (auto as = st->user ? backend::run_as_user(plan, st->user->uid, st->user->gid)
                           : outcome<void>();
        !as)
        co_return probe_verdict{true, as.error()};
    auto [ec, r] =
        co_await backend::async_supervise(ex, std::move(plan), asio::as_tuple(asio::use_awaitable));
    co_return judge_probe(ec, r);
}

// The command started inside the sandbox (it exited, or was killed by a signal not ours):
// bwrap works. (A cap can fire during the set-up, before the command, so budget_exceeded
// proves nothing.)
bool proves_usable(const exec_result& r)
{
    return r.status == exec_status::exited || r.status == exec_status::signaled;
}

// bwrap (or its absence) kept the sandbox from being set up: the command never ran.
bool bwrap_set_up_failed(const exec_outcome& o)
{
    return o.ec == errc::not_available && o.result.status == exec_status::not_started &&
           o.result.diag.limit == "backend";
}

} // namespace

// One probe at a time, whatever the number of calls that start together (200 first calls
// would otherwise start 200 probes, each a bwrap of the sandbox user's beside their own
// commands). A call that finds a probe running waits for its verdict; an undecided verdict
// lets the calls go on (each meets its own error, if any) and the next call probes again.
asio::awaitable<boost::system::error_code> bwrap_runner::ensure_usable()
{
    auto st = st_;
    while (!st->probed)
    {
        if (auto running = st->probing)
        {
            co_await running->done.async_wait(asio::as_tuple(asio::use_awaitable));
            if (!running->ended) // our caller cancelled the wait
                co_return asio::error::operation_aborted;
            if (running->went_on)
                co_return boost::system::error_code{};
            continue; // decided, or it failed: the loop sees which
        }
        auto run = std::make_shared<state::probe_run>(
            state::probe_run{asio::steady_timer(ex_, asio::steady_timer::time_point::max())});
        st->probing = run;
        // Whatever ends this probe (a verdict, none, an exception) wakes the waiters.
        struct wake
        {
            std::shared_ptr<state> st;
            std::shared_ptr<state::probe_run> run;
            ~wake()
            {
                st->probing = nullptr;
                run->ended = true;
                run->done.cancel();
            }
        } waking{st, run};
        const auto verdict = co_await probe_once(ex_, opts_, st);
        if (!verdict.decided)
        {
            run->went_on = true;
            co_return boost::system::error_code{};
        }
        if (!st->probed) // a command that ran meanwhile settled it: stronger than a probe
        {
            st->probed = true;
            st->unusable = verdict.unusable;
        }
    }
    co_return boost::system::error_code{};
}

asio::awaitable<std::optional<failure>> bwrap_runner::check()
{
    if (auto ec = co_await ensure_usable())
        throw boost::system::system_error(ec);
    if (st_->setup_error)
        co_return st_->setup_error;
    if (pool_)
        pool_->refill(enforcement());
    co_return st_->unusable;
}

std::optional<failure> bwrap_runner::setup_error() const
{
    return st_->setup_error;
}

const std::string& bwrap_runner::program() const noexcept
{
    return st_->bwrap;
}

std::vector<std::string> bwrap_runner::unwritable_paths() const
{
    return st_->unwritable;
}

std::uint32_t bwrap_runner::command_uid() const
{
    return st_->user ? st_->user->uid : static_cast<std::uint32_t>(::geteuid());
}

enforcement_report bwrap_runner::enforcement() const
{
    enforcement_report e;
    if (st_->setup_error || st_->unusable)
    {
        e.unavailable = (st_->setup_error ? st_->setup_error : st_->unusable)->diag.message;
        return e;
    }
    if (st_->bwrap.empty())
    {
        e.unavailable = "bubblewrap (bwrap) was not found";
        return e;
    }
    e = backend::supervised_enforcement(opts_.cgroup);
    if (!e.unavailable.empty())
        return e;
    e.net_modes = {net_mode::deny_all, net_mode::allow_list, net_mode::proxy};
    e.socks5 = true; // the egress proxy's port speaks SOCKS5 too
    e.mitm = true;   // and it terminates the TLS of the CONNECTs net.mitm selects
    e.filesystem_bounds = true;
    e.unix_socket_policy = holds_unix_socket_policy(opts_);
    e.command_uid = command_uid();
    e.command_gid = st_->user ? st_->user->gid : static_cast<std::uint32_t>(::getegid());
    e.unwritable_paths = st_->unwritable;
    return e;
}

// An instance waits for the probe as sessions do: its open is no command's run.
asio::awaitable<outcome<std::shared_ptr<instance>>> bwrap_runner::try_open(instance_spec spec)
{
    if (auto ec = co_await ensure_usable())
    {
        failure f;
        f.code = ec;
        f.diag.message = "cancelled while waiting for bubblewrap's availability probe; nothing ran";
        f.diag.backend = "bwrap";
        co_return f;
    }
    co_return co_await bwrap::open_instance(ex_, opts_, st_, enforcement(), std::move(spec));
}

namespace {

asio::awaitable<void> close_held(std::shared_ptr<instance> i)
{
    co_await i->close();
}

// A one-shot call in a warm sandbox. The command's tree is gone when the instance answers
// (its own worker inside kills it whole), and the sandbox is then closed on the side, so
// the call's completion does not wait for bwrap and the init to end; but when the command
// took its worker down (its orphans are the init's to kill) or the instance ended under it,
// the close is awaited: nothing of the call runs past its result. Its network's records
// stop reaching the call with its end.
asio::awaitable<exec_outcome> exec_warm(bwrap::warm_instance w, exec_request req)
{
    struct detach_records
    {
        std::shared_ptr<net_record_handler> slot;
        ~detach_records() { *slot = nullptr; }
    } detach{w.records};
    *w.records = std::move(req.on_net_record);
    req.on_net_record = nullptr;
    auto warm = std::move(w.inst);
    exec_outcome out = co_await warm->try_exec(std::move(req));
    const bool lost =
        out.ec == errc::instance_closed ||
        (out.result.status == exec_status::unenforceable && out.result.diag.limit == "supervisor");
    if (lost)
    {
        co_await warm->close();
        co_return out;
    }
    auto ex = warm->get_executor();
    asio::post(ex, [ex, warm = std::move(warm)]() mutable {
        asio::co_spawn(ex, close_held(std::move(warm)), asio::detached);
    });
    co_return out;
}

// A warm sandbox that ended while it waited (killed from outside, its init gone) before
// the pool could know: the command never started in it.
bool ended_before_start(const exec_outcome& o) noexcept
{
    return o.ec == errc::instance_closed && o.result.status == exec_status::not_started;
}

} // namespace

// No probe before a call: a call's own run is the probe. A command that ran proves bwrap
// usable here; only a run that bwrap could not set up asks the probe whether the host
// cannot (then that call, and every later one, gets the probe's verdict at once).
asio::awaitable<exec_outcome> bwrap_runner::try_exec(exec_request req)
{
    auto st = st_;
    bwrap::warm_instance warm;
    if (pool_ && bwrap::pool_serves(req, opts_.warm_net))
        warm = pool_->take();
    if (warm.inst)
    {
        // The replacement starts after this call's completion has run, however it ends.
        struct refill_after
        {
            executor_type ex;
            std::weak_ptr<bwrap::warm_pool> pool;
            ~refill_after()
            {
                asio::post(ex, [w = pool] {
                    if (auto p = w.lock())
                        p->refill();
                });
            }
        } refill{ex_, pool_};
        // For a warm sandbox found dead before the command started: a copy of the request,
        // its input included (a memcpy of at most what the caller gave, against a sandbox
        // exec's milliseconds).
        exec_request again = req;
        exec_outcome served = co_await exec_warm(std::move(warm), std::move(req));
        if (!ended_before_start(served))
            co_return served;
        req = std::move(again); // nothing of the call ran: it runs cold, as without a pool
    }
    exec_outcome out = co_await backend::exec_plan(ex_, prepare(ex_, req, opts_, *st), "bwrap");
    if (proves_usable(out.result))
    {
        // Stronger than a probe that said otherwise meanwhile (a flaky host, a probe cut
        // short): later calls run.
        st->probed = true;
        st->unusable.reset();
        if (pool_ && !pool_->has_report())
            pool_->refill(enforcement());
        else if (pool_)
            pool_->refill();
        co_return out;
    }
    if (st->probed || !bwrap_set_up_failed(out))
        co_return out; // settled, or refused before bwrap ran, or cut short: nothing learnt
    if (co_await ensure_usable())
        co_return out; // cancelled while the probe ran: this call's own failure stands
    if (!st->unusable)
        co_return out;
    diagnostics d = st->unusable->diag;
    d.backend = "bwrap";
    co_return not_run(st->unusable->code, std::move(d));
}

} // namespace sandbox
