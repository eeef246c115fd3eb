/*
 * lzma_decode.h - a decoder for the .lzma ("LZMA alone") format that `xz --format=lzma` writes,
 * so that the GPU modules can carry their device code compressed (backends/gpu/module.cmake
 * packs an image's parts into one stream; the module inflates the image it loads).
 *
 * Self-contained (no liblzma at run time) and written for untrusted input: every read and
 * write is bounds-checked, a damaged stream gives an error, never a fault.
 */
#ifndef PSSM_LZMA_DECODE_H
#define PSSM_LZMA_DECODE_H

#include <stddef.h>

/* Decodes the stream in[0..in_size) into out[0..out_size), which must be exactly the stream's
 * decoded size (its header's size, or, when the header says "unknown", the bytes before its
 * end marker).  Returns 0, or -1 with *why (a static string) saying what was wrong. */
int pssm_lzma_decode(const unsigned char *in, size_t in_size, unsigned char *out,
                     size_t out_size, const char **why);

#endif /* PSSM_LZMA_DECODE_H */
