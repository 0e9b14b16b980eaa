// tools/sandboxd/approvals.cpp: pending approvals, each a one-shot channel its approver
// coroutine waits on.
#include "approvals.hpp"

#include <sandbox/config/document.hpp>
#include <sandbox/policy/audit.hpp>
#include <sandbox/utf8.hpp>

#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

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

namespace {

// The first bytes of the input an approved command would read, as text or base64.
json::object input_json(const std::optional<std::string>& input)
{
    if (!input)
        return {{"bytes", 0}};
    constexpr std::size_t shown = 1024;
    const std::string head = input->substr(0, shown);
    json::object o{{"bytes", input->size()}, {"truncated", input->size() > shown}};
    if (sandbox::sanitize_utf8(head) == head)
        o["head"] = head;
    else
        o["head_bytes"] = head.size(); // binary: its size only
    return o;
}

} // namespace

// Everything the call would run with, so that the approver sees what it approves: the
// effective options (the sandbox's defaults merged in) as a call body, the environment it
// injects, its input, its network policy, its limits.
json::object approval_board::describe(const item& it)
{
    const auto& c = it.request.call;
    sandbox::exec_request x{c.command, c.args, c.options};
    auto o = json::parse(sandbox::config::call_to_json(x)).as_object();
    o["id"] = it.id;
    o["sandbox"] = it.request.sandbox;
    o["kind"] = sandbox::to_string(c.kind);
    o["work_dir"] = c.options.work_dir;
    o["tty"] = c.tty.has_value();
    if (c.requested_by)
        o["requested_by"] = sandbox::to_json(*c.requested_by);
    o["input"] = input_json(c.options.input);
    if (!o.contains("net"))
        o["net"] = json::object{{"mode", sandbox::to_string(c.options.net.mode)}};
    o["reason"] = it.request.reason;
    o["asked_at_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                           it.asked.time_since_epoch())
                           .count();
    return o;
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
        out.push_back(describe(*it));
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
