// config/backends.cpp: the "local" and "bwrap" factories. Settings are JSON (the
// document's subtree), decoded strictly: an unknown key or a wrong type is a problem naming
// the key; every problem of one entry's settings is reported together.
#include "config/backends.hpp"

#include <sandbox/bwrap_runner.hpp>
#include <sandbox/error.hpp>
#include <sandbox/local_runner.hpp>

#include <boost/json.hpp>

#include <filesystem>
#include <initializer_list>

namespace sandbox::config::detail {
namespace {

namespace json = boost::json;

class settings_reader
{
public:
    settings_reader(const backend_context& ctx, std::initializer_list<std::string_view> known)
        : ctx_(ctx)
    {
        if (ctx.settings.is_null())
            return;
        if (!ctx.settings.is_object())
        {
            fail("", "must be a mapping");
            return;
        }
        obj_ = &ctx.settings.get_object();
        for (const auto& kv : *obj_)
        {
            bool found = false;
            for (auto k : known)
                found = found || k == kv.key();
            if (!found)
                fail(std::string(kv.key()), "unknown key");
        }
    }

    const json::value* get(std::string_view key) const
    {
        if (!obj_)
            return nullptr;
        const json::value* v = obj_->if_contains(key);
        return v && !v->is_null() ? v : nullptr;
    }

    void text(std::string_view key, std::string& out)
    {
        if (const auto* v = get(key))
        {
            if (v->is_string())
                out = std::string(v->get_string());
            else
                fail(key, "must be a string");
        }
    }

    void texts(std::string_view key, std::vector<std::string>& out)
    {
        const auto* v = get(key);
        if (!v)
            return;
        if (!v->is_array())
        {
            fail(key, "must be a list of strings");
            return;
        }
        const auto& a = v->get_array();
        for (std::size_t i = 0; i < a.size(); ++i)
        {
            if (!a[i].is_string() || a[i].get_string().empty())
                fail(std::string(key) + "[" + std::to_string(i) + "]",
                     "must be a non-empty string");
            else
                out.emplace_back(a[i].get_string());
        }
    }

    void size(std::string_view key, std::int64_t& out)
    {
        const auto* v = get(key);
        if (!v)
            return;
        if (v->is_int64() && v->get_int64() >= 0)
            out = v->get_int64();
        else if (v->is_string())
        {
            auto r = parse_size(v->get_string());
            if (r)
                out = *r;
            else
                fail(key, r.error().diag.message);
        }
        else
            fail(key, "must be a non-negative byte count");
    }

    void count(std::string_view key, std::size_t& out)
    {
        const auto* v = get(key);
        if (!v)
            return;
        if (v->is_int64() && v->get_int64() > 0)
            out = static_cast<std::size_t>(v->get_int64());
        else if (v->is_uint64() && v->get_uint64() > 0)
            out = static_cast<std::size_t>(v->get_uint64());
        else
            fail(key, "must be a positive whole number");
    }

    void duration(std::string_view key, std::chrono::nanoseconds& out)
    {
        const auto* v = get(key);
        if (!v)
            return;
        if (!v->is_string())
        {
            fail(key, "must be a duration string such as \"100ms\"");
            return;
        }
        auto r = parse_duration(v->get_string());
        if (r && r->count() > 0)
            out = *r;
        else
            fail(key, r ? "must be positive" : r.error().diag.message);
    }

    void fail(std::string_view key, std::string message)
    {
        const std::string p = key.empty() ? ctx_.path : ctx_.path + "." + std::string(key);
        // The first problem's path goes in diag.rule (the problem's path); the others are
        // listed after it with their own.
        if (first_.empty())
        {
            first_ = p;
            problems_ = std::move(message);
        }
        else
            problems_ += "\n" + p + ": " + message;
    }

    // Throws the problems found, if any.
    void done() const
    {
        if (problems_.empty())
            return;
        auto f = make_failure(errc::validation, problems_);
        f.diag.rule = first_;
        throw_exception_from_error(f, BOOST_CURRENT_LOCATION);
    }

