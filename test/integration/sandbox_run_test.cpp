// test/integration/sandbox_run_test.cpp: the real sandbox-run binary, run through the library
// (local_runner) with the helper program as its command: output, exit statuses, JSON, policy
// flags and signal handling.
#include <boost/test/unit_test.hpp>

#include "cli.hpp"
#include "support.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace std::chrono_literals;
using sandbox::exec_status;

namespace {

using sbx_test::sandbox_run;
std::string sandbox_run_path() { return SBX_SANDBOX_RUN; }

// A local runner in a fresh temp root (the helper-leak check included) that runs sandbox-run.
struct cli_fixture : sbx_test::local_fixture
{
    // Runs `sandbox-run ARGS...` in the root, with `env` injected into its environment, and
    // requires that it ran and exited by itself. On the local backend unless ARGS name one:
    // these tests are about the command line, its output and statuses; the default backend
    // (auto) has its own tests (`run_default`).
    sandbox::exec_result run_cli(std::vector<std::string> args,
                                 std::map<std::string, std::string> env = {})
    {
        if (std::find(args.begin(), args.end(), "--backend") == args.end())
            args.insert(args.begin(), {"--backend", "local"});
        return run_default(std::move(args), std::move(env));
    }

    // The same, with ARGS as they are (the default backend unless they name one).
    sandbox::exec_result run_default(std::vector<std::string> args,
                                     std::map<std::string, std::string> env = {})
    {
        sandbox::exec_request req;
        req.command = sandbox_run;
        req.args = std::move(args);
        req.options.timeout = 25s;
        req.options.env.inject = std::move(env);
        auto out = run(std::move(req), 30s);
        BOOST_REQUIRE_MESSAGE(!out.ec, "sandbox-run did not run: " << out.ec.message() << " "
                                                                   << out.result.diag);
        BOOST_REQUIRE_MESSAGE(out.result.status == exec_status::exited,
                              "sandbox-run ended with status " << out.result.status);
        return std::move(out.result);
    }

    // Runs `program ARGS...` (which runs sandbox-run itself) the same way.
    sandbox::exec_result run_cli_via(std::string program, std::vector<std::string> args)
    {
        sandbox::exec_request req;
        req.command = std::move(program);
        req.args = std::move(args);
        req.options.timeout = 25s;
        auto out = run(std::move(req), 30s);
        BOOST_REQUIRE_MESSAGE(!out.ec, "the command did not run: " << out.ec.message() << " "
                                                                   << out.result.diag);
        return std::move(out.result);
    }

    // Writes `text` to a file in the root with `mode`; returns its path.
    std::string write_file(const std::string& name, const std::string& text, mode_t mode = 0644)
    {
        auto p = root.path() / name;
        std::ofstream(p, std::ios::binary) << text;
        ::chmod(p.c_str(), mode);
        return p.string();
    }
};

boost::json::object parse_json(const std::string& text)
{
    BOOST_TEST_REQUIRE(!text.empty());
    BOOST_TEST(text.back() == '\n');
    BOOST_TEST(text.find('\n') == text.size() - 1, "exactly one line");
    boost::system::error_code ec;
    auto v = boost::json::parse(text, ec);
    BOOST_TEST_REQUIRE(!ec, "invalid JSON: " << text);
    BOOST_TEST_REQUIRE(v.is_object());
    return v.as_object();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

bool starts_with(const std::string& s, const std::string& prefix)
{
    return s.compare(0, prefix.size(), prefix) == 0;
}

// The pid of a live sandbox-run process that is the parent of a live helper process, if any.
pid_t parent_of(pid_t pid)
{
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string s;
    std::getline(stat, s);
    auto close = s.rfind(')');
    if (close == std::string::npos)
        return 0;
    std::istringstream rest(s.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    return ppid;
}

// The sandbox-run process whose command (the test target) is running: an ancestor of the
// target (through the supervisor helper and the execution's worker).
std::optional<pid_t> sandbox_run_with_child()
{
    const auto want = std::filesystem::canonical(sandbox_run).string();
    for (pid_t helper : sbx_test::helper_processes())
    {
        pid_t p = helper;
        for (int depth = 0; depth < 4 && p > 1; ++depth)
        {
            p = parent_of(p);
            std::error_code ec;
            auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(p) + "/exe", ec);
            if (!ec && exe.string() == want)
                return p;
        }
    }
    return std::nullopt;
}

// Every byte of `text` is one a terminal shows as is, or a newline.
bool inert_on_a_terminal(const std::string& text)
{
    return std::all_of(text.begin(), text.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return c == '\n' || (c >= 0x20 && c != 0x7f);
    });
}

// A tmpfs of `kib` KiB on a fresh directory (needs root), unmounted on destruction.
class small_tmpfs
{
public:
    explicit small_tmpfs(int kib)
    {
        const std::string opts = "size=" + std::to_string(kib) + "k,mode=0700";
        mounted_ = ::geteuid() == 0 &&
                   ::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, opts.c_str()) == 0;
    }
    ~small_tmpfs()
    {
        if (mounted_)
            ::umount2(dir_.path().c_str(), MNT_DETACH);
    }
    small_tmpfs(const small_tmpfs&) = delete;
    small_tmpfs& operator=(const small_tmpfs&) = delete;
    bool mounted() const { return mounted_; }
    const std::filesystem::path& path() const { return dir_.path(); }

    // Writes to a file until the file system has no room left.
    void fill()
    {
        const auto p = dir_.path() / "filler";
        const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        BOOST_TEST_REQUIRE(fd >= 0);
        const std::string block(4096, 'x');
        while (::write(fd, block.data(), block.size()) > 0)
        {
        }
        BOOST_TEST(errno == ENOSPC);
        ::close(fd);
    }

private:
    sbx_test::temp_dir dir_;
    bool mounted_ = false;
};

} // namespace

BOOST_AUTO_TEST_SUITE(sandbox_run)

BOOST_FIXTURE_TEST_CASE(passes_output_and_exit_code_through, cli_fixture)
{
    auto r = run_cli({sbx_test::target, "print", "hello", "world", "--then", "eprint", "oops",
                      "--then", "exit", "3"});
    BOOST_TEST(r.exit_code == 3);
    BOOST_TEST(r.out.data == "hello world");
    BOOST_TEST(r.err.data == "oops");

    auto ok = run_cli({sbx_test::target, "exit", "0"});
    BOOST_TEST(ok.exit_code == 0);
    BOOST_TEST(ok.out.data.empty());
    BOOST_TEST(ok.err.data.empty());

    // Binary-safe: every byte value survives the pass-through.
    auto spam = run_cli({sbx_test::target, "spam", "100000", "both"});
    BOOST_TEST(spam.exit_code == 0);
    BOOST_TEST(spam.out.data.size() == 100000u);
    BOOST_TEST(spam.err.data.size() == 100000u);
    BOOST_TEST(spam.out.data.substr(0, 20) == "0123456789abcdef0123");
}

