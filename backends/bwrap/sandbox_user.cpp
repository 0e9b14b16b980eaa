// backends/bwrap/sandbox_user.cpp: the sandbox's host user (see sandbox_user.hpp).
#include "sandbox_user.hpp"

#include <fstream>
#include <tuple>


namespace sandbox::bwrap {

namespace {

constexpr std::uint32_t nobody_id = 65534; // when the database has no nobody or nogroup

// A decimal id below (uid_t)-1 ("unchanged" to the set*id calls).
std::optional<std::uint32_t> number(const std::string& s)
{
    if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    const unsigned long long v = std::stoull(s);
    if (v >= 0xffffffffULL)
        return std::nullopt;
    return static_cast<std::uint32_t>(v);
}

// The entry of /etc/passwd or /etc/group whose field `key_field` (0: the name, 2: the id)
// is `key`, split at ':'; empty when there is none. The files are read directly, not through
// NSS: sandbox-run is linked statically, where NSS would need the shared glibc it was built
// with (users known only to another database can be given by number).
std::vector<std::string> file_entry(const char* file, std::size_t key_field, const std::string& key)
{
    std::ifstream in(file);
    for (std::string line; std::getline(in, line);)
    {
        std::vector<std::string> fields;
        for (std::size_t at = 0;;)
        {
            const auto colon = line.find(':', at);
            fields.push_back(line.substr(at, colon - at));
            if (colon == std::string::npos)
                break;
            at = colon + 1;
        }
        if (fields.size() > 3 && !key.empty() && fields[key_field] == key)
            return fields;
    }
    return {};
}

const user_db system_db{
    [](const std::string& name) -> std::optional<std::pair<std::uint32_t, std::uint32_t>> {
        const auto e = file_entry("/etc/passwd", 0, name);
        const auto uid = e.empty() ? std::nullopt : number(e[2]);
        const auto gid = e.empty() ? std::nullopt : number(e[3]);
        if (!uid || !gid)
            return std::nullopt;
        return std::pair{*uid, *gid};
    },
    [](std::uint32_t uid) -> std::optional<std::uint32_t> {
        const auto e = file_entry("/etc/passwd", 2, std::to_string(uid));
        return e.empty() ? std::nullopt : number(e[3]);
    },
    [](const std::string& name) -> std::optional<std::uint32_t> {
        const auto e = file_entry("/etc/group", 0, name);
        return e.empty() ? std::nullopt : number(e[2]);
    }};

failure invalid(const std::string& spec, const std::string& why)
{
    return make_failure(errc::validation, "sandbox user \"" + spec + "\": " + why,
                        "sandbox_user");
}

std::string describe(const std::string& user, std::uint32_t uid, std::uint32_t gid)
{
    const std::string ids = "uid " + std::to_string(uid) + ", gid " + std::to_string(gid);
    return number(user) ? ids : user + " (" + ids + ")";
}

outcome<host_user> parse_spec(const std::string& spec, const user_db& db)
{
    const auto colon = spec.find(':');
    const std::string user = spec.substr(0, colon);
    const std::string group = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (user.empty() || (colon != std::string::npos && group.empty()))
        return invalid(spec, "expected USER or USER:GROUP (names or numbers)");
    host_user u;
    std::optional<std::uint32_t> primary;
    if (auto n = number(user))
    {
        u.uid = *n;
        primary = db.primary_gid(*n);
    }
    else if (auto pw = db.user_by_name(user))
        std::tie(u.uid, primary) = *pw;
    else
        return invalid(spec, "no user " + user + " in the user database");
    if (group.empty() && !primary)
        return invalid(spec, "uid " + user + " has no entry in the user database: give its "
                             "group too (" + user + ":GID)");
    std::optional<std::uint32_t> gid = primary;
    if (!group.empty())
        gid = number(group) ? number(group) : db.group_by_name(group);
    if (!gid)
        return invalid(spec, "no group " + group + " in the group database");
    u.gid = *gid;
    u.name = describe(user, u.uid, u.gid);
    return u;
}

host_user default_user(const user_db& db)
{
    host_user u;
    const auto pw = db.user_by_name("nobody");
    u.uid = pw ? pw->first : nobody_id;
    u.gid = db.group_by_name("nogroup").value_or(nobody_id);
    u.name = describe("nobody", u.uid, u.gid);
    return u;
}

} // namespace

const user_db& system_user_db() { return system_db; }

outcome<std::optional<host_user>> choose_sandbox_user(const std::string& spec,
                                                      std::uint32_t caller_uid,
                                                      std::uint32_t caller_gid,
                                                      const user_db& db)
{
    if (spec.empty())
        return caller_uid == 0 ? std::optional(default_user(db)) : std::nullopt;
    auto u = parse_spec(spec, db);
    if (!u)
        return u.error();
    if (caller_uid != 0)
    {
        if (u->uid == caller_uid && u->gid == caller_gid)
            return std::optional<host_user>();
        return make_failure(errc::not_available,
                            "sandbox user " + u->name + ": only a root caller can run "
                            "commands as another user (this process runs as uid " +
                                std::to_string(caller_uid) + ", gid " +
                                std::to_string(caller_gid) + ")",
                            "sandbox_user");
    }
    if (u->uid == 0 || u->gid == 0)
        return invalid(spec, "commands must not run as root (uid 0) nor with group 0: the "
                             "sandbox would map them in");
    return std::optional(std::move(*u));
}

} // namespace sandbox::bwrap
