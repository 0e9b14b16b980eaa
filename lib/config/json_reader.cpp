// lib/config/json_reader.cpp: strict JSON into the tree, with positions. Boost.JSON's
// basic_parser does the syntax; the handler builds the tree and refuses duplicate keys (which
// boost::json::parse would resolve silently) and nesting deeper than max_nesting_depth. The
// text is fed a byte at a time so that each event knows where it happened (documents are
// small: at most max_document_bytes).
#include "config/decode.hpp"
#include "config/tree.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <string>

namespace sandbox::config::detail {
namespace {

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
    int line = 1, column = 0; // of the byte fed last
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
    node* value(node::kind k)
    {
        node* n = place();
        n->what = k;
        n->line = line;
        n->column = column;
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
            ec = boost::json::error::too_deep; // read_json says where
            return false;
        }
        open_.push(value(k));
        return true;
    }
    bool on_array_begin(boost::system::error_code& ec) { return open(node::kind::array, ec); }
    bool on_array_end(std::size_t, boost::system::error_code&)
    {
        open_.pop();
        return true;
    }
    bool on_object_begin(boost::system::error_code& ec) { return open(node::kind::object, ec); }
    bool on_object_end(std::size_t, boost::system::error_code&)
    {
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
        key_line = line;
        key_column = column;
        if (const node* dup = open_.add_key(key))
            problems.push_back({errc::validation, member_path(open_.path(), key), line, column,
                                "duplicate key \"" + key + "\" (first at line " +
                                    std::to_string(dup->key_line) + ")"});
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

// Feeds `text` to `p` a byte at a time, so that each event knows its line and column.
boost::system::error_code feed(json_parser& p, std::string_view text)
{
    auto& h = p.handler();
    boost::system::error_code ec;
    for (std::size_t i = 0; i < text.size() && !ec; ++i)
    {
        if (text[i] == '\n')
        {
            ++h.line;
            h.column = 0;
        }
        else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80)
            ++h.column;
        p.write_some(true, text.data() + i, 1, ec);
        if (!ec && p.done())
        {
            // A whole value: only white space may follow.
            const auto next = text.find_first_not_of(" \t\r\n", i + 1);
            if (next != std::string_view::npos)
            {
                for (std::size_t k = i + 1; k <= next; ++k)
                    text[k] == '\n' ? (++h.line, h.column = 0) : ++h.column;
                ec = boost::json::error::extra_data;
            }
            return ec;
        }
    }
    if (!ec && !p.done())
        p.write_some(false, nullptr, 0, ec);
    return ec;
}

problem syntax_problem(const json_handler& h, boost::system::error_code ec)
{
    const int column = std::max(h.column, 1);
    if (ec == boost::json::error::too_deep)
        return too_deep(h.here(), h.line, column);
    std::string what = ec == boost::json::error::extra_data
                           ? "multiple JSON documents (a second value follows the first)"
                           : "not valid JSON: " + ec.message();
    return {errc::validation, {}, h.line, column, std::move(what)};
}

} // namespace

read_result read_json(std::string_view text)
{
    boost::json::parse_options options;
    options.max_depth = max_nesting_depth + 1; // the handler refuses first, and says where
    json_parser p(options);
    auto& h = p.handler();
    const auto ec = feed(p, text);
    read_result r;
    r.problems = std::move(h.problems);
    if (ec)
        r.problems.push_back(syntax_problem(h, ec));
    // After extra data the first value is whole: its problems count too.
    if (!ec || ec == boost::json::error::extra_data)
        r.root = std::move(h.root);
    return r;
}

} // namespace sandbox::config::detail
