// lib/policy/glob.cpp: glob parsing and matching (pure logic).
#include "policy/glob.hpp"

namespace sandbox::detail {

namespace {

failure bad(std::string_view text, const char* why)
{
    auto f = make_failure(errc::validation,
                          "malformed command pattern \"" + std::string(text) + "\": " + why);
    f.diag.rule = std::string(text);
    return f;
}

} // namespace

bool glob_pattern::token::matches(unsigned char ch) const noexcept
{
    switch (kind)
    {
    case literal: return ch == c;
    case any_one: return true;
    case any_run: return true;
    case set: break;
    }
    bool in = false;
    for (const auto& r : ranges)
        in = in || (ch >= r.lo && ch <= r.hi);
    return in != negated;
}

// Parses the set that starts at text[i] == '['; returns the index after its ']'.
outcome<std::size_t> glob_pattern::parse_set(std::string_view text, std::size_t i, token& out)
{
    out.kind = token::set;
    ++i;
    if (i < text.size() && (text[i] == '!' || text[i] == '^'))
    {
        out.negated = true;
        ++i;
    }
    // A ']' right after the opening (or the negation) is a member, as in the shell.
    bool first = true;
    for (;;)
    {
        if (i >= text.size())
            return bad(text, "unclosed '['");
        if (text[i] == ']' && !first)
            break;
        first = false;
        // "[:alpha:]", "[=a=]" and "[.a.]" mean classes to a shell; here they would quietly
        // be plain characters, so they are refused.
        if (text[i] == '[' && i + 1 < text.size() &&
            (text[i + 1] == ':' || text[i + 1] == '=' || text[i + 1] == '.'))
            return bad(text, "character classes ([:name:], [=c=], [.c.]) are not supported");
        auto member = [&](unsigned char& c) -> bool {
            if (text[i] == '\\')
            {
                if (++i >= text.size())
                    return false;
            }
            c = static_cast<unsigned char>(text[i++]);
            return true;
        };
        unsigned char lo = 0, hi = 0;
        if (!member(lo))
            return bad(text, "trailing backslash");
        hi = lo;
        if (i + 1 < text.size() && text[i] == '-' && text[i + 1] != ']')
        {
            ++i;
            if (!member(hi))
                return bad(text, "trailing backslash");
            if (hi < lo)
                return bad(text, "reversed range in a set");
        }
        out.ranges.push_back({lo, hi});
    }
    return i + 1;
}

outcome<glob_pattern> glob_pattern::parse(std::string_view text)
{
    if (text.empty())
        return bad(text, "empty");
    if (text.find('/') != std::string_view::npos)
        return bad(text, "a pattern matches a base name, which has no '/'");
    glob_pattern p;
    p.text_ = std::string(text);
    for (std::size_t i = 0; i < text.size();)
    {
        token t;
        const char ch = text[i];
        if (ch == '*')
        {
            t.kind = token::any_run;
            ++i;
        }
        else if (ch == '?')
        {
            t.kind = token::any_one;
            ++i;
        }
        else if (ch == '[')
        {
            auto next = parse_set(text, i, t);
            if (!next)
                return next.error();
            i = *next;
        }
        else
        {
            if (ch == '\\' && ++i >= text.size())
                return bad(text, "trailing backslash");
            t.c = static_cast<unsigned char>(text[i++]);
        }
        p.tokens_.push_back(std::move(t));
    }
    return p;
}

bool glob_pattern::match(std::string_view s) const noexcept
{
    // Iterative matching with one backtrack point (the last '*'): linear in practice,
    // never exponential.
    std::size_t ti = 0, si = 0;
    std::size_t star_t = std::string_view::npos, star_s = 0;
    while (si < s.size())
    {
        if (ti < tokens_.size() && tokens_[ti].kind == token::any_run)
        {
            star_t = ti++;
            star_s = si;
        }
        else if (ti < tokens_.size() && tokens_[ti].matches(static_cast<unsigned char>(s[si])))
        {
            ++ti;
            ++si;
        }
        else if (star_t != std::string_view::npos)
        {
            ti = star_t + 1;
            si = ++star_s;
        }
        else
            return false;
    }
    while (ti < tokens_.size() && tokens_[ti].kind == token::any_run)
        ++ti;
    return ti == tokens_.size();
}

} // namespace sandbox::detail
