// lib/error.cpp: the "sandbox" error category, its conditions and the exception type.
#include <sandbox/error.hpp>
#include <sandbox/exec_result.hpp>
#include <sandbox/failure.hpp>

#include <cerrno>
#include <cstring>
#include <ostream>
#include <string>

namespace sandbox {
namespace {

class sandbox_category final : public boost::system::error_category
{
public:
    const char* name() const noexcept override { return "sandbox"; }

    std::string message(int ev) const override
    {
        switch (static_cast<errc>(ev))
        {
        case errc::not_available: return "not available on this backend or host";
        case errc::forbidden: return "forbidden";
        case errc::policy_denied: return "denied by policy";
        case errc::validation: return "invalid request";
        case errc::conflict: return "conflict with current state";
        case errc::not_found: return "not found";
        case errc::budget_exceeded: return "resource budget exceeded";
        case errc::timeout: return "timed out";
        case errc::internal: return "internal error";
        case errc::sequence_gap: return "output at that offset was already dropped";
        case errc::session_closed: return "the session is closed";
        case errc::instance_closed: return "the instance is closed";
        }
        return "unknown sandbox error";
    }

    boost::system::error_condition default_error_condition(int ev) const noexcept override
    {
        switch (static_cast<errc>(ev))
        {
        case errc::forbidden:
        case errc::policy_denied: return make_error_condition(condition::denied);
        case errc::budget_exceeded:
        case errc::timeout: return make_error_condition(condition::limit_reached);
        case errc::validation:
        case errc::not_found: return make_error_condition(condition::bad_request);
        case errc::not_available: return make_error_condition(condition::unavailable);
        default: return {ev, *this};
        }
    }
};

class condition_category_impl final : public boost::system::error_category
{
public:
    const char* name() const noexcept override { return "sandbox.condition"; }

    std::string message(int ev) const override
    {
        switch (static_cast<condition>(ev))
        {
        case condition::denied: return "denied";
        case condition::limit_reached: return "limit reached";
        case condition::bad_request: return "bad request";
        case condition::unavailable: return "unavailable";
        }
        return "unknown sandbox condition";
    }
};

} // namespace

const boost::system::error_category& error_category() noexcept
{
    static const sandbox_category cat;
    return cat;
}

const boost::system::error_category& condition_category() noexcept
{
    static const condition_category_impl cat;
    return cat;
}

const char* to_string(errc e) noexcept
{
    switch (e)
    {
    case errc::not_available: return "not_available";
    case errc::forbidden: return "forbidden";
    case errc::policy_denied: return "policy_denied";
    case errc::validation: return "validation";
    case errc::conflict: return "conflict";
    case errc::not_found: return "not_found";
    case errc::budget_exceeded: return "budget_exceeded";
    case errc::timeout: return "timeout";
    case errc::internal: return "internal";
    case errc::sequence_gap: return "sequence_gap";
    case errc::session_closed: return "session_closed";
    case errc::instance_closed: return "instance_closed";
    }
    return "unknown";
}

const char* to_string(condition c) noexcept
{
    switch (c)
    {
    case condition::denied: return "denied";
    case condition::limit_reached: return "limit_reached";
    case condition::bad_request: return "bad_request";
    case condition::unavailable: return "unavailable";
    }
    return "unknown";
}

errc errc_from_errno(int err) noexcept
{
    switch (err)
    {
    case ENOENT:
    case ENOTDIR: return errc::not_found;
    case EACCES:
    case EPERM:
    case EROFS:
    case ENOEXEC: return errc::forbidden;
    case EINVAL:
    case E2BIG:
    case ENAMETOOLONG:
    case ELOOP:
    case EISDIR:
    case ENXIO: return errc::validation;
    case ETXTBSY:
    case EBUSY:
    case EEXIST: return errc::conflict;
    case ENOSYS:
    case EOPNOTSUPP: return errc::not_available;
    default: return errc::internal;
    }
}

std::ostream& operator<<(std::ostream& os, errc e) { return os << "sandbox:" << to_string(e); }

std::ostream& operator<<(std::ostream& os, condition c)
{
    return os << "sandbox.condition:" << to_string(c);
}

std::string error_name(const boost::system::error_code& ec)
{
    if (!ec)
        return "";
    if (ec.category() == error_category())
        return to_string(static_cast<errc>(ec.value()));
    if (ec == boost::system::errc::operation_canceled)
        return "aborted";
    return std::string(ec.category().name()) + ":" + std::to_string(ec.value());
}

error::error(boost::system::error_code ec, diagnostics diag)
    : boost::system::system_error(ec, diag.message),
      diag_(std::make_shared<const diagnostics>(std::move(diag)))
{
}

error::error(boost::system::error_code ec, diagnostics diag, exec_result partial)
    : boost::system::system_error(ec, diag.message),
      diag_(std::make_shared<const diagnostics>(std::move(diag))),
      partial_(std::make_shared<const exec_result>(std::move(partial)))
{
}

failure make_failure(errc code, std::string message, std::string limit)
{
    failure f;
    f.code = make_error_code(code);
    f.diag.message = std::move(message);
    f.diag.limit = std::move(limit);
    return f;
}

failure make_os_failure(errc code, const std::string& what, int err)
{
    failure f = make_failure(code, what + ": " + std::strerror(err));
    f.diag.cause = boost::system::error_code(err, boost::system::system_category());
    return f;
}

void throw_exception_from_error(const failure& f, const boost::source_location& loc)
{
    (void)loc;
    throw error(f.code, f.diag);
}

} // namespace sandbox
