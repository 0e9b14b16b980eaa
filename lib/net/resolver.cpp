// lib/net/resolver.cpp: see resolver.hpp.
#include "resolver.hpp"

#include <boost/asio/error.hpp>

#include <utility>

namespace sandbox::net {

namespace asio = boost::asio;

static_resolver::static_resolver(std::map<std::string, std::vector<asio::ip::address>> pins,
                                 std::shared_ptr<resolver> next)
    : pins_(std::move(pins)), next_(std::move(next))
{
}

asio::awaitable<resolve_result> static_resolver::resolve(std::string name)
{
    ++calls_;
    if (auto it = pins_.find(name); it != pins_.end())
        co_return resolve_result{{}, it->second};
    if (!next_)
        co_return resolve_result{asio::error::host_not_found, {}};
    co_return co_await next_->resolve(std::move(name));
}

// Interim (replaced by the c-ares resolver in the next commits): links, refuses at run time.
outcome<std::shared_ptr<resolver>> make_cares_resolver(asio::any_io_executor, cares_options)
{
    return make_failure(errc::internal, "the c-ares resolver is not built yet");
}

// Interim: pins only, parsed with make_address (no canonicalization yet), no c-ares behind.
outcome<std::shared_ptr<resolver>> make_resolver(asio::any_io_executor, const proxy_options& o)
{
    std::map<std::string, std::vector<asio::ip::address>> pins;
    for (std::size_t i = 0; i < o.resolve.size(); ++i)
    {
        boost::system::error_code ec;
        auto a = asio::ip::make_address(o.resolve[i].second, ec);
        if (ec)
            return make_failure(errc::validation, "not an IP address: " + o.resolve[i].second,
                                "resolve[" + std::to_string(i) + "]");
        pins[o.resolve[i].first].push_back(a);
    }
    return std::make_shared<static_resolver>(std::move(pins), nullptr);
}

} // namespace sandbox::net
