// tools/sandbox-run/values.cpp: the values options take: counts, durations, sizes, host
// rules and --resolve pins.
#include "cli_internal.hpp"

#include <sandbox/host_port.hpp>

#include <charconv>
#include <limits>
#include <utility>

namespace sandbox::cli {
namespace {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

bool is_digit(char c) { return c >= '0' && c <= '9'; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

} // namespace

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

// A whole string of decimal digits as a non-negative int64; nullopt-like failure otherwise.
outcome<std::int64_t> parse_count(std::string_view text, const char* what)
{
    if (text.empty())
        return make_failure(errc::validation, std::string("empty ") + what);
    if (text[0] == '-')
        return make_failure(errc::validation, std::string(what) + " " + in_quotes(text) +
                                                  " is negative");
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc::result_out_of_range)
        return make_failure(errc::validation, std::string(what) + " " + in_quotes(text) +
                                                  " is too large");
    if (ec != std::errc() || end != text.data() + text.size() || !is_digit(text[0]))
        return make_failure(errc::validation, std::string("invalid ") + what + " " +
                                                  in_quotes(text) + ": expected an integer");
    return v;
}

outcome<std::chrono::nanoseconds> parse_duration(std::string_view text)
{
    auto bad = [&](const std::string& why) {
        return make_failure(errc::validation, "invalid duration " + in_quotes(text) + ": " + why);
    };
    if (text.empty())
        return make_failure(errc::validation, "empty duration");
    if (text[0] == '-')
        return bad("durations cannot be negative");

    std::size_t i = 0;
    while (i < text.size() && is_digit(text[i]))
        ++i;
    std::string_view whole = text.substr(0, i);
    std::string_view fraction;
    if (i < text.size() && text[i] == '.')
    {
        std::size_t start = ++i;
        while (i < text.size() && is_digit(text[i]))
            ++i;
        fraction = text.substr(start, i - start);
        if (fraction.empty())
            return bad("expected digits after the decimal point");
    }
    if (whole.empty())
        return bad("expected a number with an optional unit (ns, us, ms, s, m, h)");

    std::string_view unit_text = text.substr(i);
    std::uint64_t unit = 0;
    if (unit_text.empty() || unit_text == "s")
        unit = 1'000'000'000;
    else if (unit_text == "ns")
        unit = 1;
    else if (unit_text == "us")
        unit = 1'000;
    else if (unit_text == "ms")
        unit = 1'000'000;
    else if (unit_text == "m")
        unit = 60'000'000'000;
    else if (unit_text == "h")
        unit = 3'600'000'000'000;
    else
        return bad("unknown unit " + in_quotes(unit_text) + " (use ns, us, ms, s, m or h)");

    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), n);
    if (ec == std::errc::result_out_of_range)
        return bad("too large");
    if (ec != std::errc() || end != whole.data() + whole.size())
        return bad("expected a number");
    constexpr auto max = static_cast<std::uint64_t>(int64_max);
    if (n > max / unit)
        return bad("too large");
    std::uint64_t total = n * unit;

    // ceil(0.fraction * unit), exactly: Horner's rule from the last digit; each step keeps
    // the value below 2 * unit, and rounding up at every step equals rounding up once at the
    // end. Rounding up keeps a positive duration positive ("0.4ns" is 1 ns, not "none").
    std::uint64_t part = 0;
    for (auto it = fraction.rbegin(); it != fraction.rend(); ++it)
        part = (static_cast<std::uint64_t>(*it - '0') * unit + part + 9) / 10;
    if (part > max - total)
        return bad("too large");
    total += part;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(total));
}

outcome<std::int64_t> parse_size(std::string_view text)
{
    auto bad = [&](const std::string& why) {
        return make_failure(errc::validation, "invalid size " + in_quotes(text) + ": " + why);
    };
    if (text.empty())
        return make_failure(errc::validation, "empty size");
    if (text[0] == '-')
        return bad("sizes cannot be negative");

    std::size_t i = 0;
    while (i < text.size() && is_digit(text[i]))
        ++i;
    if (i == 0)
        return bad("expected an integer with an optional unit (K, M, G, T, KiB, ...)");
    if (i < text.size() && text[i] == '.')
        return bad("fractions are not allowed (use a smaller unit)");

    std::string unit_text;
    for (char c : text.substr(i))
        unit_text += lower(c);
    int shift = 0;
    if (unit_text.empty() || unit_text == "b")
        shift = 0;
    else if (unit_text == "k" || unit_text == "kib")
        shift = 10;
    else if (unit_text == "m" || unit_text == "mib")
        shift = 20;
    else if (unit_text == "g" || unit_text == "gib")
        shift = 30;
    else if (unit_text == "t" || unit_text == "tib")
        shift = 40;
    else if (unit_text == "kb" || unit_text == "mb" || unit_text == "gb" || unit_text == "tb")
        return bad("ambiguous unit " + in_quotes(text.substr(i)) +
                   " (units are binary: use K, M, G, T or KiB, MiB, GiB, TiB)");
    else
        return bad("unknown unit " + in_quotes(text.substr(i)) +
                   " (use K, M, G, T or KiB, MiB, GiB, TiB)");

    std::int64_t n = 0;
    std::string_view digits = text.substr(0, i);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec == std::errc::result_out_of_range)
        return bad("too large");
    if (ec != std::errc() || end != digits.data() + digits.size())
        return bad("expected an integer");
    if (n > (int64_max >> shift))
        return bad("too large");
    return n << shift;
}

outcome<sandbox::net_rule> parse_host_rule(std::string_view text, sandbox::net_action action)
{
    auto split = sandbox::split_host_port(text); // the library's reading of HOST:PORT
    if (!split)
    {
        failure f = split.error();
        f.diag.limit = "net.rules";
        return f;
    }
    sandbox::net_rule rule;
    rule.action = action;
    rule.host = std::string(split->host);
    rule.port = split->port;
    return rule;
}

outcome<std::pair<std::string, std::string>> parse_resolve(std::string_view text)
{
    const auto eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
        return make_failure(errc::validation,
                            "--resolve: expected HOST=ADDRESS, got " + in_quotes(text),
                            "resolve");
    return std::pair{std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

} // namespace sandbox::cli