BOOST_FIXTURE_TEST_CASE(json_output_has_the_fields, cli_fixture)
{
    auto r = run_cli({"--json", sbx_test::target, "print", "hi", "--then", "eprint", "err",
                      "--then", "exit", "7"});
    BOOST_TEST(r.exit_code == 7);
    BOOST_TEST(r.err.data.empty()); // JSON mode writes to stdout only
    auto o = parse_json(r.out.data);
    BOOST_TEST(o.at("exit_code").to_number<int>() == 7);
    BOOST_TEST(o.at("stdout").as_string() == "hi");
    BOOST_TEST(o.at("stderr").as_string() == "err");
    BOOST_TEST(o.at("stdout_truncated").as_bool() == false);
    BOOST_TEST(o.at("stderr_truncated").as_bool() == false);
    BOOST_TEST(o.at("stdout_dropped_bytes").to_number<int>() == 0);
    BOOST_TEST(o.at("stderr_dropped_bytes").to_number<int>() == 0);
    BOOST_TEST(o.at("status").as_string() == "exited");
    BOOST_TEST(o.at("signal").to_number<int>() == 0);
    BOOST_TEST(!o.contains("budget"));
    BOOST_TEST(o.at("duration_ms").as_double() > 0.0);
    // Plain numbers: "duration_ms":1003.2, never 1.0032E3.
    const auto at = r.out.data.find("\"duration_ms\":") + 14;
    const auto raw = r.out.data.substr(at, r.out.data.find(',', at) - at);
    BOOST_TEST(raw.find_first_not_of("0123456789.") == std::string::npos, raw);
    BOOST_TEST(o.contains("peak_memory_bytes"));
    BOOST_TEST(o.contains("cpu_time_ms"));
    BOOST_TEST(!o.contains("error"));
}

BOOST_FIXTURE_TEST_CASE(timeout_exits_124, cli_fixture)
{
    auto start = std::chrono::steady_clock::now();
    auto r = run_cli({"--timeout", "100ms", sbx_test::target, "sleep", "5000"});
    BOOST_TEST(r.exit_code == 124);
    BOOST_TEST((std::chrono::steady_clock::now() - start < 4s));
    // One line on stderr, naming the error.
    BOOST_TEST(starts_with(r.err.data, "sandbox-run: timeout: "), r.err.data);
    BOOST_TEST(r.err.data.find('\n') == r.err.data.size() - 1);

    auto j = run_cli({"--json", "--timeout=100ms", sbx_test::target, "sleep", "5000"});
    BOOST_TEST(j.exit_code == 124);
    auto o = parse_json(j.out.data);
    BOOST_TEST(o.at("status").as_string() == "timed_out");
    BOOST_TEST(o.at("error").as_object().at("code").as_string() == "timeout");
    BOOST_TEST(!o.at("error").as_object().at("message").as_string().empty());
}

BOOST_FIXTURE_TEST_CASE(unknown_command_exits_127, cli_fixture)
{
    auto r = run_cli({"no-such-command-sbx-cli"});
    BOOST_TEST(r.exit_code == 127);
    BOOST_TEST(r.out.data.empty());
    BOOST_TEST(starts_with(r.err.data, "sandbox-run: not_found: "), r.err.data);

    auto j = run_cli({"--json", "/nonexistent/sbx-cli-tool"});
    BOOST_TEST(j.exit_code == 127);
    auto o = parse_json(j.out.data);
    BOOST_TEST(o.at("status").as_string() == "not_started");
    BOOST_TEST(o.at("error").as_object().at("code").as_string() == "not_found");
}

BOOST_FIXTURE_TEST_CASE(non_executable_file_exits_126, cli_fixture)
{
    auto path = write_file("not-executable", "#!/bin/sh\nexit 0\n", 0644);
    auto r = run_cli({path});
    BOOST_TEST(r.exit_code == 126);
    BOOST_TEST(starts_with(r.err.data, "sandbox-run: forbidden: "), r.err.data);
}

BOOST_FIXTURE_TEST_CASE(an_unrunnable_format_exits_126, cli_fixture)
{
    // Executable bit set, but no #! line and no ELF header: the kernel says ENOEXEC.
    auto path = write_file("plain-text", "just some words\n", 0755);
    auto r = run_cli({path});
    BOOST_TEST(r.exit_code == 126);
    BOOST_TEST(starts_with(r.err.data, "sandbox-run: forbidden: "), r.err.data);
    BOOST_TEST(r.err.data.find("not an executable format") != std::string::npos, r.err.data);
}

BOOST_FIXTURE_TEST_CASE(work_dir_and_root_refusals_exit_125, cli_fixture)
{
    // 126 and 127 belong to the command; the sandbox refusing before anything ran is 125,
    // and the JSON code still says why.
    write_file("a-file", "x");
    struct row
    {
        std::vector<std::string> flags;
        const char* code;
    };
    for (const auto& [flags, code] :
         {row{{"--workdir", "/etc"}, "forbidden"}, row{{"--workdir", "missing"}, "not_found"},
          row{{"--workdir", "a-file"}, "not_found"},
          row{{"--root", (root.path() / "no-such-root").string()}, "not_found"}})
    {
        BOOST_TEST_CONTEXT(flags[0] << " " << flags[1])
        {
            std::vector<std::string> args{"--json"};
            args.insert(args.end(), flags.begin(), flags.end());
            args.insert(args.end(), {sbx_test::target, "exit", "0"});
            auto r = run_cli(args);
            BOOST_TEST(r.exit_code == 125);
            auto o = parse_json(r.out.data);
            BOOST_TEST(o.at("status").as_string() == "not_started");
            BOOST_TEST(o.at("error").as_object().at("code").as_string() == code);
        }
    }
}

BOOST_FIXTURE_TEST_CASE(usage_errors_exit_125, cli_fixture)
{
    auto bad = run_cli({"--bogus-flag", sbx_test::target, "exit", "0"});
    BOOST_TEST(bad.exit_code == 125);
    BOOST_TEST(bad.out.data.empty());
    BOOST_TEST(starts_with(first_line(bad.err.data), "sandbox-run: "), bad.err.data);
    BOOST_TEST(first_line(bad.err.data).find("--bogus-flag") != std::string::npos);
    // One line and a pointer to --help, not the whole usage text.
    BOOST_TEST(bad.err.data == first_line(bad.err.data) + "\nTry 'sandbox-run --help'.\n",
               bad.err.data);

    auto bad_value = run_cli({"--memory", "x", sbx_test::target, "exit", "0"});
    BOOST_TEST(bad_value.exit_code == 125);
    BOOST_TEST(starts_with(bad_value.err.data, "sandbox-run: --memory: invalid size \"x\""),
               bad_value.err.data);
    BOOST_TEST(bad_value.err.data.find("Usage:") == std::string::npos);
    BOOST_TEST(std::count(bad_value.err.data.begin(), bad_value.err.data.end(), '\n') == 2);

    auto missing = run_cli({"--json"});
    BOOST_TEST(missing.exit_code == 125);
    BOOST_TEST(first_line(missing.err.data).find("missing COMMAND") != std::string::npos);

    auto backend = run_cli({"--backend", "firecracker", sbx_test::target, "exit", "0"});
    BOOST_TEST(backend.exit_code == 125);
    BOOST_TEST(first_line(backend.err.data).find("unknown backend") != std::string::npos,
               backend.err.data);

    // Refused by the library's policy checks, not by the parser: the cpu cap needs a timeout.
    auto cpu = run_cli({"--cpu", "100", "--timeout", "0", sbx_test::target, "exit", "0"});
    BOOST_TEST(cpu.exit_code == 125);
    BOOST_TEST(starts_with(cpu.err.data, "sandbox-run: not_available: "), cpu.err.data);

    auto help = run_cli({"--help"});
    BOOST_TEST(help.exit_code == 0);
    BOOST_TEST(starts_with(help.out.data, "Usage: sandbox-run"));
    BOOST_TEST(help.err.data.empty());
}

