// tools/sandbox-run/config_run.cpp: the entry of a config document as sandbox-run's runner,
// and --check. The document's problems and the build's are reported all at once.
#include "config_run.hpp"

#include "ask_terminal.hpp"
#include "streaming.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/config/document.hpp>

#include <boost/asio/co_spawn.hpp>

#include <unistd.h>

namespace sandbox::cli {
namespace {

namespace asio = boost::asio;

// The entry's chain, borrowed from the registry (which outlives the run).
class borrowed_runner final : public sandbox::runner
{
public:
    explicit borrowed_runner(sandbox::runner& inner) : inner_(inner) {}
    executor_type get_executor() const noexcept override { return inner_.get_executor(); }
    asio::awaitable<exec_outcome> try_exec(exec_request req) override
    {
        return inner_.try_exec(std::move(req));
    }
    enforcement_report enforcement() const override { return inner_.enforcement(); }
    process_manager* sessions() noexcept override { return inner_.sessions(); }

private:
    sandbox::runner& inner_;
};

// bwrap's probe (namespaces, the sandbox user, its option checks); null when usable or not
// bwrap.
std::optional<failure> probe(asio::io_context& ioc, sandbox::runner* backend)
{
    auto* b = dynamic_cast<sandbox::bwrap_runner*>(backend);
    return b ? check_bwrap(ioc, *b) : std::nullopt;
}

outcome<sandbox::config::registry> build(asio::io_context& ioc,
                                         const sandbox::config::document& doc,
                                         const run_config& cfg,
                                         std::shared_ptr<sandbox::audit_sink> audit)
{
    sandbox::config::build_options o;
    for (const auto& [name, dir] : cfg.workspaces)
        o.workspaces[name] = dir;
    o.ask = terminal_approver();
    o.audit = std::move(audit);
    return sandbox::config::builder().build(ioc.get_executor(), doc, std::move(o));
}

// Each line on its own, made safe for a terminal.
void print_lines(const std::string& text)
{
    std::size_t at = 0;
    while (at < text.size())
    {
        auto end = text.find('\n', at);
        if (end == std::string::npos)
            end = text.size();
        write_fully(STDERR_FILENO, "sandbox-run: " + printable_text(text.substr(at, end - at)) + "\n");
        at = end + 1;
    }
}

void print_problems(const failure& f)
{
    print_lines(f.diag.path.empty() ? f.diag.message : f.diag.path + ": " + f.diag.message);
}

} // namespace

config_pick pick_from_config(asio::io_context& ioc, run_config& cfg)
{
    config_pick p;
    auto doc = sandbox::config::load_document(cfg.config_file);
    if (!doc)
    {
        p.refusal = doc.error();
        return p;
    }
    const auto* entry = doc->find(cfg.sandbox_name);
    if (!entry)
    {
        std::string names;
        for (const auto& e : doc->sandboxes)
            names += (names.empty() ? "" : ", ") + e.name;
        p.refusal = make_failure(errc::not_found, "--sandbox: no sandbox named \"" +
                                                      cfg.sandbox_name + "\" in " +
                                                      cfg.config_file + " (it has: " +
                                                      (names.empty() ? "none" : names) + ")");
        return p;
    }
    p.backend = entry->backend;
    sandbox::config::document one;
    one.version = doc->version;
    one.sandboxes.push_back(*entry);
    if (!cfg.chain.audit.empty())
    {
        p.audit = std::make_shared<sandbox::audit_file>(cfg.chain.audit);
        cfg.chain.audit.clear();
    }
    auto reg = build(ioc, one, cfg, p.audit);
    if (!reg)
    {
        p.refusal = reg.error();
        return p;
    }
    p.registry = std::make_unique<sandbox::config::registry>(std::move(*reg));
    if (auto refused = probe(ioc, p.registry->backend(cfg.sandbox_name)))
    {
        p.refusal = std::move(*refused);
        return p;
    }
    p.runner = std::make_unique<borrowed_runner>(p.registry->get(cfg.sandbox_name));
    return p;
}

// One pass: the document's problems, then the build's, probe's and gate's of every entry
// that has none of its own, each entry built alone (a bad entry does not hide a missing
// root in another, nor that one the gate's word on a third).
int check_config(asio::io_context& ioc, const run_config& cfg)
{
    auto text = sandbox::config::read_document_file(cfg.config_file);
    if (!text)
    {
        print_problems(text.error());
        return exit_sandbox_failure;
    }
    sandbox::config::document clean;
    std::string out, problems;
    for (const auto& p : sandbox::config::check_document(*text, clean))
        problems += cfg.config_file + ": " + sandbox::config::to_string(p) + "\n";
    for (const auto& entry : clean.sandboxes)
    {
        sandbox::config::document one;
        one.version = clean.version;
        one.sandboxes.push_back(entry);
        auto reg = build(ioc, one, cfg, nullptr);
        if (!reg)
        {
            problems += reg.error().diag.message + "\n";
            continue;
        }
        const std::string path = "sandboxes[\"" + entry.name + "\"]";
        if (auto refused = probe(ioc, reg->backend(entry.name)))
            problems += path + ".backend: " + refused->diag.message + "\n";
        const auto e = reg->get(entry.name).enforcement();
        for (const auto& p : sandbox::config::capability_gate(entry.defaults, e, path))
            if (p.path.find(".backend") == std::string::npos) // said above
                problems += sandbox::config::to_string(p) + "\n";
        out += entry_to_json(entry, reg->root(entry.name), e) + "\n";
    }
    if (!problems.empty())
    {
        print_lines(problems);
        return exit_sandbox_failure;
    }
    write_fully(STDOUT_FILENO, out);
    return 0;
}

std::optional<failure> check_bwrap(asio::io_context& ioc, sandbox::bwrap_runner& b)
{
    std::optional<failure> verdict;
    std::exception_ptr thrown;
    asio::co_spawn(ioc, b.check(), [&](std::exception_ptr e, std::optional<failure> f) {
        thrown = e;
        verdict = std::move(f);
    });
    ioc.run();
    ioc.restart();
    if (thrown)
        std::rethrow_exception(thrown);
    return verdict;
}

} // namespace sandbox::cli
