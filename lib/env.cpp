// lib/env.cpp: environment construction from an env_policy (no I/O but reading environ).
#include <sandbox/backend/environment.hpp>

#include <algorithm>
#include <unistd.h>

namespace sandbox::backend {

namespace {
std::string_view name_of(std::string_view entry) noexcept
{
    auto eq = entry.find('=');
    return eq == std::string_view::npos ? std::string_view{} : entry.substr(0, eq);
}

bool bad_name(std::string_view n) noexcept
{
    return n.empty() || n.find('=') != n.npos || n.find('\0') != n.npos;
}
} // namespace

outcome<> validate_env_policy(const env_policy& p)
{
    if (p.allow)
    {
        for (const auto& n : *p.allow)
            if (bad_name(n))
                return make_failure(errc::validation,
                                    "env allow-list entry is not a valid variable name",
                                    "env.allow");
    }
    for (const auto& [n, v] : p.inject)
    {
        if (bad_name(n))
            return make_failure(errc::validation, "injected env name is not a valid variable name",
                                "env.inject");
        if (v.find('\0') != v.npos)
            return make_failure(errc::validation, "injected env value of " + n + " holds a NUL byte",
                                "env.inject");
    }
    return {};
}

std::vector<std::string> build_environment(const env_policy& p,
                                           const std::vector<std::string>& host)
{
    std::vector<std::string> env;
    if (!p.allow)
    {
        env.reserve(host.size() + p.inject.size());
        for (const auto& e : host)
            if (!name_of(e).empty())
                env.push_back(e);
    }
    else if (!p.allow->empty())
    {
        for (const auto& e : host)
        {
            auto n = name_of(e);
            if (!n.empty() && std::find(p.allow->begin(), p.allow->end(), n) != p.allow->end())
                env.push_back(e);
        }
    }
    if (!p.inject.empty())
    {
        std::erase_if(env, [&](const std::string& e) {
            return p.inject.find(std::string(name_of(e))) != p.inject.end();
        });
        for (const auto& [n, v] : p.inject)
            env.push_back(n + "=" + v);
    }
    return env;
}

std::vector<std::string> host_environment()
{
    std::vector<std::string> env;
    for (char** e = ::environ; e && *e; ++e)
        env.emplace_back(*e);
    return env;
}

const std::string* find_env(const std::vector<std::string>& env, std::string_view name) noexcept
{
    for (const auto& e : env)
        if (name_of(e) == name)
            return &e;
    return nullptr;
}

} // namespace sandbox::backend
