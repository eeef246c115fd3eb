/*
 * test_binding_api.c - the calls a binding from another language needs (portssm.h, "for
 * bindings"): backend strings, strided tensors, op capability, struct layouts, and the
 * deprecated context device-info call agreeing with the one device-info call.  Run once per
 * backend label (capability depends on the backend).
 */
#include "harness.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define ASSERT_HAS(haystack, needle)                                                            \
    do {                                                                                        \
        const char *h_ = (haystack);                                                            \
        if (!h_ || !strstr(h_, (needle)))                                                       \
            fail_msg("expected \"%s\" in the message \"%s\"", (needle), h_ ? h_ : "(null)");    \
    } while (0)

static void test_backend_parse_valid(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        portssm_backend kind;
        int32_t device;
    } cases[] = {
        {"cpu", PORTSSM_BACKEND_CPU, -1},     {"CUDA", PORTSSM_BACKEND_CUDA, -1},
        {"cuda:1", PORTSSM_BACKEND_CUDA, 1},  {"hip:12", PORTSSM_BACKEND_HIP, 12},
        {"sim", PORTSSM_BACKEND_SIM, -1},     {"sim32", PORTSSM_BACKEND_SIM, 0},
        {"sim64", PORTSSM_BACKEND_SIM, 1},    {"sim:1", PORTSSM_BACKEND_SIM, 1},
        {"auto", PORTSSM_BACKEND_AUTO, -1},   {"cpu:0", PORTSSM_BACKEND_CPU, 0},
        {"cuda:2147483647", PORTSSM_BACKEND_CUDA, 2147483647},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        portssm_backend b = (portssm_backend)99;
        int32_t d = 99;
        portssm_status s = portssm_backend_parse(cases[i].text, &b, &d);
        if (s != PORTSSM_OK)
            fail_msg("'%s': %s: %s", cases[i].text, portssm_status_name(s), portssm_last_error(NULL));
        assert_int_equal(b, cases[i].kind);
        assert_int_equal(d, cases[i].device);
    }
}

static void test_backend_parse_invalid(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"", "expected cpu, cuda"},           {"gpu", "expected cpu, cuda"},
        {"cuda:", "must be a number"},        {"cuda:x", "must be a number"},
        {"cuda:-1", "must be a number"},      {"cuda:2147483648", "must be a number"},
        {"sim64:1", "takes no device suffix"}, {"auto:0", "takes no device suffix"},
        {"cudax", "expected cpu, cuda"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        portssm_backend b = (portssm_backend)99;
        int32_t d = 99;
        assert_int_equal(portssm_backend_parse(cases[i].text, &b, &d), PORTSSM_ERR_INVALID_ARGUMENT);
        ASSERT_HAS(portssm_last_error(NULL), cases[i].why);
        ASSERT_HAS(portssm_last_error(NULL), "'text'");
        assert_int_equal(b, 99); /* nothing written on failure */
        assert_int_equal(d, 99);
    }
    portssm_backend b;
    int32_t d;
    assert_int_equal(portssm_backend_parse(NULL, &b, &d), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "'text' is NULL");
    assert_int_equal(portssm_backend_parse("cpu", NULL, &d), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "'backend' is NULL");
    assert_int_equal(portssm_backend_parse("cpu", &b, NULL), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "'device' is NULL");
}

static void test_tensor_strided(void **state)
{
    (void)state;
    int dummy;
    const int64_t shape[3] = {2, 3, 5}, stride[3] = {-7, 0, 11};
    portssm_tensor t = portssm_tensor_strided(&dummy, PORTSSM_BF16, 3, shape, stride);
    assert_ptr_equal(t.data, &dummy);
    assert_int_equal(t.dtype, PORTSSM_BF16);
    assert_int_equal(t.ndim, 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(t.shape[i], shape[i]);
        assert_int_equal(t.stride[i], stride[i]);
    }
    assert_int_equal(t.shape[3], 0);
    assert_int_equal(t.stride[3], 0);
    assert_int_equal(portssm_tensor_strided(&dummy, PORTSSM_F32, 0, shape, stride).ndim, 0);
    assert_int_equal(portssm_tensor_strided(&dummy, PORTSSM_F32, 5, shape, stride).ndim, 0);
    assert_int_equal(portssm_tensor_strided(&dummy, PORTSSM_F32, 3, NULL, stride).ndim, 0);
    assert_int_equal(portssm_tensor_strided(&dummy, PORTSSM_F32, 3, shape, NULL).ndim, 0);
}

