// config/decode.hpp: the schema of a document applied to its tree (docs/config.md), every
// problem collected with its path and position.
#ifndef SANDBOX_LIB_CONFIG_DECODE_HPP
#define SANDBOX_LIB_CONFIG_DECODE_HPP

#include "config/tree.hpp"

#include <sandbox/config/document.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::config::detail {

// `path.key`, or `key` at the top.
std::string member_path(const std::string& path, std::string_view key);
// `path[i]`.
std::string item_path(const std::string& path, std::size_t i);

// Typed reads of tree values; each records a problem and returns nothing on a mismatch.
// Null counts as absent everywhere: the caller checks whether the field is required.
class reader
{
public:
    explicit reader(std::vector<problem>& sink) : problems_(sink) {}

    void fail(const std::string& path, const node* at, std::string message,
              errc code = errc::validation);
    // Each key of `obj` must be one of `known`; false when one is not.
    bool known_keys(const node& obj, const std::string& path,
                    const std::vector<std::string_view>& known);
    bool is_object(const node& n, const std::string& path);
    std::optional<std::string> string(const node& n, const std::string& path);
    std::optional<bool> boolean(const node& n, const std::string& path);
    std::optional<std::int64_t> integer(const node& n, const std::string& path);
    std::optional<std::int64_t> size(const node& n, const std::string& path);
    std::optional<std::chrono::nanoseconds> duration(const node& n, const std::string& path);
    // A list of non-empty strings.
    std::optional<std::vector<std::string>> strings(const node& n, const std::string& path);

    // How many problems this reader found (listed or not: see add_problem).
    std::size_t count() const noexcept { return failures_; }

    // Whether the text may name files of this host for the decoder to read (a config
    // document: yes; a daemon client's call: no, it would read the daemon's files).
    bool reads_host_files = false;

private:
    std::vector<problem>& problems_;
    std::size_t failures_ = 0;
};

// An entry's `defaults` (also the options of a call); problems go to `r`.
void decode_defaults(reader& r, const node& n, const std::string& path, exec_options& o,
                     std::initializer_list<std::string_view> more_keys = {});

// The whole document; problems go to `sink`. With `clean`, only the entries without a
// problem of their own are kept (a check builds those).
document decode_document(const node& root, std::vector<problem>& sink, bool clean = false);

} // namespace sandbox::config::detail

#endif // SANDBOX_LIB_CONFIG_DECODE_HPP
