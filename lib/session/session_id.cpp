// lib/session/session_id.cpp: session ids, generated (time-ordered) and checked.
#include "session/session_state.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <random>

namespace sandbox::detail {

namespace {

struct id_seed
{
    std::array<unsigned char, 5> machine{};
    std::atomic<std::uint32_t> counter{0};
    id_seed()
    {
        std::random_device rd;
        for (auto& b : machine)
            b = static_cast<unsigned char>(rd());
        counter = rd();
    }
};

} // namespace

std::string generate_session_id()
{
    static id_seed seed;
    std::array<unsigned char, 12> raw{};
    const auto secs = static_cast<std::uint32_t>(
        std::chrono::duration_cast<std::chrono::seconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    for (int i = 0; i < 4; ++i)
        raw[static_cast<std::size_t>(i)] = static_cast<unsigned char>(secs >> (24 - 8 * i));
    for (std::size_t i = 0; i < 5; ++i)
        raw[4 + i] = seed.machine[i];
    const std::uint32_t n = seed.counter.fetch_add(1);
    raw[9] = static_cast<unsigned char>(n >> 16);
    raw[10] = static_cast<unsigned char>(n >> 8);
    raw[11] = static_cast<unsigned char>(n);
    // 96 bits, 5 at a time, most significant first: 20 characters (the last one padded).
    static constexpr char alphabet[] = "0123456789abcdefghijklmnopqrstuv";
    std::string out;
    out.reserve(20);
    unsigned acc = 0;
    int bits = 0;
    for (unsigned char b : raw)
    {
        acc = (acc << 8) | b;
        bits += 8;
        while (bits >= 5)
        {
            out.push_back(alphabet[(acc >> (bits - 5)) & 31]);
            bits -= 5;
        }
    }
    if (bits > 0)
        out.push_back(alphabet[(acc << (5 - bits)) & 31]);
    return out;
}

bool valid_session_id(std::string_view id) noexcept
{
    if (id.empty() || id.size() > 128)
        return false;
    for (char c : id)
    {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
                        c == ':' || c == '@';
        if (!ok)
            return false;
    }
    return true;
}

} // namespace sandbox::detail
