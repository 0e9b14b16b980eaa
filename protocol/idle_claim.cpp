// protocol/idle_claim.cpp: the shared word of an idle worker (idle_claim.hpp).
#include "protocol/idle_claim.hpp"

#include <atomic>
#include <utility>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::detail::proto {

namespace {

constexpr std::size_t word_page = 4096;

std::uint32_t* map_word(int fd) noexcept
{
    void* p = ::mmap(nullptr, word_page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : static_cast<std::uint32_t*>(p);
}

} // namespace

idle_claim::idle_claim(idle_claim&& o) noexcept
    : fd_(std::move(o.fd_)), word_(std::exchange(o.word_, nullptr))
{
}

idle_claim& idle_claim::operator=(idle_claim&& o) noexcept
{
    if (this != &o)
    {
        unmap();
        fd_ = std::move(o.fd_);
        word_ = std::exchange(o.word_, nullptr);
    }
    return *this;
}

idle_claim::~idle_claim()
{
    unmap();
}

void idle_claim::unmap() noexcept
{
    if (word_)
        ::munmap(word_, word_page);
    word_ = nullptr;
}

idle_claim idle_claim::make()
{
    idle_claim c;
    backend::unique_fd fd(::memfd_create("sbx-idle-claim", MFD_CLOEXEC));
    if (!fd || ::ftruncate(fd.get(), word_page) != 0)
        return c;
    c.word_ = map_word(fd.get()); // a fresh memfd reads as zeros: idle
    if (c.word_)
        c.fd_ = std::move(fd);
    return c;
}

idle_claim idle_claim::map(int fd)
{
    idle_claim c;
    struct stat st{};
    if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(word_page))
        return c;
    c.word_ = map_word(fd);
    return c;
}

bool idle_claim::swap_from_idle(std::uint32_t to) noexcept
{
    if (!word_)
        return false;
    std::uint32_t expected = idle;
    return std::atomic_ref<std::uint32_t>(*word_).compare_exchange_strong(expected, to);
}

bool idle_claim::has_retired() const noexcept
{
    return word_ && std::atomic_ref<std::uint32_t>(*word_).load() == retired;
}

} // namespace sandbox::detail::proto
