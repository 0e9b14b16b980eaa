// config/yaml_reader.cpp: YAML into the tree with libyaml's event parser (a Debian package,
// the reference parser's C library). Events, not libyaml's document loader, so that what a
// config must not contain is caught where it is: a duplicate key (which yaml-cpp and most
// loaders resolve silently), a second document, an alias (and with it the exponential
// "billion laughs" expansion), an explicit tag. Plain scalars resolve as JSON spells values:
// null / ~ / nothing, true / false, integers, numbers; everything else is a string ("yes" and
// "on" are strings, not YAML 1.1 booleans).
#include "config/decode.hpp"
#include "config/tree.hpp"

#include <yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <memory>
#include <regex>
#include <string>

namespace sandbox::config::detail {
namespace {

bool plain_integer(const std::string& s)
{
    static const std::regex re("[-+]?(0|[1-9][0-9]*)");
    return std::regex_match(s, re);
}

bool plain_number(const std::string& s)
{
    static const std::regex re("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
    return std::regex_match(s, re);
}

void resolve_plain(node& n, std::string text)
{
    if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
        n.what = node::kind::null;
    else if (text == "true" || text == "True" || text == "TRUE")
        n.what = node::kind::boolean, n.boolean = true;
    else if (text == "false" || text == "False" || text == "FALSE")
        n.what = node::kind::boolean, n.boolean = false;
    else if (plain_integer(text))
    {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (errno == ERANGE)
            n.what = node::kind::number, n.number = std::strtod(text.c_str(), nullptr);
        else
            n.what = node::kind::integer, n.integer = v;
    }
    else if (plain_number(text))
        n.what = node::kind::number, n.number = std::strtod(text.c_str(), nullptr);
    else
        n.what = node::kind::string;
    n.text = std::move(text);
}

struct yaml_reader
{
    yaml_parser_t parser{};
    open_containers open_{};
    bool broken = false;              // a syntax error: the tree is incomplete
    // Per open mapping: the key read and waiting for its value.
    std::vector<std::optional<std::pair<std::string, node>>> keys{};
    std::optional<node> root{};
    std::deque<node> junk{}; // stable addresses
    std::vector<problem> problems{};
    int documents = 0;

    static int line_of(const yaml_mark_t& m) { return static_cast<int>(m.line) + 1; }
    static int column_of(const yaml_mark_t& m) { return static_cast<int>(m.column) + 1; }

    void fail(const yaml_mark_t& m, std::string what)
    {
        add_problem(problems, [&] {
            return problem{errc::validation, here(), line_of(m), column_of(m), std::move(what)};
        });
    }

    // The path of the value being read: its container's, and its key or index (built for a
    // problem only).
    std::string here() const
    {
        if (open_.empty())
            return {};
        const node* top = open_.top();
        if (top->what == node::kind::array)
            return item_path(open_.path(), top->items.size());
        const auto& pending = keys.back();
        return pending ? member_path(open_.path(), pending->first) : open_.path();
    }

    // Where a new value goes; null when it is a mapping's key (then it lands in `keys`).
    node* place(const yaml_event_t& e, bool scalar)
    {
        node fresh;
        fresh.line = line_of(e.start_mark);
        fresh.column = column_of(e.start_mark);
        if (open_.empty())
        {
            root = std::move(fresh);
            return &*root;
        }
        node* top = open_.top();
        if (top->what == node::kind::array)
            return &top->items.emplace_back(std::move(fresh));
        auto& pending = keys.back();
        if (!pending)
        {
            if (!scalar)
                fail(e.start_mark, "a mapping key must be a plain string");
            pending.emplace(std::string{}, std::move(fresh));
            return nullptr;
        }
        node key_node = std::move(pending->second);
        std::string key = std::move(pending->first);
        pending.reset();
        if (const node* dup = open_.add_key(key))
        {
            add_problem(problems, [&] {
                return problem{errc::validation, member_path(open_.path(), key), key_node.line,
                               key_node.column,
                               "duplicate key \"" + key + "\" (first at line " +
                                   std::to_string(dup->key_line) + ")"};
            });
        }
        auto& m = top->members.emplace_back(std::move(key), std::move(fresh));
        m.second.key_line = key_node.line;
        m.second.key_column = key_node.column;
        return &m.second;
    }

    bool check_tag(const yaml_event_t& e, const yaml_char_t* tag, bool implicit)
    {
        if (tag != nullptr && !implicit)
        {
            fail(e.start_mark, std::string("explicit tags are not supported (") +
                                   reinterpret_cast<const char*>(tag) + ")");
            return false;
        }
        return true;
    }

    void scalar(const yaml_event_t& e)
    {
        const auto& s = e.data.scalar;
        std::string text(reinterpret_cast<const char*>(s.value), s.length);
        const bool implicit = s.plain_implicit || s.quoted_implicit;
        check_tag(e, s.tag, implicit);
        node* n = place(e, true);
        if (n == nullptr)
        {
            keys.back()->first = std::move(text);
            return;
        }
        if (s.style == YAML_PLAIN_SCALAR_STYLE)
            resolve_plain(*n, std::move(text));
        else
        {
            n->what = node::kind::string;
            n->text = std::move(text);
        }
    }

    // False when the container would nest too deep (libyaml has no bound): reading stops.
    bool open(const yaml_event_t& e, node::kind k, const yaml_char_t* tag, int implicit)
    {
        if (open_.full())
        {
            problems.push_back(too_deep(here(), line_of(e.start_mark), column_of(e.start_mark)));
            broken = true;
            return false;
        }
        check_tag(e, tag, implicit != 0);
        node* n = place(e, false);
        if (n == nullptr) // a complex key: reported; read on into a throwaway node
            n = &junk.emplace_back();
        n->what = k;
        open_.push(n);
        if (k == node::kind::object)
            keys.emplace_back();
        return true;
    }

    void close(node::kind k)
    {
        if (k == node::kind::object)
            keys.pop_back();
        open_.pop();
    }

    // One event; false at the end of the stream or on a syntax error.
    bool step()
    {
        yaml_event_t e;
        if (!yaml_parser_parse(&parser, &e))
        {
            const std::string what = parser.problem ? parser.problem : "syntax error";
            const std::string context = parser.context ? std::string(parser.context) + ": " : "";
            fail(parser.problem_mark, "not valid YAML: " + context + what);
            broken = true;
            return false;
        }
        std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> guard(&e, &yaml_event_delete);
        switch (e.type)
        {
        case YAML_DOCUMENT_START_EVENT:
            if (++documents == 2)
                fail(e.start_mark, "multiple YAML documents (one document is read)");
            return documents < 2;
        case YAML_SCALAR_EVENT: scalar(e); break;
        case YAML_ALIAS_EVENT:
            fail(e.start_mark, "aliases are not supported (write the value out)");
            place(e, true);
            break;
        case YAML_SEQUENCE_START_EVENT:
            return open(e, node::kind::array, e.data.sequence_start.tag,
                        e.data.sequence_start.implicit);
        case YAML_MAPPING_START_EVENT:
            return open(e, node::kind::object, e.data.mapping_start.tag,
                        e.data.mapping_start.implicit);
        case YAML_SEQUENCE_END_EVENT: close(node::kind::array); break;
        case YAML_MAPPING_END_EVENT: close(node::kind::object); break;
        case YAML_STREAM_END_EVENT: return false;
        default: break;
        }
        return true;
    }
};

} // namespace

read_result read_yaml(std::string_view text)
{
    yaml_reader r;
    read_result out;
    if (!yaml_parser_initialize(&r.parser))
    {
        out.problems.push_back({errc::internal, {}, 0, 0, "libyaml could not start"});
        return out;
    }
    yaml_parser_set_input_string(&r.parser, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
    yaml_parser_set_encoding(&r.parser, YAML_UTF8_ENCODING);
    while (r.step())
    {
    }
    yaml_parser_delete(&r.parser);
    out.problems = std::move(r.problems);
    if (!r.root && !r.broken)
        out.problems.push_back({errc::validation, {}, 1, 1, "the document is empty"});
    else if (!r.broken)
        out.root = std::move(r.root); // read on: the schema's problems are reported too
    return out;
}

} // namespace sandbox::config::detail
