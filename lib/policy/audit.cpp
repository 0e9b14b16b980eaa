// lib/policy/audit.cpp: audit records as JSON, and the append-only audit file.
#include <sandbox/error.hpp>
#include <sandbox/policy/audit.hpp>
#include <sandbox/utf8.hpp>

#include <boost/json/serialize.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <ostream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox {

const char* to_string(audit_event e) noexcept
{
    switch (e)
    {
    case audit_event::denied: return "denied";
    case audit_event::approved: return "approved";
    case audit_event::allowed: return "allowed";
    case audit_event::refused: return "refused";
    case audit_event::started: return "started";
    case audit_event::finished: return "finished";
    case audit_event::connection: return "connection";
    case audit_event::connection_closed: return "connection_closed";
    case audit_event::http_request: return "http_request";
    case audit_event::instance_opened: return "instance_opened";
    case audit_event::instance_closed: return "instance_closed";
    }
    return "unknown";
}

std::ostream& operator<<(std::ostream& os, audit_event e)
{
    return os << to_string(e);
}

namespace {


std::int64_t us_of(std::chrono::nanoseconds d)
{
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
}

} // namespace

std::string to_rfc3339(std::chrono::system_clock::time_point t)
{
    using namespace std::chrono;
    const auto ms = duration_cast<milliseconds>(t.time_since_epoch()).count();
    const std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    ::gmtime_r(&secs, &tm);
    char buf[40];
    const auto n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
    return buf;
}

boost::json::object to_json(const requester& r)
{
    return {{"uid", r.uid}, {"gid", r.gid}, {"pid", r.pid}};
}

boost::json::object to_json(const audit_record& r)
{
    boost::json::object o;
    o["time"] = to_rfc3339(r.time);
    o["call"] = r.call;
    if (!r.sandbox.empty())
        o["sandbox"] = r.sandbox;
    o["event"] = to_string(r.event);
    o["layer"] = r.layer;
    o["kind"] = to_string(r.kind);
    // Commands and arguments are the caller's bytes: made valid UTF-8, so that every line
    // is JSON a strict parser accepts.
    o["command"] = sanitize_utf8(r.command);
    boost::json::array args;
    for (const auto& a : r.args)
        args.emplace_back(sanitize_utf8(a));
    o["args"] = std::move(args);
    // Always there, set or not, so that every record has one shape: "" is the backend's
    // root (no work directory asked for).
    o["work_dir"] = sanitize_utf8(r.work_dir);
    o["tty"] = r.tty;
    if (!r.session_id.empty())
        o["session"] = sanitize_utf8(r.session_id);
    if (!r.instance_id.empty())
        o["instance"] = sanitize_utf8(r.instance_id);
    if (r.requested_by)
        o["requested_by"] = to_json(*r.requested_by);
    if (!r.reason.empty())
        o["reason"] = sanitize_utf8(r.reason);
    if (!r.error.empty())
        o["error"] = r.error;
    if (r.status)
    {
        o["status"] = to_string(*r.status);
        o["exit_code"] = r.exit_code;
        if (r.signal != 0)
            o["signal"] = r.signal;
        // Integers: Boost.JSON writes doubles with exponents.
        o["duration_us"] = us_of(r.wall_time);
        o["cpu_time_us"] = us_of(r.cpu_time);
        o["peak_memory_bytes"] = r.peak_memory_bytes;
    }
    if (r.net)
        o["net"] = to_json(*r.net);
    return o;
}

audit_sink::~audit_sink() = default;

namespace {

[[noreturn]] void refuse_audit_file(errc code, const std::filesystem::path& path, std::string why,
                                    int err)
{
    diagnostics d;
    d.message = "cannot open the audit file: " + why;
    d.path = path.string();
    if (err != 0)
        d.cause = boost::system::error_code(err, boost::system::system_category());
    throw error(make_error_code(code), std::move(d));
}

} // namespace

audit_file::audit_file(const std::filesystem::path& path)
{
    // O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of blocking here.
    fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                 0600);
    if (fd_ < 0)
    {
        const int err = errno;
        if (err == ENXIO)
            refuse_audit_file(errc::validation, path,
                              "a FIFO without a reader (or a socket) is refused: it could block "
                              "the caller",
                              err);
        refuse_audit_file(errc_from_errno(err), path, std::strerror(err), err);
    }
    // A FIFO that has a reader opens: refused all the same, as its reader could stall.
    struct stat st{};
    if (::fstat(fd_, &st) == 0 && (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode)))
        return;
    ::close(fd_);
    fd_ = -1;
    refuse_audit_file(errc::validation, path,
                      "not a regular file or a character device (a FIFO's reader could stall "
                      "the caller)",
                      0);
}

audit_file::~audit_file()
{
    if (fd_ >= 0)
        ::close(fd_);
}

boost::system::error_code audit_file::write(const audit_record& r) noexcept
{
    boost::system::error_code ec;
    try
    {
        std::string line = boost::json::serialize(to_json(r));
        line += '\n';
        // One write(2) per line: with O_APPEND the kernel places it whole at the end, so
        // concurrent writers interleave lines, never bytes. A short write (disk full) is
        // reported, not retried: a retry would be a second, separately placed piece.
        ssize_t n;
        do
            n = ::write(fd_, line.data(), line.size());
        while (n < 0 && errno == EINTR);
        if (n < 0)
            ec.assign(errno, boost::system::system_category());
        else if (n != static_cast<ssize_t>(line.size()))
            ec = make_error_code(boost::system::errc::no_space_on_device);
    }
    catch (...)
    {
        ec = make_error_code(boost::system::errc::not_enough_memory);
    }
    if (ec)
        ++failures_;
    return ec;
}

} // namespace sandbox
