// lib/config/tree.hpp: the document as read, before its schema is applied: one tree for both
// syntaxes, every value with the line and column it was found at.
#ifndef SANDBOX_LIB_CONFIG_TREE_HPP
#define SANDBOX_LIB_CONFIG_TREE_HPP

#include <sandbox/config/document.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandbox::config::detail {

struct node
{
    enum class kind
    {
        null,
        boolean,
        integer,
        number, // not an integer (a fraction or an exponent)
        string,
        array,
        object,
    };
    kind what = kind::null;
    bool boolean = false;
    std::int64_t integer = 0;
    double number = 0;
    std::string text{}; // a string's value, a number's text
    std::vector<node> items{};
    std::vector<std::pair<std::string, node>> members{};
    int line = 0;
    int column = 0;
    // For an object member: where its key is.
    int key_line = 0;
    int key_column = 0;

    const node* member(std::string_view key) const noexcept
    {
        for (const auto& [k, v] : members)
            if (k == key)
                return &v;
        return nullptr;
    }
};

const char* kind_name(node::kind k) noexcept;

struct read_result
{
    std::optional<node> root{};
    std::vector<problem> problems{};
};

// Strict JSON: one value, no comments, duplicate keys are problems.
read_result read_json(std::string_view text);
// YAML: one document, no aliases, no explicit tags, duplicate keys are problems; plain
// scalars resolve to null, true/false, integers and numbers as JSON would spell them.
read_result read_yaml(std::string_view text);

boost::json::value to_json(const node& n);

} // namespace sandbox::config::detail

#endif // SANDBOX_LIB_CONFIG_TREE_HPP
