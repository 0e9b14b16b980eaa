// test/fuzz/fuzz_net_policy.cpp: host patterns and network policies built from arbitrary
// bytes: no crash, only validation errors, and accepted host patterns are stable.
#include "host/pattern.hpp"

#include <sandbox/net_policy.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {
// Splits the input at NUL bytes into fields (missing fields are empty).
std::string_view field(std::string_view all, int n)
{
    for (int i = 0; i < n; ++i)
    {
        auto z = all.find('\0');
        if (z == std::string_view::npos)
            return {};
        all.remove_prefix(z + 1);
    }
    return all.substr(0, all.find('\0'));
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    std::string_view in(reinterpret_cast<const char*>(data), size);
    auto host = field(in, 0);
    if (auto p = sandbox::detail::parse_host_pattern(host))
    {
        // Normalising is idempotent: the normalised text parses to the same pattern.
        if (p->kind == sandbox::detail::host_kind::domain)
        {
            auto again = sandbox::detail::parse_host_pattern(p->host);
            if (!again || again->host != p->host)
                std::abort();
        }
    }
    else if (p.error().code != sandbox::errc::validation)
        std::abort();

    sandbox::net_policy pol;
    pol.mode = static_cast<sandbox::net_mode>(size % 5);
    pol.proxy = std::string(field(in, 1));
    sandbox::net_rule rule;
    rule.action = static_cast<sandbox::net_action>(size % 3);
    rule.host = std::string(host);
    rule.port = static_cast<int>(size * 977 % 70000);
    if (!host.empty())
        pol.rules.push_back(rule);
    if (!field(in, 2).empty())
        pol.unix_sockets.emplace_back(field(in, 2));
    auto r = pol.validate();
    if (r.has_error() && (r.error().code != sandbox::errc::validation || r.error().diag.limit.empty()))
        std::abort();
    return 0;
}