    const backend_context& context() const { return ctx_; }

private:
    const backend_context& ctx_;
    const json::object* obj_ = nullptr;
    std::string problems_{}, first_{};
};

void common(settings_reader& s, common_runner_options& o)
{
    o.root = s.context().root;
    s.size("default_max_output_bytes", o.default_max_output_bytes);
    s.text("cgroup", o.cgroup);
    s.duration("sample_interval", o.sample_interval);
}

} // namespace

std::string resolve_settings_path(const std::string& root, const std::string& p,
                                  const std::string& where)
{
    namespace fs = std::filesystem;
    auto refuse = [&](std::string why) {
        auto f = make_failure(errc::validation, "\"" + p + "\" " + why);
        f.diag.rule = where;
        throw_exception_from_error(f, BOOST_CURRENT_LOCATION);
    };
    if (p.empty())
        refuse("is empty");
    const fs::path path(p);
    if (path.is_absolute())
        return path.lexically_normal().string();
    const fs::path rel = path.lexically_normal();
    if (rel.empty() || *rel.begin() == "..")
        refuse("escapes the root");
    std::error_code ec;
    const fs::path real_root = fs::weakly_canonical(root, ec);
    const fs::path real = fs::weakly_canonical(fs::path(root) / rel, ec);
    if (ec)
        refuse("cannot be resolved: " + ec.message());
    const auto inside = real.lexically_relative(real_root);
    if (inside.empty() || *inside.begin() == "..")
        refuse("escapes the root through a symlink");
    return real.string();
}

std::unique_ptr<runner> make_local(const backend_context& ctx)
{
    settings_reader s(ctx, {"default_max_output_bytes", "cgroup", "sample_interval"});
    local_runner_options o;
    common(s, o);
    s.done();
    return std::make_unique<local_runner>(ctx.executor, std::move(o));
}

// The most warm sandboxes an entry may keep.
constexpr std::size_t max_warm = 16;

std::unique_ptr<runner> make_bwrap(const backend_context& ctx)
{
    settings_reader s(ctx, {"default_max_output_bytes", "cgroup", "sample_interval", "binary",
                            "writable_paths", "read_deny", "write_deny", "unix_sockets",
                            "extra_flags", "sandbox_user", "max_tunnels", "max_sandbox_tunnels",
                            "setup_timeout", "warm"});
    bwrap_runner_options o;
    common(s, o);
    s.text("binary", o.bwrap_path);
    std::vector<std::string> writable;
    s.texts("writable_paths", writable);
    s.texts("read_deny", o.read_deny);
    s.texts("write_deny", o.write_deny);
    s.texts("unix_sockets", o.unix_sockets);
    s.texts("extra_flags", o.extra_flags);
    s.text("sandbox_user", o.sandbox_user);
    s.count("max_tunnels", o.proxy.limits.max_tunnels);
    s.count("max_sandbox_tunnels", o.proxy.limits.max_sandbox_tunnels);
    s.duration("setup_timeout", o.setup_timeout);
    std::size_t warm = 0;
    s.count("warm", warm);
    if (warm > max_warm)
        s.fail("warm", "at most " + std::to_string(max_warm) + " (each is a sandbox kept set up)");
    if (ctx.warm_pools)
        o.warm = warm;
    o.warm_net = ctx.default_net; // what the entry's calls get unless they narrow it
    s.done();
    o.read_deny.insert(o.read_deny.end(), ctx.hidden_paths.begin(), ctx.hidden_paths.end());
    for (std::size_t i = 0; i < writable.size(); ++i)
        o.writable_paths.push_back(resolve_settings_path(
            ctx.root, writable[i], ctx.path + ".writable_paths[" + std::to_string(i) + "]"));
    auto r = std::make_unique<bwrap_runner>(ctx.executor, std::move(o));
    // A setting the runner refuses is a problem at that setting (the root at the entry's
    // `root`), not a backend that cannot run here.
    if (auto f = r->setup_error(); f && f->code == errc::validation)
    {
        const std::string entry = ctx.path.substr(0, ctx.path.rfind(".settings"));
        f->diag.rule = f->diag.limit == "root"    ? entry + ".root"
                       : f->diag.limit.empty()    ? ctx.path
                                                  : ctx.path + "." + f->diag.limit;
        throw_exception_from_error(*f, BOOST_CURRENT_LOCATION);
    }
    return r;
}

} // namespace sandbox::config::detail
