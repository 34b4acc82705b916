// Thin header for CCurl. Typed static inline wrappers live here only where Swift cannot call
// the C API directly: curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic,
// and CURL_GLOBAL_DEFAULT is a macro built from other macros. One wrapper per argument type.
// They could go if libcurl grew typed setters (it has none as of 8.x).
#ifndef TOKENRELAY_CCURL_SHIM_H
#define TOKENRELAY_CCURL_SHIM_H

// The GCC type-check macros only add noise around these already-typed wrappers.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

static inline CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/// For CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION, which share this signature.
static inline CURLcode ccurl_easy_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode ccurl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLMcode ccurl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

static inline CURLcode ccurl_global_init_default(void) { return curl_global_init(CURL_GLOBAL_DEFAULT); }

#endif