BOOST_FIXTURE_TEST_CASE(memory_cap_exits_137, cli_fixture)
{
    auto r = run_cli({"--json", "--memory", "64M", sbx_test::target, "alloc", "512"});
    BOOST_TEST(r.exit_code == 137);
    auto o = parse_json(r.out.data);
    BOOST_TEST(o.at("status").as_string() == "budget_exceeded");
    BOOST_TEST(o.at("budget").as_string() == "memory");
    BOOST_TEST(o.at("error").as_object().at("code").as_string() == "budget_exceeded");
    BOOST_TEST(o.at("stdout").as_string().find("allocated 512") == std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(signal_death_exits_128_plus_n, cli_fixture)
{
    auto r = run_cli({sbx_test::target, "kill-self", "15"});
    BOOST_TEST(r.exit_code == 143);
    auto k = run_cli({"--json", sbx_test::target, "kill-self", "9"});
    BOOST_TEST(k.exit_code == 137);
    auto o = parse_json(k.out.data);
    BOOST_TEST(o.at("status").as_string() == "signaled");
    BOOST_TEST(o.at("signal").to_number<int>() == 9);
}

BOOST_FIXTURE_TEST_CASE(enforcement_report, cli_fixture)
{
    auto r = run_cli({"--enforcement"});
    BOOST_TEST(r.exit_code == 0);
    auto o = parse_json(r.out.data);
    BOOST_TEST(o.at("memory_cap").as_bool());
    BOOST_TEST(r.err.data.empty());
}

BOOST_FIXTURE_TEST_CASE(environment_flags, cli_fixture)
{
    const std::map<std::string, std::string> host{{"TZ", "UTC"}, {"SBX_CLI_SECRET", "s3cret"}};
    // The default allow-list passes TZ and hides everything not on it.
    auto def = run_cli({sbx_test::target, "print-env", "TZ", "SBX_CLI_SECRET"}, host);
    BOOST_TEST(def.out.data == "TZ=UTC\nSBX_CLI_SECRET=<unset>\n");
    // --env-clear hides even listed variables.
    auto clear = run_cli({"--env-clear", sbx_test::target, "print-env", "TZ", "PATH"}, host);
    BOOST_TEST(clear.exit_code == 0);
    BOOST_TEST(clear.out.data == "TZ=<unset>\nPATH=<unset>\n");
    // --env-allow replaces the list.
    auto allow = run_cli({"--env-allow", "SBX_CLI_SECRET", sbx_test::target, "print-env",
                          "SBX_CLI_SECRET", "TZ"},
                         host);
    BOOST_TEST(allow.out.data == "SBX_CLI_SECRET=s3cret\nTZ=<unset>\n");
    // --env injects, also on top of --env-clear.
    auto inject = run_cli({"--env-clear", "--env", "X=1", "--env", "TZ=Europe/Paris",
                           sbx_test::target, "print-env", "X", "TZ"},
                          host);
    BOOST_TEST(inject.out.data == "X=1\nTZ=Europe/Paris\n");
}

BOOST_FIXTURE_TEST_CASE(stdin_file_feeds_the_command, cli_fixture)
{
    const std::string content("first line\nsecond \0 line\xff\n", 25);
    auto path = write_file("input.bin", content);
    auto r = run_cli({"--stdin-file", path, sbx_test::target, "cat"});
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.out.data == content);

    // Without the flag stdin is /dev/null.
    auto none = run_cli({sbx_test::target, "cat"});
    BOOST_TEST(none.exit_code == 0);
    BOOST_TEST(none.out.data.empty());

    auto missing = run_cli({"--stdin-file", "no-such-input", sbx_test::target, "cat"});
    BOOST_TEST(missing.exit_code == 125);
    BOOST_TEST(first_line(missing.err.data).find("no-such-input") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(stdin_file_is_streamed_not_loaded, cli_fixture)
{
    // A 512 MiB (sparse) file: once read into memory (twice), now the command's own stdin.
    const auto path = root.path() / "big.bin";
    constexpr std::uintmax_t size = 512u << 20;
    { std::ofstream(path).put('x'); }
    std::filesystem::resize_file(path, size);
    auto r = run_cli({"--stdin-file", path.string(), "wc", "-c"});
    BOOST_TEST(r.exit_code == 0, r.err.data);
    BOOST_TEST(r.out.data == std::to_string(size) + "\n");
    // The peak of sandbox-run and everything it waited for, as the kernel counted it, next
    // to the same run with an empty stdin (the program's own size differs by build: a
    // sanitized sandbox-run alone peaks near 128 MiB); loading the file would add 512 MiB.
    const auto empty = run_cli({"wc", "-c"});
    BOOST_TEST(r.peak_memory_bytes > 0u);
    BOOST_TEST(r.peak_memory_bytes < empty.peak_memory_bytes + (64u << 20),
               r.peak_memory_bytes << " against " << empty.peak_memory_bytes);
}

BOOST_FIXTURE_TEST_CASE(endless_stdin_is_bounded_by_the_timeout, cli_fixture)
{
    // /dev/zero never ends: once read until bad_alloc (exit 134); now the timeout ends it.
    auto r = run_cli({"--json", "--timeout", "1s", "--stdin-file", "/dev/zero", "wc", "-c"});
    BOOST_TEST(r.exit_code == 124, r.err.data);
    BOOST_TEST(parse_json(r.out.data).at("status").as_string() == "timed_out");
    const auto empty = run_cli({"--json", "wc", "-c"}); // the same program, stdin empty
    BOOST_TEST(r.peak_memory_bytes < empty.peak_memory_bytes + (64u << 20),
               r.peak_memory_bytes << " against " << empty.peak_memory_bytes);
}

BOOST_FIXTURE_TEST_CASE(a_fifo_nobody_writes_is_covered_by_the_timeout, cli_fixture)
{
    const auto fifo = root.path() / "in.fifo";
    BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto r = run_cli({"--json", "--timeout", "1s", "--stdin-file", fifo.string(),
                      sbx_test::target, "cat"});
    BOOST_TEST(r.exit_code == 124, r.err.data);
    auto o = parse_json(r.out.data);
    BOOST_TEST(o.at("error").as_object().at("code").as_string() == "timeout");
    BOOST_TEST(o.at("status").as_string() == "not_started");
}

BOOST_FIXTURE_TEST_CASE(a_fifo_is_read_once_a_writer_comes, cli_fixture)
{
    // sandbox-run waits for the writer (as `< fifo` would), then the command reads it all.
    const auto fifo = root.path() / "in.fifo";
    BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    sandbox::exec_request cli;
    cli.command = SBX_SANDBOX_RUN;
    cli.args = {"--backend", "local", "--timeout", "20s", "--stdin-file", fifo.string(), sbx_test::target, "cat"};
    cli.options.timeout = 25s;
    sandbox::exec_request writer;
    writer.command = "/bin/sh";
    // Two writes with a pause between: the command must block for the second one (a
    // non-blocking stdin would read EAGAIN in the pause and fail).
    writer.args = {"-c", "sleep 0.3; { printf 'fed through '; sleep 0.5; printf 'a fifo'; } > \"$0\"",
                   fifo.string()};
    writer.options.timeout = 25s;

    std::optional<sandbox::exec_result> got, wrote;
    sandbox::async_exec(runner, std::move(cli), [&](boost::system::error_code, sandbox::exec_result r) {
        got = std::move(r);
    });
    sandbox::async_exec(runner, std::move(writer),
                        [&](boost::system::error_code, sandbox::exec_result r) { wrote = std::move(r); });
    ioc.run_for(30s);
    BOOST_REQUIRE(got && wrote);
    BOOST_TEST(wrote->exit_code == 0);
    BOOST_TEST(got->exit_code == 0, got->err.data);
    BOOST_TEST(got->out.data == "fed through a fifo");
}

BOOST_FIXTURE_TEST_CASE(max_output_truncates, cli_fixture)
{
    auto r = run_cli({"--json", "--max-output", "10", sbx_test::target, "spam", "100"});
    BOOST_TEST(r.exit_code == 0);
    auto o = parse_json(r.out.data);
    BOOST_TEST(o.at("stdout").as_string() == "0123456789");
    BOOST_TEST(o.at("stdout_truncated").as_bool());
    BOOST_TEST(o.at("stdout_dropped_bytes").to_number<int>() == 90);
    BOOST_TEST(!o.at("stderr_truncated").as_bool());

    // Streamed output has no cap to hit: nothing is cut.
    auto plain = run_cli({"--max-output", "10", sbx_test::target, "spam", "100"});
    BOOST_TEST(plain.exit_code == 0);
    BOOST_TEST(plain.out.data.size() == 100u);
    BOOST_TEST(plain.err.data.empty());
}

BOOST_FIXTURE_TEST_CASE(refusals_show_control_bytes_escaped, cli_fixture)
{
    // A command name or a path that clears the screen, sets the window title and rings the
    // bell: shown as \x1b... on stderr, as the --ask question shows them.
    const std::string evil = "\x1b[2J\x1b]0;pwned\x07name\x7f\r";
    auto denied = run_cli({"--allow-command", "ls", "--", evil});
    BOOST_TEST(denied.exit_code == 125);
    BOOST_TEST(denied.err.data.find("\\x1b[2J\\x1b]0;pwned\\x07name\\x7f\\x0d") !=
                   std::string::npos,
               denied.err.data);
    BOOST_TEST(inert_on_a_terminal(denied.err.data), denied.err.data);

    auto missing = run_cli({"--", evil});
    BOOST_TEST(missing.exit_code == 127);
    BOOST_TEST(missing.err.data.find("\\x1b[2J") != std::string::npos, missing.err.data);
    BOOST_TEST(inert_on_a_terminal(missing.err.data), missing.err.data);

    auto workdir = run_cli({"--workdir", "no-" + evil, "--", "true"});
    BOOST_TEST(workdir.exit_code == 125);
    BOOST_TEST(workdir.err.data.find("no-\\x1b[2J") != std::string::npos, workdir.err.data);
    BOOST_TEST(inert_on_a_terminal(workdir.err.data), workdir.err.data);
}

BOOST_FIXTURE_TEST_CASE(option_like_arguments_reach_the_command, cli_fixture)
{
    auto r = run_cli({sbx_test::target, "print-args", "--json", "--timeout", "1s", "--", "-h"});
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.out.data == "--json\n--timeout\n1s\n--\n-h\n");

    auto sep = run_cli({"--json", "--", sbx_test::target, "print-args", "--enforcement"});
    BOOST_TEST(sep.exit_code == 0);
    auto o = parse_json(sep.out.data);
    BOOST_TEST(o.at("stdout").as_string() == "--enforcement\n");
}

BOOST_FIXTURE_TEST_CASE(sigint_and_sigterm_cancel_and_exit_130, cli_fixture)
{
    for (int sig : {SIGINT, SIGTERM})
    {
        BOOST_TEST_CONTEXT("signal " << sig)
        {
            // Once sandbox-run has a child (so its signal handling is set up), signal it.
            boost::asio::steady_timer poll(ioc);
            bool sent = false;
            const auto give_up = std::chrono::steady_clock::now() + 5s;
            std::function<void()> arm = [&] {
                poll.expires_after(10ms);
                poll.async_wait([&](boost::system::error_code ec) {
                    if (ec || std::chrono::steady_clock::now() > give_up)
                        return;
                    if (auto pid = sandbox_run_with_child())
                    {
                        ::kill(*pid, sig);
                        sent = true;
                        return;
                    }
                    arm();
                });
            };
            arm();
            auto start = std::chrono::steady_clock::now();
            auto r = run_cli({sbx_test::target, "sleep", "10000"});
            BOOST_TEST(sent);
            BOOST_TEST(r.exit_code == 130);
            BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
            BOOST_TEST(starts_with(r.err.data, "sandbox-run: aborted: "), r.err.data);
        }
    }
}

BOOST_FIXTURE_TEST_CASE(allow_command_gates_what_runs, cli_fixture)
{
    auto ok = run_cli({"--allow-command", "/bin/sh", "--", "/bin/sh", "-c", "echo ran"});
    BOOST_TEST(ok.exit_code == 0);
    BOOST_TEST(ok.out.data == "ran\n");
    auto no = run_cli({"--json", "--allow-command", "/bin/sh", "--", "touch", "made"});
    BOOST_TEST(no.exit_code == 125);
    auto j = parse_json(no.out.data);
    BOOST_TEST(j.at("error").at("code").as_string() == "policy_denied");
    BOOST_TEST(j.at("status").as_string() == "not_started");
    BOOST_TEST(!std::filesystem::exists(root.path() / "made"));
    // Exact names: the path is not the name.
    auto path = run_cli({"--allow-command", "touch", "--", "/usr/bin/touch", "made"});
    BOOST_TEST(path.exit_code == 125);
    BOOST_TEST(path.err.data.find("policy_denied") != std::string::npos, path.err.data);
    BOOST_TEST(!std::filesystem::exists(root.path() / "made"));
}

BOOST_FIXTURE_TEST_CASE(ask_without_a_terminal_denies_and_piped_input_cannot_answer, cli_fixture)
{
    // setsid: no controlling terminal, whatever the test runs under. "y" waits on stdin.
    sandbox::exec_request req;
    req.command = "setsid";
    req.args = {"-w", sandbox_run_path(), "--backend", "local", "--json", "--ask", "touch", "--", "touch", "made"};
    req.options.input = "y\nyes\n";
    req.options.timeout = 25s;
    auto out = run(std::move(req), 30s);
    BOOST_TEST_REQUIRE(!out.ec);
    BOOST_TEST(out.result.exit_code == 125);
    auto j = parse_json(out.result.out.data);
    BOOST_TEST(j.at("error").at("code").as_string() == "policy_denied");
    BOOST_TEST(std::string(j.at("error").at("message").as_string()).find("no terminal") !=
               std::string::npos);
    BOOST_TEST(!std::filesystem::exists(root.path() / "made"));
    // A command no pattern matches runs without asking.
    auto other = run_cli({"--ask", "touch", "--", "/bin/sh", "-c", "echo free"});
    BOOST_TEST(other.exit_code == 0);
    BOOST_TEST(other.out.data == "free\n");
}

BOOST_FIXTURE_TEST_CASE(audit_lines_from_concurrent_runs_stay_whole, cli_fixture)
{
    // 24 sandbox-run processes at once append to one file; each line is ~5 KB (a long
    // argument), so appends made in pieces would interleave inside lines.
    const auto audit = root.path() / "audit.jsonl";
    std::ofstream(audit) << "{\"earlier\":true}\n";
    const std::string long_arg(5000, 'a');
    const std::string script =
        "i=0; while [ $i -lt 24 ]; do \"$0\" --backend local --audit \"$1\" --allow-command /bin/sh -- "
        "/bin/sh -c 'exit 0' \"$2\" & i=$((i+1)); done; "
        "\"$0\" --backend local --audit \"$1\" --allow-command /bin/sh -- /bin/false; wait";
    auto r = run_cli_via("/bin/sh", {"-c", script, sandbox_run_path(), audit.string(), long_arg});
    BOOST_TEST(r.exit_code == 0);
    std::ifstream in(audit);
    std::string line;
    int lines = 0, allowed = 0, finished = 0, denied = 0;
    while (std::getline(in, line))
    {
        ++lines;
        boost::system::error_code ec;
        auto v = boost::json::parse(line, ec);
        BOOST_TEST_REQUIRE(!ec, "torn or invalid line " << lines);
        if (lines == 1)
        {
            BOOST_TEST(v.as_object().contains("earlier")); // appended, never truncated
            continue;
        }
        const auto ev = std::string(v.as_object().at("event").as_string());
        allowed += ev == "allowed";
        finished += ev == "finished";
        denied += ev == "denied";
        if (ev == "finished")
            BOOST_TEST(v.as_object().at("exit_code").as_int64() == 0);
    }
    BOOST_TEST(allowed == 24);
    BOOST_TEST(finished == 24);
    BOOST_TEST(denied == 1); // /bin/false is not on the list
    BOOST_TEST(lines == 1 + 24 * 2 + 1);
}

BOOST_FIXTURE_TEST_CASE(an_audit_file_that_cannot_be_opened_stops_the_run, cli_fixture)
{
    auto r = run_cli({"--json", "--audit", (root.path() / "no" / "such" / "a").string(), "--",
                      "touch", "made"});
    BOOST_TEST(r.exit_code == 125);
    BOOST_TEST(parse_json(r.out.data).at("error").at("code").as_string() == "not_found");
    BOOST_TEST(!std::filesystem::exists(root.path() / "made"));
}

BOOST_FIXTURE_TEST_CASE(an_audit_trail_that_cannot_record_stops_the_run, cli_fixture)
{
    // /dev/full opens but takes no byte. Before, the command ran (exit 0) with nothing
    // recorded and no word; now the `allowed` record fails before the run: 125, internal.
    const auto made = root.path() / "made";
    auto plain = run_cli({"--audit", "/dev/full", "--", "touch", made.string()});
    BOOST_TEST(plain.exit_code == 125);
    BOOST_TEST(plain.err.data.find("internal: the audit trail cannot record the call (No space "
                                   "left on device): nothing ran") != std::string::npos,
               plain.err.data);
    auto json = run_cli({"--json", "--audit", "/dev/full", "--", "touch", made.string()});
    BOOST_TEST(json.exit_code == 125);
    BOOST_TEST(parse_json(json.out.data).at("error").at("code").as_string() == "internal");
    BOOST_TEST(!std::filesystem::exists(made));
}

BOOST_FIXTURE_TEST_CASE(an_audit_fifo_without_a_reader_is_refused_at_once, cli_fixture)
{
    // open(2) of a FIFO for writing waited for a reader: sandbox-run hung before the run.
    const auto fifo = root.path() / "audit.fifo";
    BOOST_TEST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const auto made = root.path() / "made";
    sandbox::exec_request req;
    req.command = sandbox_run_path();
    req.args = {"--backend", "local", "--audit", fifo.string(), "--", "touch", made.string()};
    req.options.timeout = 5s;
    const auto start = std::chrono::steady_clock::now();
    auto out = run(std::move(req), 10s);
    BOOST_TEST_REQUIRE(!out.ec, out.result.diag);
    BOOST_TEST((std::chrono::steady_clock::now() - start < 3s));
    BOOST_TEST(out.result.exit_code == 125);
    BOOST_TEST(out.result.err.data.find("validation: cannot open the audit file: a FIFO") !=
                   std::string::npos,
               out.result.err.data);
    BOOST_TEST(!std::filesystem::exists(made));
}

BOOST_FIXTURE_TEST_CASE(an_audit_file_on_a_full_file_system_stops_the_run, cli_fixture)
{
    small_tmpfs fs(64);
    if (!fs.mounted())
    {
        BOOST_TEST_MESSAGE("skipped: needs root to mount a tmpfs");
        return;
    }
    const auto audit = fs.path() / "audit.jsonl";
    std::ofstream(audit).close();
    fs.fill();
    const auto made = root.path() / "made";
    auto r = run_cli({"--audit", audit.string(), "--", "touch", made.string()});
    BOOST_TEST(r.exit_code == 125);
    BOOST_TEST(r.err.data.find("the audit trail cannot record the call") != std::string::npos,
               r.err.data);
    BOOST_TEST(!std::filesystem::exists(made));
}

BOOST_AUTO_TEST_CASE(process_cap_for_an_unprivileged_caller)
{
    // sandbox-run, its supervisor and the command all run as nobody. Without CAP_SYS_ADMIN
    // the fork gate's filter needs no_new_privs, and the worker that holds the gate's
    // listener is not dumpable, so the command, although it runs as the same user, can
    // neither read the worker's descriptors nor ptrace it. The cap still holds: the fourth
    // sleep is the fifth process. (Copies of the two programs, in a directory nobody can
    // reach, whatever the checkout's permissions.)
    if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0)
    {
        BOOST_TEST_MESSAGE("skipped: needs root and setpriv to become nobody");
        return;
    }
    cli_fixture f;
    namespace fs = std::filesystem;
    const fs::perms open_dir = fs::perms::owner_all | fs::perms::group_read |
                               fs::perms::group_exec | fs::perms::others_read |
                               fs::perms::others_exec;
    fs::permissions(f.root.path(), open_dir);
    const auto run_copy = f.root.path() / "sandbox-run";
    const auto sup_copy = f.root.path() / "sandbox-supervisor";
    fs::copy_file(sandbox_run_path(), run_copy);
    fs::copy_file(SBX_SUPERVISOR, sup_copy);
    sandbox::exec_request req;
    req.command = "/usr/bin/setpriv";
    req.args = {"--reuid=65534", "--regid=65534", "--clear-groups", run_copy.string(),
                "--backend", "local", "--max-processes", "4", "--", "/bin/sh", "-c",
                "grep NoNewPrivs /proc/self/status; "
                "ls /proc/$PPID/fd >/dev/null 2>&1 && echo worker-readable || echo worker-private; "
                "for i in 1 2 3 4 5; do sleep 5 & done; wait; echo survived"};
    req.options.timeout = 25s;
    req.options.env.inject = {{"SANDBOX_SUPERVISOR", sup_copy.string()}};
    auto out = f.run(std::move(req), 30s);
    BOOST_TEST_REQUIRE(!out.ec, out.result.diag);
    const auto& r = out.result;
    BOOST_TEST(r.exit_code == 137, r.err.data);
    BOOST_TEST(r.out.data == "NoNewPrivs:\t1\nworker-private\n");
    BOOST_TEST(r.err.data.find("processes cap exceeded (5 > 4 processes)") != std::string::npos,
               r.err.data);
}

BOOST_AUTO_TEST_CASE(process_cap_refused_where_seccomp_is_forbidden)
{
    // Under a filter that forbids seccomp() (a container runtime's, say), the fork gate
    // cannot be installed: a process cap (sandbox-run's default is 1024) is refused as
    // not_available, never only sampled, and nothing runs; without the cap the same command
    // runs.
    cli_fixture f;
    auto plain = f.run_cli_via(sbx_test::target,
                               {"seccomp-denied-exec", sandbox_run_path(), "--backend", "local",
                                "--max-processes", "0",
                                "--", sbx_test::target, "println", "ran"});
    BOOST_TEST(plain.exit_code == 0, plain.err.data);
    BOOST_TEST(plain.out.data == "ran\n");
    auto capped = f.run_cli_via(sbx_test::target,
                                {"seccomp-denied-exec", sandbox_run_path(), "--backend", "local",
                                 "--json", "--max-processes",
                                 "5", "--", sbx_test::target, "println", "ran"});
    BOOST_TEST(capped.exit_code == 125, capped.err.data);
    const auto j = parse_json(capped.out.data);
    BOOST_TEST(j.at("error").at("code").as_string() == "not_available");
    BOOST_TEST(std::string(j.at("error").at("message").as_string()).find("seccomp fork gate") !=
               std::string::npos);
    BOOST_TEST(j.at("stdout").as_string() == "");
}

// ---- the default backend (auto) ------------------------------------------------------------

namespace fs = std::filesystem;

// The pid namespace we run in (the local backend's commands share it; bwrap's have their own).
std::string our_pid_namespace()
{
    return fs::read_symlink("/proc/self/ns/pid").string();
}

const std::vector<std::string> print_pid_namespace{"--json", "--", "readlink",
                                                   "/proc/self/ns/pid"};

std::vector<std::string> with(std::vector<std::string> head, const std::vector<std::string>& tail)
{
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
}

// bwrap works on this host (the integration suite runs as root, where it can create its
// namespaces): the default backend runs the command inside it, in a pid namespace of its own,
// with nothing extra on stderr and no warning.
BOOST_FIXTURE_TEST_CASE(the_default_backend_is_bwrap_where_bubblewrap_works, cli_fixture)
{
    auto r = run_default(print_pid_namespace);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err.data);
    auto j = parse_json(r.out.data);
    BOOST_TEST(j.at("backend").as_string() == "bwrap");
    BOOST_TEST(j.at("stdout").as_string() != our_pid_namespace() + "\n");
    BOOST_TEST(std::string(j.at("stdout").as_string()).find("pid:[") == 0u, r.out.data);
    BOOST_TEST(r.err.data.find("warning") == std::string::npos, r.err.data);
    auto e = run_default({"--enforcement"});
    auto report = parse_json(e.out.data);
    BOOST_TEST(report.at("backend").as_string() == "bwrap");
    BOOST_TEST(report.at("filesystem_bounds").as_bool());
    BOOST_TEST(report.contains("backend_reason"));
}

