/*
 * device_images.h - the device-code images embedded in a GPU module.
 *
 * The build (backends/gpu/module.cmake) compiles kernels/ for the vendor into one or more images
 * (a CUDA fatbinary, PTX text, a HIP code-object bundle) and generates a C file that embeds each
 * with .incbin and defines this table.  The module tries the images in order and keeps the first
 * that the driver loads for the device: "is there a kernel image for this device" is answered by
 * the driver itself, never by a table of architectures kept by hand.
 */
#ifndef PSSM_DEVICE_IMAGES_H
#define PSSM_DEVICE_IMAGES_H

typedef struct pssm_image {
    const char *name;           /* "main", "legacy", "ptx_sm60": for messages and the env var */
    const char *targets;        /* what it holds, e.g. "sm_75 sm_80 sm_90 + compute_90 PTX" */
    const unsigned char *begin; /* followed by a NUL byte, so PTX text is a C string */
    const unsigned char *end;
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
