// bench/net/tls.cpp: TLS inspection's certificate costs. A leaf mint (cache miss) through the
// CA of net/tls (the leaf key's public half pre-encoded once) against a straightforward
// OpenSSL mint in the same run (X509_set_pubkey and string-configured extensions for every
// leaf, what most code does), p50 and p99; a cache hit against a miss. Targets (tls.md M1):
// mint p50 at most 80 us, p99 at most 250 us.
#include "cases.hpp"

#include "bench/common.hpp"
#include "host/canonical.hpp"
#include "net/tls/certificate_authority.hpp"
#include "rig.hpp"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace net_bench {
namespace {

using steady = std::chrono::steady_clock;
namespace tls = sandbox::net::tls;

// The baseline: a CA and a leaf key of its own, and per leaf the usual calls.
struct naive_ca
{
    EVP_PKEY* ca_key = EVP_EC_gen("P-256");
    EVP_PKEY* leaf_key = EVP_EC_gen("P-256");
    X509* ca = X509_new();

    naive_ca()
    {
        X509_set_version(ca, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(ca), 1);
        X509_gmtime_adj(X509_getm_notBefore(ca), -3600);
        X509_gmtime_adj(X509_getm_notAfter(ca), 86400);
        X509_NAME_add_entry_by_txt(X509_get_subject_name(ca), "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>("naive CA"), -1, -1, 0);
        X509_set_issuer_name(ca, X509_get_subject_name(ca));
        X509_set_pubkey(ca, ca_key);
        add(ca, ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
        add(ca, ca, NID_subject_key_identifier, "hash");
        X509_sign(ca, ca_key, EVP_sha256());
    }
    ~naive_ca()
    {
        X509_free(ca);
        EVP_PKEY_free(leaf_key);
        EVP_PKEY_free(ca_key);
    }
    static void add(X509* issuer, X509* c, int nid, const char* value)
    {
        X509V3_CTX ctx;
        X509V3_set_ctx(&ctx, issuer, c, nullptr, nullptr, 0);
        X509_EXTENSION* e = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
        X509_add_ext(c, e, -1);
        X509_EXTENSION_free(e);
    }
    bool mint(const std::string& host) const
    {
        X509* c = X509_new();
        X509_set_version(c, 2);
        ASN1_INTEGER_set(X509_get_serialNumber(c), 2);
        X509_gmtime_adj(X509_getm_notBefore(c), -3600);
        X509_gmtime_adj(X509_getm_notAfter(c), 86400);
        X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(host.c_str()), -1, -1, 0);
        X509_set_issuer_name(c, X509_get_subject_name(ca));
        X509_set_pubkey(c, leaf_key);
        const std::string san = "DNS:" + host;
        add(ca, c, NID_subject_alt_name, san.c_str());
        add(ca, c, NID_basic_constraints, "critical,CA:FALSE");
        add(ca, c, NID_key_usage, "critical,digitalSignature");
        add(ca, c, NID_ext_key_usage, "serverAuth");
        add(ca, c, NID_authority_key_identifier, "keyid:always");
        const bool ok = X509_sign(c, ca_key, EVP_sha256()) > 0;
        X509_free(c);
        return ok;
    }
};

} // namespace

void run_tls(const options& o)
{
    auto made = tls::certificate_authority::create();
    if (!made)
    {
        std::fprintf(stderr, "tls: %s\n", made.error().diag.message.c_str());
        return;
    }
    auto& ca = **made;
    naive_ca naive;
    const int per_round = o.quick ? 20 : 300;
    const int round_count = o.quick ? 2 : 11;
    std::vector<double> ours, base;
    int serial = 0;
    for (int r = 0; r < round_count; ++r)
        for (int i = 0; i < per_round; ++i, ++serial)
        {
            const std::string name = "h" + std::to_string(serial) + ".bench.example";
            const auto host = *sandbox::net::canonicalize_host(name);
            auto t0 = steady::now();
            if (!naive.mint(name))
                return void(std::fprintf(stderr, "tls: the naive mint failed\n"));
            base.push_back(micros_since(t0));
            t0 = steady::now();
            if (!ca.mint(host, tls::clock::now()))
                return void(std::fprintf(stderr, "tls: the mint failed\n"));
            ours.push_back(micros_since(t0));
        }
    bench::print_json("net_bench", "tls_leaf_mint_p50", bench::percentile(ours, 50), "us",
                      bench::percentile(base, 50));
    bench::print_json("net_bench", "tls_leaf_mint_p99", bench::percentile(ours, 99), "us",
                      bench::percentile(base, 99));

    // A hit against a miss, both through leaf_for (the cache keyed by canonical host).
    std::vector<double> hits, misses;
    const auto warm = *sandbox::net::canonicalize_host("warm.bench.example");
    ca.leaf_for(warm);
    for (int i = 0; i < per_round * 4; ++i, ++serial)
    {
        const auto cold =
            *sandbox::net::canonicalize_host("c" + std::to_string(serial) + ".bench.example");
        auto t0 = steady::now();
        ca.leaf_for(cold);
        misses.push_back(micros_since(t0));
        t0 = steady::now();
        ca.leaf_for(warm);
        hits.push_back(micros_since(t0));
    }
    bench::print_json("net_bench", "tls_leaf_cache_hit_p50", bench::percentile(hits, 50), "us",
                      bench::percentile(misses, 50));
}

} // namespace net_bench
