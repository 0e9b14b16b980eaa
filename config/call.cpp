// config/call.cpp: a call as sandboxd's clients write it: the command, its arguments, and
// the options in the syntax of an entry's defaults (one decoder, one set of rules).
#include "config/decode.hpp"
#include "config/tree.hpp"

#include <sandbox/config/document.hpp>

namespace sandbox::config {
namespace {

bool absent(const detail::node* n) { return n == nullptr || n->what == detail::node::kind::null; }

void decode_tty(detail::reader& r, const detail::node& n, call_document& c)
{
    if (n.what == detail::node::kind::boolean)
    {
        if (n.boolean)
            c.tty = std::pair(24, 80);
        return;
    }
    if (!r.is_object(n, "tty"))
        return;
    r.known_keys(n, "tty", {"rows", "cols"});
    int size[2] = {24, 80};
    const char* keys[2] = {"rows", "cols"};
    for (int i = 0; i < 2; ++i)
        if (const auto* v = n.member(keys[i]); !absent(v))
            if (auto x = r.integer(*v, std::string("tty.") + keys[i]))
            {
                if (*x < 1 || *x > 10000)
                    r.fail(std::string("tty.") + keys[i], v, "must be 1 to 10000");
                else
                    size[i] = static_cast<int>(*x);
            }
    c.tty = std::pair(size[0], size[1]);
}

} // namespace

outcome<call_document> parse_call(std::string_view json)
{
    auto read = detail::read_json(json);
    std::vector<problem> problems = std::move(read.problems);
    call_document c;
    if (read.root)
    {
        detail::reader r(problems);
        const auto& n = *read.root;
        detail::decode_defaults(r, n, "", c.options,
                                {"command", "args", "work_dir", "stdin", "tty", "id"});
        if (n.what == detail::node::kind::object)
        {
            if (const auto* v = n.member("command"); absent(v))
                r.fail("command", &n, "is required");
            else if (auto s = r.string(*v, "command"))
            {
                if (s->empty())
                    r.fail("command", v, "must not be empty");
                c.command = std::move(*s);
            }
            if (const auto* v = n.member("args"); !absent(v))
            {
                if (v->what != detail::node::kind::array)
                    r.fail("args", v, "must be a list of strings");
                else
                    for (std::size_t i = 0; i < v->items.size(); ++i)
                        if (auto s = r.string(v->items[i], detail::item_path("args", i)))
                            c.args.push_back(std::move(*s));
            }
            if (const auto* v = n.member("work_dir"); !absent(v))
                c.options.work_dir = r.string(*v, "work_dir").value_or("");
            if (const auto* v = n.member("stdin"); !absent(v))
                c.options.input = r.string(*v, "stdin");
            if (const auto* v = n.member("tty"); !absent(v))
                decode_tty(r, *v, c);
            if (const auto* v = n.member("id"); !absent(v))
                if (auto s = r.string(*v, "id"))
                {
                    if (s->empty())
                        r.fail("id", v, "must not be empty (leave it out for a fresh id)");
                    c.id = std::move(*s);
                }
        }
    }
    if (problems.empty())
        return c;
    return detail::failure_of_problems(problems, "");
}

outcome<exec_options> parse_instance_call(std::string_view json)
{
    auto read = detail::read_json(json.empty() ? std::string_view("{}") : json);
    std::vector<problem> problems = std::move(read.problems);
    exec_options o;
    if (read.root)
    {
        detail::reader r(problems);
        const auto& n = *read.root;
        detail::decode_defaults(r, n, "", o, {"work_dir"});
        if (n.what == detail::node::kind::object)
            if (const auto* v = n.member("work_dir"); !absent(v))
                o.work_dir = r.string(*v, "work_dir").value_or("");
    }
    if (problems.empty())
        return o;
    return detail::failure_of_problems(problems, "");
}

} // namespace sandbox::config
