// config/tree.hpp: the document as read, before its schema is applied: one tree for both
// syntaxes, every value with the line and column it was found at.
#ifndef SANDBOX_LIB_CONFIG_TREE_HPP
#define SANDBOX_LIB_CONFIG_TREE_HPP

#include <sandbox/config/document.hpp>
#include <sandbox/failure.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
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

// The containers a reader has open while it builds the tree, outermost first. An open mapping
// of many members indexes its keys (a hash table of member indexes), so that a duplicate is
// found in constant time; a path is built only when a problem names it, from the key or index
// each open container has in its parent.
class open_containers
{
public:
    bool empty() const noexcept { return frames_.empty(); }
    node* top() const noexcept { return frames_.back().at; }
    // Whether one more container would nest deeper than max_nesting_depth.
    bool full() const noexcept { return frames_.size() >= max_nesting_depth; }
    void push(node* n) { frames_.push_back({n}); }
    void pop() noexcept { frames_.pop_back(); }
    // The member of the innermost mapping first written with `key`, or null when `key` is new
    // (then it is recorded as the key of the member added next).
    const node* add_key(const std::string& key);
    // The path of the innermost container.
    std::string path() const;

private:
    struct frame
    {
        node* at;
        // Open addressing: a key's hash in the high half, its member's index + 1 in the low
        // half; 0 for a free slot. Empty while the mapping has fewer than `indexed_from`
        // members (a scan is cheaper then).
        std::vector<std::uint64_t> slots{};
    };
    static constexpr std::size_t indexed_from = 16;
    static std::uint64_t& slot_of(frame& f, std::string_view key, std::uint64_t hash);
    static void reindex(frame& f);

    std::vector<frame> frames_{};
};

// At most this many problems are listed for one document or call; past it, one last problem
// says how many more there were (a document of 80,000 bad keys costs a bounded message and
// bounded time, not one line each).
inline constexpr std::size_t max_listed_problems = 100;

// Adds `p` to `sink` while it lists fewer than max_listed_problems; past that, counts it in
// one last problem that says how many more there were. Whether `p` was listed.
bool add_problem(std::vector<problem>& sink, problem p);
// Whether `sink` still lists problems (one more would be listed).
inline bool listing(const std::vector<problem>& sink) noexcept
{
    return sink.size() < max_listed_problems;
}
// The same, with the problem made by `make()` only when it is listed (a message that costs
// a path and a string is not built for a problem that is only counted).
template <class Make>
requires std::is_invocable_r_v<problem, Make>
bool add_problem(std::vector<problem>& sink, Make&& make)
{
    return add_problem(sink, listing(sink) ? std::forward<Make>(make)() : problem{});
}

// The failure that lists `problems` (at least one), each on its line after `lead`, counted when
// there are several: the first one's code, its path as the rule.
failure failure_of_problems(const std::vector<problem>& problems, std::string_view lead);

// The problem of a container that would nest deeper than max_nesting_depth.
problem too_deep(std::string path, int line, int column);

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