/* A strided tensor made by the constructor runs an op exactly as one built by hand. */
static void test_tensor_strided_in_an_op(void **state)
{
    (void)state;
    th_rng r = th_rng_for(0x5171de);
    const int64_t B = 2, D = 3, L = 9, W = 4;
    const int64_t xs[3] = {B, D, L}, cl_stride[3] = {D * L, 1, D}; /* channel-last */
    const int64_t ws[2] = {D, W};
    th_tensor *x = th_new(th_ctx, PORTSSM_F32, 3, xs, cl_stride);
    th_tensor *w = th_new(th_ctx, PORTSSM_F32, 2, ws, NULL);
    th_tensor *out = th_new(th_ctx, PORTSSM_F32, 3, xs, NULL);
    th_tensor *ref = th_new(th_ctx, PORTSSM_F32, 3, xs, NULL);
    th_fill_uniform(x, &r, -1, 1);
    th_fill_uniform(w, &r, -1, 1);
    th_poison(out);
    th_poison(ref);
    portssm_causal_conv1d_fwd_args a = {0};
    a.x = th_view(x);
    a.weight = th_view(w);
    a.out = th_view(ref);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a));
    a.x = portssm_tensor_strided(x->dev + x->guard + (size_t)x->base * 4, PORTSSM_F32, 3, xs,
                                 cl_stride);
    a.out = th_view(out);
    TH_CHECK_OP(th_ctx, portssm_causal_conv1d_fwd(th_ctx, &a));
    th_assert_close(out, ref, (th_tol){0, 0}, "out");
    th_free_all();
}

static void test_op_supported(void **state)
{
    (void)state;
    const char *names[PORTSSM_OP_COUNT] = {
        "causal_conv1d_fwd",  "causal_conv1d_bwd",  "causal_conv1d_update",
        "selective_scan_fwd", "selective_scan_bwd", "selective_state_update",
        "ssd_chunk_scan_fwd", "ssd_chunk_scan_bwd", "norm_fwd",
        "norm_bwd",
    };
    for (int op = 0; op < PORTSSM_OP_COUNT; op++) {
        assert_string_equal(portssm_op_name((portssm_op)op), names[op]);
        portssm_status s = portssm_op_supported(th_ctx, (portssm_op)op);
        if (portssm_get_backend(th_ctx) == PORTSSM_BACKEND_CPU)
            assert_int_equal(s, PORTSSM_OK); /* the oracle implements every op */
        if (s == PORTSSM_ERR_UNSUPPORTED) {
            ASSERT_HAS(portssm_last_error(th_ctx), names[op]);
            ASSERT_HAS(portssm_last_error(th_ctx), portssm_backend_name(portssm_get_backend(th_ctx)));
        } else {
            assert_int_equal(s, PORTSSM_OK);
            assert_string_equal(portssm_last_error(th_ctx), "");
        }
    }
    assert_null(portssm_op_name((portssm_op)PORTSSM_OP_COUNT));
    assert_null(portssm_op_name((portssm_op)-1));
    assert_int_equal(portssm_op_supported(th_ctx, (portssm_op)PORTSSM_OP_COUNT),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(th_ctx), "'op'");
    assert_int_equal(portssm_op_supported(NULL, PORTSSM_OP_CAUSAL_CONV1D_FWD),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "'ctx' is NULL");
}

/* An op the capability query calls unsupported answers UNSUPPORTED itself, and the other way
 * round: the two cannot drift apart.  Checked with args the op accepts on the cpu. */