// --backend local stays the local backend: the command shares our pid namespace.
BOOST_FIXTURE_TEST_CASE(backend_local_runs_on_the_host, cli_fixture)
{
    auto r = run_default(with({"--backend", "local"}, print_pid_namespace));
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err.data);
    auto j = parse_json(r.out.data);
    BOOST_TEST(j.at("backend").as_string() == "local");
    BOOST_TEST(j.at("stdout").as_string() == our_pid_namespace() + "\n");
    BOOST_TEST(r.err.data == "");
}

// Where bubblewrap cannot create its namespaces (here: a seccomp filter that refuses new
// namespaces, as a container's default profile does), the default backend runs the command
// on the local backend with one warning that says why; a flag only bwrap enforces is
// refused instead, and --backend bwrap stays bwrap (refused, no fallback).
BOOST_FIXTURE_TEST_CASE(the_default_backend_falls_back_where_bubblewrap_cannot_start,
                        cli_fixture)
{
    const std::vector<std::string> no_namespaces{"seccomp-no-namespaces-exec",
                                                 sandbox_run_path()};
    auto r = run_cli_via(sbx_test::target, with(no_namespaces, print_pid_namespace));
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.err.data);
    auto j = parse_json(r.out.data);
    BOOST_TEST(j.at("backend").as_string() == "local");
    BOOST_TEST(j.at("stdout").as_string() == our_pid_namespace() + "\n");
    BOOST_TEST(starts_with(r.err.data, "sandbox-run: warning: bubblewrap is not usable here "
                                       "(bwrap cannot create its namespaces"),
               r.err.data);
    BOOST_TEST(r.err.data.find("); running on the local backend, which confines nothing\n") !=
                   std::string::npos,
               r.err.data);
    BOOST_TEST(std::count(r.err.data.begin(), r.err.data.end(), '\n') == 1, r.err.data);

    auto e = run_cli_via(sbx_test::target, with(no_namespaces, {"--enforcement"}));
    auto report = parse_json(e.out.data);
    BOOST_TEST(report.at("backend").as_string() == "local");
    BOOST_TEST(std::string(report.at("backend_reason").as_string())
                       .find("bubblewrap is not usable here") == 0u,
               e.out.data);
    BOOST_TEST(!report.at("filesystem_bounds").as_bool());

    auto deny = run_cli_via(sbx_test::target,
                            with(no_namespaces, {"--json", "--net", "deny", "--", "/bin/true"}));
    BOOST_TEST(deny.exit_code == 125, deny.err.data);
    auto dj = parse_json(deny.out.data);
    BOOST_TEST(dj.at("error").at("code").as_string() == "not_available");
    BOOST_TEST(std::string(dj.at("error").at("message").as_string())
                       .find("--net deny needs the bwrap backend, which is not usable here") ==
                   0u,
               deny.out.data);
    BOOST_TEST(dj.at("backend").as_string() == "bwrap");

    auto explicit_bwrap = run_cli_via(
        sbx_test::target, with(no_namespaces, {"--json", "--backend", "bwrap", "--", "/bin/true"}));
    BOOST_TEST(explicit_bwrap.exit_code == 125, explicit_bwrap.err.data);
    BOOST_TEST(parse_json(explicit_bwrap.out.data).at("error").at("code").as_string() ==
               "not_available");
}

