// config/backends.hpp: the built-in backend factories of the config builder ("local",
// "bwrap"): their strict settings and the paths in them resolved against the root.
#ifndef SANDBOX_LIB_CONFIG_BACKENDS_HPP
#define SANDBOX_LIB_CONFIG_BACKENDS_HPP

#include <sandbox/config/registry.hpp>

#include <memory>
#include <string>

namespace sandbox::config::detail {

std::unique_ptr<runner> make_local(const backend_context& ctx);
std::unique_ptr<runner> make_bwrap(const backend_context& ctx);

// A settings path: absolute is taken as written (lexically normal); relative is joined to
// `root` and must stay inside it, lexically and after symlinks. Throws `errc::validation`.
std::string resolve_settings_path(const std::string& root, const std::string& p,
                                  const std::string& where);

} // namespace sandbox::config::detail

#endif // SANDBOX_LIB_CONFIG_BACKENDS_HPP
