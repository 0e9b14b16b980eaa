// lib/policy/predicates.cpp: the built-in approval predicates.
#include <sandbox/error.hpp>
#include <sandbox/policy/predicates.hpp>

#include "policy/glob.hpp"

#include <ostream>

namespace sandbox {

namespace fs = std::filesystem;

const char* to_string(call_kind k) noexcept
{
    return k == call_kind::session ? "session" : k == call_kind::instance ? "instance" : "exec";
}

std::ostream& operator<<(std::ostream& os, call_kind k)
{
    return os << to_string(k);
}

std::string command_base_name(std::string_view command)
{
    while (!command.empty() && command.back() == '/')
        command.remove_suffix(1);
    if (command.empty())
        return ".";
    const auto slash = command.rfind('/');
    return std::string(slash == std::string_view::npos ? command : command.substr(slash + 1));
}

predicate command_patterns(std::vector<std::string> patterns)
{
    std::vector<detail::glob_pattern> compiled;
    compiled.reserve(patterns.size());
    for (const auto& p : patterns)
        compiled.push_back(detail::glob_pattern::parse(p).value()); // throws on a bad one
    return [compiled = std::move(compiled)](const call_snapshot& c) -> std::optional<std::string> {
        const auto base = command_base_name(c.command);
        for (const auto& g : compiled)
            if (g.match(base))
                return "command \"" + base + "\" matches sensitive pattern \"" + g.text() + "\"";
        return std::nullopt;
    };
}

predicate interactive()
{
    return [](const call_snapshot& c) -> std::optional<std::string> {
        if (c.interactive())
            return std::string("interactive terminal session");
        return std::nullopt;
    };
}

predicate net_non_default()
{
    return [](const call_snapshot& c) -> std::optional<std::string> {
        if (c.options.net.mode == net_mode::inherit)
            return std::nullopt;
        return std::string("network mode \"") + to_string(c.options.net.mode) +
               "\" is not the default";
    };
}

namespace {

// Absolute, `.` and `..` folded, symlinks of the existing part resolved; on an error the
// folded path (never an exception: a predicate must answer).
fs::path resolved(const fs::path& p)
{
    std::error_code ec;
    auto r = fs::weakly_canonical(p, ec);
    return ec ? p.lexically_normal() : r;
}

bool inside(const fs::path& p, const fs::path& root)
{
    auto [r, q] = std::mismatch(root.begin(), root.end(), p.begin(), p.end());
    // A trailing empty element ("dir/") is no element.
    return r == root.end() || (std::next(r) == root.end() && r->empty());
}

} // namespace

predicate work_dir_outside_root(const fs::path& root_in)
{
    std::error_code ec;
    fs::path root = fs::absolute(root_in, ec);
    if (ec)
        root = root_in;
    root = resolved(root);
    return [root](const call_snapshot& c) -> std::optional<std::string> {
        const auto& wd = c.options.work_dir;
        if (wd.empty())
            return std::nullopt;
        fs::path p(wd);
        if (p.is_relative())
            p = root / p;
        const fs::path r = resolved(p.lexically_normal());
        if (inside(r, root))
            return std::nullopt;
        return "work directory \"" + wd + "\" is outside the root \"" + root.string() + "\"";
    };
}

predicate make_predicate(std::function<bool(const call_snapshot&)> test, std::string reason)
{
    if (!test)
        return {};
    return [test = std::move(test), reason = std::move(reason)](
               const call_snapshot& c) -> std::optional<std::string> {
        if (test(c))
            return reason;
        return std::nullopt;
    };
}

} // namespace sandbox