// The default backend no longer asks bwrap's probe before the run on a host that shows no
// sign against it (no seccomp filter above us, user namespaces allowed): the run is its own
// probe. Where bwrap then fails before the command starts (here: a "bwrap" first on the PATH
// that fails as bwrap does without user namespaces), the runner's probe settles it, and the
// same request runs on the local backend after the warning: the command runs once, nothing
// is lost. A flag only bwrap enforces is refused instead, the command never having run.
BOOST_FIXTURE_TEST_CASE(the_default_backend_falls_back_after_a_run_bwrap_could_not_set_up,
                        cli_fixture)
{
    const auto signs = sandbox::cli::read_namespace_signs();
    if (sandbox::cli::probe_before_run(signs))
    {
        BOOST_TEST_MESSAGE("skipped: this host shows a sign against namespaces (the probe "
                           "runs first; the_default_backend_falls_back_where_bubblewrap_cannot"
                           "_start covers it)");
        return;
    }
    sbx_test::temp_dir bin;
    fs::permissions(bin.path(), fs::perms(0755));
    const auto runs = bin.path() / "runs";
    {
        std::ofstream(bin.path() / "bwrap")
            << "#!/bin/sh\necho run >> " << runs.string()
            << "\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n";
    }
    fs::permissions(bin.path() / "bwrap", fs::perms(0755));
    ::chmod(bin.str().c_str(), 0777); // the sandbox user appends to the log
    const auto marker = bin.path() / "ran";
    const std::map<std::string, std::string> path{
        {"PATH", bin.str() + ":/usr/local/bin:/usr/bin:/bin"}};
    auto count_runs = [&] {
        std::ifstream in(runs);
        return static_cast<int>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
    };
    auto j = run_default(
        {"--json", "--", "/bin/sh", "-c", "echo x >> " + marker.string() + "; echo ran"}, path);
    BOOST_TEST_REQUIRE(j.exit_code == 0, j.err.data);
    auto v = parse_json(j.out.data);
    BOOST_TEST(v.at("backend").as_string() == "local");
    BOOST_TEST(v.at("stdout").as_string() == "ran\n");
    // After the notes printed for the bwrap sandbox before the run (the price of not
    // probing first), the warning.
    BOOST_TEST(j.err.data.find("sandbox-run: warning: bubblewrap is not usable here "
                               "(bwrap cannot create its namespaces") != std::string::npos,
               j.err.data);
    BOOST_TEST(count_runs() == 2);           // the run, then the probe; not a probe first
    BOOST_TEST(fs::file_size(marker) == 2u); // the command ran once

    // Streamed: bwrap's own line comes through before the warning; the command runs once.
    auto streamed =
        run_default({"--", "/bin/sh", "-c", "echo x >> " + marker.string() + "; echo ran"}, path);
    BOOST_TEST(streamed.exit_code == 0, streamed.err.data);
    BOOST_TEST(streamed.out.data == "ran\n");
    const auto said = streamed.err.data.find("bwrap: No permissions to create new namespace");
    const auto warned =
        streamed.err.data.find("; running on the local backend, which confines nothing");
    BOOST_TEST(said != std::string::npos, streamed.err.data);
    BOOST_TEST(warned != std::string::npos, streamed.err.data);
    BOOST_TEST(said < warned, streamed.err.data); // bwrap's own line, then ours
    BOOST_TEST(fs::file_size(marker) == 4u);

    auto deny = run_default(
        {"--json", "--net", "deny", "--", "/bin/sh", "-c", "echo x >> " + marker.string()}, path);
    BOOST_TEST(deny.exit_code == 125, deny.err.data);
    auto dj = parse_json(deny.out.data);
    BOOST_TEST(dj.at("error").at("code").as_string() == "not_available");
    BOOST_TEST(std::string(dj.at("error").at("message").as_string())
                       .find("--net deny needs the bwrap backend, which is not usable here") == 0u,
               deny.out.data);
    BOOST_TEST(fs::file_size(marker) == 4u); // never ran
}

