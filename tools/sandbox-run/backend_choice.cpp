// tools/sandbox-run/backend_choice.cpp: which backend `--backend auto` runs a command line
// on, and `--enforcement`'s report of it.
#include "cli_internal.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string_view.hpp>

#include <fstream>
#include <iterator>
#include <string_view>
#include <utility>

namespace sandbox::cli {

std::vector<std::string> bwrap_only_flags(const run_config& cfg)
{
    std::vector<std::string> out;
    for (auto [flag, given] : {std::pair{"--writable", !cfg.bwrap.writable.empty()},
                               std::pair{"--read-deny", !cfg.bwrap.read_deny.empty()},
                               std::pair{"--write-deny", !cfg.bwrap.write_deny.empty()},
                               std::pair{"--unix-socket", !cfg.bwrap.unix_sockets.empty()},
                               std::pair{"--read-only", !cfg.bwrap.read_only.empty()},
                               std::pair{"--sandbox-user", !cfg.bwrap.sandbox_user.empty()}})
        if (given)
            out.emplace_back(flag);
    switch (cfg.request.options.net.mode)
    {
    case sandbox::net_mode::deny_all: out.emplace_back("--net deny"); break;
    case sandbox::net_mode::allow_list: out.emplace_back("--net allow-list (--allow-host)"); break;
    case sandbox::net_mode::proxy: out.emplace_back("--net proxy (--proxy)"); break;
    case sandbox::net_mode::inherit: break;
    }
    if (!cfg.net_proxy.resolve.empty())
        out.emplace_back("--resolve");
    return out;
}

namespace {

// The whole of a small /proc file; empty when it cannot be read.
std::string text_of(const char* path)
{
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The number in a one-number /proc file; -1 when missing or not a number.
long number_in(const char* path)
{
    std::ifstream in(path);
    long v = -1;
    return in >> v ? v : -1;
}

} // namespace

namespace_signs namespace_signs_of(std::string_view status, long userns_clone, long max_userns,
                                   long apparmor_restrict)
{
    namespace_signs s;
    for (std::size_t at = 0; at < status.size();)
    {
        std::size_t nl = status.find('\n', at);
        if (nl == std::string_view::npos)
            nl = status.size();
        std::string_view line = status.substr(at, nl - at);
        at = nl + 1;
        constexpr std::string_view key = "Seccomp:";
        if (line.substr(0, key.size()) != key)
            continue;
        line.remove_prefix(key.size());
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            line.remove_prefix(1);
        s.seccomp_filtered = line == "2";
        break;
    }
    s.userns_clone_off = userns_clone == 0;
    s.no_user_namespaces = max_userns == 0;
    s.apparmor_restricts = apparmor_restrict == 1;
    return s;
}

namespace_signs read_namespace_signs()
{
    return namespace_signs_of(text_of("/proc/self/status"),
                              number_in("/proc/sys/kernel/unprivileged_userns_clone"),
                              number_in("/proc/sys/user/max_user_namespaces"),
                              number_in("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"));
}

bool probe_before_run(const namespace_signs& s)
{
    return s.seccomp_filtered || s.userns_clone_off || s.no_user_namespaces || s.apparmor_restricts;
}

namespace {

std::string joined(const std::vector<std::string>& names)
{
    std::string out;
    for (const auto& n : names)
        out += (out.empty() ? "" : ", ") + n;
    return out;
}

} // namespace

backend_choice choose_backend(const std::optional<failure>& bwrap_check,
                              const std::vector<std::string>& bwrap_only)
{
    backend_choice c;
    c.backend = "bwrap";
    if (!bwrap_check)
    {
        c.reason = "bubblewrap can create its namespaces here for this command line";
        return c;
    }
    const std::string& why = bwrap_check->diag.message;
    failure refusal = *bwrap_check;
    refusal.diag.backend = "bwrap";
    if (bwrap_check->code != errc::not_available)
    {
        // bwrap refuses this command line: the local backend would run it unconfined.
        refusal.diag.message += " (the default backend, auto, runs commands inside "
                                "bubblewrap and never falls back to the local backend for "
                                "a command line bubblewrap refuses; --backend local runs it "
                                "unconfined)";
        c.reason = "refused: bubblewrap refuses this command line: " + why;
        c.refusal = std::move(refusal);
        return c;
    }
    if (!bwrap_only.empty())
    {
        refusal.diag.message = joined(bwrap_only) + " need" + (bwrap_only.size() == 1 ? "s" : "") +
                               " the bwrap backend, which is not usable here: " + why;
        c.reason = "refused: " + refusal.diag.message;
        c.refusal = std::move(refusal);
        return c;
    }
    c.backend = "local";
    c.reason = "bubblewrap is not usable here: " + why;
    c.warning = "warning: bubblewrap is not usable here (" + why +
                "); running on the local backend, which confines nothing";
    return c;
}

std::string enforcement_to_json(const sandbox::enforcement_report& e, std::string_view backend,
                                std::string_view reason)
{
    boost::json::object out;
    out["backend"] = boost::json::string_view(backend.data(), backend.size());
    if (!reason.empty())
        out["backend_reason"] =
            sanitize_utf8(std::string(reason)); // bwrap's stderr may be in it
    const boost::json::value report = boost::json::parse(to_json(e));
    for (const auto& kv : report.as_object())
        out[kv.key()] = kv.value();
    return boost::json::serialize(out);
}

} // namespace sandbox::cli
