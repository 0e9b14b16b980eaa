// tools/sandboxd/approvals.cpp: pending approvals, each a one-shot channel its approver
// coroutine waits on.
#include "approvals.hpp"

#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>

#include <algorithm>

namespace sandboxd {

namespace asio = boost::asio;
namespace json = boost::json;

struct approval_board::item
{
    using channel = asio::experimental::channel<void(boost::system::error_code,
                                                     sandbox::approval_decision)>;
    std::string id;
    sandbox::approval_request request;
    std::chrono::system_clock::time_point asked = std::chrono::system_clock::now();
    channel answer;

    item(asio::any_io_executor ex, std::string i, sandbox::approval_request r)
        : id(std::move(i)), request(std::move(r)), answer(std::move(ex), 1)
    {
    }
};

sandbox::approver approval_board::approver()
{
    return [this](sandbox::approval_request req) -> asio::awaitable<sandbox::approval_decision> {
        const std::string id = std::to_string(next_++);
        auto it = std::make_shared<item>(ex_, id, std::move(req));
        items_[id] = it;
        // Gone from the list however the wait ends: answered, cancelled by the deadline or
        // by the caller.
        struct unlist
        {
            approval_board* board;
            std::string id;
            ~unlist() { board->items_.erase(id); }
        } guard{this, id};
        auto decision = co_await it->answer.async_receive(asio::use_awaitable);
        co_return decision;
    };
}

json::array approval_board::list() const
{
    std::vector<std::shared_ptr<item>> all;
    for (const auto& [id, it] : items_)
        all.push_back(it);
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
        return std::stoull(a->id) < std::stoull(b->id);
    });
    json::array out;
    for (const auto& it : all)
    {
        const auto& c = it->request.call;
        json::array args;
        for (const auto& a : c.args)
            args.emplace_back(a);
        out.push_back(json::object{
            {"id", it->id},
            {"kind", sandbox::to_string(c.kind)},
            {"command", c.command},
            {"args", std::move(args)},
            {"work_dir", c.options.work_dir},
            {"tty", c.tty.has_value()},
            {"reason", it->request.reason},
            {"asked_at_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                it->asked.time_since_epoch())
                                .count()}});
    }
    return out;
}

bool approval_board::answer(const std::string& id, bool allow, std::string reason)
{
    auto it = items_.find(id);
    if (it == items_.end())
        return false;
    auto held = it->second;
    items_.erase(it);
    return held->answer.try_send(boost::system::error_code{},
                                 sandbox::approval_decision{allow, std::move(reason)});
}

} // namespace sandboxd