// A root caller whose root the sandbox user cannot reach is refused (125, with the reason),
// never run on the local backend as root instead; so is a root bwrap cannot make writable.
BOOST_FIXTURE_TEST_CASE(the_default_backend_refuses_what_bubblewrap_refuses, cli_fixture)
{
    if (::geteuid() != 0)
    {
        BOOST_TEST_MESSAGE("skipped: needs root (a root caller's sandbox user)");
        return;
    }
    sbx_test::temp_dir closed;
    fs::permissions(closed.path(), fs::perms::owner_all); // 0700: nobody cannot search it
    const auto made = closed.path() / "made";
    auto r = run_default({"--root", closed.str(), "--", "touch", made.string()});
    BOOST_TEST(r.exit_code == 125);
    BOOST_TEST(starts_with(r.err.data, "sandbox-run: validation: the root " + closed.str() +
                                           " cannot be reached by the sandbox user"),
               r.err.data);
    BOOST_TEST(!fs::exists(made));
    auto slash = run_default({"--json", "--root", "/", "--", "/bin/true"});
    BOOST_TEST(slash.exit_code == 125);
    BOOST_TEST(parse_json(slash.out.data).at("error").at("code").as_string() == "validation");
    auto e = run_default({"--root", closed.str(), "--enforcement"});
    auto report = parse_json(e.out.data);
    BOOST_TEST(std::string(report.at("backend_reason").as_string()).find("refused: ") == 0u,
               e.out.data);
    BOOST_TEST(std::string(report.at("unavailable").as_string()).find("cannot be reached") !=
                   std::string::npos,
               e.out.data);
}

