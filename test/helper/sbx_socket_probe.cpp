// test/helper/sbx_socket_probe.cpp: what a command inside a sandbox does with sockets, for the
// unix-socket policy's tests (test/integration/unix_socket_policy_test.cpp). One mode per run;
// each prints one line per attempt: "NAME ok" or "NAME <errno name>".
//
//   connect PATH          connect a stream socket to PATH ("connect ok")
//   serve PATH            bind and listen at PATH, then connect to it by PATH and, from its
//                         directory, by its name alone ("serve ok", "relative ok")
//   race GOOD BAD N       one thread rewrites the address between GOOD and BAD without pause
//                         while this one connects N times through it: "race ok=K denied=D
//                         other=O" (every connect is to GOOD or BAD, whatever the check saw)
//   datagram              AF_UNIX datagram sockets (socket, socketpair, SOCK_RAW) and an
//                         io_uring ring; a stream socketpair for contrast
// (32-bit calls through int 0x80 are judged by the unit test only: this host's kernel runs no
// 32-bit code, so such a call ends the process with SIGSEGV before any filter sees it.)
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

namespace {

const char* errno_name(int e)
{
    switch (e)
    {
    case 0: return "ok";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ENOENT: return "ENOENT";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENOSYS: return "ENOSYS";
    case EAGAIN: return "EAGAIN";
    case EINVAL: return "EINVAL";
    default: return std::strerror(e);
    }
}

void report(const char* what, int rc)
{
    std::printf("%s %s\n", what, errno_name(rc == 0 ? 0 : errno));
}

sockaddr_un address(const std::string& path)
{
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    return a;
}

int connect_to(const std::string& path)
{
    const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un a = address(path);
    const int rc = ::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a);
    const int err = errno;
    ::close(s);
    errno = err;
    return rc;
}

int serve(const std::string& path)
{
    const int l = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const sockaddr_un a = address(path);
    if (::bind(l, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 8) != 0)
    {
        report("bind", -1);
        return 1;
    }
    report("serve", connect_to(path));
    const auto slash = path.rfind('/');
    if (slash != std::string::npos && ::chdir(path.substr(0, slash + 1).c_str()) == 0)
        report("relative", connect_to(path.substr(slash + 1)));
    return 0;
}

// Connects to `path` until a connect blocks (the server's queue is full and it accepts
// nothing), saying how many got through; the connect stays blocked until the tree is killed.
int fill(const std::string& path)
{
    const sockaddr_un a = address(path);
    for (int n = 0;; ++n)
    {
        std::printf("connected %d\n", n);
        const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (::connect(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
            return report("connect", -1), 1;
    }
}

int race(const std::string& good, const std::string& bad, int n)
{
    static sockaddr_un shared;
    shared = address(good);
    const sockaddr_un g = address(good), b = address(bad);
    std::atomic<bool> done{false};
    std::thread flipper([&] {
        for (unsigned i = 0; !done.load(std::memory_order_relaxed); ++i)
            std::memcpy(shared.sun_path, (i & 1 ? b : g).sun_path, sizeof shared.sun_path);
    });
    int ok = 0, denied = 0, other = 0;
    for (int i = 0; i < n; ++i)
    {
        const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (::connect(s, reinterpret_cast<const sockaddr*>(&shared), sizeof shared) == 0)
            ++ok;
        else if (errno == EACCES)
            ++denied;
        else
            ++other;
        ::close(s);
    }
    done = true;
    flipper.join();
    std::printf("race ok=%d denied=%d other=%d\n", ok, denied, other);
    return 0;
}

int datagram()
{
    int sv[2];
    int s = ::socket(AF_UNIX, SOCK_DGRAM, 0);
    report("socket-dgram", s < 0 ? -1 : 0);
    s = ::socket(AF_UNIX, SOCK_RAW | SOCK_CLOEXEC, 0);
    report("socket-raw", s < 0 ? -1 : 0);
    report("socketpair-dgram", ::socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
    report("socketpair-stream", ::socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    char params[120] = {}; // struct io_uring_params
    const long ring = ::syscall(425, 4, params);
    report("io_uring", ring < 0 ? -1 : 0);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "connect" && argc == 3)
        return report("connect", connect_to(argv[2])), 0;
    if (mode == "serve" && argc == 3)
        return serve(argv[2]);
    if (mode == "race" && argc == 5)
        return race(argv[2], argv[3], std::atoi(argv[4]));
    if (mode == "fill" && argc == 3)
        return fill(argv[2]);
    if (mode == "datagram" && argc == 2)
        return datagram();
    std::fprintf(stderr, "usage: sbx_socket_probe MODE ARGS (see the source)\n");
    return 2;
}
