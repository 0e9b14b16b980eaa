// tools/sandbox-run/cli_internal.hpp: what the files of sandbox_run_cli share and the
// program does not need: the option table's parser, the value parsers' pieces, the defaults.
#ifndef SANDBOX_TOOLS_SANDBOX_RUN_CLI_INTERNAL_HPP
#define SANDBOX_TOOLS_SANDBOX_RUN_CLI_INTERNAL_HPP

#include "cli.hpp"

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/variables_map.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::cli {

/// `"text"`, for messages.
std::string in_quotes(std::string_view s);

/// A whole string of decimal digits as a non-negative int64; `errc::validation` naming
/// `what` otherwise.
outcome<std::int64_t> parse_count(std::string_view text, const char* what);

/// `inner` with its message prefixed by `--option: ` and its limit set to `field`.
failure option_failure(const char* option, const failure& inner, const char* field);

/// The host variables the default policy passes (options.cpp prints them in the usage).
const std::vector<std::string>& default_env_allow();

/// Every option of sandbox-run, made from the option table (options.cpp), which the usage
/// text is printed from too.
boost::program_options::options_description make_options();

/// --net, --allow-host, --deny-host, --proxy, --resolve: the network policy and the egress
/// proxy's pins. All of it needs the bwrap backend (its egress proxy): refused on local.
outcome<void> parse_net_flags(const boost::program_options::variables_map& vm, run_config& cfg);

/// --allow-command, --ask, --ask-timeout, --audit: the policy chain in front of the backend.
outcome<run_config::chain_flags> parse_chain_flags(const boost::program_options::variables_map& vm);

} // namespace sandbox::cli

#endif // SANDBOX_TOOLS_SANDBOX_RUN_CLI_INTERNAL_HPP
