/*
 * case_shorthand.h - short names the suites' case tables use for dtypes and layouts, so that a
 * table row stays on one line.  Include after harness.h, in a suite's .c only.
 */
#ifndef PSSM_TEST_CASE_SHORTHAND_H
#define PSSM_TEST_CASE_SHORTHAND_H
#define F32 PORTSSM_F32
#define F16 PORTSSM_F16
#define BF16 PORTSSM_BF16
#define CF TH_L_CONTIG
#define CL TH_L_CL
#define PAD TH_L_PAD
#define GAP TH_L_GAP
#define NEGL TH_L_NEGL
#define NEGB TH_L_NEGB
#define PADB TH_L_PADB
#define SHIFT TH_L_SHIFT
#define SHIFTO TH_L_SHIFTO
#define XOUT TH_L_XOUT
#endif
