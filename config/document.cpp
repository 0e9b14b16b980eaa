// config/document.cpp: reading a document (which syntax, the size bound, every problem in
// document order) and the value syntaxes a document uses for durations and sizes.
#include "config/decode.hpp"
#include "config/tree.hpp"

#include <sandbox/config/document.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <fstream>
#include <limits>
#include <sstream>

namespace sandbox::config {

std::string to_string(const problem& p)
{
    std::string s = p.path.empty() ? "document" : p.path;
    s += ": " + p.message;
    if (p.line > 0)
        s += " (line " + std::to_string(p.line) + ", column " + std::to_string(p.column) + ")";
    return s;
}

const sandbox_entry* document::find(std::string_view name) const noexcept
{
    for (const auto& e : sandboxes)
        if (e.name == name)
            return &e;
    return nullptr;
}

namespace {

bool looks_like_json(std::string_view text)
{
    const auto at = text.find_first_not_of(" \t\r\n");
    return at != std::string_view::npos && text[at] == '{';
}

void in_document_order(std::vector<problem>& ps)
{
    auto key = [](const problem& p) {
        return std::pair(p.line == 0 ? std::numeric_limits<int>::max() : p.line, p.column);
    };
    std::stable_sort(ps.begin(), ps.end(),
                     [&](const problem& a, const problem& b) { return key(a) < key(b); });
}

} // namespace

namespace {

outcome<document> decode(std::string_view text, std::vector<problem>& problems,
                         document* clean_entries = nullptr)
{
    if (text.size() > max_document_bytes)
    {
        problems.push_back({errc::validation, {}, 0, 0,
                            "the document is larger than " + std::to_string(max_document_bytes) +
                                " bytes"});
        return make_failure(errc::validation, to_string(problems.front()));
    }
    auto read = looks_like_json(text) ? detail::read_json(text) : detail::read_yaml(text);
    problems = std::move(read.problems);
    document d;
    if (read.root)
        d = detail::decode_document(*read.root, problems, clean_entries != nullptr);
    in_document_order(problems);
    if (clean_entries)
        *clean_entries = d;
    if (problems.empty())
        return d;
    return detail::failure_of_problems(problems, "sandbox config: ");
}

} // namespace

std::vector<problem> check_document(std::string_view text)
{
    std::vector<problem> problems;
    (void)decode(text, problems);
    return problems;
}

std::vector<problem> check_document(std::string_view text, document& clean)
{
    std::vector<problem> problems;
    clean = document{};
    (void)decode(text, problems, &clean);
    return problems;
}

outcome<document> parse_document(std::string_view text)
{
    std::vector<problem> problems;
    return decode(text, problems);
}

outcome<std::string> read_text_file(const std::filesystem::path& file, std::string_view what,
                                    std::size_t max_bytes)
{
    auto fail = [&](errc code, const std::string& why) {
        auto f = make_failure(code, "cannot read " + std::string(what) + ": " + why);
        f.diag.path = file.string();
        return f;
    };
    std::ifstream in(file, std::ios::binary);
    if (!in)
    {
        const int err = errno;
        auto f =
            fail(errc_from_errno(err), std::error_code(err, std::generic_category()).message());
        f.diag.cause = boost::system::error_code(err, boost::system::generic_category());
        return f;
    }
    std::string text;
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0)
    {
        text.append(buf, static_cast<std::size_t>(in.gcount()));
        if (text.size() > max_bytes)
            return fail(errc::validation,
                        "it is larger than " + std::to_string(max_bytes) + " bytes");
    }
    if (in.bad())
        return fail(errc::validation, "is it a directory?");
    return text;
}

outcome<std::string> read_secret_file(const std::filesystem::path& file, std::string_view what)
{
    auto text = read_text_file(file, what, 64 * 1024);
    if (text && text->ends_with('\n'))
        text->pop_back();
    if (text && text->ends_with('\r'))
        text->pop_back();
    return text;
}

outcome<std::string> read_document_file(const std::filesystem::path& file)
{
    return read_text_file(file, "the config document", max_document_bytes);
}

