/* ref_math.c - pointwise functions and small helpers shared by the reference ops (see ref.h). */
#include "ref.h"

#include <math.h>

double pssm_ref_silu(double v) { return v / (1.0 + exp(-v)); }

/* silu = v*s with s = sigmoid(v):  silu' = s + v*s*(1-s) = s*(1 + v*(1-s)). */
double pssm_ref_dsilu(double v)
{
    double s = 1.0 / (1.0 + exp(-v));
    return s * (1.0 + v * (1.0 - s));
}

/* The threshold rule of the reference kernels (mamba-ssm): above 20 softplus is the identity. */
double pssm_ref_softplus(double v) { return v <= 20.0 ? log1p(exp(v)) : v; }

/* d/dv log1p(exp(v)) = exp(v)/(1+exp(v)) = sigmoid(v); the identity branch has slope 1. */
double pssm_ref_dsoftplus(double v) { return v <= 20.0 ? 1.0 / (1.0 + exp(-v)) : 1.0; }

void pssm_ref_zero(double *v, int64_t n)
{
    if (v)
        for (int64_t i = 0; i < n; i++)
            v[i] = 0.0;
}
