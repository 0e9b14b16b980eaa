// lib/host/request_pattern.hpp: the parts of TLS inspection's per-request policy that are text
// alone: a request rule's pattern ("GET,HEAD api.example.com/repos/acme/**"), the canonical
// forms of a request's path that rules are judged on, the glob match, and the checks of an
// injected header. Validation (net_policy::validate) and the proxy use the same functions.
#ifndef SANDBOX_LIB_HOST_REQUEST_PATTERN_HPP
#define SANDBOX_LIB_HOST_REQUEST_PATTERN_HPP

#include "pattern.hpp"

#include <sandbox/failure.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace sandbox::detail {

/// \brief A parsed request pattern: `METHODS HOST/PATH_GLOB`.
struct request_pattern
{
    /// Upper-case method tokens; empty: any method (`*`).
    std::vector<std::string> methods{};
    host_pattern host{};
    /// The path glob in its strict canonical form (`canonical_path::strict`): `*` matches
    /// within one segment, `**` across segments; a trailing `/**` also matches the path
    /// without it (`/repos/acme/**` covers `/repos/acme`).
    std::string path{};
};

/// \brief Parses `METHODS HOST/PATH_GLOB`: METHODS is `*` or tokens joined by commas, HOST
/// a rule host pattern (no port: the CONNECT decided the port), PATH_GLOB starts with `/`,
/// at most 1,024 bytes, no query, fragment, dot segment or control byte. `errc::validation`
/// with a message quoting the text (no `limit`: the caller knows the field).
SANDBOX_DECL outcome<request_pattern> parse_request_pattern(std::string_view text);

/// \brief The forms a request path is judged in.
struct canonical_path
{
    /// Percent-decoded except `%2F` and `%25` (kept, upper-case), dot segments removed: what
    /// allow rules match, case and all.
    std::string strict{};
    /// Fully decoded (`%2F` a slash, `\` a slash), repeated slashes merged, dot segments
    /// removed, lower-case: what deny rules match too, so an origin that decodes or folds
    /// more than we do cannot reach a denied path by spelling it differently.
    std::string loose{};
};

/// \brief The canonical forms of a request target's path (origin form, `/` first; any query
/// is cut off and never looked at). `errc::validation` for a bad percent escape, a control
/// byte (raw or encoded), a fragment, a path over 8 KiB, or `..` above the root.
SANDBOX_DECL outcome<canonical_path> canonicalize_request_path(std::string_view target);

/// \brief Whether `path` matches the glob (`*`, `**`, a trailing `/**`), byte for byte
/// otherwise (a caller matching without case lower-cases both).
SANDBOX_DECL bool path_matches(std::string_view glob, std::string_view path) noexcept;

/// \brief Whether `name` may be set by the proxy: a token, and none of the headers that
/// frame or route a request (Host, Content-Length, Transfer-Encoding, Connection, Upgrade,
/// TE, Trailer, Keep-Alive, Proxy-Connection, Expect). `errc::validation` naming it.
SANDBOX_DECL outcome<> check_injected_header_name(std::string_view name);

/// \brief Whether `value` is a header value the proxy may send: not empty, at most 8 KiB,
/// no control byte but tab, no leading or trailing blank. The message never quotes it.
SANDBOX_DECL outcome<> check_injected_header_value(std::string_view value);

/// Whether `c` is an HTTP token character (RFC 9110 tchar).
SANDBOX_DECL bool is_token_char(char c) noexcept;

} // namespace sandbox::detail

#endif // SANDBOX_LIB_HOST_REQUEST_PATTERN_HPP
