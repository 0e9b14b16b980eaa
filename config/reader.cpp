// config/reader.cpp: typed reads of tree values with the problem they make when the
// document has something else.
#include "config/decode.hpp"

#include <algorithm>
#include <limits>

namespace sandbox::config::detail {

std::string member_path(const std::string& path, std::string_view key)
{
    // Names the document chooses (sandbox names, variables) in brackets and quotes; the
    // schema's own keys with a dot.
    const bool plain = !key.empty() && path != "sandboxes" &&
                       std::all_of(key.begin(), key.end(), [](char c) {
                           return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                       });
    if (!plain)
        return path + "[\"" + std::string(key) + "\"]";
    return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string item_path(const std::string& path, std::size_t i)
{
    return path + "[" + std::to_string(i) + "]";
}

const char* kind_name(node::kind k) noexcept
{
    switch (k)
    {
    case node::kind::null: return "null";
    case node::kind::boolean: return "a boolean";
    case node::kind::integer: return "an integer";
    case node::kind::number: return "a number";
    case node::kind::string: return "a string";
    case node::kind::array: return "a list";
    case node::kind::object: return "a mapping";
    }
    return "a value";
}

bool add_problem(std::vector<problem>& sink, problem p)
{
    if (sink.size() < max_listed_problems)
    {
        sink.push_back(std::move(p));
        return true;
    }
    // The last problem counts the rest: "... and N more problems (only the first 100 are
    // listed)"; N is read back from its own message.
    constexpr std::string_view lead = "... and ";
    std::size_t more = 1;
    if (sink.size() == max_listed_problems)
        sink.push_back({errc::validation, {}, 0, 0, {}});
    else
        more += std::stoul(sink.back().message.substr(lead.size()));
    sink.back().message = std::string(lead) + std::to_string(more) +
                          " more problems (only the first " + std::to_string(max_listed_problems) +
                          " are listed)";
    return false;
}

failure failure_of_problems(const std::vector<problem>& problems, std::string_view lead)
{
    std::string message(lead);
    if (problems.size() > max_listed_problems)
        message += "more than " + std::to_string(max_listed_problems) + " problems:\n";
    else if (problems.size() > 1)
        message += std::to_string(problems.size()) + " problems:\n";
    for (std::size_t i = 0; i < problems.size(); ++i)
        message += (i ? "\n" : "") + to_string(problems[i]);
    auto f = make_failure(problems.front().code, std::move(message));
    f.diag.rule = problems.front().path;
    return f;
}

void reader::fail(const std::string& path, const node* at, std::string message, errc code)
{
    ++failures_;
    add_problem(problems_,
                {code, path, at ? at->line : 0, at ? at->column : 0, std::move(message)});
}

bool reader::known_keys(const node& obj, const std::string& path,
                        const std::vector<std::string_view>& known)
{
    bool good = true;
    for (const auto& [key, value] : obj.members)
    {
        bool found = false;
        for (auto k : known)
            found = found || k == key;
        if (found)
            continue;
        good = false;
        ++failures_;
        add_problem(problems_, [&] {
            std::string list;
            for (auto k : known)
                list += (list.empty() ? "" : ", ") + std::string(k);
            return problem{errc::validation, member_path(path, key), value.key_line,
                           value.key_column, "unknown key (known here: " + list + ")"};
        });
    }
    return good;
}

bool reader::is_object(const node& n, const std::string& path)
{
    if (n.what == node::kind::object)
        return true;
    fail(path, &n, std::string("must be a mapping, not ") + kind_name(n.what));
    return false;
}

std::optional<std::string> reader::string(const node& n, const std::string& path)
{
    if (n.what == node::kind::string)
        return n.text;
    fail(path, &n, std::string("must be a string, not ") + kind_name(n.what) +
                       (n.what == node::kind::integer || n.what == node::kind::number ||
                                n.what == node::kind::boolean
                            ? " (quote it: \"" + (n.text.empty() ? std::string(n.boolean ? "true" : "false") : n.text) + "\")"
                            : ""));
    return std::nullopt;
}

std::optional<bool> reader::boolean(const node& n, const std::string& path)
{
    if (n.what == node::kind::boolean)
        return n.boolean;
    fail(path, &n, std::string("must be true or false, not ") + kind_name(n.what) +
                       (n.what == node::kind::string ? " \"" + n.text + "\"" : ""));
    return std::nullopt;
}

std::optional<std::int64_t> reader::integer(const node& n, const std::string& path)
{
    if (n.what == node::kind::integer)
        return n.integer;
    if (n.what == node::kind::number)
        fail(path, &n, "must be an integer in range, not " + n.text);
    else
        fail(path, &n, std::string("must be an integer, not ") + kind_name(n.what));
    return std::nullopt;
}

std::optional<std::int64_t> reader::size(const node& n, const std::string& path)
{
    if (n.what == node::kind::integer)
    {
        if (n.integer < 0)
        {
            fail(path, &n, "must not be negative");
            return std::nullopt;
        }
        return n.integer;
    }
    if (n.what == node::kind::string)
    {
        auto r = parse_size(n.text);
        if (r)
            return *r;
        fail(path, &n, r.error().diag.message);
        return std::nullopt;
    }
    fail(path, &n, std::string("must be a byte count (an integer, or a string such as "
                               "\"64MiB\"), not ") +
                       kind_name(n.what));
    return std::nullopt;
}

std::optional<std::chrono::nanoseconds> reader::duration(const node& n, const std::string& path)
{
    if (n.what == node::kind::string)
    {
        auto r = parse_duration(n.text);
        if (r)
            return *r;
        fail(path, &n, r.error().diag.message);
        return std::nullopt;
    }
    if (n.what == node::kind::integer || n.what == node::kind::number)
        fail(path, &n, "must be a duration string with a unit, such as \"30s\" or \"2m\", not "
                       "the bare number " + n.text);
    else
        fail(path, &n, std::string("must be a duration string such as \"30s\", not ") +
                           kind_name(n.what));
    return std::nullopt;
}

std::optional<std::vector<std::string>> reader::strings(const node& n, const std::string& path)
{
    if (n.what != node::kind::array)
    {
        fail(path, &n, std::string("must be a list of strings, not ") + kind_name(n.what));
        return std::nullopt;
    }
    std::vector<std::string> out;
    bool good = true;
    for (std::size_t i = 0; i < n.items.size(); ++i)
    {
        auto s = string(n.items[i], item_path(path, i));
        if (s && s->empty())
            fail(item_path(path, i), &n.items[i], "must not be empty");
        good = good && s && !s->empty();
        if (s)
            out.push_back(std::move(*s));
    }
    if (!good)
        return std::nullopt;
    return out;
}

} // namespace sandbox::config::detail
