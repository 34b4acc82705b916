#ifndef TOKENRELAY_CPKCS11_SHIM_H
#define TOKENRELAY_CPKCS11_SHIM_H
// PKCS#11 v2.40 types and constants from Debian's libp11-kit-dev. No library is linked: the
// module (SoftHSM2, a cloud HSM's client library) is loaded at run time with dlopen, and its
// functions reached through C_GetFunctionList, as every PKCS#11 application does.
#include <dlfcn.h>
#include <p11-kit-1/p11-kit/pkcs11.h>

/// Calls the module's `C_GetFunctionList` found by dlsym (a data pointer Swift cannot cast).
static inline CK_RV tokenrelay_pkcs11_get_function_list(void *symbol, CK_FUNCTION_LIST_PTR *list) {
    return ((CK_C_GetFunctionList)symbol)(list);
}
#endif