static void test_op_supported_agrees_with_ops(void **state)
{
    (void)state;
    th_rng r = th_rng_for(0xcab);
    const int64_t B = 1, D = 2, L = 5, W = 3, N = 2;
    const int64_t xs[3] = {B, D, L}, ws[2] = {D, W}, an[2] = {D, N};
    th_tensor *x = th_new(th_ctx, PORTSSM_F32, 3, xs, NULL);
    th_tensor *w = th_new(th_ctx, PORTSSM_F32, 2, ws, NULL);
    th_tensor *dout = th_new(th_ctx, PORTSSM_F32, 3, xs, NULL);
    th_tensor *dx = th_new(th_ctx, PORTSSM_F32, 3, xs, NULL);
    th_tensor *dw = th_new(th_ctx, PORTSSM_F32, 2, ws, NULL);
    th_tensor *A = th_new(th_ctx, PORTSSM_F32, 2, an, NULL);
    th_tensor *Bc = th_new(th_ctx, PORTSSM_F32, 2, an, NULL);
    th_tensor *Cc = th_new(th_ctx, PORTSSM_F32, 2, an, NULL);
    th_tensor *du = th_new(th_ctx, PORTSSM_F32, 3, xs, NULL);
    th_tensor *ddelta = th_new(th_ctx, PORTSSM_F32, 3, xs, NULL);
    th_tensor *dA = th_new(th_ctx, PORTSSM_F32, 2, an, NULL);
    th_tensor *dB = th_new(th_ctx, PORTSSM_F32, 2, an, NULL);
    th_tensor *dC = th_new(th_ctx, PORTSSM_F32, 2, an, NULL);
    th_fill_uniform(x, &r, -1, 1);
    th_fill_uniform(w, &r, -1, 1);
    th_fill_uniform(dout, &r, -1, 1);
    th_fill_uniform(A, &r, -1, -0.1);
    th_fill_uniform(Bc, &r, -1, 1);
    th_fill_uniform(Cc, &r, -1, 1);

    portssm_causal_conv1d_bwd_args cb = {0};
    cb.x = th_view(x);
    cb.weight = th_view(w);
    cb.dout = th_view(dout);
    cb.dx = th_view(dx);
    cb.dweight = th_view(dw);
    portssm_status want = portssm_op_supported(th_ctx, PORTSSM_OP_CAUSAL_CONV1D_BWD);
    portssm_status got = portssm_causal_conv1d_bwd(th_ctx, &cb);
    assert_int_equal(want == PORTSSM_OK, got == PORTSSM_OK);
    if (want != PORTSSM_OK)
        assert_int_equal(got, PORTSSM_ERR_UNSUPPORTED);

    portssm_selective_scan_bwd_args sb = {0};
    sb.u = th_view(x);
    sb.delta = th_view(x);
    sb.A = th_view(A);
    sb.B = th_view(Bc);
    sb.C = th_view(Cc);
    sb.dout = th_view(dout);
    sb.du = th_view(du);
    sb.ddelta = th_view(ddelta);
    sb.dA = th_view(dA);
    sb.dB = th_view(dB);
    sb.dC = th_view(dC);
    want = portssm_op_supported(th_ctx, PORTSSM_OP_SELECTIVE_SCAN_BWD);
    got = portssm_selective_scan_bwd(th_ctx, &sb);
    assert_int_equal(want == PORTSSM_OK, got == PORTSSM_OK);
    if (want != PORTSSM_OK)
        assert_int_equal(got, PORTSSM_ERR_UNSUPPORTED);

    /* the norms over (B*D, L) rows: x and dout as 2-D views */
    const int64_t rs[2] = {B * D, L}, hs[1] = {L};
    th_tensor *nw = th_new(th_ctx, PORTSSM_F32, 1, hs, NULL);
    th_tensor *rstd = th_new(th_ctx, PORTSSM_F32, 2, (const int64_t[]){B * D, 1}, NULL);
    th_fill_uniform(nw, &r, -1, 1);
    portssm_norm_fwd_args nf = {0};
    nf.x = portssm_tensor_contiguous(th_view(x).data, PORTSSM_F32, 2, rs);
    nf.weight = th_view(nw);
    nf.out = portssm_tensor_contiguous(th_view(dx).data, PORTSSM_F32, 2, rs);
    nf.rstd = th_view(rstd);
    nf.kind = PORTSSM_NORM_RMS;
    want = portssm_op_supported(th_ctx, PORTSSM_OP_NORM_FWD);
    got = portssm_norm_fwd(th_ctx, &nf);
    assert_int_equal(want == PORTSSM_OK, got == PORTSSM_OK);
    if (want != PORTSSM_OK)
        assert_int_equal(got, PORTSSM_ERR_UNSUPPORTED);
    th_fill_uniform(rstd, &r, 0.5, 2); /* the backward's own: the forward may be missing */
    portssm_norm_bwd_args nb = {0};
    nb.x = nf.x;
    nb.weight = nf.weight;
    nb.rstd = nf.rstd;
    nb.dout = portssm_tensor_contiguous(th_view(dout).data, PORTSSM_F32, 2, rs);
    nb.dx = portssm_tensor_contiguous(th_view(du).data, PORTSSM_F32, 2, rs);
    nb.kind = PORTSSM_NORM_RMS;
    want = portssm_op_supported(th_ctx, PORTSSM_OP_NORM_BWD);
    got = portssm_norm_bwd(th_ctx, &nb);
    assert_int_equal(want == PORTSSM_OK, got == PORTSSM_OK);
    if (want != PORTSSM_OK)
        assert_int_equal(got, PORTSSM_ERR_UNSUPPORTED);
    th_free_all();
}

/* Every public struct is described completely: its fields in declaration order, none
 * overlapping, the gaps between them no larger than alignment padding, the last one ending
 * within sizeof. */
