// net/tls/trust.cpp: the sandbox's trust bundle and the variables that name it.
#include "trust.hpp"

#include <fstream>
#include <sstream>

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

outcome<std::string> trust_bundle(const std::string& system_bundle, const std::string& ca_pem)
{
    std::string out;
    if (std::ifstream in(system_bundle); in)
    {
        std::ostringstream text;
        text << in.rdbuf();
        copy_certificates(text.str(), out);
    }
    if (copy_certificates(ca_pem, out) == 0)
        return make_failure(errc::validation, "TLS inspection: the CA has no certificate to trust",
                            "net.mitm");
    return out;
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

} // namespace sandbox::net::tls
