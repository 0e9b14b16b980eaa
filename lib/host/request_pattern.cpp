// lib/host/request_pattern.cpp: request patterns, canonical request paths, the glob match and
// the checks of injected headers.
#include "request_pattern.hpp"

#include <algorithm>
#include <array>
#include <cstddef>

namespace sandbox::detail {

namespace {

constexpr std::size_t max_path_bytes = 8 * 1024;
constexpr std::size_t max_glob_bytes = 1024;
constexpr std::size_t max_value_bytes = 8 * 1024;

failure bad(std::string message)
{
    return make_failure(errc::validation, std::move(message));
}

bool is_control(unsigned char c) noexcept
{
    return c < 0x20 || c == 0x7f;
}

// RFC 3986 5.2.4 on a path of `/`-separated segments; false when `..` climbs above the root.
bool remove_dot_segments(std::string& path)
{
    std::vector<std::string_view> kept;
    const std::string_view p(path);
    bool trailing = false;
    std::size_t at = 1; // past the leading '/'
    for (;;)
    {
        const std::size_t end = std::min(p.find('/', at), p.size());
        const std::string_view seg = p.substr(at, end - at);
        if (end == p.size()) // the last segment: a directory's trailing slash stays
            trailing = seg.empty() || seg == "." || seg == "..";
        if (seg == "..")
        {
            if (kept.empty())
                return false;
            kept.pop_back();
        }
        else if (seg != "." && !(end == p.size() && seg.empty()))
            kept.push_back(seg);
        if (end == p.size())
            break;
        at = end + 1;
    }
    std::string out;
    for (const auto seg : kept)
        out.append("/").append(seg);
    if (out.empty() || trailing)
        out += '/';
    path = std::move(out);
    return true;
}

void merge_slashes(std::string& s)
{
    const auto end =
        std::unique(s.begin(), s.end(), [](char a, char b) { return a == '/' && b == '/'; });
    s.erase(end, s.end());
}

// One decoded byte into both forms.
void append_decoded(canonical_path& out, unsigned char b, bool encoded)
{
    const char c = static_cast<char>(b);
    if (encoded && c == '/')
        out.strict += "%2F";
    else if (encoded && c == '%')
        out.strict += "%25";
    else
        out.strict += c;
    out.loose += c == '\\' ? '/' : to_lower_ascii(c);
}

// A glob's element: a byte, `*` (within a segment) or `**` (across segments).
enum class glob_kind
{
    byte,
    star,
    double_star
};
struct glob_token
{
    glob_kind kind;
    char c;
};

std::vector<glob_token> tokens_of(std::string_view glob)
{
    std::vector<glob_token> t;
    for (std::size_t i = 0; i < glob.size(); ++i)
    {
        if (glob[i] != '*')
            t.push_back({glob_kind::byte, glob[i]});
        else if (i + 1 < glob.size() && glob[i + 1] == '*')
            t.push_back({glob_kind::double_star, '*'}), ++i;
        else
            t.push_back({glob_kind::star, '*'});
    }
    return t;
}

outcome<std::vector<std::string>> parse_methods(std::string_view text, std::string_view whole)
{
    std::vector<std::string> methods;
    if (text == "*")
        return methods;
    std::size_t at = 0;
    for (;;)
    {
        const std::size_t end = std::min(text.find(',', at), text.size());
        const std::string_view m = text.substr(at, end - at);
        if (m.empty() || m.size() > 32 || !std::all_of(m.begin(), m.end(), is_token_char))
            return bad("request pattern " + quote_for_message(whole) +
                       ": methods are * or tokens joined by commas (GET,HEAD)");
        std::string up(m);
        std::transform(up.begin(), up.end(), up.begin(),
                       [](char c) { return c >= 'a' && c <= 'z' ? char(c - 32) : c; });
        methods.push_back(std::move(up));
        if (end == text.size())
            return methods;
        at = end + 1;
    }
}

outcome<std::string> parse_glob(std::string_view glob, std::string_view whole)
{
    const auto refuse = [&](const char* why) {
        return bad("request pattern " + quote_for_message(whole) + ": the path " + why);
    };
    if (glob.size() > max_glob_bytes)
        return refuse("is over 1,024 bytes");
    if (glob.find_first_of("?#") != std::string_view::npos)
        return refuse("has a query or fragment (rules judge the path alone)");
    auto c = canonicalize_request_path(glob);
    if (!c)
        return refuse("does not parse as a request path (bad escape, control byte)");
    for (std::size_t at = 0; at != std::string_view::npos;)
    {
        const std::size_t end = glob.find('/', at + 1);
        const std::string_view seg = glob.substr(at + 1, end - at - 1);
        if (seg == "." || seg == "..")
            return refuse("has a dot segment");
        at = end;
    }
    return std::move(c->strict);
}

} // namespace

bool is_token_char(char c) noexcept
{
    static constexpr std::string_view extra = "!#$%&'*+-.^_`|~";
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           extra.find(c) != std::string_view::npos;
}

outcome<request_pattern> parse_request_pattern(std::string_view text)
{
    const std::size_t space = text.find(' ');
    const std::size_t rest_at = text.find_first_not_of(' ', space);
    if (space == std::string_view::npos || rest_at == std::string_view::npos)
        return bad("request pattern " + quote_for_message(text) +
                   " is not METHODS HOST/PATH (GET api.example.com/repos/**)");
    const std::string_view rest = text.substr(rest_at);
    const std::size_t slash = rest.find('/');
    if (rest.find(' ') != std::string_view::npos || slash == std::string_view::npos)
        return bad("request pattern " + quote_for_message(text) +
                   " is not METHODS HOST/PATH (a path is required: /** for every path)");
    request_pattern p;
    auto methods = parse_methods(text.substr(0, space), text);
    if (!methods)
        return methods.error();
    p.methods = std::move(*methods);
    auto host = parse_host_pattern(rest.substr(0, slash));
    if (!host)
        return host.error();
    if (host->kind == host_kind::cidr)
        return bad("request pattern " + quote_for_message(text) +
                   ": the host is a name or an address, not a block");
    p.host = std::move(*host);
    auto glob = parse_glob(rest.substr(slash), text);
    if (!glob)
        return glob.error();
    p.path = std::move(*glob);
    return p;
}

outcome<canonical_path> canonicalize_request_path(std::string_view target)
{
    if (target.empty() || target.front() != '/')
        return bad("the request path does not start with /");
    const std::string_view path = target.substr(0, target.find('?'));
    if (path.find('#') != std::string_view::npos)
        return bad("the request target has a fragment");
    if (path.size() > max_path_bytes)
        return bad("the request path is over 8 KiB");
    canonical_path out;
    for (std::size_t i = 0; i < path.size(); ++i)
    {
        const char c = path[i];
        if (c != '%')
        {
            if (is_control(static_cast<unsigned char>(c)) || c == ' ')
                return bad("the request path has a control byte or a space");
            append_decoded(out, static_cast<unsigned char>(c), false);
            continue;
        }
        const int hi = i + 2 < path.size() ? hex_value(path[i + 1]) : -1;
        const int lo = hi >= 0 ? hex_value(path[i + 2]) : -1;
        if (lo < 0)
            return bad("the request path has a bad percent escape");
        const auto b = static_cast<unsigned char>(hi * 16 + lo);
        if (is_control(b))
            return bad("the request path has an encoded control byte");
        append_decoded(out, b, true);
        i += 2;
    }
    merge_slashes(out.loose);
    if (!remove_dot_segments(out.strict) || !remove_dot_segments(out.loose))
        return bad("the request path climbs above the root (..)");
    return out;
}

bool path_matches(std::string_view glob, std::string_view path) noexcept
{
    if (glob.size() >= 3 && glob.substr(glob.size() - 3) == "/**" &&
        path == glob.substr(0, glob.size() - 3))
        return true;
    const auto t = tokens_of(glob);
    const std::size_t m = t.size();
    // row[j]: the path's bytes so far match the glob's first j tokens.
    std::vector<char> row(m + 1, 0), next(m + 1, 0);
    row[0] = 1;
    for (std::size_t j = 1; j <= m; ++j)
        row[j] = row[j - 1] && t[j - 1].kind != glob_kind::byte;
    for (const char c : path)
    {
        next[0] = 0;
        for (std::size_t j = 1; j <= m; ++j)
        {
            const glob_token& k = t[j - 1];
            if (k.kind == glob_kind::byte)
                next[j] = row[j - 1] && k.c == c;
            else if (k.kind == glob_kind::star)
                next[j] = next[j - 1] || (row[j] && c != '/');
            else
                next[j] = next[j - 1] || row[j];
        }
        row.swap(next);
    }
    return row[m] != 0;
}

outcome<> check_injected_header_name(std::string_view name)
{
    static constexpr std::array<std::string_view, 10> framing = {
        "host", "content-length", "transfer-encoding", "connection",       "upgrade",
        "te",   "trailer",        "keep-alive",        "proxy-connection", "expect"};
    if (name.empty() || name.size() > 128 || !std::all_of(name.begin(), name.end(), is_token_char))
        return bad("header name " + quote_for_message(name) + " is not an HTTP token");
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), to_lower_ascii);
    if (std::find(framing.begin(), framing.end(), lower) != framing.end())
        return bad("header " + std::string(name) +
                   " frames or routes the request; the proxy does not set it");
    return {};
}

outcome<> check_injected_header_value(std::string_view value)
{
    if (value.empty())
        return bad("the header's value is empty");
    if (value.size() > max_value_bytes)
        return bad("the header's value is over 8 KiB");
    if (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' ||
        value.back() == '\t')
        return bad("the header's value starts or ends with a blank");
    for (const char c : value)
        if (c != '\t' && is_control(static_cast<unsigned char>(c)))
            return bad("the header's value has a control byte (a line break?)");
    return {};
}

} // namespace sandbox::detail
