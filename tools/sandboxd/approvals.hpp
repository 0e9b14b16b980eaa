// tools/sandboxd/approvals.hpp: approvals a client answers over the API. The library's
// approval layer asks (`approver()`), the request waits here until a client allows or denies
// it at /v1/approvals/{id}; the layer's deadline cancels the wait (denied, fail closed).
#ifndef SANDBOXD_APPROVALS_HPP
#define SANDBOXD_APPROVALS_HPP

#include <sandbox/policy/call.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace sandboxd {

class approval_board
{
public:
    explicit approval_board(boost::asio::any_io_executor ex) : ex_(std::move(ex)) {}

    /// The approver to give the registry: each call it is asked about waits here.
    sandbox::approver approver();

    /// The requests waiting for an answer, oldest first.
    boost::json::array list() const;

    /// Answers one; false when no request of that id is waiting (answered, timed out, never
    /// asked).
    bool answer(const std::string& id, bool allow, std::string reason);

    std::size_t pending() const noexcept { return items_.size(); }

    struct item;

private:
    static boost::json::object describe(const item& it);

    boost::asio::any_io_executor ex_;
    std::map<std::string, std::shared_ptr<item>> items_;
    std::uint64_t next_ = 1;
};

} // namespace sandboxd

#endif
