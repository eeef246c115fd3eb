/* struct_layout.c - the layout of every public struct, field by field, as this build of the
 * library sees portssm.h: what a binding in another language checks its declarations against.
 * A struct that gains a field here without the binding following (or the other way round) then
 * fails at load time, loudly, instead of passing misplaced pointers. */
#include "core.h"

#include <stddef.h>
#include <string.h>

typedef struct pssm_field {
    const char *name;
    size_t offset, size;
} pssm_field;

typedef struct pssm_struct {
    const char *name;
    size_t size;
    const pssm_field *fields;
    int32_t count;
} pssm_struct;

#define F(type, field) {#field, offsetof(type, field), sizeof(((type *)0)->field)}
#define S(type, list) {#type, sizeof(type), list, (int32_t)(sizeof list / sizeof list[0])}

static const pssm_field tensor_fields[] = {
    F(portssm_tensor, data),  F(portssm_tensor, dtype),  F(portssm_tensor, ndim),
    F(portssm_tensor, shape), F(portssm_tensor, stride),
};
static const pssm_field workspace_fields[] = {
    F(portssm_workspace, data),
    F(portssm_workspace, bytes),
};
static const pssm_field device_info_fields[] = {
    F(portssm_device_info, name),
    F(portssm_device_info, arch),
    F(portssm_device_info, warp_size),
    F(portssm_device_info, multiprocessors),
    F(portssm_device_info, total_memory),
};
#define CF(field) F(portssm_causal_conv1d_fwd_args, field)
static const pssm_field conv_fwd_fields[] = {
    CF(x), CF(weight), CF(bias), CF(seq_idx), CF(initial_states), CF(final_states), CF(out),
    CF(activation),
};
#undef CF
#define CB(field) F(portssm_causal_conv1d_bwd_args, field)
static const pssm_field conv_bwd_fields[] = {
    CB(x),       CB(weight),          CB(bias),          CB(seq_idx),
    CB(initial_states), CB(dout),     CB(dfinal_states), CB(dx),
    CB(dweight), CB(dbias),           CB(dinitial_states), CB(activation),
    CB(workspace),
};
#undef CB
#define CU(field) F(portssm_causal_conv1d_update_args, field)
static const pssm_field conv_update_fields[] = {
    CU(x),     CU(conv_state), CU(weight),     CU(bias), CU(cache_seqlens), CU(conv_state_indices),
    CU(out),   CU(activation),
};
#undef CU
#define SF(field) F(portssm_selective_scan_fwd_args, field)
static const pssm_field scan_fwd_fields[] = {
    SF(u), SF(delta), SF(A), SF(B), SF(C), SF(D), SF(z), SF(delta_bias), SF(initial_state),
    SF(final_state), SF(out), SF(delta_softplus), SF(checkpoints),
};
#undef SF
#define SB(field) F(portssm_selective_scan_bwd_args, field)
static const pssm_field scan_bwd_fields[] = {
    SB(u),  SB(delta), SB(A),  SB(B),  SB(C), SB(D), SB(z), SB(delta_bias), SB(initial_state),
    SB(dout), SB(dfinal_state), SB(du), SB(ddelta), SB(dA), SB(dB), SB(dC), SB(dD), SB(dz),
    SB(ddelta_bias), SB(dinitial_state), SB(delta_softplus), SB(checkpoints), SB(workspace),
};
#undef SB
#define SU(field) F(portssm_selective_state_update_args, field)
static const pssm_field state_update_fields[] = {
    SU(state), SU(x), SU(dt), SU(A), SU(B), SU(C), SU(D), SU(z), SU(dt_bias),
    SU(state_batch_indices), SU(out), SU(dt_softplus),
};
#undef SU

