// tools/sandbox-run/options.cpp: the options of sandbox-run as data: one table feeds the
// parser (Boost.Program_options) and the usage text, so an option cannot be parsed without
// being documented, or documented without being parsed.
#include "cli_internal.hpp"

#include <boost/program_options/value_semantic.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace sandbox::cli {
namespace {

namespace po = boost::program_options;

enum class arity
{
    flag,     // a switch: no value
    one,      // one value; given twice is a usage error
    repeated, // any number of values, in order
};

struct option_spec
{
    /// Program_options' name: "long" or "long,s".
    std::string_view name;
    /// What the value is called in the usage text; empty for a flag.
    std::string_view value;
    arity kind;
    /// The help text, broken into lines of at most 56 columns.
    std::string_view help;
};

// In the order of the usage text.
constexpr option_spec option_table[] = {
    {"root", "DIR", arity::one,
     "directory that work directories are confined to; with\n"
     "bwrap, also the directory the command can write\n"
     "(default: the current directory)"},
    {"workdir", "DIR", arity::one,
     "work directory: relative to the root, or absolute inside it\n"
     "(default: the root)"},
    {"timeout", "DUR", arity::one,
     "wall-clock limit; the whole tree is killed when it elapses;\n"
     "0 disables it"},
    {"kill-grace", "DUR", arity::one,
     "time between SIGTERM and SIGKILL when the tree is stopped\n"
     "(default 0: SIGKILL at once)"},
    {"memory", "SIZE", arity::one,
     "cap on the tree's memory: its summed PSS (proportional set\n"
     "size: a page shared by N processes counts 1/N), judged\n"
     "once its summed RSS reaches the cap; in a cgroup with the\n"
     "memory controller, the kernel's memory.max; 0 disables it"},
    {"cpu", "MILLICORES", arity::one,
     "cpu-time budget as a share of the timeout (1000 = one core\n"
     "for the whole timeout); needs a timeout; 0 disables it"},
    {"max-processes", "N", arity::one,
     "cap on live processes in the tree (threads not counted);\n"
     "0 disables it"},
    {"max-tasks", "N", arity::one,
     "cap on live threads of all processes in the tree; 0\n"
     "disables it"},
    {"max-output", "SIZE", arity::one,
     "with --json, bytes kept per stream, the rest is counted\n"
     "and dropped; 0 keeps everything"},
    {"env-allow", "NAME", arity::repeated,
     "pass host variable NAME (repeatable; replaces the default\n"
     "list)"},
    {"env-clear", "", arity::flag, "pass no host variable at all"},
    {"env", "NAME=VALUE", arity::repeated, "set NAME in the child's environment (repeatable)"},
    {"stdin-file", "FILE", arity::one,
     "FILE is the command's stdin, read by the command itself\n"
     "(any size; a FIFO is waited for under the timeout)\n"
     "(default: /dev/null)"},
    {"json", "", arity::flag,
     "print one JSON object with the outcome and the captured\n"
     "output, instead of streaming the output through as it\n"
     "is produced"},
    {"tty", "", arity::flag,
     "run COMMAND on a pseudo-terminal of its own, connected to\n"
     "ours (which must be a terminal): raw mode while it runs,\n"
     "window size changes passed on, Ctrl-C goes to COMMAND"},
    {"enforcement", "", arity::flag,
     "print what the backend enforces on this host (JSON) and,\n"
     "with --backend auto, which backend it chose and why; exit"},
    {"cgroup", "WHERE", arity::one,
     "auto (default): each command's tree in a cgroup of its own\n"
     "under our cgroup v2 when it is writable (killed at once,\n"
     "cpu counted by the kernel), else the /proc sampler; off:\n"
     "the sampler only; DIR: a delegated cgroup v2 directory\n"
     "(refused when it cannot be used)"},
    {"backend", "NAME", arity::one,
     "auto (default): bwrap when it can create its namespaces\n"
     "here, else local with a warning; but a command line\n"
     "bwrap refuses (a root it cannot make writable, a root\n"
     "the sandbox user cannot reach) or that needs bwrap\n"
     "(--writable, --net deny, ...) where it is not usable is\n"
     "refused (125), never run on local instead. local or\n"
     "bwrap: that backend, no fallback"},
    {"net", "MODE", arity::one,
     "inherit (default); deny: no network but loopback, host\n"
     "sockets under /run hidden; allow-list: only the hosts\n"
     "--allow-host allows, through an egress proxy on the host\n"
     "(the command gets HTTP_PROXY etc.; other traffic fails);\n"
     "proxy: everything through --proxy URL (all but inherit:\n"
     "bwrap only)"},
    {"allow-host", "PATTERN[:PORT]", arity::repeated,
     "allow a destination: example.com (and its\n"
     "subdomains), *.example.com, an IP or a CIDR such as\n"
     "10.0.0.0/8; no port: any (repeatable; implies --net\n"
     "allow-list). Loopback, private and link-local addresses\n"
     "need an explicit IP or CIDR rule. The host's own\n"
     "loopback is host.sandbox.internal (127.0.0.1 inside is\n"
     "the sandbox's): --allow-host host.sandbox.internal:PORT"},
    {"deny-host", "PATTERN[:PORT]", arity::repeated,
     "refuse a destination; wins over every allow\n"
     "(repeatable)"},
    {"proxy", "URL", arity::one,
     "send everything through this upstream proxy:\n"
     "http://[user:pass@]host:port or socks5://... (implies\n"
     "--net proxy)"},
    {"inspect", "PATTERN", arity::repeated,
     "terminate TLS to these hosts in the egress proxy (same\n"
     "forms as --allow-host, no port): the command trusts a\n"
     "CA made for this run alone, through a bundle at\n"
     "/run/sandbox/ca-certificates.crt and SSL_CERT_FILE etc.;\n"
     "the proxy verifies the origin (repeatable; needs --net\n"
     "allow-list or proxy)"},
    {"exclude-inspect", "PATTERN", arity::repeated,
     "never inspect these hosts, whatever --inspect says\n"
     "(repeatable)"},
    {"origin-ca", "FILE", arity::repeated,
     "PEM roots the proxy also trusts for inspected origins,\n"
     "beside the system's (repeatable)"},
    {"origin-ca-for", "'HOST_PATTERN=FILE'", arity::repeated,
     "PEM roots the proxy trusts for the origins of these\n"
     "hosts only (repeatable)"},
    {"allow-request", "'METHODS HOST/PATH'", arity::repeated,
     "let these HTTPS requests through (GET,HEAD\n"
     "api.example.com/repos/acme/**; * any method; * within\n"
     "a segment, ** across): once one names a host, its other\n"
     "requests get 403. Inspects HOST (repeatable)"},
    {"deny-request", "'METHODS HOST/PATH'", arity::repeated,
     "refuse these HTTPS requests with 403; wins over every\n"
     "allow. Inspects HOST (repeatable)"},
    {"inject-header", "'HOST: Name=@env:VAR'", arity::repeated,
     "the proxy adds this header to HTTPS requests to HOST,\n"
     "its value from @env:VAR (taken out of the command's\n"
     "environment) or @file:PATH (hidden from the sandbox);\n"
     "a request that has it already gets 403. Inspects HOST\n"
     "(repeatable)"},
    {"replace-header", "'HOST: Name=@env:VAR'", arity::repeated,
     "as --inject-header, replacing the request's own value"},
    {"resolve", "HOST=ADDRESS", arity::repeated,
     "the egress proxy resolves HOST to ADDRESS without a\n"
     "lookup (repeatable)"},
    {"sni-check", "MODE", arity::one,
     "the TLS server name of tunnels not inspected: record\n"
     "(default: a name that is not the tunnel's host is\n"
     "recorded), deny (that tunnel is closed), off (not read)"},
    {"writable", "DIR", arity::repeated, "with bwrap: also bind DIR read-write (repeatable)"},
    {"read-only", "PATH", arity::repeated,
     "with bwrap: bind host PATH read-only at the same place,\n"
     "through the private /tmp (repeatable)"},
    {"read-deny", "PATH", arity::repeated,
     "with bwrap: hide PATH, on top of the built-in list of\n"
     "credentials under your home (repeatable)"},
    {"write-deny", "PATH", arity::repeated,
     "with bwrap: keep PATH read-only inside the writable\n"
     "directories, even if missing (repeatable; relative: in\n"
     "each of them; git's hooks and config files, editor and\n"
     "tool files and rc files are built in)"},
    {"unix-socket", "PATH", arity::repeated,
     "with bwrap: let the command connect to this host socket\n"
     "(repeatable)"},
    {"sandbox-user", "USER[:GROUP]", arity::one,
     "with bwrap, for a root caller: run commands as\n"
     "this user (name or number; default nobody:nogroup),\n"
     "which must be able to reach the root and --writable\n"
     "dirs (refused otherwise); one it cannot write is\n"
     "read-only to the command"},
    {"allow-command", "NAME", arity::repeated,
     "run COMMAND only if it is NAME, exactly as typed\n"
     "(repeatable; /bin/rm and rm are different names);\n"
     "otherwise refuse with exit status 125"},
    {"ask", "PATTERN", arity::repeated,
     "a COMMAND whose base name matches the shell glob PATTERN\n"
     "needs a yes typed on the controlling terminal (never\n"
     "read from stdin); no terminal, no or a late answer\n"
     "refuses with exit status 125 (repeatable)"},
    {"ask-timeout", "DUR", arity::one, "how long --ask waits for the answer (default: 1m)"},
    {"audit", "FILE", arity::one,
     "append a JSON line to FILE for every decision and the\n"
     "outcome, and for every connection through the egress\n"
     "proxy (created if missing, never truncated)"},
    {"config", "FILE", arity::one,
     "a config document (JSON or YAML, docs/config.md) naming\n"
     "sandboxes: run COMMAND through the one --sandbox NAME\n"
     "names, with its backend, root and policy; the flags\n"
     "above then only narrow that policy (the stricter value\n"
     "of each field wins) and the default policy below does\n"
     "not apply; --backend, --root, --cgroup and the bwrap\n"
     "view flags are refused (the entry decides them)"},
    {"sandbox", "NAME", arity::one, "the entry of --config to run through"},
    {"check", "", arity::flag,
     "with --config: check the document and build every\n"
     "entry, print each one's policy and enforcement (JSON),\n"
     "exit 0, or 125 listing every problem"},
    {"workspace", "NAME=DIR", arity::repeated,
     "a workspace the entries of --config may name\n"
     "(repeatable)"},
    {"connect", "SOCKET", arity::one,
     "run COMMAND through the sandbox --sandbox NAME of the\n"
     "sandboxd listening on SOCKET (docs/sandboxd.md): output\n"
     "streamed, same exit status; the flags only narrow the\n"
     "sandbox's policy; --tty attaches to a terminal session,\n"
     "--stdin-file is streamed to it; no chain flags"},
    {"instance", "ID", arity::one,
     "with --connect: run COMMAND as one exec in the daemon's\n"
     "instance ID of the sandbox (opened by POST /v1/sandboxes/\n"
     "NAME/instances): output when it ends, same exit status;\n"
     "with --tty a terminal session in it; no --stdin-file"},
    {"help,h", "", arity::flag, "print this text and exit"},
};

constexpr std::string_view intro =
    "Usage: sandbox-run [options] [--] COMMAND [ARG...]\n"
    "\n"
    "Runs COMMAND under the policy below, inside bubblewrap (host / read-only, the\n"
    "root writable, private /tmp and pid namespace, credentials hidden, no\n"
    "capabilities; run by root: as the sandbox user) when bwrap can create its\n"
    "namespaces here, else on the local backend (host processes in their own process\n"
    "group, no isolation) with a warning (see --backend), and exits with its exit\n"
    "status. Options end at \"--\" or at the first argument that is not an option or\n"
    "an option's value; all arguments from there on belong to COMMAND, even those\n"
    "that look like options.\n"
    "\n"
    "Options:\n";

// Then the default environment list (default_env_allow), then the rest of the policy.
constexpr std::string_view units_and_defaults =
    "\n"
    "DUR is a number with an optional unit ns, us, ms, s, m or h (default: s), for\n"
    "example 500ms, 1.5s or 2m; fractions round up to whole nanoseconds. SIZE is an\n"
    "integer with an optional unit K, M, G, T or KiB, MiB, GiB, TiB, all powers of\n"
    "1024 (default: bytes), for example 64M.\n"
    "\n"
    "Default policy (each option replaces only its own part):\n"
    "  environment     only ";

constexpr std::string_view policy_and_exit_statuses =
    "\n"
    "  timeout         10m\n"
    "  output          streamed; with --json 10 MiB kept per stream\n"
    "  processes       1024\n"
    "  tasks           no cap\n"
    "  memory, cpu     no cap\n"
    "  kill grace      0 (SIGKILL at once)\n"
    "\n"
    "Exit status:\n"
    "  N               COMMAND exited with status N\n"
    "  128+N           COMMAND was killed by signal N\n"
    "  124             the timeout elapsed and the tree was killed\n"
    "  125             sandbox-run failed before COMMAND ran: bad usage, a work dir or\n"
    "                  root that is missing, not a directory or outside the root,\n"
    "                  refused or unenforceable policy, internal error\n"
    "  126             COMMAND exists but cannot be executed\n"
    "  127             COMMAND was not found\n"
    "  130             interrupted by SIGINT or SIGTERM; the tree was killed\n"
    "  141             the reader of the streamed output went away; the tree was\n"
    "                  killed\n"
    "  137             a memory, cpu, process or task cap was exceeded; the tree was\n"
    "                  killed\n";

// "  --name VALUE" padded to the help column (22), or "  -s, --name".
std::string label_of(const option_spec& o)
{
    const auto comma = o.name.find(',');
    std::string label = "  ";
    if (comma != std::string_view::npos)
        label.append("-").append(o.name.substr(comma + 1)).append(", ");
    label.append("--").append(o.name.substr(0, comma));
    if (!o.value.empty())
        label.append(" ").append(o.value);
    constexpr std::size_t help_column = 22;
    label.append(label.size() + 2 <= help_column ? help_column - label.size() : 2, ' ');
    return label;
}

std::string help_of(std::string_view help)
{
    std::string out;
    for (std::size_t start = 0; start < help.size();)
    {
        const auto end = std::min(help.find('\n', start), help.size());
        if (start > 0)
            out.append(22, ' ');
        out.append(help.substr(start, end - start)).append("\n");
        start = end + 1;
    }
    return out;
}

} // namespace

po::options_description make_options()
{
    po::options_description d("sandbox-run options");
    for (const option_spec& o : option_table)
    {
        const std::string name(o.name);
        switch (o.kind)
        {
        case arity::flag: d.add_options()(name.c_str(), po::bool_switch(), ""); break;
        case arity::one: d.add_options()(name.c_str(), po::value<std::string>(), ""); break;
        case arity::repeated:
            d.add_options()(name.c_str(), po::value<std::vector<std::string>>()->composing(), "");
            break;
        }
    }
    return d;
}

std::string usage()
{
    std::string out(intro);
    for (const option_spec& o : option_table)
        out.append(label_of(o)).append(help_of(o.help));
    std::string env_list;
    for (const auto& n : default_env_allow())
        env_list.append(env_list.empty() ? "" : " ").append(n);
    return out.append(units_and_defaults).append(env_list).append(policy_and_exit_statuses);
}

} // namespace sandbox::cli
