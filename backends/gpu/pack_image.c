/*
 * pack_image.c - portssm_pack_image, a build-time tool of the GPU modules (module.cmake):
 *
 *   portssm_pack_image <index out> <raw out> <part file>...
 *
 * lays an image's part files end to end in <raw out> (each followed by a NUL byte, so PTX text
 * is a C string, and padded to a 4096-byte boundary, as the driver wants its images aligned)
 * and writes <index out>, the layout the module needs to find the parts again once it has
 * inflated the raw file (which the build compresses with `xz --format=lzma`): image_pack.h.
 */
#include "image_pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const char *path)
{
    fprintf(stderr, "portssm_pack_image: %s %s\n", what, path);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: portssm_pack_image <index out> <raw out> <part file>...\n");
        return 2;
    }
    const int count = argc - 3;
    pssm_pack_index_header head;
    memset(&head, 0, sizeof head);
    memcpy(head.magic, PSSM_PACK_MAGIC, sizeof head.magic);
    head.part_count = (uint32_t)count;
    pssm_pack_index_part *parts = calloc((size_t)count, sizeof *parts);
    FILE *raw = fopen(argv[2], "wb");
    if (parts == NULL || raw == NULL)
        return fail("cannot write", argv[2]);
    static unsigned char buf[1 << 16];
    static const unsigned char zeros[PSSM_PACK_ALIGN];
    uint64_t at = 0;
    for (int i = 0; i < count; i++) {
        const char *path = argv[3 + i];
        FILE *in = fopen(path, "rb");
        if (in == NULL)
            return fail("cannot read", path);
        parts[i].offset = at;
        uint32_t hash = PSSM_PACK_HASH_SEED;
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
            hash = pssm_pack_hash(hash, buf, n);
            if (fwrite(buf, 1, n, raw) != n)
                return fail("cannot write", argv[2]);
            parts[i].size += n;
        }
        if (ferror(in))
            return fail("cannot read", path);
        fclose(in);
        parts[i].hash = hash;
        at += parts[i].size;
        /* the NUL, then zeros up to the next boundary */
        const size_t pad = (size_t)(PSSM_PACK_ALIGN - at % PSSM_PACK_ALIGN);
        if (fwrite(zeros, 1, pad, raw) != pad)
            return fail("cannot write", argv[2]);
        at += pad;
    }
    head.raw_size = at;
    if (fclose(raw) != 0)
        return fail("cannot write", argv[2]);
    FILE *index = fopen(argv[1], "wb");
    if (index == NULL || fwrite(&head, sizeof head, 1, index) != 1 ||
        fwrite(parts, sizeof *parts, (size_t)count, index) != (size_t)count || fclose(index) != 0)
        return fail("cannot write", argv[1]);
    free(parts);
    return 0;
}
