/*
 * image_pack.h - the layout of a packed device-code image, shared by the build-time tool that
 * makes it (pack_image.c) and the module that unpacks it (device_module.c).
 *
 * A packed image is two embedded files:
 *  - the index: a header, then one entry per kernel part, in the image's part order;
 *  - the parts laid end to end (each followed by a NUL byte and zeros up to a PSSM_PACK_ALIGN
 *    boundary), as one .lzma stream (lzma_decode.h).
 * The module inflates the stream into one aligned buffer; each part is then where its entry
 * says, and its hash checks that it came out as the build wrote it.
 * Both files are made and read on the same machine's byte order (the build host's is the
 * module's).
 */
#ifndef PSSM_IMAGE_PACK_H
#define PSSM_IMAGE_PACK_H

#include <stddef.h>
#include <stdint.h>

#define PSSM_PACK_MAGIC "PSSMPK1"
#define PSSM_PACK_ALIGN 4096
#define PSSM_PACK_HASH_SEED 2166136261u

typedef struct pssm_pack_index_header {
    char magic[8];       /* PSSM_PACK_MAGIC and its NUL */
    uint32_t part_count;
    uint32_t reserved;
    uint64_t raw_size;   /* bytes of the inflated stream */
} pssm_pack_index_header;

typedef struct pssm_pack_index_part {
    uint64_t offset; /* in the inflated stream, a multiple of PSSM_PACK_ALIGN */
    uint64_t size;   /* the part file's bytes (the NUL after them not counted) */
    uint32_t hash;   /* pssm_pack_hash of those bytes from PSSM_PACK_HASH_SEED */
    uint32_t reserved;
} pssm_pack_index_part;

/* FNV-1a, 32 bits: catches a stream that inflated to the wrong bytes (not an adversary). */
static inline uint32_t pssm_pack_hash(uint32_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

#endif /* PSSM_IMAGE_PACK_H */
