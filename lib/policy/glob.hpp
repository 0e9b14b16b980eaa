// lib/policy/glob.hpp: shell-glob patterns for one path element, checked when built.
#ifndef SANDBOX_LIB_POLICY_GLOB_HPP
#define SANDBOX_LIB_POLICY_GLOB_HPP

#include <sandbox/failure.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace sandbox::detail {

/// \brief A compiled glob (`*`, `?`, `[set]`, `[!set]`/`[^set]`, `\c`) matched against a whole
/// string, case-sensitively, byte by byte. `parse` refuses what has no clear meaning here
/// (including POSIX classes such as `[[:upper:]]`, which it does not implement).
class glob_pattern
{
public:
    static outcome<glob_pattern> parse(std::string_view text);
    bool match(std::string_view s) const noexcept;
    const std::string& text() const noexcept { return text_; }

private:
    struct range
    {
        unsigned char lo, hi;
    };
    struct token
    {
        enum kind_t : unsigned char { literal, any_one, any_run, set } kind = literal;
        unsigned char c = 0;
        bool negated = false;
        std::vector<range> ranges{};
        bool matches(unsigned char ch) const noexcept;
    };
    static outcome<std::size_t> parse_set(std::string_view text, std::size_t i, token& out);
    std::string text_;
    std::vector<token> tokens_;
};

} // namespace sandbox::detail

#endif // SANDBOX_LIB_POLICY_GLOB_HPP
