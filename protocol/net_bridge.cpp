// protocol/net_bridge.cpp: the hand-off message and the proxy environment (pure).
#include "protocol/net_bridge.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

namespace sandbox::detail {

std::string net_bridge_body(std::uint16_t port)
{
    return "listen " + std::to_string(port) + "\n";
}

std::optional<std::uint16_t> parse_net_bridge_body(std::string_view body)
{
    constexpr std::string_view prefix = "listen ";
    if (body.size() < prefix.size() + 2 || body.substr(0, prefix.size()) != prefix ||
        body.back() != '\n')
        return std::nullopt;
    const std::string_view digits = body.substr(prefix.size(), body.size() - prefix.size() - 1);
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || end != digits.data() + digits.size() || digits.size() > 5 ||
        value == 0 || value > 65535)
        return std::nullopt;
    return static_cast<std::uint16_t>(value);
}

namespace {

constexpr std::array<std::string_view, 5> proxy_names = {"HTTP_PROXY", "HTTPS_PROXY",
                                                         "ALL_PROXY", "GRPC_PROXY", "NO_PROXY"};

bool is_proxy_variable(const std::string& entry)
{
    const std::string_view name(entry.data(), std::min(entry.find('='), entry.size()));
    return std::any_of(proxy_names.begin(), proxy_names.end(), [&](std::string_view p) {
        return name.size() == p.size() &&
               std::equal(name.begin(), name.end(), p.begin(), [](char a, char b) {
                   return std::toupper(static_cast<unsigned char>(a)) == b;
               });
    });
}

std::string lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

} // namespace

std::vector<std::string> proxy_environment(std::vector<std::string> env, std::uint16_t port)
{
    std::erase_if(env, is_proxy_variable);
    const std::string url = "http://127.0.0.1:" + std::to_string(port);
    for (std::string_view name : proxy_names)
    {
        const std::string value = name == "NO_PROXY" ? "localhost,127.0.0.1,::1" : url;
        env.push_back(lower(name) + "=" + value);
        env.push_back(std::string(name) + "=" + value);
    }
    return env;
}

} // namespace sandbox::detail
