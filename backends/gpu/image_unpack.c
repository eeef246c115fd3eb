/*
 * image_unpack.c - the parts of an embedded image as the driver loads them (device_images.h):
 * the embedded files themselves, or, for a packed image, the parts inflated from its .lzma
 * stream (image_pack.h), once per process.  The inflated parts are kept, as the code the driver
 * loads from them is (device_module.c): a second device of the same kind loads them again.
 */
#include "device_images.h"
#include "image_pack.h"
#include "lzma_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pssm_image_part **pssm_unpacked; /* per image: the inflated parts, once made */

static const pssm_image_part *unpack_fail(char *why, size_t n, const pssm_image *img,
                                          const char *what)
{
    snprintf(why, n, "image '%s' of this module cannot be unpacked: %s", img->name, what);
    return NULL;
}

/* The index of `img`, checked against the stream's part count; NULL with *why. */
static const pssm_pack_index_header *index_of(const pssm_image *img, char *why, size_t n)
{
    const size_t bytes = (size_t)(img->pack_index_end - img->pack_index);
    const pssm_pack_index_header *head = (const pssm_pack_index_header *)img->pack_index;
    if (bytes < sizeof *head || memcmp(head->magic, PSSM_PACK_MAGIC, sizeof head->magic) != 0 ||
        head->part_count != (uint32_t)img->part_count ||
        bytes != sizeof *head + (size_t)img->part_count * sizeof(pssm_pack_index_part)) {
        unpack_fail(why, n, img, "its index does not match the module (a damaged build)");
        return NULL;
    }
    return head;
}

const pssm_image_part *pssm_image_parts(int i, char *why, size_t n)
{
    const pssm_image *img = &pssm_images[i];
    if (img->pack_stream == NULL)
        return img->parts;
    if (pssm_unpacked == NULL) {
        pssm_unpacked = (pssm_image_part **)calloc((size_t)pssm_image_count, sizeof *pssm_unpacked);
        if (pssm_unpacked == NULL)
            return unpack_fail(why, n, img, "out of host memory");
    }
    if (pssm_unpacked[i] != NULL)
        return pssm_unpacked[i];

    const pssm_pack_index_header *head = index_of(img, why, n);
    if (head == NULL)
        return NULL;
    const pssm_pack_index_part *entry = (const pssm_pack_index_part *)(head + 1);
    if (head->raw_size > SIZE_MAX / 2)
        return unpack_fail(why, n, img, "its index does not match the module (a damaged build)");
    void *raw = NULL;
    pssm_image_part *parts = (pssm_image_part *)calloc((size_t)img->part_count, sizeof *parts);
    if (parts == NULL || posix_memalign(&raw, PSSM_PACK_ALIGN, (size_t)head->raw_size + 1) != 0) {
        free(parts);
        return unpack_fail(why, n, img, "out of host memory");
    }
    const char *lzma_why = NULL;
    if (pssm_lzma_decode(img->pack_stream, (size_t)(img->pack_stream_end - img->pack_stream),
                         (unsigned char *)raw, (size_t)head->raw_size, &lzma_why) != 0) {
        free(parts);
        free(raw);
        return unpack_fail(why, n, img, lzma_why);
    }
    const unsigned char *bytes = (const unsigned char *)raw;
    for (int k = 0; k < img->part_count; k++) {
        const pssm_pack_index_part *e = &entry[k];
        /* within the stream, NUL-terminated, and the bytes the build wrote */
        if (e->offset > head->raw_size || e->size >= head->raw_size - e->offset ||
            bytes[e->offset + e->size] != 0 ||
            pssm_pack_hash(PSSM_PACK_HASH_SEED, bytes + e->offset, (size_t)e->size) != e->hash) {
            free(parts);
            free(raw);
            char what[160];
            snprintf(what, sizeof what, "part %s inflated to other bytes than the build packed",
                     img->parts[k].name);
            return unpack_fail(why, n, img, what);
        }
        parts[k].name = img->parts[k].name;
        parts[k].begin = bytes + e->offset;
        parts[k].end = bytes + e->offset + e->size;
    }
    pssm_unpacked[i] = parts; /* (raw lives on through parts[0].begin) */
    return parts;
}

void pssm_image_sizes(int i, double *embedded, double *inflated)
{
    const pssm_image *img = &pssm_images[i];
    if (img->pack_stream != NULL) {
        *embedded = (double)(img->pack_stream_end - img->pack_stream) +
                    (double)(img->pack_index_end - img->pack_index);
        char unused[192];
        const pssm_pack_index_header *head = index_of(img, unused, sizeof unused);
        *inflated = head != NULL ? (double)head->raw_size : 0;
        return;
    }
    double sum = 0;
    for (int k = 0; k < img->part_count; k++)
        sum += (double)(img->parts[k].end - img->parts[k].begin);
    *embedded = *inflated = sum;
}
