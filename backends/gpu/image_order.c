/*
 * image_order.c - the order in which a module offers its images to the driver for a device
 * (device_images.h).  The driver still decides whether an image's code runs on the device; the
 * order only spares inflating packed images it would refuse, and puts the best code first:
 * machine code for the device itself, then machine code of its major version, then the newest
 * PTX not newer than the device, then the rest in the module's order.  What each image holds is
 * read from the targets the build wrote into its description ("sm_80 sm_86 + compute_80 PTX",
 * "gfx906 gfx908 gfx90a"), never from a table kept by hand.
 */
#include "device_images.h"

#include <string.h>

/* The number XY of "sm_XY" / "compute_XY" (prefix given) in word[0..len), or -1. */
static int arch_number(const char *word, size_t len, const char *prefix)
{
    const size_t p = strlen(prefix);
    if (len <= p || strncmp(word, prefix, p) != 0)
        return -1;
    int v = 0;
    for (size_t i = p; i < len; i++) {
        if (word[i] < '0' || word[i] > '9' || v > 100000)
            return -1;
        v = v * 10 + (word[i] - '0');
    }
    return v;
}

long pssm_image_rank(const pssm_image *img, const char *arch)
{
    const int dev = arch_number(arch, strlen(arch), "sm_");
    long best = PSSM_IMAGE_RANK_OTHER;
    for (const char *w = img->targets; *w;) {
        while (*w == ' ')
            w++;
        const size_t len = strcspn(w, " ");
        if (len == 0)
            break;
        const int sm = arch_number(w, len, "sm_"), ptx = arch_number(w, len, "compute_");
        long rank = PSSM_IMAGE_RANK_OTHER;
        if (len == strlen(arch) && strncmp(w, arch, len) == 0)
            rank = PSSM_IMAGE_RANK_EXACT;
        else if (dev >= 0 && sm >= 0 && sm / 10 == dev / 10 && sm <= dev)
            rank = PSSM_IMAGE_RANK_MAJOR - sm; /* the newest minor first */
        else if (dev >= 0 && ptx >= 0 && ptx <= dev)
            rank = PSSM_IMAGE_RANK_PTX - ptx; /* the newest PTX first */
        if (rank < best)
            best = rank;
        w += len;
    }
    return best;
}

int pssm_image_order(const char *arch, int order[PSSM_MAX_IMAGES])
{
    long rank[PSSM_MAX_IMAGES];
    const int count = pssm_image_count < PSSM_MAX_IMAGES ? pssm_image_count : PSSM_MAX_IMAGES;
    for (int i = 0; i < count; i++) { /* insertion by rank, stable: a module has a few images */
        const long r = pssm_image_rank(&pssm_images[i], arch);
        int at = i;
        for (; at > 0 && rank[at - 1] > r; at--) {
            rank[at] = rank[at - 1];
            order[at] = order[at - 1];
        }
        rank[at] = r;
        order[at] = i;
    }
    return count;
}
