// Thin header for COpenSSL. Typed static inline wrappers live here only where Swift cannot call
// the C API directly (variadic functions, function-like macros, macro constants built from
// expressions). Each could go if a later OpenSSL exposed a plain function or Swift learned to
// import the macro.
#ifndef TOKENRELAY_COPENSSL_SHIM_H
#define TOKENRELAY_COPENSSL_SHIM_H

#include <openssl/bn.h>
#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

/// `OPENSSL_free` is a function-like macro (it passes __FILE__/__LINE__ to CRYPTO_free).
static inline void cossl_free(void *pointer) { OPENSSL_free(pointer); }

/// `EVP_RSA_gen` is a macro over the variadic `EVP_PKEY_Q_keygen`.
static inline EVP_PKEY *cossl_rsa_gen(unsigned int bits) { return EVP_RSA_gen(bits); }

/// `BIO_get_mem_data` is a macro over `BIO_ctrl` with a pointer out-parameter cast to char**.
static inline long cossl_bio_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/// `EVP_PKEY_PUBLIC_KEY` is a macro built from an OR of two other macros, which Swift does not import.
static inline int cossl_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/// `BN_num_bytes` is a function-like macro.
static inline int cossl_bn_num_bytes(const BIGNUM *bn) { return BN_num_bytes(bn); }

#endif
