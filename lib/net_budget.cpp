// lib/net_budget.cpp: the proxies' connection budgets (sandbox/net_proxy.hpp).
#include <sandbox/net_proxy.hpp>

#include <algorithm>

#include <sys/resource.h>

namespace sandbox {

tunnel_budget::tunnel_budget(std::size_t limit) noexcept : limit_(std::max<std::size_t>(limit, 1))
{
}

bool tunnel_budget::try_acquire() noexcept
{
    std::size_t used = used_.load(std::memory_order_relaxed);
    do
    {
        if (used >= limit_)
            return false;
    } while (!used_.compare_exchange_weak(used, used + 1, std::memory_order_relaxed));
    return true;
}

void tunnel_budget::release() noexcept
{
    used_.fetch_sub(1, std::memory_order_relaxed);
}

std::size_t tunnel_budget_for_descriptors(std::uint64_t nofile) noexcept
{
    const std::uint64_t reserve = std::max<std::uint64_t>(64, nofile / 8);
    const std::uint64_t spare = nofile > reserve ? nofile - reserve : 0;
    return static_cast<std::size_t>(std::max<std::uint64_t>(spare / 2, 1));
}

tunnel_budget& process_tunnel_budget()
{
    static tunnel_budget budget([] {
        rlimit r{};
        if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
            return tunnel_budget_for_descriptors(1024);
        return tunnel_budget_for_descriptors(r.rlim_cur);
    }());
    return budget;
}

} // namespace sandbox