outcome<document> load_document(const std::filesystem::path& file)
{
    auto text = read_document_file(file);
    if (!text)
        return text.error();
    auto d = parse_document(*text);
    if (!d)
    {
        auto f = d.error();
        f.diag.path = file.string();
        return f;
    }
    return d;
}

outcome<std::chrono::nanoseconds> parse_duration(std::string_view text)
{
    auto bad = [&](std::string why) {
        return make_failure(errc::validation,
                            "\"" + std::string(text) + "\" is not a duration: " + why +
                                " (write it as \"30s\", \"1h30m\", \"250ms\")");
    };
    if (text == "0")
        return std::chrono::nanoseconds(0);
    if (text.empty())
        return bad("it is empty");
    long double total = 0;
    long double previous_scale = 0; // units from the largest down, each once: "1h30m"
    std::size_t i = 0;
    while (i < text.size())
    {
        const std::size_t start = i;
        while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'))
            ++i;
        const std::string number(text.substr(start, i - start));
        if (number.empty() || number == "." || std::count(number.begin(), number.end(), '.') > 1)
            return bad("a number must come before each unit");
        const std::size_t unit_start = i;
        while (i < text.size() && !((text[i] >= '0' && text[i] <= '9') || text[i] == '.'))
            ++i;
        const std::string_view unit = text.substr(unit_start, i - unit_start);
        long double scale = 0;
        if (unit == "ns") scale = 1;
        else if (unit == "us" || unit == "\xC2\xB5s" || unit == "\xCE\xBCs") scale = 1e3;
        else if (unit == "ms") scale = 1e6;
        else if (unit == "s") scale = 1e9;
        else if (unit == "m") scale = 60e9;
        else if (unit == "h") scale = 3600e9;
        else if (unit.empty())
            return bad("a unit must follow " + number);
        else
            return bad("unknown unit \"" + std::string(unit) + "\"");
        if (previous_scale != 0 && scale >= previous_scale)
            return bad("each unit once, from the largest down");
        previous_scale = scale;
        total += std::strtold(number.c_str(), nullptr) * scale;
    }
    const long double ceiling = std::ceil(total);
    if (ceiling > static_cast<long double>(std::numeric_limits<std::int64_t>::max()))
        return bad("it is too long");
    return std::chrono::nanoseconds(static_cast<std::int64_t>(ceiling));
}

outcome<std::int64_t> parse_size(std::string_view text)
{
    auto bad = [&](std::string why) {
        return make_failure(errc::validation, "\"" + std::string(text) + "\" is not a byte count: " +
                                                  why + " (write it as 1048576, \"64MiB\", \"1G\")");
    };
    std::size_t i = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9')
        ++i;
    if (i == 0)
        return bad("it must start with digits");
    std::string unit(text.substr(i));
    for (auto& c : unit)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    int shift = 0;
    if (unit.empty() || unit == "B") shift = 0;
    else if (unit == "K" || unit == "KIB") shift = 10;
    else if (unit == "M" || unit == "MIB") shift = 20;
    else if (unit == "G" || unit == "GIB") shift = 30;
    else if (unit == "T" || unit == "TIB") shift = 40;
    else if (unit == "KB" || unit == "MB" || unit == "GB" || unit == "TB")
        return bad("decimal units are ambiguous; use KiB, MiB, GiB or TiB");
    else
        return bad("unknown unit \"" + std::string(text.substr(i)) + "\"");
    std::int64_t v = 0;
    for (std::size_t k = 0; k < i; ++k)
    {
        if (v > (std::numeric_limits<std::int64_t>::max() - (text[k] - '0')) / 10)
            return bad("it is too large");
        v = v * 10 + (text[k] - '0');
    }
    if (shift > 0 && v > (std::numeric_limits<std::int64_t>::max() >> shift))
        return bad("it is too large");
    return v << shift;
}

const char* to_string(run_as_user r) noexcept
{
    return r == run_as_user::daemon ? "daemon" : "caller";
}

} // namespace sandbox::config
