/*
 * device_images.h - the device-code images embedded in a GPU module.
 *
 * The build (backends/gpu/module.cmake) compiles kernels/ for the vendor into one or more images
 * (CUDA fatbinaries, PTX text, HIP code-object bundles), each as one file per kernel part, and
 * generates a C file that embeds each file with .incbin and defines this table.  The module tries the images in order and keeps the first
 * that the driver loads for the device: "is there a kernel image for this device" is answered by
 * the driver itself, never by a table of architectures kept by hand.
 */
#ifndef PSSM_DEVICE_IMAGES_H
#define PSSM_DEVICE_IMAGES_H

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
    const pssm_image_part *parts;
    int part_count;      /* PSSM_PART_COUNT: every part of every image is built */
} pssm_image;

extern const pssm_image pssm_images[];
extern const int pssm_image_count;
/* Every target of every image, for "no kernel image for X in this build (built for ...)". */
extern const char pssm_images_built_for[];
/* Targets the default list wanted but this build's compilers could not produce, each with the
 * toolchain that would ("" if none). */
extern const char pssm_images_dropped[];
extern const char pssm_images_dropped_hint[];

#endif /* PSSM_DEVICE_IMAGES_H */