static void test_struct_layout(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        size_t size;
        int32_t fields;
    } structs[] = {
        {"portssm_tensor", sizeof(portssm_tensor), 5},
        {"portssm_workspace", sizeof(portssm_workspace), 2},
        {"portssm_device_info", sizeof(portssm_device_info), 5},
        {"portssm_causal_conv1d_fwd_args", sizeof(portssm_causal_conv1d_fwd_args), 8},
        {"portssm_causal_conv1d_bwd_args", sizeof(portssm_causal_conv1d_bwd_args), 13},
        {"portssm_causal_conv1d_update_args", sizeof(portssm_causal_conv1d_update_args), 8},
        {"portssm_selective_scan_fwd_args", sizeof(portssm_selective_scan_fwd_args), 13},
        {"portssm_selective_scan_bwd_args", sizeof(portssm_selective_scan_bwd_args), 23},
        {"portssm_selective_state_update_args", sizeof(portssm_selective_state_update_args), 12},
        {"portssm_norm_fwd_args", sizeof(portssm_norm_fwd_args), 13},
        {"portssm_norm_bwd_args", sizeof(portssm_norm_bwd_args), 18},
    };
    for (size_t i = 0; i < sizeof structs / sizeof structs[0]; i++) {
        size_t size = 0;
        int32_t n = 0;
        assert_int_equal(portssm_struct_layout(structs[i].name, &size, &n), PORTSSM_OK);
        assert_int_equal(size, structs[i].size);
        assert_int_equal(n, structs[i].fields);
        size_t end = 0;
        for (int32_t f = 0; f < n; f++) {
            const char *fname = NULL;
            size_t off = 0, fsize = 0;
            assert_int_equal(portssm_struct_field(structs[i].name, f, &fname, &off, &fsize),
                             PORTSSM_OK);
            assert_non_null(fname);
            assert_true(fsize > 0);
            if (off < end || off - end >= 8) /* overlap, or a gap no padding explains */
                fail_msg("%s.%s at %zu, the field before ends at %zu", structs[i].name, fname, off,
                         end);
            end = off + fsize;
        }
        assert_true(end <= size && size - end < 8);
    }
    /* spot checks against the compiler's own view */
    const char *fname;
    size_t off, fsize;
    assert_int_equal(portssm_struct_field("portssm_selective_scan_bwd_args", 22, &fname, &off, &fsize),
                     PORTSSM_OK);
    assert_string_equal(fname, "workspace");
    assert_int_equal(off, offsetof(portssm_selective_scan_bwd_args, workspace));
    assert_int_equal(fsize, sizeof(portssm_workspace));
    assert_int_equal(portssm_struct_field("portssm_tensor", 4, &fname, &off, &fsize), PORTSSM_OK);
    assert_string_equal(fname, "stride");
    assert_int_equal(off, offsetof(portssm_tensor, stride));

    size_t size = 7;
    int32_t n = 7;
    assert_int_equal(portssm_struct_layout("portssm_nothing", &size, &n), PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "portssm_nothing");
    assert_int_equal(size, 7);
    assert_int_equal(n, 7);
    assert_int_equal(portssm_struct_layout(NULL, &size, &n), PORTSSM_ERR_INVALID_ARGUMENT);
    fname = "untouched";
    off = 7;
    assert_int_equal(portssm_struct_field("portssm_tensor", 5, &fname, &off, &fsize),
                     PORTSSM_ERR_INVALID_ARGUMENT);
    ASSERT_HAS(portssm_last_error(NULL), "'index' 5");
    assert_string_equal(fname, "untouched");
    assert_int_equal(off, 7);
    assert_int_equal(portssm_struct_field("portssm_tensor", -1, &fname, &off, &fsize),
                     PORTSSM_ERR_INVALID_ARGUMENT);
}

static void test_one_device_info(void **state)
{
    (void)state;
    portssm_device_info a, b;
    memset(&a, 0x5a, sizeof a);
    memset(&b, 0xa5, sizeof b);
    assert_int_equal(portssm_get_device_info(th_ctx, &a), PORTSSM_OK);
    assert_int_equal(portssm_device_get_info(portssm_get_backend(th_ctx), portssm_get_device(th_ctx), &b),
                     PORTSSM_OK);
    assert_string_equal(a.name, b.name);
    assert_string_equal(a.arch, b.arch);
    assert_int_equal(a.warp_size, b.warp_size);
    assert_int_equal(a.multiprocessors, b.multiprocessors);
    assert_int_equal(a.total_memory, b.total_memory);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_parse_valid),
        cmocka_unit_test(test_backend_parse_invalid),
        cmocka_unit_test(test_tensor_strided),
        cmocka_unit_test(test_tensor_strided_in_an_op),
        cmocka_unit_test(test_op_supported),
        cmocka_unit_test(test_op_supported_agrees_with_ops),
        cmocka_unit_test(test_struct_layout),
        cmocka_unit_test(test_one_device_info),
    };
    return th_main(argc, argv, "test_binding_api", tests, sizeof tests / sizeof tests[0]);
}
