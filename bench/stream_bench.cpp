// bench/stream_bench.cpp: how soon streamed output reaches the reader. A shell prints the
// wall clock (ns) on a line every 50 ms; each reader notes when the line arrived. Readers:
// a plain pipe from a posix_spawned child (the baseline), the library's `on_output`, and
// `sandbox-run` writing into a pipe. One JSON line per figure, latency in ms.
//
//   stream_bench [--lines N] [--quick]
#include "common.hpp"

#include <sandbox/local_runner.hpp>
#include <sandbox/runner.hpp>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

using namespace std::chrono_literals;

std::int64_t now_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string printer_script(int lines)
{
    return "i=0; while [ $i -lt " + std::to_string(lines) +
           " ]; do date +%s%N; sleep 0.05; i=$((i+1)); done";
}

// Splits arriving bytes into lines and records each line's age on arrival.
struct line_clock
{
    std::string partial;
    std::vector<double> latency_ms;

    void feed(std::string_view data)
    {
        const std::int64_t now = now_ns();
        partial += data;
        for (std::size_t nl; (nl = partial.find('\n')) != std::string::npos;)
        {
            const std::int64_t written = std::strtoll(partial.substr(0, nl).c_str(), nullptr, 10);
            if (written > 0)
                latency_ms.push_back(static_cast<double>(now - written) / 1e6);
            partial.erase(0, nl + 1);
        }
    }
};

// Runs argv with stdout on a pipe, reading it with blocking reads until EOF.
line_clock read_child(const std::vector<std::string>& args)
{
    line_clock c;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        std::exit(1);
    posix_spawn_file_actions_t fa;
    ::posix_spawn_file_actions_init(&fa);
    ::posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    std::vector<char*> argv;
    for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
        std::exit(1);
    ::posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;)
        if (n > 0)
            c.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return c;
}

line_clock read_library(int lines)
{
    line_clock c;
    boost::asio::io_context ioc;
    sandbox::local_runner runner(ioc.get_executor());
    sandbox::exec_request req;
    req.command = "/bin/sh";
    req.args = {"-c", printer_script(lines)};
    req.on_output = [&c](sandbox::output_stream, std::string_view data) {
        c.feed(data);
        return true;
    };
    sandbox::async_exec(runner, std::move(req),
                        [](boost::system::error_code, sandbox::exec_result) {});
    ioc.run();
    return c;
}

void report(const char* name, const line_clock& ours, const line_clock& base)
{
    for (double p : {50.0, 99.0})
        bench::print_json("stream_bench", name + std::string("_p") + std::to_string(int(p)),
                          bench::percentile(ours.latency_ms, p), "ms",
                          bench::percentile(base.latency_ms, p));
    const double first = ours.latency_ms.empty() ? -1 : ours.latency_ms.front();
    bench::print_json("stream_bench", name + std::string("_first_line"), first, "ms",
                      base.latency_ms.empty() ? -1 : base.latency_ms.front());
}

} // namespace

int main(int argc, char** argv)
{
    int lines = 40;
    for (int i = 1; i < argc; ++i)
    {
        if (std::strcmp(argv[i], "--quick") == 0)
            lines = 5;
        else if (std::strcmp(argv[i], "--lines") == 0 && i + 1 < argc)
            lines = std::atoi(argv[++i]);
    }
    bench::print_machine(stderr);
    std::fprintf(stderr, "stream_bench: %d lines, one every 50 ms; latency from the child's "
                         "clock reading to the reader's (target: p99 and first line < 100 ms)\n",
                 lines);
    const auto base = read_child({"/bin/sh", "-c", printer_script(lines)});
    const auto lib = read_library(lines);
    const auto cli = read_child({SBX_SANDBOX_RUN, "--backend", "local", "--", "/bin/sh", "-c",
                                 printer_script(lines)});
    bool ok = true;
    for (const auto* c : {&base, &lib, &cli})
        ok = ok && static_cast<int>(c->latency_ms.size()) == lines;
    report("library_on_output", lib, base);
    report("sandbox_run", cli, base);
    const bool met = ok && bench::percentile(lib.latency_ms, 99) < 100 &&
                     bench::percentile(cli.latency_ms, 99) < 100 &&
                     lib.latency_ms.front() < 100 && cli.latency_ms.front() < 100;
    std::fprintf(stderr, "stream_bench: %s\n",
                 !ok ? "lines missing" : met ? "targets met" : "targets missed");
    return ok ? 0 : 1;
}
