// net/tls/certificate_authority.cpp: making the CA and minting leaves with OpenSSL 3.0.
#include "certificate_authority.hpp"

#include "leaf_cache.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>

namespace sandbox::net::tls {

namespace {

template <auto Free> struct freeing
{
    template <class T> void operator()(T* p) const noexcept { Free(p); }
};
using x509_ptr = std::unique_ptr<X509, freeing<X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, freeing<EVP_PKEY_free>>;
using octets_ptr = std::unique_ptr<ASN1_OCTET_STRING, freeing<ASN1_OCTET_STRING_free>>;
using bits_ptr = std::unique_ptr<ASN1_BIT_STRING, freeing<ASN1_BIT_STRING_free>>;
using names_ptr = std::unique_ptr<GENERAL_NAMES, freeing<GENERAL_NAMES_free>>;
using basic_ptr = std::unique_ptr<BASIC_CONSTRAINTS, freeing<BASIC_CONSTRAINTS_free>>;
using akid_ptr = std::unique_ptr<AUTHORITY_KEYID, freeing<AUTHORITY_KEYID_free>>;
using eku_ptr = std::unique_ptr<EXTENDED_KEY_USAGE, freeing<EXTENDED_KEY_USAGE_free>>;
using bio_ptr = std::unique_ptr<BIO, freeing<BIO_free>>;

// OpenSSL's reason for the step that failed (its error queue is emptied).
failure openssl_failure(const std::string& what)
{
    char reason[256] = "no reason given";
    if (const unsigned long e = ERR_get_error())
        ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    return make_failure(errc::internal, "TLS inspection: " + what + ": " + reason);
}

// Valid from `start` to `end`.
bool set_validity(X509* c, clock::time_point start, clock::time_point end)
{
    time_t from = clock::to_time_t(start);
    time_t to = clock::to_time_t(end);
    return X509_time_adj_ex(X509_getm_notBefore(c), 0, 0, &from) != nullptr &&
           X509_time_adj_ex(X509_getm_notAfter(c), 0, 0, &to) != nullptr;
}

// 16 random bytes, positive, of full length.
bool set_serial(X509* c)
{
    std::array<unsigned char, 16> b{};
    if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1)
        return false;
    b[0] = static_cast<unsigned char>((b[0] & 0x7f) | 0x40);
    BIGNUM* bn = BN_bin2bn(b.data(), static_cast<int>(b.size()), nullptr);
    const bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) != nullptr;
    BN_free(bn);
    return ok;
}

bool add_text(X509_NAME* n, const char* field, const std::string& value)
{
    return X509_NAME_add_entry_by_txt(n, field, MBSTRING_UTF8,
                                      reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                      0) == 1;
}

template <class T> bool add_ext(X509* c, int nid, T* value, bool critical)
{
    return value && X509_add1_ext_i2d(c, nid, value, critical ? 1 : 0, X509V3_ADD_DEFAULT) == 1;
}

bool add_basic(X509* c, bool ca)
{
    basic_ptr bc(BASIC_CONSTRAINTS_new());
    if (!bc)
        return false;
    bc->ca = ca ? 0xff : 0;
    if (ca) // pathlen 0: it signs leaves only
    {
        bc->pathlen = ASN1_INTEGER_new();
        if (!bc->pathlen || ASN1_INTEGER_set(bc->pathlen, 0) != 1)
            return false;
    }
    return add_ext(c, NID_basic_constraints, bc.get(), true);
}

// Key usage bits as RFC 5280 numbers them.
bool add_key_usage(X509* c, std::initializer_list<int> bits)
{
    bits_ptr ku(ASN1_BIT_STRING_new());
    if (!ku)
        return false;
    for (int b : bits)
        if (ASN1_BIT_STRING_set_bit(ku.get(), b, 1) != 1)
            return false;
    return add_ext(c, NID_key_usage, ku.get(), true);
}
constexpr int digital_signature = 0, key_cert_sign = 5, crl_sign = 6;

bool add_authority_key_id(X509* c, const ASN1_OCTET_STRING* ski)
{
    akid_ptr akid(AUTHORITY_KEYID_new());
    if (!akid || !(akid->keyid = ASN1_OCTET_STRING_dup(ski)))
        return false;
    return add_ext(c, NID_authority_key_identifier, akid.get(), false);
}

