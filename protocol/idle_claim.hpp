// protocol/idle_claim.hpp: who ends an idle worker's wait, the library or the worker.
//
// An idle worker beyond the pool's `keep_idle` (sandbox/worker_pool.hpp) retires by itself
// after `retire_after`: the timer runs in the worker, so no wait of the library's keeps the
// caller's io_context from running out of work. The library and the worker share one word
// (a page of a memfd sent with msg_type::retire), and whoever changes it first from `idle`
// wins: the library taking the worker for a plan (then the worker stays), or the worker
// retiring (then the library drops the channel and takes another worker). So no plan is
// ever sent to a worker that is leaving.
#ifndef SANDBOX_PROTOCOL_IDLE_CLAIM_HPP
#define SANDBOX_PROTOCOL_IDLE_CLAIM_HPP

#include <sandbox/unique_fd.hpp>

#include <cstdint>

namespace sandbox::detail::proto {

class idle_claim
{
public:
    idle_claim() = default;
    idle_claim(const idle_claim&) = delete;
    idle_claim& operator=(const idle_claim&) = delete;
    idle_claim(idle_claim&& o) noexcept;
    idle_claim& operator=(idle_claim&& o) noexcept;
    ~idle_claim();

    /// A fresh word, `idle`, in a memfd of its own (the library's side). Empty on failure
    /// (errno set).
    static idle_claim make();
    /// The word behind a memfd received with msg_type::retire (the worker's side). Empty
    /// when it cannot be mapped.
    static idle_claim map(int fd);

    explicit operator bool() const noexcept { return word_ != nullptr; }
    /// The memfd to send (the library's side keeps it until sent).
    int fd() const noexcept { return fd_.get(); }
    void drop_fd() noexcept { fd_.reset(); }

    /// The library takes the worker for a plan: false when it has retired.
    bool take() noexcept { return swap_from_idle(taken); }
    /// The worker retires: false when the library took it first.
    bool retire() noexcept { return swap_from_idle(retired); }
    /// True once the worker retired (it exits right after).
    bool has_retired() const noexcept;

private:
    static constexpr std::uint32_t idle = 0, taken = 1, retired = 2;
    bool swap_from_idle(std::uint32_t to) noexcept;
    void unmap() noexcept;

    backend::unique_fd fd_;
    std::uint32_t* word_ = nullptr;
};

} // namespace sandbox::detail::proto

#endif // SANDBOX_PROTOCOL_IDLE_CLAIM_HPP
