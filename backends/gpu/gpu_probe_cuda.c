/* gpu_probe_cuda.c - run at configure time (detect_gpus.cmake) for PORTSSM_CUDA_ARCHS=auto:
 * prints one line per NVIDIA GPU the driver shows this process, "sm_<major><minor> <name>", or
 * one line "none: <why>" (no driver, cuInit failed, no device).  The driver API is opened with
 * dlopen, as the cuda module does, so the probe builds and runs on any machine; it exits 0
 * whatever it finds. */
#include <dlfcn.h>
#include <stdio.h>

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_attr_fn)(int *, int, int);
typedef int (*cu_name_fn)(char *, int, int);
typedef int (*cu_error_name_fn)(int, const char **);

enum { CC_MAJOR = 75, CC_MINOR = 76 }; /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/_MINOR */

int main(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("none: no NVIDIA driver (%s)\n", dlerror());
        return 0;
    }
    cu_init_fn init = (cu_init_fn)dlsym(h, "cuInit");
    cu_count_fn count = (cu_count_fn)dlsym(h, "cuDeviceGetCount");
    cu_get_fn get = (cu_get_fn)dlsym(h, "cuDeviceGet");
    cu_attr_fn attr = (cu_attr_fn)dlsym(h, "cuDeviceGetAttribute");
    cu_name_fn name = (cu_name_fn)dlsym(h, "cuDeviceGetName");
    cu_error_name_fn error_name = (cu_error_name_fn)dlsym(h, "cuGetErrorName");
    if (!init || !count || !get || !attr || !name) {
        printf("none: libcuda.so.1 lacks the driver API's device queries\n");
        return 0;
    }
    int rc = init(0);
    if (rc != 0) {
        const char *what = NULL;
        if (error_name)
            error_name(rc, &what);
        printf("none: cuInit failed with %s (%d)\n", what ? what : "an error", rc);
        return 0;
    }
    int n = 0;
    if (count(&n) != 0 || n <= 0) {
        printf("none: the NVIDIA driver shows no device\n");
        return 0;
    }
    for (int i = 0; i < n; i++) {
        int dev = 0, major = 0, minor = 0;
        char text[256] = "";
        if (get(&dev, i) != 0 || attr(&major, CC_MAJOR, dev) != 0 ||
            attr(&minor, CC_MINOR, dev) != 0) {
            printf("none: cannot query device %d's compute capability\n", i);
            return 0;
        }
        if (name(text, (int)sizeof text, dev) != 0)
            text[0] = '\0';
        printf("sm_%d%d %s\n", major, minor, text);
    }
    return 0;
}
