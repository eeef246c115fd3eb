/*
 * device_api.h - the table of driver entry points that device_module.c calls, expanded from the
 * vendor header's PSSM_API_FUNCTIONS(X) list (backends/cuda/cuda_api.h, backends/hip/hip_api.h).
 *
 * Each X(member, return_type, (parameters), "symbol", "fallback symbol" or NULL, required)
 * becomes one function pointer.  The driver library is opened with dlopen, never linked, so the
 * module builds without the vendor's headers and loads with any driver version that has these
 * symbols.  Included by the vendor header, which device_module.h includes.
 */
#ifndef PSSM_DEVICE_API_H
#define PSSM_DEVICE_API_H

#include <stddef.h>

typedef struct pssm_api_table {
#define PSSM_API_MEMBER_(member, ret, params, symbol, fallback, required) ret(*member) params;
    PSSM_API_FUNCTIONS(PSSM_API_MEMBER_)
#undef PSSM_API_MEMBER_
} pssm_api_table;

/* Defined and filled by device_module.c when the driver is opened, before any other use. */
extern pssm_api_table pssm_api;

/* The driver's name of each entry point, for messages: pssm_api_symbol.init is "cuInit". */
static const struct pssm_api_symbols {
#define PSSM_API_SYMBOL_FIELD_(member, ret, params, symbol, fallback, required) const char *member;
    PSSM_API_FUNCTIONS(PSSM_API_SYMBOL_FIELD_)
#undef PSSM_API_SYMBOL_FIELD_
} pssm_api_symbol = {
#define PSSM_API_SYMBOL_NAME_(member, ret, params, symbol, fallback, required) .member = symbol,
    PSSM_API_FUNCTIONS(PSSM_API_SYMBOL_NAME_)
#undef PSSM_API_SYMBOL_NAME_
};

#endif /* PSSM_DEVICE_API_H */
