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

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <fcntl.h>
#include <unistd.h>

namespace sandboxd {

namespace asio = boost::asio;

daemon::daemon(asio::any_io_executor ex, daemon_options opts)
    : ex_(ex), opts_(std::move(opts)), approvals_(ex), sweep_timer_(ex),
      call_numbers_(std::make_shared<std::atomic<std::uint64_t>>(static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count())))
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
    o.call_numbers = call_numbers_;
    o.warm_pools = true; // bwrap entries' settings.warm
    // No command may reach the daemon's socket: hidden where the backend can hide it (bwrap);
    // a local command that connects anyway is refused by `in_own_tree`.
    if (const auto sock = socket_path_for(*doc); !sock.empty())
        o.hidden_paths.push_back(sock);
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

std::string daemon::socket_path_for(const sandbox::config::document& doc) const
{
    if (!opts_.listen.empty())
        return opts_.listen;
    if (!doc.daemon.listen.empty())
        return doc.daemon.listen;
    if (::geteuid() == 0)
        return "/run/sandboxd.sock";
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x == '/')
        return std::string(x) + "/sandboxd.sock";
    return {};
}

namespace {

// The parent of `pid` by /proc/PID/stat (0 when it is gone or unreadable).
int parent_of(int pid)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char* close_paren = std::strrchr(buf, ')'); // the name may hold spaces and parens
    int ppid = 0;
    if (!close_paren || std::sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
        return 0;
    return ppid;
}


} // namespace

bool daemon::in_own_tree(const peer& p) const
{
    // Every tree of ours hangs below this process: the helper is our child and the subreaper
    // of its trees, so an orphan of a tree is re-parented inside it, never above us.
    const int self = ::getpid();
    int pid = p.pid;
    for (int hops = 0; pid > 1 && hops < 4096; ++hops)
    {
        if (pid == self)
            return p.pid != self; // a connection from ourselves is not one of our commands
        pid = parent_of(pid);
    }
    return false;
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

bool daemon::may_use(const peer& p, const instance_record& r) const
{
    return p.uid == r.owner.uid || is_operator(p);
}

std::optional<refusal> daemon::admit_instance(const peer& owner) const
{
    const auto& c = document().daemon;
    std::int64_t mine = 0;
    if (auto it = starting_->instances_by_uid.find(owner.uid);
        it != starting_->instances_by_uid.end())
        mine = it->second;
    for (const auto& [id, r] : instances_)
        mine += r.owner.uid == owner.uid ? 1 : 0;
    const auto held = static_cast<std::int64_t>(instances_.size()) + starting_->instances;
    if (mine >= c.max_instances_per_uid)
        return refusal{429, "daemon.max_instances_per_uid",
                       "uid " + std::to_string(owner.uid) + " holds " + std::to_string(mine) +
                           " instances, the most daemon.max_instances_per_uid allows: close "
                           "one"};
    if (held >= c.max_instances)
        return refusal{503, "daemon.max_instances",
                       "the daemon holds " + std::to_string(held) +
                           " instances (open or opening), the most daemon.max_instances "
                           "allows"};
    return std::nullopt;
}

std::optional<refusal> daemon::admit_session(const peer& owner, std::int64_t output_bytes) const
{
    const auto& c = document().daemon;
    std::int64_t mine = 0, reserved = starting_->output_bytes;
    if (auto it = starting_->by_uid.find(owner.uid); it != starting_->by_uid.end())
        mine = it->second;
    for (const auto& [id, r] : sessions_)
    {
        mine += r.owner.uid == owner.uid ? 1 : 0;
        reserved += r.output_reserved;
    }
    const auto held = static_cast<std::int64_t>(sessions_.size()) + starting_->all;
    if (mine >= c.max_sessions_per_uid)
        return refusal{429, "daemon.max_sessions_per_uid",
                       "uid " + std::to_string(owner.uid) + " holds " + std::to_string(mine) +
                           " sessions, the most daemon.max_sessions_per_uid allows: close one"};
    if (held >= c.max_sessions)
        return refusal{503, "daemon.max_sessions",
                       "the daemon holds " + std::to_string(held) +
                           " sessions (started or starting), the most daemon.max_sessions "
                           "allows"};
    if (reserved + output_bytes > c.session_output_budget)
        return refusal{503, "daemon.session_output_budget",
                       "the sessions' output logs would pass daemon.session_output_budget (" +
                           std::to_string(reserved) + " of " +
                           std::to_string(c.session_output_budget) + " bytes reserved, " +
                           std::to_string(output_bytes) + " asked)"};
    return std::nullopt;
}

namespace {

// A hold on counts in `counts`, given back by `release(counts)` when the last copy goes;
// weakly, as a connection's or a start's frame may be destroyed after the daemon (with
// the io_context): then there is nothing to give back.
template <class Counts, class Release>
std::shared_ptr<void> hold_on(const std::shared_ptr<Counts>& counts, Release release)
{
    return std::shared_ptr<void>(counts.get(),
                                 [weak = std::weak_ptr<Counts>(counts), release](void*) {
                                     if (auto c = weak.lock())
                                         release(*c);
                                 });
}

} // namespace

std::shared_ptr<void> daemon::hold_session_start(const peer& owner, std::int64_t output_bytes)
{
    ++starting_->by_uid[owner.uid];
    ++starting_->all;
    starting_->output_bytes += output_bytes;
    return hold_on(starting_, [uid = owner.uid, output_bytes](start_counts& c) {
        if (auto it = c.by_uid.find(uid); it != c.by_uid.end() && --it->second <= 0)
            c.by_uid.erase(it);
        --c.all;
        c.output_bytes -= output_bytes;
    });
}

std::shared_ptr<void> daemon::hold_instance_open(const peer& owner)
{
    ++starting_->instances_by_uid[owner.uid];
    ++starting_->instances;
    return hold_on(starting_, [uid = owner.uid](start_counts& c) {
        if (auto it = c.instances_by_uid.find(uid);
            it != c.instances_by_uid.end() && --it->second <= 0)
            c.instances_by_uid.erase(it);
        --c.instances;
    });
}

std::shared_ptr<void> daemon::claim_session_id(const std::string& id)
{
    if (sessions_.count(id) || !starting_->ids.insert(id).second)
        return nullptr;
    return hold_on(starting_, [id](start_counts& c) { c.ids.erase(id); });
}

std::shared_ptr<void> daemon::hold_connection(std::uint32_t uid)
{
    auto& n = (*connections_)[uid];
    if (n >= document().daemon.max_connections_per_uid)
        return nullptr;
    ++n;
    return hold_on(connections_, [uid](connection_counts& c) {
        if (auto it = c.find(uid); it != c.end() && --it->second <= 0)
            c.erase(it);
    });
}

void daemon::audit(boost::json::object line)
{
    if (audit_fd_ < 0)
        return;
    line.emplace("time", sandbox::to_rfc3339(std::chrono::system_clock::now()));
    const std::string text = boost::json::serialize(line) + "\n";
    // One write per line (O_APPEND): lines from the library's sink do not interleave.
    (void)!::write(audit_fd_, text.data(), text.size());
}

void daemon::sweep_sessions(std::vector<std::shared_ptr<sandbox::session>>& ended)
{
    const auto linger = document().daemon.session_linger;
    const auto now = std::chrono::system_clock::now();
    for (auto it = sessions_.begin(); it != sessions_.end();)
    {
        const auto info = it->second.session->info();
        const bool stale =
            info.exit &&
            info.started_at + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                  info.exit->wall_time + linger) <=
                now;
        if (!stale)
        {
            ++it;
            continue;
        }
        audit({{"event", "session_expired"}, {"session", it->first}});
        ended.push_back(std::move(it->second.session));
        it = sessions_.erase(it);
    }
}

