// lib/session/registry.cpp: the shared bookkeeping of sessions (ids, conflicts, start order,
// retention of ended sessions nobody closes).
#include <sandbox/process_manager.hpp>

#include "front_end.hpp"
#include "session/session_state.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <map>

namespace sandbox {

namespace asio = boost::asio;

process_manager::~process_manager() = default;

asio::awaitable<std::shared_ptr<session>> process_manager::start(session_spec spec)
{
    outcome<std::shared_ptr<session>> s = co_await try_start(std::move(spec));
    co_return detail::value_or_throw(std::move(s)); // the edge for callers that prefer exceptions
}

struct session_registry::state : std::enable_shared_from_this<state>
{
    struct record
    {
        std::uint64_t seq = 0;
        std::chrono::system_clock::time_point started_at{};
        std::vector<std::string> argv;
        bool tty = false;
        std::shared_ptr<session> s; // null while starting
        std::unique_ptr<asio::steady_timer> retention{};
    };

    state(executor_type e, starter st, session_registry_options o)
        : ex(std::move(e)), start(std::move(st)), opts(o)
    {
    }

    void hook(const std::string& id, session& s);
    void arm_retention(const std::string& id, const detail::session_state* which);
    bool holds(const std::string& id, const detail::session_state* which) const;

    executor_type ex;
    starter start;
    session_registry_options opts;
    std::map<std::string, record, std::less<>> records;
    std::uint64_t next_seq = 0;
    bool destroyed = false; // the registry object is gone; starts still under way are void
};

namespace {

// Why `spec` cannot start, before anything else is looked at.
std::optional<failure> check_spec(const session_spec& spec)
{
    if (spec.command.empty())
        return make_failure(errc::validation, "a session needs a command", "command");
    if (spec.options.input)
        return make_failure(errc::validation,
                            "a session takes its input through write(), not options.input",
                            "input");
    if (!spec.id.empty() && !detail::valid_session_id(spec.id))
        return make_failure(errc::validation,
                            "a session id is 1 to 128 letters, digits or -_.:@ (got \"" +
                                spec.id.substr(0, 160) + "\")",
                            "id");
    if (spec.tty && (spec.tty->rows == 0 || spec.tty->cols == 0))
        return make_failure(errc::validation, "a terminal needs at least one row and one column",
                            "tty");
    return std::nullopt;
}

} // namespace

// True while the record `id` is that session's (an id is reused once its session closed).
bool session_registry::state::holds(const std::string& id,
                                    const detail::session_state* which) const
{
    auto it = records.find(id);
    return it != records.end() && it->second.s &&
           detail::session_access::state(*it->second.s).get() == which;
}

// Close and exit reach the registry through weak hooks: a session may outlive it.
void session_registry::state::hook(const std::string& id, session& s)
{
    auto& ss = *detail::session_access::state(s);
    const detail::session_state* which = &ss;
    std::weak_ptr<state> w = weak_from_this();
    ss.on_close_hook = [w, id, which] {
        if (auto r = w.lock(); r && r->holds(id, which))
            r->records.erase(id);
    };
    ss.on_exit_hook = [w, id, which] {
        if (auto r = w.lock())
            r->arm_retention(id, which);
    };
    if (!s.running())
        arm_retention(id, which);
}

void session_registry::state::arm_retention(const std::string& id,
                                            const detail::session_state* which)
{
    if (opts.retention <= std::chrono::nanoseconds(0) || !holds(id, which))
        return;
    auto& t = records.find(id)->second.retention;
    t = std::make_unique<asio::steady_timer>(ex, opts.retention);
    t->async_wait([w = weak_from_this(), id, which](boost::system::error_code ec) {
        auto r = w.lock();
        if (ec || !r || !r->holds(id, which))
            return;
        asio::co_spawn(r->ex, r->records.find(id)->second.s->close(), asio::detached);
    });
}

session_registry::session_registry(executor_type ex, starter s, session_registry_options opts)
    : st_(std::make_shared<state>(std::move(ex), std::move(s), opts))
{
}

session_registry::~session_registry()
{
    st_->destroyed = true;
    for (auto& [id, rec] : st_->records)
        if (rec.s && rec.s->running())
            detail::session_access::state(*rec.s)->child->terminate(std::chrono::nanoseconds(0));
}

session_registry::executor_type session_registry::get_executor() const noexcept
{
    return st_->ex;
}

namespace {

using registry_state = std::shared_ptr<session_registry::state>;

// Why the books refuse `id` (in use, or too many sessions open).
std::optional<failure> check_room(const session_registry::state& st, const std::string& id)
{
    if (st.records.count(id) != 0)
        return make_failure(errc::conflict,
                            "session id \"" + id + "\" is in use (close the session first)", "id");
    if (st.records.size() >= st.opts.max_sessions)
        return make_failure(errc::conflict,
                            "too many sessions (" + std::to_string(st.opts.max_sessions) +
                                " not closed); close some first",
                            "max_sessions");
    return std::nullopt;
}

asio::awaitable<outcome<std::shared_ptr<session>>> start_body(registry_state st, session_spec spec)
{
    if (auto bad = check_spec(spec))
        co_return std::move(*bad);
    if (!st->start)
        co_return make_failure(errc::not_available, "this runner has no sessions");
    std::string id = spec.id.empty() ? detail::generate_session_id() : spec.id;
    if (auto full = check_room(*st, id))
        co_return std::move(*full);
    spec.id = id;
    auto plan = st->start(spec);
    if (!plan)
        co_return std::move(plan).error();

    std::vector<std::string> argv{spec.command};
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    auto& rec = st->records[id];
    rec.seq = st->next_seq++;
    rec.started_at = std::chrono::system_clock::now();
    rec.argv = argv;
    rec.tty = spec.tty.has_value();
    // An Asio wait refuses to start after a cancellation: its throw becomes the failure.
    auto s = co_await detail::catching(start_session(st->ex, id, std::move(argv), std::move(*plan)),
                                       detail::failure_of);
    if (!s)
    {
        st->records.erase(id);
        co_return s;
    }
    if (st->destroyed) // the registry went away while this started: so does the session
    {
        detail::session_access::state(**s)->child->terminate(std::chrono::nanoseconds(0));
        co_return make_failure(errc::not_available,
                               "the runner's sessions were destroyed while this one started");
    }
    auto it = st->records.find(id);
    if (it == st->records.end()) // cannot happen: only close() erases, and it has no handle
        co_return make_failure(errc::internal, "session " + id + " vanished while starting");
    it->second.s = *s;
    st->hook(id, **s);
    co_return s;
}

using detail::throw_failure;

asio::awaitable<exec_result> terminate_body(registry_state st, std::string id,
                                            std::chrono::nanoseconds grace)
{
    auto it = st->records.find(id);
    if (it == st->records.end())
        throw_failure(errc::not_found, "no session \"" + id + "\"", "id");
    if (!it->second.s)
        throw_failure(errc::conflict, "session \"" + id + "\" is still starting", "id");
    auto s = it->second.s;
    co_return co_await s->terminate(grace);
}

} // namespace

// The thread rule: the books are touched on the registry's executor only.
asio::awaitable<outcome<std::shared_ptr<session>>> session_registry::try_start(session_spec spec)
{
    return detail::on_executor(st_->ex, start_body(st_, std::move(spec)));
}

asio::awaitable<exec_result> session_registry::terminate(std::string id,
                                                         std::chrono::nanoseconds grace)
{
    return detail::on_executor(st_->ex, terminate_body(st_, std::move(id), grace));
}

std::vector<session_info> session_registry::list() const
{
    std::vector<std::pair<std::uint64_t, session_info>> rows;
    rows.reserve(st_->records.size());
    for (const auto& [id, rec] : st_->records)
    {
        session_info i;
        if (rec.s)
            i = rec.s->info();
        else
        {
            i.id = id;
            i.argv = rec.argv;
            i.tty = rec.tty;
            i.started_at = rec.started_at;
            i.running = true;
        }
        rows.emplace_back(rec.seq, std::move(i));
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<session_info> out;
    out.reserve(rows.size());
    for (auto& r : rows)
        out.push_back(std::move(r.second));
    return out;
}

std::shared_ptr<session> session_registry::find(std::string_view id) const
{
    auto it = st_->records.find(id);
    return it == st_->records.end() ? nullptr : it->second.s;
}

namespace detail {
namespace {

asio::awaitable<std::shared_ptr<session>> find_body(process_manager* pm, std::string id)
{
    co_return pm->find(id);
}

} // namespace

void async_start_impl(process_manager* pm, session_spec spec, diagnostics_sink sink,
                      value_handler<std::shared_ptr<session>> h)
{
    launch(pm->get_executor(), pm->try_start(std::move(spec)), std::move(sink), std::move(h));
}

void async_find_impl(process_manager* pm, std::string id, diagnostics_sink sink,
                     value_handler<std::shared_ptr<session>> h)
{
    launch(pm->get_executor(), find_body(pm, std::move(id)), std::move(sink), std::move(h));
}

} // namespace detail

} // namespace sandbox
