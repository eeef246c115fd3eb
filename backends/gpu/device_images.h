/*
 * device_images.h - the device-code images embedded in a GPU module.
 *
 * The build (backends/gpu/module.cmake) compiles kernels/ for the vendor into one or more images
 * (CUDA fatbinaries, PTX text, HIP code-object bundles), each as one file per kernel part, and
 * generates a C file that embeds each file with .incbin (or, packed, each image as one LZMA
 * stream) and defines this table.  The module tries the images in the order their targets
 * suggest for the device (device_module.c) and keeps the first that the driver loads: "is there
 * a kernel image for this device" is answered by the driver itself, never by a table of
 * architectures kept by hand.
 */
#ifndef PSSM_DEVICE_IMAGES_H
#define PSSM_DEVICE_IMAGES_H

#include <stddef.h>

/* One part of an image: the kernels of one part of kernels/kernel_parts.h, loaded as a module of
 * its own (parts compile separately, in parallel). */
typedef struct pssm_image_part {
    const char *name;           /* the kernel part, e.g. "scan_bf16" */
    const unsigned char *begin; /* followed by a NUL byte, so PTX text is a C string */
    const unsigned char *end;
} pssm_image_part;

typedef struct pssm_image {
    const char *name;    /* "main", "legacy", "ptx_sm60": for messages and the env var */
    const char *targets; /* what it holds, e.g. "sm_75 sm_80 sm_90 + compute_90 PTX" */
    const pssm_image_part *parts; /* begin/end NULL in a packed image: see pack_index */
    int part_count;      /* PSSM_PART_COUNT: every part of every image is built */
    /* A packed image (PORTSSM_PACK_IMAGES): its index and its .lzma stream (image_pack.h),
     * inflated when a device first loads the image; all NULL otherwise. */
    const unsigned char *pack_index, *pack_index_end;
    const unsigned char *pack_stream, *pack_stream_end;
} pssm_image;

/* The most images a module has (module.cmake refuses more). */
#define PSSM_MAX_IMAGES 32

extern const pssm_image pssm_images[];
extern const int pssm_image_count;
/* Every target of every image, for "no kernel image for X in this build (built for ...)". */
extern const char pssm_images_built_for[];
/* Targets the default list wanted but this build's compilers could not produce, each with the
 * toolchain that would ("" if none). */
extern const char pssm_images_dropped[];
extern const char pssm_images_dropped_hint[];

/* image_order.c.  How well img's targets suit a device of `arch` ("sm_86", "gfx90a"): lower
 * first; a rank is one of these classes, less the target's number within a class (newest
 * first). */
#define PSSM_IMAGE_RANK_EXACT 0L         /* machine code for arch itself */
#define PSSM_IMAGE_RANK_MAJOR 1000000L   /* machine code of arch's major version, older minor */
#define PSSM_IMAGE_RANK_PTX 2000000L     /* PTX not newer than arch */
#define PSSM_IMAGE_RANK_OTHER 3000000L   /* whatever the driver makes of it */
long pssm_image_rank(const pssm_image *img, const char *arch);
/* The indices of pssm_images in the order to offer them for `arch`: by rank, ties in the
 * module's order; returns how many (every image). */
int pssm_image_order(const char *arch, int order[PSSM_MAX_IMAGES]);

/* image_unpack.c.  The loadable parts of pssm_images[i]: the embedded files, or a packed
 * image's parts inflated (once per process, kept); NULL with the reason in why[0..n).  The
 * caller serialises calls (the module's lock). */
const pssm_image_part *pssm_image_parts(int i, char *why, size_t n);
/* The bytes pssm_images[i] takes in the module, and inflated (the same when not packed). */
void pssm_image_sizes(int i, double *embedded, double *inflated);

#endif /* PSSM_DEVICE_IMAGES_H */
