// sandbox/backend/caps.hpp: the caps the supervisor samples for one tree.
#ifndef SANDBOX_BACKEND_CAPS_HPP
#define SANDBOX_BACKEND_CAPS_HPP

#include <chrono>
#include <cstdint>

namespace sandbox::backend {

/// \brief The caps the supervisor samples for one tree, in the units it judges them in.
/// Zero: no cap. The one representation from the request (`caps_of`) through the spawn
/// plan and the wire to the worker's `cap_budget`.
struct cap_limits
{
    std::uint64_t memory_bytes = 0;
    /// Total cpu time of the tree (`cpu_budget(options)`).
    std::chrono::nanoseconds cpu{0};
    std::uint64_t max_processes = 0;
    /// Threads of all processes of the tree.
    std::uint64_t max_tasks = 0;

    bool any() const noexcept
    {
        return memory_bytes > 0 || cpu.count() > 0 || max_processes > 0 || max_tasks > 0;
    }
};

} // namespace sandbox::backend

#endif // SANDBOX_BACKEND_CAPS_HPP
