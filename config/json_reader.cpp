// config/json_reader.cpp: strict JSON into the tree, with positions. Boost.JSON's
// basic_parser does the syntax; the handler builds the tree and refuses duplicate keys (which
// boost::json::parse would resolve silently) and nesting deeper than max_nesting_depth. The
// text is parsed in one pass; a cursor that knows only token boundaries (white space, the
// separators, where a string or a scalar ends) walks beside the parser, one token per event,
// to say where each value starts. Only a syntax error costs more passes (at most three, each
// whole up to where the last one narrowed it) to find the offending byte.
#include "config/decode.hpp"
#include "config/tree.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

namespace sandbox::config::detail {
namespace {

// Where the parser is, by tokens: each event of the parser is one token of the text, in order,
// so moving to the next token's first byte (past white space, ',' and ':') and then past its
// end gives every value its line and column without feeding the parser byte by byte.
struct token_cursor
{
    std::string_view text{};
    std::size_t at = 0;       // the next byte to look at
    int line = 1, column = 0; // of the byte before `at`

    bool more() const noexcept { return at < text.size(); }
    void step() noexcept
    {
        const char c = text[at++];
        if (c == '\n')
        {
            ++line;
            column = 0;
        }
        else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80)
            ++column;
    }
    // Onto the first byte of the next token: `line` and `column` are then its own.
    void to_token() noexcept
    {
        while (more() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\r' ||
                          text[at] == '\n' || text[at] == ',' || text[at] == ':'))
            step();
        if (more())
            step();
    }
    // From a string's opening quote to past its closing one.
    void past_string() noexcept
    {
        while (more())
        {
            const char c = text[at];
            step();
            if (c == '\\' && more())
                step();
            else if (c == '"')
                return;
        }
    }
    // From a number's or a literal's first byte to its last.
    // Past a number, true, false or null: up to the first byte that cannot be part of one.
    void past_scalar() noexcept
    {
        constexpr std::string_view ends = " \t\r\n,]}:\"";
        while (more() && ends.find(text[at]) == std::string_view::npos)
            step();
    }
};

struct json_handler
{
    static constexpr std::size_t max_object_size = std::size_t(-1);
    static constexpr std::size_t max_array_size = std::size_t(-1);
    static constexpr std::size_t max_key_size = std::size_t(-1);
    static constexpr std::size_t max_string_size = std::size_t(-1);

    open_containers open_{};
    std::optional<node> root{};
    std::string key{}, part{};
    bool have_key = false;
    token_cursor pos{};
    std::vector<problem> problems{};

    node* place()
    {
        if (open_.empty())
        {
            root.emplace();
            return &*root;
        }
        node* top = open_.top();
        if (top->what == node::kind::array)
            return &top->items.emplace_back();
        auto& m = top->members.emplace_back(key, node{});
        m.second.key_line = key_line;
        m.second.key_column = key_column;
        have_key = false;
        return &m.second;
    }
    // The value whose token starts next: placed, with its position; the cursor then moves past
    // the token (a container's only token is its opening bracket).
    node* value(node::kind k)
    {
        pos.to_token();
        node* n = place();
        n->what = k;
        n->line = pos.line;
        n->column = pos.column;
        if (k == node::kind::string)
            pos.past_string();
        else if (k != node::kind::array && k != node::kind::object)
            pos.past_scalar();
        return n;
    }
    int key_line = 0, key_column = 0;

    bool on_document_begin(boost::system::error_code&) { return true; }
    bool on_document_end(boost::system::error_code&) { return true; }
    // The path of the value about to be placed (built for a problem only).
    std::string here() const
    {
        if (open_.empty())
            return {};
        if (open_.top()->what == node::kind::array)
            return item_path(open_.path(), open_.top()->items.size());
        return member_path(open_.path(), key);
    }
    bool open(node::kind k, boost::system::error_code& ec)
    {
        if (open_.full())
        {
            pos.to_token();
            ec = boost::json::error::too_deep; // read_json says where
            return false;
        }
        open_.push(value(k));
        return true;
    }
    bool on_array_begin(boost::system::error_code& ec) { return open(node::kind::array, ec); }
    bool on_array_end(std::size_t, boost::system::error_code&)
    {
        pos.to_token();
        open_.pop();
        return true;
    }
    bool on_object_begin(boost::system::error_code& ec) { return open(node::kind::object, ec); }
    bool on_object_end(std::size_t, boost::system::error_code&)
    {
        pos.to_token();
        open_.pop();
        return true;
    }
    bool on_string_part(boost::json::string_view s, std::size_t, boost::system::error_code&)
    {
        part.append(s.data(), s.size());
        return true;
    }
    bool on_string(boost::json::string_view s, std::size_t, boost::system::error_code&)
    {
        part.append(s.data(), s.size());
        value(node::kind::string)->text = std::move(part);
        part.clear();
        return true;
    }
    bool on_key_part(boost::json::string_view s, std::size_t, boost::system::error_code&)
    {
        part.append(s.data(), s.size());
        return true;
    }
    bool on_key(boost::json::string_view s, std::size_t, boost::system::error_code&)
    {
        part.append(s.data(), s.size());
        key = std::move(part);
        part.clear();
        pos.to_token();
        key_line = pos.line;
        key_column = pos.column;
        pos.past_string();
        if (const node* dup = open_.add_key(key))
        {
            add_problem(problems, [&] {
                return problem{errc::validation, member_path(open_.path(), key), key_line,
                               key_column,
                               "duplicate key \"" + key + "\" (first at line " +
                                   std::to_string(dup->key_line) + ")"};
            });
        }
        have_key = true;
        return true;
    }
    bool on_number_part(boost::json::string_view s, boost::system::error_code&)
    {
        part.append(s.data(), s.size());
        return true;
    }
    bool on_int64(std::int64_t i, boost::json::string_view s, boost::system::error_code&)
    {
        node* n = value(node::kind::integer);
        n->integer = i;
        n->text = std::move(part.append(s.data(), s.size()));
        part.clear();
        return true;
    }
    bool on_uint64(std::uint64_t u, boost::json::string_view s, boost::system::error_code&)
    {
        // Beyond int64: kept as a number, so that a field wanting an integer says it is too big.
        node* n = value(node::kind::number);
        n->number = static_cast<double>(u);
        n->text = std::move(part.append(s.data(), s.size()));
        part.clear();
        return true;
    }
    bool on_double(double d, boost::json::string_view s, boost::system::error_code&)
    {
        node* n = value(node::kind::number);
        n->number = d;
        n->text = std::move(part.append(s.data(), s.size()));
        part.clear();
        return true;
    }
    bool on_bool(bool b, boost::system::error_code&)
    {
        value(node::kind::boolean)->boolean = b;
        return true;
    }
    bool on_null(boost::system::error_code&)
    {
        value(node::kind::null);
        return true;
    }
    bool on_comment_part(boost::json::string_view, boost::system::error_code&) { return true; }
    bool on_comment(boost::json::string_view, boost::system::error_code&) { return true; }
};