BOOST_AUTO_TEST_CASE(enforcement_reports_no_process_cap_where_the_fork_gate_cannot_install)
{
    // Two hosts where the gate's filter cannot be installed: seccomp() forbidden, and a
    // listener already held above us (a container runtime that intercepts calls): the kernel
    // allows one listener per filter chain, which only a real installation finds out
    // (EBUSY). --enforcement must say so, as the refused run does.
    cli_fixture f;
    for (const char* wrapper : {"seccomp-denied-exec", "seccomp-listener-exec"})
        BOOST_TEST_CONTEXT(wrapper)
        {
            auto e = f.run_cli_via(sbx_test::target,
                                   {wrapper, sandbox_run_path(), "--backend", "local", "--enforcement"});
            BOOST_TEST_REQUIRE(e.exit_code == 0, e.err.data);
            BOOST_TEST(parse_json(e.out.data).at("process_cap").as_bool() == false, e.out.data);
            auto capped = f.run_cli_via(sbx_test::target,
                                        {wrapper, sandbox_run_path(), "--json", "--backend", "local",
                                         "--max-processes", "5", "--", "/bin/true"});
            BOOST_TEST(capped.exit_code == 125, capped.err.data);
            BOOST_TEST(parse_json(capped.out.data).at("error").at("code").as_string() ==
                       "not_available");
        }
    // Where nothing stands in the way, the report says what runs.
    auto plain = f.run_cli({"--backend", "local", "--enforcement"});
    BOOST_TEST(parse_json(plain.out.data).at("process_cap").as_bool() == true, plain.out.data);
}

BOOST_AUTO_TEST_SUITE_END()

// How the output streams to slow, stalled and vanished readers: mostly waits on timeouts
// and graces, so a ctest group of its own runs it beside the rest (test/CMakeLists.txt).
BOOST_AUTO_TEST_SUITE(sandbox_run_streaming)

BOOST_FIXTURE_TEST_CASE(plain_runs_stream_their_output, cli_fixture)
{
    // The first line must reach sandbox-run's stdout while the command still runs: the
    // command waits for a file that only our output handler creates once it saw that line.
    const auto marker = root.path() / "seen-first";
    sandbox::exec_request req;
    req.command = SBX_SANDBOX_RUN;
    req.args = {"--backend", "local",     sbx_test::target, "println",  "first",
                "--then",    "wait-file", marker.string(),  "--then",   "println",
                "second",    "--then",    "eprint",         "on stderr"};
    req.options.timeout = 25s;
    sbx_test::streamed got;
    req.on_output = got.handler(marker, "first\n");
    auto res = run(std::move(req), 30s);
    BOOST_TEST(!res.ec, res.result.diag);
    BOOST_TEST(res.result.exit_code == 0, got.err);
    BOOST_TEST(got.out == "first\nsecond\n");
    BOOST_TEST(got.err == "on stderr");
}

BOOST_FIXTURE_TEST_CASE(a_reader_that_goes_away_ends_the_run, cli_fixture)
{
    // `yes` never stops by itself; once `head` has its 4 KiB and exits, sandbox-run's next
    // write fails with EPIPE: it kills the tree and exits 141, well before its 10-minute
    // default timeout (the outer timeout here is 25 s).
    const std::string script = "'" + std::string(SBX_SANDBOX_RUN) +
                               "' --backend local -- yes | head -c 4096 | wc -c; "
                               "echo \"${PIPESTATUS[0]}\"";
    auto r = run_cli_via("/bin/bash", {"-c", script});
    BOOST_TEST(r.out.data == "4096\n141\n", r.err.data);
    BOOST_TEST(r.err.data.find("reader of the output went away") != std::string::npos, r.err.data);
}

BOOST_FIXTURE_TEST_CASE(a_stalled_reader_cannot_outlast_the_timeout_or_a_signal, cli_fixture)
{
    // The reader (`sleep`) never reads. Before, sandbox-run blocked in write() and saw neither
    // its timeout nor SIGTERM until the reader exited (then EPIPE: 141).
    const std::string cli = "'" + std::string(SBX_SANDBOX_RUN) + "' --backend local";
    auto timed = run_cli_via("/bin/bash", {"-c", "{ " + cli +
                                                     " --timeout 1s -- yes; echo \"rc=$?\" >&2; } "
                                                     "| sleep 6"});
    BOOST_TEST(timed.err.data.find("rc=124") != std::string::npos, timed.err.data);
    BOOST_TEST(timed.err.data.find("reader of the output was stalled") != std::string::npos,
               timed.err.data);

    auto term =
        run_cli_via("/bin/bash", {"-c", "{ " + cli +
                                            " -- yes & p=$!; sleep 1; kill -TERM $p; wait $p; "
                                            "echo \"rc=$?\" >&2; } | sleep 6"});
    BOOST_TEST(term.err.data.find("rc=130") != std::string::npos, term.err.data);
}