#define DF(field) F(portssm_ssd_chunk_scan_fwd_args, field)
static const pssm_field ssd_fwd_fields[] = {
    DF(x),       DF(dt),         DF(A),          DF(B),           DF(C),
    DF(D),       DF(z),          DF(dt_bias),    DF(initial_states), DF(seq_idx),
    DF(cu_seqlens), DF(out),     DF(final_states), DF(varlen_states), DF(y), DF(checkpoints),
    DF(dt_softplus),
    DF(dt_limit), DF(dt_min),    DF(dt_max),     DF(chunk_size),  DF(workspace),
};
#undef DF
#define DB(field) F(portssm_ssd_chunk_scan_bwd_args, field)
static const pssm_field ssd_bwd_fields[] = {
    DB(x),       DB(dt),       DB(A),        DB(B),       DB(C),          DB(D),
    DB(z),       DB(dt_bias),  DB(initial_states), DB(seq_idx), DB(cu_seqlens), DB(dout),
    DB(dfinal_states), DB(y), DB(checkpoints), DB(dx), DB(ddt), DB(dA), DB(dB), DB(dC),
    DB(dD),      DB(dz),       DB(ddt_bias), DB(dinitial_states), DB(dt_softplus), DB(dt_limit),
    DB(dt_min),  DB(dt_max),   DB(chunk_size), DB(workspace),
};
#undef DB
#define NF(field) F(portssm_norm_fwd_args, field)
static const pssm_field norm_fwd_fields[] = {
    NF(x),    NF(residual), NF(z),    NF(weight),           NF(bias),       NF(out),
    NF(residual_out), NF(mean), NF(rstd), NF(kind), NF(norm_before_gate), NF(group_size),
    NF(eps),
};
#undef NF
#define NB(field) F(portssm_norm_bwd_args, field)
static const pssm_field norm_bwd_fields[] = {
    NB(x),    NB(z),    NB(weight),  NB(bias),  NB(mean), NB(rstd), NB(dout), NB(dresidual_out),
    NB(dx),   NB(dresidual), NB(dz), NB(dweight), NB(dbias), NB(out), NB(kind), NB(norm_before_gate),
    NB(group_size), NB(workspace),
};
#undef NB

static const pssm_struct structs[] = {
    S(portssm_tensor, tensor_fields),
    S(portssm_workspace, workspace_fields),
    S(portssm_device_info, device_info_fields),
    S(portssm_causal_conv1d_fwd_args, conv_fwd_fields),
    S(portssm_causal_conv1d_bwd_args, conv_bwd_fields),
    S(portssm_causal_conv1d_update_args, conv_update_fields),
    S(portssm_selective_scan_fwd_args, scan_fwd_fields),
    S(portssm_selective_scan_bwd_args, scan_bwd_fields),
    S(portssm_selective_state_update_args, state_update_fields),
    S(portssm_ssd_chunk_scan_fwd_args, ssd_fwd_fields),
    S(portssm_ssd_chunk_scan_bwd_args, ssd_bwd_fields),
    S(portssm_norm_fwd_args, norm_fwd_fields),
    S(portssm_norm_bwd_args, norm_bwd_fields),
};

static const pssm_struct *find(const char *fn, const char *name)
{
    if (!name) {
        pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "%s: 'struct_name' is NULL", fn);
        return NULL;
    }
    for (size_t i = 0; i < sizeof structs / sizeof structs[0]; i++)
        if (strcmp(structs[i].name, name) == 0)
            return &structs[i];
    pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                     "%s: 'struct_name' \"%.100s\" is not a public struct of portssm.h", fn, name);
    return NULL;
}

PORTSSM_API portssm_status portssm_struct_layout(const char *struct_name, size_t *size,
                                                 int32_t *num_fields)
{
    pssm_thread_clear();
    if (!size || !num_fields)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "portssm_struct_layout: '%s' is NULL",
                                !size ? "size" : "num_fields");
    const pssm_struct *s = find("portssm_struct_layout", struct_name);
    if (!s)
        return PORTSSM_ERR_INVALID_ARGUMENT;
    *size = s->size;
    *num_fields = s->count;
    return PORTSSM_OK;
}

PORTSSM_API portssm_status portssm_struct_field(const char *struct_name, int32_t index,
                                                const char **field_name, size_t *offset,
                                                size_t *size)
{
    pssm_thread_clear();
    if (!field_name || !offset || !size)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT, "portssm_struct_field: '%s' is NULL",
                                !field_name ? "field_name" : !offset ? "offset" : "size");
    const pssm_struct *s = find("portssm_struct_field", struct_name);
    if (!s)
        return PORTSSM_ERR_INVALID_ARGUMENT;
    if (index < 0 || index >= s->count)
        return pssm_thread_fail(PORTSSM_ERR_INVALID_ARGUMENT,
                                "portssm_struct_field: 'index' %d is outside 0..%d for %s",
                                (int)index, (int)s->count - 1, s->name);
    *field_name = s->fields[index].name;
    *offset = s->fields[index].offset;
    *size = s->fields[index].size;
    return PORTSSM_OK;
}
