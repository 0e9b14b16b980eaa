// sandbox/policy/predicates.hpp: the built-in approval predicates.
#ifndef SANDBOX_POLICY_PREDICATES_HPP
#define SANDBOX_POLICY_PREDICATES_HPP

#include <sandbox/config.hpp>
#include <sandbox/policy/call.hpp>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox {

/// \brief The last element of a command path, trailing slashes ignored: `/bin/rm` and
/// `rm` give `rm`, `dir/` gives `dir`; an empty or all-slash command gives `.`.
SANDBOX_DECL std::string command_base_name(std::string_view command);

/// \brief Matches when the base name of the command (`command_base_name`) matches one of
/// the shell-glob `patterns`, as a whole and case-sensitively.
///
/// Syntax: `*` any run of characters, `?` one character, `[abc]`, `[a-z]` and `[!a-z]`
/// (or `[^a-z]`) one character of (or not of) a set, `\c` the character `c`. The first
/// matching pattern gives the reason. Only the command is looked at: `sh -c "rm -rf /"`
/// matches `sh`, not `rm`.
///
/// \throws sandbox::error `errc::validation` (with `diag.rule` the pattern) for an empty
/// pattern, one with `/`, an unclosed `[`, an empty or reversed set or range, or a trailing
/// backslash: a pattern that cannot mean what was meant is refused when the predicate is
/// built, never silently treated as "no match".
SANDBOX_DECL predicate command_patterns(std::vector<std::string> patterns);

/// Matches a session started on a terminal (`call_snapshot::interactive`).
SANDBOX_DECL predicate interactive();

/// Matches a call whose network mode is not `net_mode::inherit`.
SANDBOX_DECL predicate net_non_default();

/// \brief Matches a call whose work directory is outside `root`.
///
/// `root` is made absolute and its symlinks resolved once, here. A work directory is judged
/// as the runner will use it: empty is the root itself; relative is joined onto the root,
/// so `../x` or `a/../../x` climb out and match; then `.` and `..` are folded and the
/// symlinks of the part that exists are resolved (a link inside the root that points out
/// matches). The runner still confines work directories itself: this only asks.
SANDBOX_DECL predicate work_dir_outside_root(const std::filesystem::path& root);

/// \brief A predicate from any test on the call: matches with `reason` when `test` is true.
/// An empty `test` makes an empty predicate, which denies (fail closed).
SANDBOX_DECL predicate make_predicate(std::function<bool(const call_snapshot&)> test,
                                      std::string reason);

} // namespace sandbox

#endif // SANDBOX_POLICY_PREDICATES_HPP
