// config/registry.cpp: building the runners of a document: each entry's root, its backend
// from the catalog, the capability gate, the composed chain; every problem reported, and what
// was built destroyed in reverse order when the build fails.
#include "config/backends.hpp"
#include "config/tree.hpp"
#include "proxy_url.hpp"

#include <sandbox/config/registry.hpp>
#include <sandbox/error.hpp>
#include <sandbox/policy/decorators.hpp>
#include <sandbox/policy/predicates.hpp>

#include <filesystem>
#include <system_error>

namespace sandbox::config {

struct registry::impl
{
    struct built
    {
        std::string name;
        std::string root;
        runner* backend = nullptr; // owned by the chain
        std::unique_ptr<runner> chain;
    };
    document doc;
    // In build order (name order); destroyed in reverse.
    std::vector<built> runners;

    ~impl()
    {
        while (!runners.empty())
            runners.pop_back();
    }

    const built* find(std::string_view name) const noexcept
    {
        for (const auto& b : runners)
            if (b.name == name)
                return &b;
        return nullptr;
    }
};

registry::registry(std::unique_ptr<impl> p) : p_(std::move(p)) {}
registry::registry(registry&&) noexcept = default;
registry& registry::operator=(registry&&) noexcept = default;
registry::~registry() = default;

std::vector<std::string> registry::names() const
{
    std::vector<std::string> out;
    for (const auto& b : p_->runners)
        out.push_back(b.name);
    return out;
}

runner* registry::find(std::string_view name) const noexcept
{
    const auto* b = p_->find(name);
    return b ? b->chain.get() : nullptr;
}

runner* registry::backend(std::string_view name) const noexcept
{
    const auto* b = p_->find(name);
    return b ? b->backend : nullptr;
}

std::string registry::root(std::string_view name) const
{
    const auto* b = p_->find(name);
    return b ? b->root : std::string();
}

runner& registry::get(std::string_view name) const
{
    if (runner* r = find(name))
        return *r;
    throw_exception_from_error(
        make_failure(errc::not_found, "no sandbox named \"" + std::string(name) +
                                          "\" in the config (see sandbox-run --check)"),
        BOOST_CURRENT_LOCATION);
}

const sandbox_entry* registry::entry(std::string_view name) const noexcept
{
    return p_->doc.find(name);
}

const document& registry::source() const noexcept { return p_->doc; }

namespace {

std::string entry_path(const sandbox_entry& e) { return "sandboxes[\"" + e.name + "\"]"; }

problem at_entry(const sandbox_entry& e, std::string field, std::string message,
                 errc code = errc::validation)
{
    const std::string p = entry_path(e);
    return {code, field.empty() ? p : p + "." + field, e.line, e.column, std::move(message)};
}

std::optional<std::string> resolve_root(const sandbox_entry& e, const build_options& opts,
                                        std::vector<problem>& problems)
{
    std::string root = e.root;
    const char* field = "root";
    if (!e.workspace.empty())
    {
        field = "workspace";
        auto it = opts.workspaces.find(e.workspace);
        if (it == opts.workspaces.end())
        {
            detail::add_problem(problems,
                                at_entry(e, field, "unknown workspace \"" + e.workspace + "\""));
            return std::nullopt;
        }
        root = it->second;
    }
    std::error_code ec;
    auto real = std::filesystem::canonical(root, ec);
    if (ec)
    {
        detail::add_problem(problems, at_entry(e, field, "\"" + root + "\": " + ec.message()));
        return std::nullopt;
    }
    if (!std::filesystem::is_directory(real, ec))
    {
        detail::add_problem(problems, at_entry(e, field, "\"" + root + "\" is not a directory"));
        return std::nullopt;
    }
    return real.string();
}

local_policy policy_of(const sandbox_entry& e, const std::string& root, const build_options& opts)
{
    local_policy p;
    p.defaults = e.defaults;
    p.allowed_commands = e.allowed_commands;
    p.match = e.match;
    if (e.approval.outside_workdir)
        p.approval.predicates.push_back(work_dir_outside_root(root));
    if (e.approval.non_default_network)
        p.approval.predicates.push_back(net_non_default());
    if (e.approval.interactive)
        p.approval.predicates.push_back(interactive());
    if (!e.approval.sensitive_commands.empty())
        p.approval.predicates.push_back(command_patterns(e.approval.sensitive_commands));
    p.approval.ask = opts.ask;
    p.approval.deadline = e.approval.deadline;
    p.audit = opts.audit;
    p.name = e.name;
    p.call_numbers = opts.call_numbers;
    return p;
}

// The backend of one entry, or the problems that stop it.
std::unique_ptr<runner> make_backend(const backend_factory& make, const sandbox_entry& e,
                                     const backend_context& ctx, std::vector<problem>& problems)
{
    try
    {
        auto r = make(ctx);
        if (!r)
            detail::add_problem(
                problems,
                at_entry(e, "backend", "the factory of \"" + e.backend + "\" made no runner"));
        return r;
    }
    catch (const sandbox::error& x)
    {
        const auto code = x.code().category() == error_category()
                              ? static_cast<errc>(x.code().value())
                              : errc::validation;
        detail::add_problem(
            problems, at_entry(e, x.diag().rule.empty() ? "settings" : "", x.diag().message, code));
        if (!x.diag().rule.empty())
            problems.back().path = x.diag().rule;
    }
    catch (const std::exception& x)
    {
        detail::add_problem(problems, at_entry(e, "settings", x.what()));
    }
    return nullptr;
}

} // namespace

// Any spelling of the scheme (SOCKS5://, socks5h://) is a SOCKS5 upstream: read by the one
// parser of proxy URLs.
bool is_socks5_upstream(const std::string& proxy)
{
    auto url = sandbox::detail::parse_proxy_url(proxy);
    return url && url->scheme == sandbox::detail::proxy_url::kind::socks5;
}

std::vector<problem> capability_gate(const exec_options& d, const enforcement_report& e,
                                     const std::string& entry_path)
{
    std::vector<problem> out;
    auto refuse = [&](const char* field, std::string what) {
        out.push_back({errc::not_available, entry_path + ".defaults." + field, 0, 0,
                       "the backend cannot enforce " + what + " here"});
    };
    if (!e.unavailable.empty()) // it enforces nothing: that one reason says it all
    {
        out.push_back({errc::not_available, entry_path + ".backend", 0, 0,
                       "the backend cannot run here: " + e.unavailable});
        return out;
    }
    if (d.env.allow && !e.env_allow_list)
        refuse("env.allow", "an environment allow-list");
    if (d.net.mode != net_mode::inherit &&
        std::find(e.net_modes.begin(), e.net_modes.end(), d.net.mode) == e.net_modes.end())
        refuse("net.mode", std::string("network mode \"") + to_string(d.net.mode) + "\"");
    if (is_socks5_upstream(d.net.proxy) && !e.socks5)
        refuse("net.proxy", "a socks5 upstream");
    if (d.net.mitm && d.net.mitm->enabled && !e.mitm)
        refuse("net.mitm", "TLS inspection (mitm)");
    if (!d.net.unix_sockets.empty() && !e.unix_socket_policy)
        refuse("net.unix_sockets", "a unix socket allow-list");
    if (d.limits.memory_bytes > 0 && !e.memory_cap)
        refuse("resources.memory_bytes", "a memory cap");
    if (d.limits.cpu_millicores > 0 && !e.cpu_cap)
        refuse("resources.cpu_millicores", "a cpu cap");
    if (d.limits.disk_bytes > 0 && !e.disk_cap)
        refuse("resources.disk_bytes", "a disk cap");
    if (d.limits.max_processes > 0 && !e.process_cap)
        refuse("resources.max_processes", "a process cap");
    if (d.limits.max_tasks > 0 && !e.task_cap)
        refuse("resources.max_tasks", "a task cap");
    return out;
}

builder::builder()
{
    factories_.emplace("local", &detail::make_local);
    factories_.emplace("bwrap", &detail::make_bwrap);
}
builder::builder(const builder&) = default;
builder& builder::operator=(const builder&) = default;
builder::~builder() = default;

void builder::register_backend(std::string name, backend_factory factory)
{
    if (name.empty() || !factory)
        throw_exception_from_error(
            make_failure(errc::validation, name.empty() ? "a backend needs a name"
                                                        : "backend \"" + name + "\" has no factory"),
            BOOST_CURRENT_LOCATION);
    factories_[std::move(name)] = std::move(factory);
}

namespace {

outcome<registry> fail_with(std::vector<problem>& problems)
{
    return detail::failure_of_problems(problems, "sandbox config: ");
}

} // namespace

std::vector<problem> builder::check(runner::executor_type ex, const document& doc,
                                    const build_options& opts) const
{
    std::vector<problem> problems;
    (void)build_into(std::move(ex), doc, opts, problems);
    return problems;
}

outcome<registry> builder::build(runner::executor_type ex, const document& doc,
                                 build_options opts) const
{
    std::vector<problem> problems;
    auto r = build_into(std::move(ex), doc, opts, problems);
    if (!r)
        return fail_with(problems);
    return std::move(*r);
}

std::optional<registry> builder::build_into(runner::executor_type ex, const document& doc,
                                            const build_options& opts,
                                            std::vector<problem>& problems) const
{
    auto p = std::make_unique<registry::impl>();
    p->doc = doc;
    for (const auto& e : doc.sandboxes)
    {
        const std::size_t before = problems.size();
        auto root = resolve_root(e, opts, problems);
        if (e.approval.any() && !opts.ask)
            detail::add_problem(problems, at_entry(e, "approval",
                                                   "approval predicates need an approver (the "
                                                   "application's build_options::ask)"));
        auto f = factories_.find(e.backend);
        if (f == factories_.end())
            detail::add_problem(problems,
                                at_entry(e, "backend", "unknown backend \"" + e.backend + "\""));
        if (problems.size() != before)
            continue;
        backend_context ctx{ex,
                            *root,
                            e.settings,
                            entry_path(e) + ".settings",
                            opts.hidden_paths,
                            opts.warm_pools,
                            e.defaults.net};
        auto backend = make_backend(f->second, e, ctx, problems);
        if (!backend)
            continue;
        auto refused = capability_gate(e.defaults, backend->enforcement(), entry_path(e));
        for (auto& r : refused)
            r.line = e.line, r.column = e.column;
        if (!refused.empty())
        {
            problems.insert(problems.end(), refused.begin(), refused.end());
            continue;
        }
        runner* raw = backend.get();
        try // a document made in code may hold what the chain refuses (parse_document checks it)
        {
            p->runners.push_back(
                {e.name, *root, raw, compose_local(std::move(backend), policy_of(e, *root, opts))});
        }
        catch (const sandbox::error& x)
        {
            detail::add_problem(problems, at_entry(e, "", x.diag().message));
        }
    }
    if (!problems.empty())
        return std::nullopt; // p goes: the runners built so far, in reverse order
    return registry(std::move(p));
}

} // namespace sandbox::config