// The host as the leaf's one subjectAltName: DNS for a name, IP for an address.
bool add_alt_name(X509* c, const canonical_host& host, bool critical)
{
    names_ptr names(GENERAL_NAMES_new());
    GENERAL_NAME* g = GENERAL_NAME_new();
    if (!names || !g || sk_GENERAL_NAME_push(names.get(), g) == 0)
    {
        GENERAL_NAME_free(g);
        return false;
    }
    ASN1_STRING* value = nullptr;
    int type = GEN_DNS;
    if (host.ip)
    {
        type = GEN_IPADD;
        value = ASN1_OCTET_STRING_new();
        if (host.ip->is_v4())
        {
            const auto b = host.ip->to_v4().to_bytes();
            if (value && ASN1_OCTET_STRING_set(value, b.data(), static_cast<int>(b.size())) != 1)
                return ASN1_STRING_free(value), false;
        }
        else
        {
            const auto b = host.ip->to_v6().to_bytes();
            if (value && ASN1_OCTET_STRING_set(value, b.data(), static_cast<int>(b.size())) != 1)
                return ASN1_STRING_free(value), false;
        }
    }
    else
    {
        value = ASN1_IA5STRING_new();
        if (value &&
            ASN1_STRING_set(value, host.name.data(), static_cast<int>(host.name.size())) != 1)
            return ASN1_STRING_free(value), false;
    }
    if (!value)
        return false;
    GENERAL_NAME_set0_value(g, type, value);
    return add_ext(c, NID_subject_alt_name, names.get(), critical);
}

bool add_server_auth(X509* c)
{
    eku_ptr eku(sk_ASN1_OBJECT_new_null());
    if (!eku || sk_ASN1_OBJECT_push(eku.get(), OBJ_nid2obj(NID_server_auth)) == 0)
        return false;
    return add_ext(c, NID_ext_key_usage, eku.get(), false);
}

} // namespace

struct certificate_authority::impl
{
    authority_options opts;
    pkey_ptr ca_key;
    x509_ptr ca;
    octets_ptr ca_key_id; // the CA's subjectKeyIdentifier, every leaf's authority key id
    pkey_ptr leaf_key;
    clock::time_point not_after;
    leaf_cache<leaf_certificate> cache;

    explicit impl(authority_options o)
        : opts(std::move(o)), cache(opts.cache_capacity, opts.renew_before)
    {}
    outcome<void> make_ca(clock::time_point now);
    outcome<void> make_leaf_key();
};

outcome<void> certificate_authority::impl::make_ca(clock::time_point now)
{
    ca_key.reset(EVP_EC_gen("P-256"));
    ca.reset(X509_new());
    if (!ca_key || !ca)
        return openssl_failure("the CA key");
    X509* c = ca.get();
    X509_NAME* subject = X509_get_subject_name(c);
    not_after = now + opts.lifetime;
    if (X509_set_version(c, 2) != 1 || !set_serial(c) ||
        !set_validity(c, now - opts.backdate, not_after) || !add_text(subject, "O", "sandbox") ||
        !add_text(subject, "CN", opts.name) || X509_set_issuer_name(c, subject) != 1 ||
        X509_set_pubkey(c, ca_key.get()) != 1)
        return openssl_failure("the CA certificate");
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    ca_key_id.reset(ASN1_OCTET_STRING_new());
    if (!ca_key_id || X509_pubkey_digest(c, EVP_sha1(), md, &n) != 1 ||
        ASN1_OCTET_STRING_set(ca_key_id.get(), md, static_cast<int>(n)) != 1)
        return openssl_failure("the CA key identifier");
    if (!add_basic(c, true) || !add_key_usage(c, {key_cert_sign, crl_sign}) ||
        !add_ext(c, NID_subject_key_identifier, ca_key_id.get(), false) ||
        !add_authority_key_id(c, ca_key_id.get()) || X509_sign(c, ca_key.get(), EVP_sha256()) <= 0)
        return openssl_failure("the CA certificate's extensions");
    return {};
}

// The leaf key as a "legacy" EC key object (OpenSSL's EC_KEY inside the EVP_PKEY): with one,
// X509_set_pubkey encodes the point directly and keeps the key object in the certificate,
// a few microseconds. With a provider key (what EVP_EC_gen makes) it runs the provider's
// encoder and then its decoder, about 160 microseconds for every leaf (measured here with
// bench/net_bench --case tls); setting pre-encoded bytes instead leaves the certificate
// without a decoded key, which SSL_use_cert_and_key needs, and decoding it costs the same.
// EC_KEY is deprecated in OpenSSL 3.0 but kept through 3.x.
outcome<void> certificate_authority::impl::make_leaf_key()
{
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    EC_KEY* ec = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    leaf_key.reset(EVP_PKEY_new());
    if (!ec || !leaf_key || EC_KEY_generate_key(ec) != 1 ||
        EVP_PKEY_assign_EC_KEY(leaf_key.get(), ec) != 1)
    {
        EC_KEY_free(ec);
        return openssl_failure("the leaf key");
    }
#pragma GCC diagnostic pop
    return {};
}

