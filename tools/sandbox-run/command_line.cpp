// tools/sandbox-run/command_line.cpp: `sandbox-run [options] [--] COMMAND [ARG...]` read
// into a run_config, one group of options at a time.
#include "cli_internal.hpp"

#include <sandbox/error.hpp>

#include <boost/program_options/errors.hpp>
#include <boost/program_options/parsers.hpp>
#include <boost/program_options/variables_map.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::cli {

namespace po = boost::program_options;

failure option_failure(const char* option, const failure& inner, const char* field)
{
    failure f = inner;
    f.diag.message = std::string("--") + option + ": " + inner.diag.message;
    f.diag.limit = field;
    return f;
}

namespace {

// Index of the first argument that belongs to the command (argc when there is none), and
// whether a "--" separator was seen just before it.
struct split_point
{
    int command = 0;
    bool separator = false;
};

split_point find_command(int argc, const char* const* argv, const po::options_description& d)
{
    int i = 1;
    while (i < argc)
    {
        std::string_view a = argv[i];
        if (a == "--")
            return {i + 1, true};
        if (a.size() < 2 || a[0] != '-')
            return {i, false};
        if (a.size() > 2 && a[1] == '-' && a.find('=') == std::string_view::npos)
        {
            // "--name VALUE": skip the value too when the option takes one. Unknown options
            // are left for program_options to reject.
            const po::option_description* o =
                d.find_nothrow(std::string(a.substr(2)), false, false, false);
            if (o && o->semantic()->max_tokens() > 0)
                ++i;
        }
        ++i;
    }
    return {argc, false};
}

struct stdin_file
{
    std::shared_ptr<const unique_fd> fd;
    bool fifo = false;
};

outcome<stdin_file> open_input_file(const std::string& path)
{
    auto fail = [&](int e, const std::string& why) {
        auto f = make_failure(errc_from_errno(e), "--stdin-file " + in_quotes(path) + ": " + why,
                              "input");
        f.diag.path = path;
        f.diag.cause = boost::system::error_code(e, boost::system::system_category());
        return f;
    };
    // O_NONBLOCK: opening a FIFO must not wait for a writer before the timeout even starts
    // (main waits for one under the timeout); the child gets a blocking descriptor.
    unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
    if (!fd)
        return fail(errno, std::strerror(errno));
    struct stat st;
    if (::fstat(fd.get(), &st) != 0)
        return fail(errno, std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        return fail(EISDIR, "is a directory");
    int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
        return fail(errno, std::strerror(errno));
    stdin_file f;
    f.fd = std::make_shared<const unique_fd>(std::move(fd));
    f.fifo = S_ISFIFO(st.st_mode);
    return f;
}

bool given(const po::variables_map& vm, const char* name)
{
    return vm.count(name) > 0 && !vm[name].defaulted();
}

// The command's stdin from a file (`--stdin-file`), opened now, read by the command.
outcome<void> take_stdin_file(const po::variables_map& vm, run_config& cfg)
{
    auto file = open_input_file(vm["stdin-file"].as<std::string>());
    if (!file)
        return file.error();
    cfg.request.stdin_fd = std::move(file->fd);
    cfg.stdin_fifo = file->fifo;
    return {};
}

// --connect SOCKET: the daemon's sandbox decides what the local flags would.
outcome<void> parse_connect_flags(const po::variables_map& vm, run_config& cfg)
{
    cfg.connect = vm["connect"].as<std::string>();
    if (cfg.connect.empty() || cfg.sandbox_name.empty())
        return make_failure(errc::validation, "--connect SOCKET needs --sandbox NAME", "connect");
    for (const char* flag :
         {"config",        "check",        "workspace",     "backend",        "root",
          "cgroup",        "writable",     "read-only",     "read-deny",      "write-deny",
          "unix-socket",   "sandbox-user", "resolve",       "origin-ca",      "origin-ca-for",
          "allow-request", "deny-request", "inject-header", "replace-header", "allow-command",
          "ask",           "ask-timeout",  "audit",         "enforcement"})
        if (given(vm, flag) && (std::string_view(flag) != "check" || cfg.check) &&
            (std::string_view(flag) != "enforcement" || vm["enforcement"].as<bool>()))
            return make_failure(errc::validation,
                                std::string("--") + flag +
                                    " cannot be used with --connect (the daemon's sandbox "
                                    "decides it, or the client cannot do it yet)",
                                "connect");
    cfg.tty = vm["tty"].as<bool>();
    if (given(vm, "instance"))
    {
        cfg.instance = vm["instance"].as<std::string>();
        const auto id_char = [](char ch) {
            return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' ||
                   ch == '.' || ch == ':' || ch == '@';
        };
        if (cfg.instance.empty() || !std::all_of(cfg.instance.begin(), cfg.instance.end(), id_char))
            return make_failure(errc::validation,
                                "--instance: an instance id (as the daemon "
                                "answered it)",
                                "instance");
        if (given(vm, "stdin-file"))
            return make_failure(errc::validation,
                                "--instance runs one exec in the instance (or with --tty a "
                                "terminal session in it): no --stdin-file",
                                "instance");
    }
    const bool json = vm["json"].as<bool>(); // (cfg.json is set after these flags)
    if (given(vm, "stdin-file") && (cfg.tty || json))
        return make_failure(errc::validation,
                            "--stdin-file with --connect is streamed to the session: not "
                            "with --tty (the terminal is stdin) or --json (one exec)",
                            "stdin-file"); // (opened with the run flags, as without --connect)
    if (cfg.tty && json)
        return make_failure(errc::validation,
                            "--tty and --json exclude each other (a terminal session is "
                            "streamed to this terminal)",
                            "tty");
    return {};
}

// --config FILE with --sandbox NAME or --check: the entry decides backend, root and view.
outcome<void> check_config_use(const po::variables_map& vm, const run_config& cfg)
{
    if (cfg.check && !cfg.sandbox_name.empty())
        return make_failure(errc::validation, "--check checks every entry: no --sandbox",
                            "config");
    if (!cfg.check && cfg.sandbox_name.empty())
        return make_failure(errc::validation, "--config needs --sandbox NAME (or --check)",
                            "config");
    for (const char* flag : {"backend", "root", "cgroup", "writable", "read-only", "read-deny",
                             "write-deny", "unix-socket", "sandbox-user", "resolve"})
        if (given(vm, flag))
            return make_failure(
                errc::validation,
                std::string("--") + flag + " cannot be used with --config: the entry decides it " +
                    (std::string_view(flag) == "resolve" ? "(pin names in its defaults.net.resolve)"
                                                         : "(its backend, root and settings)"),
                "config");
    // An entry's network replaces the caller's whole: these would be dropped without a word.
    if (given(vm, "sni-check"))
        return make_failure(errc::validation,
                            "--sni-check cannot be used with --config: the entry decides it (its "
                            "defaults.net.sni_check)",
                            "config");
    for (const char* flag : {"inspect", "exclude-inspect", "origin-ca", "origin-ca-for",
                             "allow-request", "deny-request", "inject-header", "replace-header"})
        if (given(vm, flag))
            return make_failure(errc::validation,
                                std::string("--") + flag +
                                    " cannot be used with --config: the entry decides it (its "
                                    "defaults.net.mitm)",
                                "config");
    return {};
}

// --config, --sandbox, --check, --workspace, --connect, and the flags an entry decides.
outcome<void> parse_config_flags(const po::variables_map& vm, run_config& cfg)
{
    cfg.check = vm["check"].as<bool>();
    if (given(vm, "config") && (cfg.config_file = vm["config"].as<std::string>()).empty())
        return make_failure(errc::validation, "--config: empty file name", "config");
    if (given(vm, "sandbox"))
        cfg.sandbox_name = vm["sandbox"].as<std::string>();
    if (given(vm, "workspace"))
        for (const auto& kv : vm["workspace"].as<std::vector<std::string>>())
        {
            const auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
                return make_failure(errc::validation,
                                    "--workspace: expected NAME=DIR, got " + in_quotes(kv),
                                    "workspace");
            cfg.workspaces[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
    if (given(vm, "connect"))
        return parse_connect_flags(vm, cfg);
    if (given(vm, "instance"))
        return make_failure(errc::validation, "--instance needs --connect SOCKET", "instance");
    if (!cfg.config_file.empty())
        return check_config_use(vm, cfg);
    for (const char* flag : {"sandbox", "check", "workspace"})
        if (given(vm, flag) && (std::string_view(flag) != "check" || cfg.check))
            return make_failure(errc::validation, std::string("--") + flag + " needs --config FILE",
                                "config");
    return {};
}

} // namespace

namespace {

// program_options reads what comes before the command (or before "--").
outcome<po::variables_map> read_options(int argc, const char* const* argv, split_point split,
                                        const po::options_description& desc)
{
    po::variables_map vm;
    try
    {
        std::vector<std::string> ours(argv + (argc > 0 ? 1 : 0),
                                      argv + (split.separator ? split.command - 1
                                                              : split.command));
        namespace style = po::command_line_style;
        const int s = style::unix_style & ~style::allow_guessing;
        po::store(po::command_line_parser(ours).options(desc).style(s).run(), vm);
        po::notify(vm);
    }
    catch (const po::error& e)
    {
        return make_failure(errc::validation, e.what());
    }
    return vm;
}

// --json, --tty, --enforcement: what sandbox-run prints.
outcome<void> parse_output_flags(const po::variables_map& vm, run_config& cfg)
{
    cfg.json = vm["json"].as<bool>();
    cfg.tty = vm["tty"].as<bool>();
    if (cfg.tty && cfg.json)
        return make_failure(errc::validation,
                            "--tty and --json exclude each other (a terminal session is "
                            "interactive; its output is not captured)",
                            "tty");
    cfg.enforcement = vm["enforcement"].as<bool>();
    return {};
}

// --backend and the bwrap view (--writable ... --sandbox-user), which local cannot enforce.
outcome<void> parse_backend_flags(const po::variables_map& vm, run_config& cfg)
{
    if (given(vm, "backend"))
        cfg.backend = vm["backend"].as<std::string>();
    if (cfg.backend != "auto" && cfg.backend != "local" && cfg.backend != "bwrap")
    {
        auto f = make_failure(errc::not_available,
                              "unknown backend " + in_quotes(cfg.backend) +
                                  " (\"auto\", \"local\" or \"bwrap\")",
                              "backend");
        f.diag.backend = cfg.backend;
        return f;
    }
    return {};
}

outcome<void> parse_view_flags(const po::variables_map& vm, run_config& cfg)
{
    for (auto [name, target] :
         {std::pair{"writable", &cfg.bwrap.writable}, std::pair{"read-deny", &cfg.bwrap.read_deny},
          std::pair{"write-deny", &cfg.bwrap.write_deny},
          std::pair{"unix-socket", &cfg.bwrap.unix_sockets},
          std::pair{"read-only", &cfg.bwrap.read_only}})
        if (given(vm, name))
            *target = vm[name].as<std::vector<std::string>>();
    for (const auto& p : cfg.bwrap.read_only)
        if (p.empty() || p.front() != '/')
            return make_failure(errc::validation,
                                "--read-only: " + in_quotes(p) + " is not an absolute path",
                                "read_only");
    if (given(vm, "sandbox-user") &&
        (cfg.bwrap.sandbox_user = vm["sandbox-user"].as<std::string>()).empty())
        return make_failure(errc::validation, "--sandbox-user: expected USER or USER:GROUP",
                            "sandbox_user");
    if (!cfg.bwrap.empty() && cfg.backend == "local")
        return make_failure(errc::validation,
                            "--writable, --read-only, --read-deny, --write-deny, "
                            "--unix-socket and --sandbox-user need --backend bwrap or auto "
                            "(the local backend "
                            "cannot enforce them)",
                            "backend");
    return {};
}

// --root, --workdir, --cgroup: where the command runs.
outcome<void> parse_place_flags(const po::variables_map& vm, run_config& cfg)
{
    if (given(vm, "root"))
    {
        cfg.runner.root = vm["root"].as<std::string>();
        if (cfg.runner.root.empty())
            return make_failure(errc::validation, "--root: empty directory", "root");
    }
    if (given(vm, "workdir"))
        cfg.request.options.work_dir = vm["workdir"].as<std::string>();
    if (given(vm, "cgroup"))
    {
        cfg.runner.cgroup = vm["cgroup"].as<std::string>();
        const auto& c = cfg.runner.cgroup;
        if (c != "auto" && c != "off" && (c.empty() || c.front() != '/'))
            return make_failure(errc::validation,
                                "--cgroup: auto, off, or an absolute directory of the cgroup2 "
                                "mount, not '" + c + "'",
                                "cgroup");
    }
    return {};
}

// --timeout, --kill-grace and the caps.
outcome<void> parse_limit_flags(const po::variables_map& vm, run_config& cfg)
{
    exec_options& o = cfg.request.options;
    auto text = [&vm](const char* name) { return vm[name].as<std::string>(); };
    struct duration_option
    {
        const char* name;
        const char* field;
        std::chrono::nanoseconds* target;
    };
    for (auto d : {duration_option{"timeout", "timeout", &o.timeout},
                   duration_option{"kill-grace", "kill_grace", &o.kill_grace}})
    {
        if (!given(vm, d.name))
            continue;
        auto v = parse_duration(text(d.name));
        if (!v)
            return option_failure(d.name, v.error(), d.field);
        *d.target = *v;
    }
    struct number_option
    {
        const char* name;
        const char* field;
        std::int64_t* target;
        bool size;
    };
    for (auto n : {number_option{"memory", "memory", &o.limits.memory_bytes, true},
                   number_option{"cpu", "cpu", &o.limits.cpu_millicores, false},
                   number_option{"max-processes", "processes", &o.limits.max_processes, false},
                   number_option{"max-tasks", "tasks", &o.limits.max_tasks, false},
                   number_option{"max-output", "output", &o.limits.max_output_bytes, true}})
    {
        if (!given(vm, n.name))
            continue;
        auto v = n.size ? parse_size(text(n.name)) : parse_count(text(n.name), "number");
        if (!v)
            return option_failure(n.name, v.error(), n.field);
        *n.target = *v;
    }
    // "--max-output 0" keeps everything: no request cap and no runner default either.
    if (given(vm, "max-output") && o.limits.max_output_bytes == 0)
        cfg.runner.default_max_output_bytes = 0;
    return {};
}

// --env-clear, --env-allow, --env.
outcome<void> parse_env_flags(const po::variables_map& vm, exec_options& o)
{
    const bool env_clear = vm["env-clear"].as<bool>();
    if (env_clear && given(vm, "env-allow"))
        return make_failure(errc::validation, "--env-clear and --env-allow exclude each other",
                            "env");
    if (env_clear)
        o.env.allow = std::vector<std::string>{};
    if (given(vm, "env-allow"))
    {
        auto names = vm["env-allow"].as<std::vector<std::string>>();
        for (const auto& n : names)
            if (n.empty() || n.find('=') != std::string::npos)
                return make_failure(errc::validation,
                                    "--env-allow: invalid variable name " + in_quotes(n), "env");
        o.env.allow = std::move(names);
    }
    if (given(vm, "env"))
        for (const auto& kv : vm["env"].as<std::vector<std::string>>())
        {
            auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0)
                return make_failure(errc::validation,
                                    "--env: expected NAME=VALUE, got " + in_quotes(kv), "env");
            o.env.inject[kv.substr(0, eq)] = kv.substr(eq + 1);
        }
    return {};
}

// COMMAND [ARG...], which --enforcement and --check do without (and --check refuses).
outcome<void> take_command(int argc, const char* const* argv, split_point split,
                           run_config& cfg)
{
    if (split.command < argc)
    {
        cfg.request.command = argv[split.command];
        cfg.request.args.assign(argv + split.command + 1, argv + argc);
    }
    else if (!cfg.enforcement && !cfg.check)
        return make_failure(errc::validation, "missing COMMAND", "command");
    if (cfg.check && split.command < argc)
        return make_failure(errc::validation, "--check takes no COMMAND", "command");
    return {};
}

// The groups of flags after the config flags, in the order their errors are reported.
outcome<void> parse_run_flags(const po::variables_map& vm, run_config& cfg)
{
    if (auto r = parse_output_flags(vm, cfg); !r)
        return r;
    if (auto r = parse_backend_flags(vm, cfg); !r)
        return r;
    if (auto r = parse_net_flags(vm, cfg); !r)
        return r;
    if (auto r = parse_view_flags(vm, cfg); !r)
        return r;
    auto chain = parse_chain_flags(vm);
    if (!chain)
        return chain.error();
    cfg.chain = std::move(*chain);
    if (auto r = parse_place_flags(vm, cfg); !r)
        return r;
    if (auto r = parse_limit_flags(vm, cfg); !r)
        return r;
    if (auto r = parse_env_flags(vm, cfg.request.options); !r)
        return r;
    if (given(vm, "stdin-file") && cfg.tty)
        return make_failure(errc::validation,
                            "--tty and --stdin-file exclude each other (the terminal is stdin)",
                            "tty");
    if (given(vm, "stdin-file"))
        return take_stdin_file(vm, cfg);
    return {};
}

} // namespace

outcome<run_config> parse_command_line(int argc, const char* const* argv)
{
    const po::options_description desc = make_options();
    const split_point split = find_command(argc, argv, desc);
    auto vm = read_options(argc, argv, split, desc);
    if (!vm)
        return vm.error();

    run_config cfg;
    if (auto r = parse_config_flags(*vm, cfg); !r)
        return r.error();
    // Through a config entry, the entry's policy is the default and the flags narrow it.
    cfg.request.options =
        cfg.config_file.empty() && cfg.connect.empty() ? default_policy() : exec_options{};
    cfg.runner.default_max_output_bytes = sandbox::default_max_output_bytes;
    cfg.help = (*vm)["help"].as<bool>();
    if (cfg.help)
        return cfg;
    if (auto r = parse_run_flags(*vm, cfg); !r)
        return r.error();
    if (auto r = take_command(argc, argv, split, cfg); !r)
        return r.error();
    return cfg;
}

} // namespace sandbox::cli