void daemon::sweep_instances(std::vector<std::shared_ptr<sandbox::instance>>& ended)
{
    const auto idle = document().daemon.instance_idle;
    const auto now = std::chrono::steady_clock::now();
    for (auto it = instances_.begin(); it != instances_.end();)
    {
        const auto& use = *it->second.use;
        const bool gone = !it->second.instance->is_open(); // its timeout or limits ended it
        if (use.busy > 0 || (!gone && now - use.last_used < idle))
        {
            ++it;
            continue;
        }
        audit({{"event", gone ? "instance_ended" : "instance_expired"},
               {"instance", it->first},
               {"sandbox", it->second.sandbox}});
        ended.push_back(std::move(it->second.instance));
        it = instances_.erase(it);
    }
}

asio::awaitable<void> daemon::sweep_ended_sessions()
{
    for (;;)
    {
        // Looked at often enough for a short linger or idle bound, at most every 30 s.
        const auto& c = document().daemon;
        const auto every = std::clamp<std::chrono::nanoseconds>(
            std::min(c.session_linger, c.instance_idle) / 4, std::chrono::milliseconds(100),
            std::chrono::seconds(30));
        sweep_timer_.expires_after(every);
        boost::system::error_code ec;
        co_await sweep_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (ec) // a reload: wait again with the new bounds
            continue;
        std::vector<std::shared_ptr<sandbox::session>> sessions;
        std::vector<std::shared_ptr<sandbox::instance>> instances;
        sweep_sessions(sessions);
        sweep_instances(instances);
        for (auto& s : sessions)
        {
            try
            {
                co_await s->close();
            }
            catch (const std::exception&)
            {
            }
        }
        for (auto& i : instances)
            co_await i->close(); // never fails
    }
}

asio::awaitable<void> daemon::end_sessions(std::chrono::nanoseconds grace)
{
    stopping_ = true;
    while (!instances_.empty()) // an open that completes meanwhile adds one
    {
        auto instances = std::move(instances_);
        instances_.clear();
        for (auto& [id, rec] : instances)
            co_await rec.instance->close(); // never fails
    }
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