leaf_certificate::~leaf_certificate()
{
    X509_free(cert);
}

certificate_authority::certificate_authority(std::unique_ptr<impl> p) noexcept : p_(std::move(p)) {}
certificate_authority::~certificate_authority() = default;

outcome<std::unique_ptr<certificate_authority>>
certificate_authority::create(authority_options opts, clock::time_point now)
{
    if (opts.name.empty())
        return make_failure(errc::validation, "TLS inspection: the CA needs a name", "name");
    if (opts.lifetime <= std::chrono::seconds(0) || opts.leaf_lifetime <= std::chrono::seconds(0))
        return make_failure(errc::validation, "TLS inspection: lifetimes must be positive",
                            "lifetime");
    auto p = std::make_unique<impl>(std::move(opts));
    if (auto r = p->make_ca(now); !r)
        return r.error();
    if (auto r = p->make_leaf_key(); !r)
        return r.error();
    return std::unique_ptr<certificate_authority>(new certificate_authority(std::move(p)));
}

X509* certificate_authority::certificate() const noexcept
{
    return p_->ca.get();
}
EVP_PKEY* certificate_authority::leaf_key() const noexcept
{
    return p_->leaf_key.get();
}
clock::time_point certificate_authority::not_after() const noexcept
{
    return p_->not_after;
}
const authority_options& certificate_authority::options() const noexcept
{
    return p_->opts;
}
std::size_t certificate_authority::cached() const noexcept
{
    return p_->cache.size();
}

std::string certificate_authority::certificate_pem() const
{
    bio_ptr b(BIO_new(BIO_s_mem()));
    if (!b || PEM_write_bio_X509(b.get(), p_->ca.get()) != 1)
        return {};
    char* data = nullptr;
    const long n = BIO_get_mem_data(b.get(), &data);
    return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string{};
}

outcome<std::shared_ptr<const leaf_certificate>>
certificate_authority::mint(const canonical_host& host, clock::time_point now) const
{
    const std::string text = host.text();
    if (text.empty())
        return make_failure(errc::validation, "TLS inspection: no host to mint a leaf for", "host");
    x509_ptr leaf(X509_new());
    if (!leaf)
        return openssl_failure("a leaf for " + text);
    X509* c = leaf.get();
    const clock::time_point end = std::min(now + p_->opts.leaf_lifetime, p_->not_after);
    // A common name over 63 characters is not allowed: then the subject is empty and the
    // subjectAltName, the name that counts, is critical (RFC 5280 4.2.1.6).
    const bool named = text.size() <= 63;
    if (X509_set_version(c, 2) != 1 || !set_serial(c) ||
        !set_validity(c, now - p_->opts.backdate, end) ||
        (named && !add_text(X509_get_subject_name(c), "CN", text)) ||
        X509_set_issuer_name(c, X509_get_subject_name(p_->ca.get())) != 1 ||
        X509_set_pubkey(c, p_->leaf_key.get()) != 1 || !add_alt_name(c, host, !named) ||
        !add_basic(c, false) || !add_key_usage(c, {digital_signature}) || !add_server_auth(c) ||
        !add_authority_key_id(c, p_->ca_key_id.get()) ||
        X509_sign(c, p_->ca_key.get(), EVP_sha256()) <= 0)
        return openssl_failure("a leaf for " + text);
    return std::make_shared<const leaf_certificate>(leaf.release(), end);
}

outcome<std::shared_ptr<const leaf_certificate>>
certificate_authority::leaf_for(const canonical_host& host, clock::time_point now, bool* hit)
{
    const std::string key = host.text();
    if (auto cached = p_->cache.find(key, now))
    {
        if (hit)
            *hit = true;
        return cached;
    }
    if (hit)
        *hit = false;
    auto fresh = mint(host, now);
    if (fresh)
        p_->cache.insert(key, *fresh, (*fresh)->not_after);
    return fresh;
}

} // namespace sandbox::net::tls