BOOST_FIXTURE_TEST_CASE(output_written_during_the_kill_grace_is_streamed, cli_fixture)
{
    // The command prints on SIGTERM and exits 0.5 s into its 2 s grace. Before, streaming
    // stopped at the timeout itself: that output was dropped, even into a regular file, and
    // the run ended blaming a stalled reader.
    const std::string script = "trap 'echo got-term; sleep 0.5; echo cleanup-done; exit 0' TERM; "
                               "echo ready; while :; do sleep 0.1; done";
    const std::string want = "ready\ngot-term\ncleanup-done\n";
    auto piped = run_cli({"--timeout", "1s", "--kill-grace", "2s", "--", "/bin/sh", "-c", script});
    BOOST_TEST(piped.exit_code == 124);
    BOOST_TEST(piped.out.data == want, piped.err.data);
    BOOST_TEST(piped.err.data.find("stalled") == std::string::npos, piped.err.data);

    const auto file = root.path() / "out.txt";
    auto to_file = run_cli_via(
        "/bin/sh",
        {"-c", "\"$0\" --backend local --timeout 1s --kill-grace 2s -- /bin/sh -c \"$1\" > \"$2\"",
         sandbox_run_path(), script, file.string()});
    BOOST_TEST(to_file.exit_code == 124);
    std::ifstream in(file);
    const std::string written((std::istreambuf_iterator<char>(in)), {});
    BOOST_TEST(written == want, to_file.err.data);
    BOOST_TEST(to_file.err.data.find("stalled") == std::string::npos, to_file.err.data);
}

BOOST_FIXTURE_TEST_CASE(a_stalled_reader_ends_the_run_at_the_end_of_the_grace, cli_fixture)
{
    // Nobody reads the pipe and `yes` fills it: sandbox-run waits for the reader until the
    // timeout and the grace have passed (2 s), then kills the tree and blames the reader.
    const std::string script =
        "{ s=$(date +%s%N); \"$0\" --backend local --timeout 1s --kill-grace 1s -- yes; "
        "rc=$?; e=$(date +%s%N); echo \"rc=$rc ms=$(( (e - s) / 1000000 ))\" >&2; } "
        "| sleep 5";
    auto r = run_cli_via("/bin/bash", {"-c", script, sandbox_run_path()});
    BOOST_TEST(r.err.data.find("rc=124") != std::string::npos, r.err.data);
    BOOST_TEST(r.err.data.find("timed out while the reader of the output was stalled") !=
                   std::string::npos,
               r.err.data);
    const auto at = r.err.data.find("ms=");
    BOOST_TEST_REQUIRE(at != std::string::npos);
    const long ms = std::stol(r.err.data.substr(at + 3));
    BOOST_TEST(ms >= 1900);
    BOOST_TEST(ms < 3500);
}

// `seq 1 N` as text, to compare what a reader received with.
std::string seq_text(int n)
{
    std::string s;
    for (int i = 1; i <= n; ++i)
        s += std::to_string(i) + '\n';
    return s;
}

std::string read_whole(const std::filesystem::path& p)
{
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

BOOST_FIXTURE_TEST_CASE(a_reader_slower_than_the_command_loses_no_bytes, cli_fixture)
{
    // `seq` writes 3.4 MB at once. The reader takes 2.9 MiB in 64 KiB blocks, then reads
    // the rest 8 KiB at a time with pauses, so that `seq` has exited (and its tree was
    // reported gone) well before the last ~128 KiB (pipe and sandbox-run's chunk) are read.
    // The library gives a finished tree's pipes 500 ms to drain: with that limit running
    // while a chunk was still with sandbox-run, 58 KB were lost and the exit status was 0.
    const auto file = root.path() / "got.txt";
    const std::string script =
        "\"$0\" --backend local -- seq 1 500000 | { dd bs=65536 count=47 iflag=fullblock "
        "status=none > \"$1\"; "
        "p=-1; while :; do dd bs=8192 count=1 status=none >> \"$1\"; s=$(stat -c %s \"$1\"); "
        "[ \"$s\" = \"$p\" ] && break; p=$s; sleep 0.05; done; }; "
        "echo \"rc=${PIPESTATUS[0]}\" >&2";
    auto r = run_cli_via("/bin/bash", {"-c", script, sandbox_run_path(), file.string()});
    BOOST_TEST(r.err.data == "rc=0\n");
    const std::string got = read_whole(file);
    const std::string want = seq_text(500000);
    BOOST_TEST(got.size() == want.size());
    BOOST_TEST((got == want), "the bytes differ");
}

// A pipeline that starts `sandbox-run ARGS -- sh -c 'echo $$ > PIDFILE; exec yes'` with a
// reader that never reads, does `then` with sandbox-run's pid in $p, and reports on stderr
// its exit status, how long it took and whether the command was gone when it exited.
sandbox::exec_result stalled_yes(cli_fixture& f, const std::string& args, const std::string& then)
{
    const auto pidfile = f.root.path() / "yes.pid";
    const std::string script =
        "{ s=$(date +%s%N); \"$0\" --backend local " + args +
        " -- /bin/sh -c 'echo $$ > \"$0\"; exec yes' \"$1\" & p=$!; " + then +
        " wait $p; rc=$?; e=$(date +%s%N); "
        "kill -0 $(cat \"$1\") 2>/dev/null && t=alive || t=gone; "
        "echo \"rc=$rc tree=$t ms=$(( (e - s) / 1000000 ))\" >&2; } | sleep 5";
    auto r = f.run_cli_via("/bin/bash", {"-c", script, sandbox_run_path(), pidfile.string()});
    for (pid_t pid : sbx_test::read_pids(pidfile))
        BOOST_TEST(!sbx_test::alive(pid));
    return r;
}

long ms_of(const std::string& report)
{
    const auto at = report.find("ms=");
    return at == std::string::npos ? -1 : std::stol(report.substr(at + 3));
}

BOOST_FIXTURE_TEST_CASE(a_timeout_during_a_blocked_write_ends_on_time, cli_fixture)
{
    // `yes` fills the pipe nobody reads; sandbox-run's write waits. The deadline (timeout and
    // grace: 2 s) ends the run: 124, the tree gone, blamed on the reader.
    auto r = stalled_yes(*this, "--timeout 1s --kill-grace 1s", "");
    BOOST_TEST(r.err.data.find("rc=124 tree=gone") != std::string::npos, r.err.data);
    BOOST_TEST(r.err.data.find("timed out while the reader of the output was stalled") !=
                   std::string::npos,
               r.err.data);
    BOOST_TEST(ms_of(r.err.data) >= 1900, r.err.data);
    BOOST_TEST(ms_of(r.err.data) < 3500, r.err.data);
}

BOOST_FIXTURE_TEST_CASE(an_unread_stdout_does_not_hold_stderr, cli_fixture)
{
    // stdout's reader never reads, so that write waits; stderr's line still goes out while
    // it does. Before, the write blocked sandbox-run's loop: the line was read only after
    // the deadline had stopped the streaming, and dropped.
    const std::string script = "{ \"$0\" --backend local --timeout 2s -- /bin/sh -c 'yes & sleep "
                               "0.5; echo marker >&2; wait'; "
                               "echo \"rc=$?\" >&2; } | sleep 4";
    auto r = run_cli_via("/bin/bash", {"-c", script, sandbox_run_path()});
    BOOST_TEST(r.err.data.find("marker\n") != std::string::npos, r.err.data);
    BOOST_TEST(r.err.data.find("rc=124") != std::string::npos, r.err.data);
}

BOOST_FIXTURE_TEST_CASE(an_interrupt_during_a_blocked_write_ends_the_run, cli_fixture)
{
    for (const std::string sig : {"INT", "TERM"})
    {
        BOOST_TEST_CONTEXT("SIG" << sig)
        {
            auto r = stalled_yes(*this, "", "sleep 1; kill -" + sig + " $p;");
            BOOST_TEST(r.err.data.find("rc=130 tree=gone") != std::string::npos, r.err.data);
            BOOST_TEST(r.err.data.find("sandbox-run: interrupted; process tree killed") !=
                           std::string::npos,
                       r.err.data);
            BOOST_TEST(ms_of(r.err.data) < 4000, r.err.data);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