using json_parser = boost::json::basic_parser<json_handler>;

// The line and column of byte `offset` of `text` (1-based; a UTF-8 character is one column).
std::pair<int, int> line_column(std::string_view text, std::size_t offset)
{
    token_cursor c{text};
    while (c.at <= offset && c.more())
        c.step();
    return {c.line, std::max(c.column, 1)};
}

struct parse_end
{
    boost::system::error_code ec{};
    std::size_t offset = 0; // of the offending byte, for a syntax error
};

// Parses `text` into `p`'s handler: whole up to `whole_up_to`, then `step` bytes at a time, so
// that a syntax error past `whole_up_to` is known to lie in the piece where it was found
// (`offset` is that piece's first byte; with a step of 1, the offending byte).
parse_end feed(json_parser& p, std::string_view text, std::size_t whole_up_to, std::size_t step)
{
    p.handler().pos.text = text;
    parse_end e;
    std::size_t used = whole_up_to < text.size()
                           ? p.write_some(true, text.data(), whole_up_to, e.ec)
                           : p.write_some(false, text.data(), text.size(), e.ec);
    for (std::size_t i = used; !e.ec && !p.done() && i < text.size(); i += step)
    {
        used = i + p.write_some(true, text.data() + i, std::min(step, text.size() - i), e.ec);
        e.offset = i;
    }
    if (!e.ec && !p.done())
        p.write_some(false, nullptr, 0, e.ec);
    if (!e.ec && p.done())
    {
        // A whole value: only white space may follow.
        const auto next = text.find_first_not_of(" \t\r\n", used);
        if (next != std::string_view::npos)
        {
            e.ec = boost::json::error::extra_data;
            e.offset = next;
        }
    }
    // The text ended inside a value: the error is at its last byte.
    if (e.ec == boost::json::error::incomplete)
        e.offset = text.empty() ? 0 : text.size() - 1;
    return e;
}

problem syntax_problem(const json_handler& h, std::string_view text, const parse_end& e)
{
    if (e.ec == boost::json::error::too_deep)
        return too_deep(h.here(), h.pos.line, std::max(h.pos.column, 1));
    std::string what = e.ec == boost::json::error::extra_data
                           ? "multiple JSON documents (a second value follows the first)"
                           : "not valid JSON: " + e.ec.message();
    const auto [line, column] = line_column(text, std::min(e.offset, text.size() - 1));
    return {errc::validation, {}, line, column, std::move(what)};
}

boost::json::parse_options json_options()
{
    boost::json::parse_options options;
    options.max_depth = max_nesting_depth + 1; // the handler refuses first, and says where
    return options;
}

} // namespace

read_result read_json(std::string_view text)
{
    std::optional<json_parser> p(std::in_place, json_options());
    auto e = feed(*p, text, text.size(), 1);
    // A syntax error lies past the last token the handler saw: parse again, whole up to there,
    // then in pieces of 4 KiB, 64 bytes and 1 byte, each pass whole up to the piece the last
    // one failed in. A few fast passes, never one byte at a time over a long stretch.
    std::size_t from = p->handler().pos.at, step = 4096;
    while (e.ec && e.ec != boost::json::error::too_deep && e.ec != boost::json::error::extra_data &&
           e.ec != boost::json::error::incomplete)
    {
        p.emplace(json_options());
        e = feed(*p, text, from, step);
        if (step == 1)
            break;
        from = e.offset;
        step = step > 64 ? 64 : 1;
    }
    auto& h = p->handler();
    read_result r;
    r.problems = std::move(h.problems);
    if (e.ec)
        add_problem(r.problems, syntax_problem(h, text, e));
    // After extra data the first value is whole: its problems count too.
    if (!e.ec || e.ec == boost::json::error::extra_data)
        r.root = std::move(h.root);
    return r;
}

} // namespace sandbox::config::detail
