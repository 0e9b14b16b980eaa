// sandbox/utf8.hpp: making untrusted bytes safe to put into JSON text.
#ifndef SANDBOX_UTF8_HPP
#define SANDBOX_UTF8_HPP

#include <sandbox/config.hpp>

#include <string>
#include <string_view>

namespace sandbox {

/// \brief Replaces each ill-formed UTF-8 subsequence of `bytes` with U+FFFD.
///
/// Follows the Unicode "maximal subpart" practice: an ill-formed sequence is replaced by
/// one U+FFFD per maximal prefix of a valid sequence (or per lone byte). Overlong forms,
/// surrogates and code points above U+10FFFF are ill-formed. Valid text is unchanged.
/// Used for command output in `sandbox-run --json` and for commands and arguments in
/// audit records.
SANDBOX_DECL std::string sanitize_utf8(std::string_view bytes);

} // namespace sandbox

#endif // SANDBOX_UTF8_HPP
