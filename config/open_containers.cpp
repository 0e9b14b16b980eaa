// config/open_containers.cpp: what both readers keep of the containers they have open
// (tree.hpp): the depth bound, the key index of each open mapping and paths on demand.
#include "config/decode.hpp"
#include "config/tree.hpp"

#include <bit>
#include <functional>

namespace sandbox::config::detail {

namespace {

// The high half of a slot: the key's hash, never 0 with the index below it.
std::uint64_t hash_of(std::string_view key) { return std::hash<std::string_view>{}(key) << 32; }

std::size_t index_in(std::uint64_t slot) { return (slot & 0xffffffff) - 1; }

} // namespace

const node* open_containers::add_key(const std::string& key)
{
    frame& f = frames_.back();
    auto& members = f.at->members;
    if (members.size() < indexed_from)
    {
        for (auto& [k, v] : members)
            if (k == key)
                return &v;
        return nullptr;
    }
    if (2 * (members.size() + 1) > f.slots.size())
        reindex(f);
    const std::uint64_t hash = hash_of(key);
    std::uint64_t& slot = slot_of(f, key, hash);
    if (slot != 0)
        return &members[index_in(slot)].second;
    slot = hash | (members.size() + 1);
    return nullptr;
}

// The slot holding `key`, or the free one where it goes (the table is never full).
std::uint64_t& open_containers::slot_of(frame& f, std::string_view key, std::uint64_t hash)
{
    const std::size_t mask = f.slots.size() - 1;
    for (std::size_t i = (hash >> 32) & mask;; i = (i + 1) & mask)
    {
        const std::uint64_t s = f.slots[i];
        if (s == 0 || ((s >> 32) == (hash >> 32) && f.at->members[index_in(s)].first == key))
            return f.slots[i];
    }
}

// A table at most half full until the members double, each key at its first member (a JSON
// duplicate is a member too).
void open_containers::reindex(frame& f)
{
    const auto& members = f.at->members;
    f.slots.assign(std::bit_ceil(2 * (members.size() + 1)), 0);
    for (std::size_t i = 0; i < members.size(); ++i)
    {
        const std::uint64_t hash = hash_of(members[i].first);
        if (std::uint64_t& slot = slot_of(f, members[i].first, hash); slot == 0)
            slot = hash | (i + 1);
    }
}

std::string open_containers::path() const
{
    // Each open container is the last item or member of the one it is in; a YAML mapping used
    // as a key is in none (it has its parent's path).
    std::string p;
    for (std::size_t i = 1; i < frames_.size(); ++i)
    {
        const node& parent = *frames_[i - 1].at;
        if (parent.what == node::kind::array)
            p = item_path(p, parent.items.size() - 1);
        else if (!parent.members.empty() && &parent.members.back().second == frames_[i].at)
            p = member_path(p, parent.members.back().first);
    }
    return p;
}

problem too_deep(std::string path, int line, int column)
{
    return {errc::validation, std::move(path), line, column,
            "lists and mappings nest deeper than the limit of " +
                std::to_string(max_nesting_depth) + " levels"};
}

} // namespace sandbox::config::detail
