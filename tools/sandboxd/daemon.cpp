// tools/sandboxd/daemon.cpp: loading and reloading the document, who may connect, the audit
// lines of the daemon itself.
#include "daemon.hpp"

#include <sandbox/error.hpp>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

namespace sandboxd {

namespace asio = boost::asio;

daemon::daemon(asio::any_io_executor ex, daemon_options opts)
    : ex_(ex), opts_(std::move(opts)), approvals_(ex), sweep_timer_(ex)
{
}

sandbox::outcome<void> daemon::load()
{
    auto doc = sandbox::config::load_document(opts_.config_file);
    if (!doc)
        return doc.error();
    // The audit file: the library's records of every call, and our request lines.
    std::shared_ptr<sandbox::audit_file> sink = audit_sink_;
    if (doc->daemon.audit_file != audit_path_)
    {
        sink.reset();
        if (!doc->daemon.audit_file.empty())
        {
            try
            {
                sink = std::make_shared<sandbox::audit_file>(doc->daemon.audit_file);
            }
            catch (const sandbox::error& e)
            {
                auto f = sandbox::make_failure(sandbox::errc::validation,
                                               "daemon.audit_file: " + e.diag().message);
                return f;
            }
        }
    }
    sandbox::config::build_options o;
    for (const auto& [name, dir] : opts_.workspaces)
        o.workspaces[name] = dir;
    o.ask = approvals_.approver();
    o.audit = sink;
    auto reg = sandbox::config::builder().build(ex_, *doc, std::move(o));
    if (!reg)
        return reg.error();
    registry_ = std::make_shared<const sandbox::config::registry>(std::move(*reg));
    sweep_timer_.cancel(); // the sweeper looks again with this document's session_linger
    if (doc->daemon.audit_file != audit_path_)
    {
        if (audit_fd_ >= 0)
            ::close(audit_fd_);
        audit_fd_ = -1;
        audit_path_ = doc->daemon.audit_file;
        if (!audit_path_.empty())
            audit_fd_ = ::open(audit_path_.c_str(),
                               O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    }
    audit_sink_ = std::move(sink);
    return {};
}

bool daemon::admits(const peer& p) const
{
    if (p.uid == ::geteuid())
        return true;
    const auto& d = document().daemon;
    return std::find(d.allow_uids.begin(), d.allow_uids.end(), p.uid) != d.allow_uids.end() ||
           std::find(d.allow_gids.begin(), d.allow_gids.end(), p.gid) != d.allow_gids.end();
}

bool daemon::is_operator(const peer& p) const
{
    return p.uid == ::geteuid() || p.uid == 0;
}

bool daemon::may_use(const peer& p, const session_record& r) const
{
    return p.uid == r.owner.uid || is_operator(p);
}

void daemon::audit(boost::json::object line)
{
    if (audit_fd_ < 0)
        return;
    line.emplace("time_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
    const std::string text = boost::json::serialize(line) + "\n";
    // One write per line (O_APPEND): lines from the library's sink do not interleave.
    (void)!::write(audit_fd_, text.data(), text.size());
}

asio::awaitable<void> daemon::sweep_ended_sessions()
{
    for (;;)
    {
        // Looked at often enough for a short linger, at most every 30 s.
        const auto linger = document().daemon.session_linger;
        const auto every = std::min<std::chrono::nanoseconds>(std::max<std::chrono::nanoseconds>(
                                                                   linger / 4, std::chrono::milliseconds(100)),
                                                               std::chrono::seconds(30));
        sweep_timer_.expires_after(every);
        boost::system::error_code ec;
        co_await sweep_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec) // a reload: wait again with the new linger
            continue;
        const auto now = std::chrono::system_clock::now();
        std::vector<std::shared_ptr<sandbox::session>> ended;
        for (auto it = sessions_.begin(); it != sessions_.end();)
        {
            const auto info = it->second.session->info();
            const bool stale = info.exit && info.started_at + std::chrono::duration_cast<std::chrono::system_clock::duration>(info.exit->wall_time + linger) <= now;
            if (!stale)
            {
                ++it;
                continue;
            }
            boost::json::object line{{"event", "session_expired"}, {"session", it->first}};
            audit(std::move(line));
            ended.push_back(std::move(it->second.session));
            it = sessions_.erase(it);
        }
        for (auto& s : ended)
        {
            try
            {
                co_await s->close();
            }
            catch (const std::exception&)
            {
            }
        }
    }
}

asio::awaitable<void> daemon::end_sessions(std::chrono::nanoseconds grace)
{
    auto all = std::move(sessions_);
    sessions_.clear();
    for (auto& [id, rec] : all)
    {
        try
        {
            co_await rec.session->terminate(grace);
        }
        catch (const std::exception&)
        {
        }
        try
        {
            co_await rec.session->close();
        }
        catch (const std::exception&)
        {
        }
    }
}

} // namespace sandboxd
