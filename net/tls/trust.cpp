// net/tls/trust.cpp: the sandbox's trust bundle and the variables that name it.
#include "trust.hpp"

#include "inspector.hpp"

#include <fstream>
#include <mutex>
#include <sstream>

#include <cerrno>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sandbox::net::tls {

namespace {

constexpr std::string_view begin_cert = "-----BEGIN CERTIFICATE-----";
constexpr std::string_view end_cert = "-----END CERTIFICATE-----";

// Appends every certificate block of `pem` to `out`; how many there were.
int copy_certificates(std::string_view pem, std::string& out)
{
    int n = 0;
    for (std::size_t at = pem.find(begin_cert); at != std::string_view::npos;
         at = pem.find(begin_cert, at))
    {
        const std::size_t end = pem.find(end_cert, at);
        if (end == std::string_view::npos)
            break;
        out.append(pem.substr(at, end + end_cert.size() - at));
        out.push_back('\n');
        at = end + end_cert.size();
        ++n;
    }
    return n;
}

} // namespace

std::shared_ptr<const std::string> system_roots(const std::string& path)
{
    struct cached
    {
        std::string path;
        bool existed = false;
        struct stat seen = {};
        std::shared_ptr<const std::string> roots;
    };
    static std::mutex lock;
    static cached last;
    struct stat now = {};
    const bool exists = ::stat(path.c_str(), &now) == 0;
    std::lock_guard hold(lock);
    const bool same =
        exists == last.existed &&
        (!exists ||
         (now.st_ino == last.seen.st_ino && now.st_dev == last.seen.st_dev &&
          now.st_size == last.seen.st_size && now.st_mtim.tv_sec == last.seen.st_mtim.tv_sec &&
          now.st_mtim.tv_nsec == last.seen.st_mtim.tv_nsec));
    if (last.roots && last.path == path && same) // a missing file is remembered too
        return last.roots;
    auto roots = std::make_shared<std::string>();
    if (std::ifstream in(path); exists && in)
    {
        std::ostringstream text;
        text << in.rdbuf();
        copy_certificates(text.str(), *roots);
    }
    last = {path, exists, now, roots};
    return roots;
}

outcome<std::string> trust_bundle(std::string_view roots, const std::string& ca_pem)
{
    std::string out;
    out.reserve(roots.size() + ca_pem.size() + 1);
    out.append(roots);
    if (copy_certificates(ca_pem, out) == 0)
        return make_failure(errc::validation, "TLS inspection: the CA has no certificate to trust",
                            "net.mitm");
    return out;
}

outcome<unique_fd> bundle_file(std::string_view bundle)
{
    auto os_failure = [](const char* what) {
        return make_os_failure(
            errc::internal, std::string("TLS inspection: the trust bundle's file: ") + what, errno);
    };
    unique_fd fd(::memfd_create("sandbox-ca-bundle", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (fd.get() < 0)
        return os_failure("memfd_create");
    for (std::size_t done = 0; done < bundle.size();)
    {
        const ssize_t n = ::write(fd.get(), bundle.data() + done, bundle.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return os_failure("write");
        done += static_cast<std::size_t>(n);
    }
    if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) !=
        0)
        return os_failure("seal");
    if (::lseek(fd.get(), 0, SEEK_SET) != 0)
        return os_failure("lseek");
    return fd;
}

std::vector<std::pair<std::string, std::string>> trust_environment(const std::string& bundle_path)
{
    std::vector<std::pair<std::string, std::string>> env;
    for (const char* name :
         {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
          "GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE", "CARGO_HTTP_CAINFO", "DENO_CERT",
          "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE", "NIX_SSL_CERT_FILE"})
        env.emplace_back(name, bundle_path);
    return env;
}

outcome<sandbox_trust> sandbox_trust_for(inspector& inspection)
{
    auto bundle = trust_bundle(*system_roots(), inspection.authority().certificate_pem());
    if (!bundle)
        return bundle.error();
    auto file = bundle_file(*bundle);
    if (!file)
        return file.error();
    return sandbox_trust{std::move(*file), trust_environment(std::string(bundle_path_inside))};
}

} // namespace sandbox::net::tls
