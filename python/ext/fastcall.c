/*
 * portssm._fastcall: the host path of one portssm op call, in C.  It does what
 * portssm/torch/_runtime.py's run_python() does (that function is the reference, and
 * python/tests/test_fastcall.py checks that both pack the same bytes, raise the same errors and
 * give the same results), for the decode ops, whose whole cost is this path: read each tensor's
 * device, dtype, shape, data_ptr() and stride() through the Python C API, check them, pack them
 * into the op's args struct on the stack, and call the op.
 *
 * What it links: nothing.  It is built against CPython's limited API (abi3, 3.9), so one file
 * serves every CPython >= 3.9; it knows torch only as Python objects (the dtype objects come
 * from the caller), and libportssm only through the address of the op's function, which
 * Python takes from ctypes.  Of portssm.h it uses the portssm_tensor layout, which Python
 * compares with the library's own (TENSOR_LAYOUT) before using this module.
 *
 *   plan(fn, size, names, offsets, like, f32, int_offsets, dtypes, codes, on_error) -> plan
 *       fn: the op's address (portssm_status (*)(portssm_context *, const void *args));
 *       size: sizeof the args struct; names/offsets: each portssm_tensor field, in the order
 *       the tensors are checked; like: per field, -1, or the index of an earlier field whose
 *       tensor this one was made like (torch.empty_like: same device and dtype, so neither is
 *       read again); f32: per field, 1 where a float16/bfloat16 tensor is used as t.float()
 *       (any other dtype but float32 is refused there);
 *       int_offsets: the int32 fields; dtypes/codes: the dtype objects taken and their
 *       portssm_dtype (code 0, PORTSSM_F32, is float32); on_error(status, ctx): called when
 *       the op fails, raises the library's error.
 *   call(plan, ctx, where, ref, tensors, ints) -> None
 *       ctx: the portssm_context pointer as an int; where: the device every tensor must be
 *       on, as the cheapest test that tells it: -2 cpu (t.is_cpu), -1 the only CUDA device
 *       there is (t.is_cuda), n >= 0 CUDA device n (t.is_cuda and t.get_device() == n); ref:
 *       the tensor whose device is the call's (not tested again; the messages name it);
 *       tensors: one per field, None where absent (left zero); ints: one per int field.  A
 *       refused tensor raises with the argument named, before the op is called: nothing is
 *       written.  The exception of a wrong dtype and of any other bad tensor (device, rank)
 *       are the classes set_errors gave (portssm.errors.DtypeError, InvalidArgumentError;
 *       TypeError and ValueError until then); a non-tensor raises TypeError.
 *   set_errors(argument_error, dtype_error) -> None
 *   pack(plan, address, where, ref, tensors, ints) -> tuple
 *       call's checks and packing alone, into the zeroed args struct at `address` (an int: a
 *       ctypes buffer of at least the plan's size, which Python then completes and calls
 *       with, for the SSD ops' workspace and float fields); returns the tensors converted,
 *       for the caller to keep alive until the op has returned.  Nothing is written when it
 *       raises.
 */
#define Py_LIMITED_API 0x03090000
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "portssm.h"

#define ARGS_MAX 4096 /* bytes: the largest args struct (selective_scan_bwd) is under 2 KB */
#define MAX_FIELDS ((Py_ssize_t)(ARGS_MAX / sizeof(portssm_tensor)))
#define DTYPES_MAX 8

typedef portssm_status (*op_fn)(portssm_context *, const void *);

typedef struct {
    op_fn fn;
    Py_ssize_t size, ntensors, nints, ndtypes;
    Py_ssize_t *offsets;     /* ntensors, then nints */
    Py_ssize_t *like;        /* ntensors: -1 or an earlier field */
    char *f32;               /* ntensors: 1 where another dtype is converted with .float() */
    PyObject *names;         /* tuple of str, for the messages */
    PyObject *on_error;
    PyObject *dtypes[DTYPES_MAX];
    int codes[DTYPES_MAX];
} plan_t;

static const char PLAN_NAME[] = "portssm._fastcall.plan";

/* ---------------------------------------------------------------- tensor accessors
 *
 * The attributes read per tensor, by index.  PyObject_GetAttr and PyObject_CallMethod look
 * each one up in the type's MRO on every access; that lookup is a tenth of this module's time.
 * So, per tensor type, the descriptors are looked up once (the way type.__getattribute__
 * would: the first class of the MRO whose __dict__ has the name) and then called directly: a
 * data descriptor's tp_descr_get (the getters: is_cpu, is_cuda, dtype, shape), a method
 * descriptor's tp_call (data_ptr, stride, get_device).  This is what CPython's own attribute
 * cache does, without its invalidation: a tensor type whose attributes of these names are
 * reassigned after its first call here, or a tensor instance with its own attribute named
 * like one of the methods, is not seen (torch itself does neither).  Types whose descriptors
 * are not of that kind, and CPython 3.9, where PyType_GetSlot does not take static types,
 * take the plain lookups.
 */
enum { A_IS_CPU, A_IS_CUDA, A_DTYPE, A_SHAPE, N_GETTERS, A_DATA_PTR = N_GETTERS, A_STRIDE,
       A_GET_DEVICE, A_FLOAT, N_ACCESSORS };
static const char *const ACCESSOR_NAMES[N_ACCESSORS] = {
    "is_cpu", "is_cuda", "dtype", "shape", "data_ptr", "stride", "get_device", "float"};
static PyObject *s_names[N_ACCESSORS], *s_device; /* interned */

typedef struct {
    PyTypeObject *type;         /* a strong reference; NULL: a free entry */
    int plain;                  /* 1: this type takes the plain lookups */
    PyObject *descr[N_ACCESSORS];
    descrgetfunc get[N_GETTERS];
    ternaryfunc call[N_ACCESSORS];
} accessors_t;

/* torch.Tensor, nn.Parameter and a few more.  Entries are never replaced (so a pointer to one
 * stays valid across any call made while it is used); once all are taken, other types take
 * the plain lookups. */
#define TYPES_CACHED 8
static accessors_t accessor_cache[TYPES_CACHED];

/* The attribute `name` of the first class of tp's MRO that has it in its __dict__ (a new
 * reference), or NULL without an exception when none has. */
static PyObject *mro_lookup(PyTypeObject *tp, PyObject *name)
{
    PyObject *mro = PyObject_GetAttrString((PyObject *)tp, "__mro__");
    if (!mro)
        return NULL;
    PyObject *found = NULL;
    Py_ssize_t n = PyTuple_Check(mro) ? PyTuple_Size(mro) : 0;
    for (Py_ssize_t i = 0; i < n && !found && !PyErr_Occurred(); i++) {
        PyObject *dict = PyObject_GetAttrString(PyTuple_GetItem(mro, i), "__dict__");
        if (!dict)
            break;
        found = PyObject_GetItem(dict, name);
        if (!found && PyErr_ExceptionMatches(PyExc_KeyError))
            PyErr_Clear();
        Py_DECREF(dict);
    }
    Py_DECREF(mro);
    return found;
}

/* Fills a->descr/get/call for a->type; on any accessor not of the kind described above,
 * releases what it took and sets a->plain (no exception left set either way: the plain
 * lookups then decide what happens). */
static void accessors_resolve(accessors_t *a)
{
    for (int k = 0; k < N_ACCESSORS; k++) {
        PyObject *d = mro_lookup(a->type, s_names[k]);
        if (!d)
            goto plain;
        a->descr[k] = d;
        PyTypeObject *dt = Py_TYPE(d);
        /* PyType_GetSlot raises SystemError for a static type before 3.10 */
        void *getter = PyType_GetSlot(dt, Py_tp_descr_get);
        void *setter = getter ? PyType_GetSlot(dt, Py_tp_descr_set) : NULL;
        if (PyErr_Occurred())
            goto plain;
        if (k < N_GETTERS) {
            if (!getter || !setter) /* not a data descriptor: an instance attribute would win */
                goto plain;
            a->get[k] = (descrgetfunc)getter;
        } else {
            void *caller = PyType_GetSlot(dt, Py_tp_call);
            if (PyErr_Occurred() || !caller || setter)
                goto plain;
            a->call[k] = (ternaryfunc)caller;
        }
    }
    return;
plain:
    PyErr_Clear();
    for (int k = 0; k < N_ACCESSORS; k++)
        Py_CLEAR(a->descr[k]);
    a->plain = 1;
}

/* The accessors of t's type, or NULL for the plain lookups. */
static const accessors_t *accessors_of(PyObject *t)
{
    PyTypeObject *tp = Py_TYPE(t);
    for (int i = 0; i < TYPES_CACHED; i++) {
        accessors_t *a = &accessor_cache[i];
        if (a->type == tp)
            return a->plain ? NULL : a;
        if (!a->type) {
            /* resolved aside, then published whole */
            accessors_t fresh;
            memset(&fresh, 0, sizeof fresh);
            fresh.type = tp;
            accessors_resolve(&fresh);
            if (a->type) /* taken meanwhile (resolving ran no Python code: cannot happen) */
                return NULL;
            Py_INCREF((PyObject *)tp);
            *a = fresh;
            return a->plain ? NULL : a;
        }
    }
    return NULL;
}

/* t.<getter k> (a new reference). */
static PyObject *get(const accessors_t *a, int k, PyObject *t)
{
    if (a)
        return a->get[k](a->descr[k], t, (PyObject *)a->type);
    return PyObject_GetAttr(t, s_names[k]);
}

/* t.<method k>(); *self is (t,), made on first use and released by the caller. */
static PyObject *call_method(const accessors_t *a, int k, PyObject *t, PyObject **self)
{
    if (a) {
        if (!*self && !(*self = PyTuple_Pack(1, t)))
            return NULL;
        return a->call[k](a->descr[k], *self, NULL);
    }
    return PyObject_CallMethodObjArgs(t, s_names[k], NULL);
}

/* ---------------------------------------------------------------- plans */

static void plan_free(PyObject *capsule)
{
    plan_t *p = (plan_t *)PyCapsule_GetPointer(capsule, PLAN_NAME);
    if (!p)
        return;
    Py_XDECREF(p->names);
    Py_XDECREF(p->on_error);
    for (Py_ssize_t i = 0; i < p->ndtypes; i++)
        Py_XDECREF(p->dtypes[i]);
    PyMem_Free(p->offsets);
    PyMem_Free(p->like);
    PyMem_Free(p->f32);
    PyMem_Free(p);
}

/* PyMem_Malloc'd zeroed bytes (PyMem_Calloc is in the limited API from 3.10 only). */
static void *zalloc(size_t bytes)
{
    void *p = PyMem_Malloc(bytes ? bytes : 1);
    if (p)
        memset(p, 0, bytes ? bytes : 1);
    return p;
}

/* One Python int of a tuple as a Py_ssize_t in [lo, hi]; -1 with an exception otherwise. */
static int tuple_index(PyObject *tuple, Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi,
                       Py_ssize_t *out)
{
    PyObject *o = PyTuple_GetItem(tuple, i);
    if (!o)
        return -1;
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "plan: %zd is outside [%zd, %zd]", v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static PyObject *make_plan(PyObject *self, PyObject *args)
{
    PyObject *fn_obj, *names, *offsets, *like, *f32, *int_offsets, *dtypes, *codes, *on_error;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "OnO!O!O!O!O!O!O!O:plan", &fn_obj, &size, &PyTuple_Type,
                          &names, &PyTuple_Type, &offsets, &PyTuple_Type, &like, &PyTuple_Type,
                          &f32, &PyTuple_Type, &int_offsets, &PyTuple_Type, &dtypes,
                          &PyTuple_Type, &codes, &on_error))
        return NULL;
    void *fn = PyLong_AsVoidPtr(fn_obj);
    if (!fn) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "plan: the op's address is NULL");
        return NULL;
    }
    Py_ssize_t nt = PyTuple_Size(names), ni = PyTuple_Size(int_offsets);
    Py_ssize_t nd = PyTuple_Size(dtypes);
    if (size <= 0 || size > ARGS_MAX || nt > MAX_FIELDS || PyTuple_Size(offsets) != nt ||
        PyTuple_Size(like) != nt || PyTuple_Size(f32) != nt || nd > DTYPES_MAX ||
        PyTuple_Size(codes) != nd || !PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_ValueError, "plan: inconsistent arguments");
        return NULL;
    }
    plan_t *p = (plan_t *)zalloc(sizeof *p);
    if (!p)
        return PyErr_NoMemory();
    /* the capsule owns p from here on: plan_free undoes whatever was filled in */
    PyObject *capsule = PyCapsule_New(p, PLAN_NAME, plan_free);
    if (!capsule) {
        PyMem_Free(p);
        return NULL;
    }
    p->fn = (op_fn)fn;
    p->size = size;
    p->ntensors = nt;
    p->nints = ni;
    Py_INCREF(names);
    p->names = names;
    Py_INCREF(on_error);
    p->on_error = on_error;
    p->offsets = (Py_ssize_t *)zalloc((size_t)(nt + ni) * sizeof(Py_ssize_t));
    p->like = (Py_ssize_t *)zalloc((size_t)nt * sizeof(Py_ssize_t));
    p->f32 = (char *)zalloc((size_t)nt);
    if (!p->offsets || !p->like || !p->f32) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < nt; i++) {
        Py_ssize_t v;
        if (!PyUnicode_Check(PyTuple_GetItem(names, i))) {
            PyErr_SetString(PyExc_TypeError, "plan: names are str");
            goto fail;
        }
        /* a whole portssm_tensor inside the struct, 8-byte aligned */
        if (tuple_index(offsets, i, 0, size - (Py_ssize_t)sizeof(portssm_tensor),
                        &p->offsets[i]) < 0)
            goto fail;
        if (p->offsets[i] % 8) {
            PyErr_SetString(PyExc_ValueError, "plan: a tensor offset is not 8-byte aligned");
            goto fail;
        }
        if (tuple_index(like, i, -1, i - 1, &p->like[i]) < 0 ||
            tuple_index(f32, i, 0, 1, &v) < 0)
            goto fail;
        p->f32[i] = (char)v;
    }
    for (Py_ssize_t i = 0; i < ni; i++) {
        if (tuple_index(int_offsets, i, 0, size - 4, &p->offsets[nt + i]) < 0)
            goto fail;
        if (p->offsets[nt + i] % 4) {
            PyErr_SetString(PyExc_ValueError, "plan: an int offset is not 4-byte aligned");
            goto fail;
        }
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        Py_ssize_t code;
        if (tuple_index(codes, i, 0, INT32_MAX, &code) < 0)
            goto fail;
        p->dtypes[i] = PyTuple_GetItem(dtypes, i);
        Py_INCREF(p->dtypes[i]);
        p->codes[i] = (int)code;
        p->ndtypes = i + 1;
    }
    return capsule;
fail:
    Py_DECREF(capsule);
    return NULL;
}

/* ---------------------------------------------------------------- one call */

/* obj (a torch.Size, a tuple from stride(), or another sequence) as at most PORTSSM_MAX_DIMS
 * int64 values; *n is its length whatever it is (values are read only when it fits). */
static int int64s(PyObject *obj, int64_t *out, Py_ssize_t *n)
{
    PyObject *tuple = PyTuple_Check(obj) ? (Py_INCREF(obj), obj) : PySequence_Tuple(obj);
    if (!tuple)
        return -1;
    *n = PyTuple_Size(tuple);
    for (Py_ssize_t i = 0; i < *n && i < PORTSSM_MAX_DIMS; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GetItem(tuple, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(tuple);
            return -1;
        }
        out[i] = (int64_t)v;
    }
    Py_DECREF(tuple);
    return 0;
}

/* The exception classes of a bad tensor (set_errors): a wrong dtype, any other bad argument.
 * NULL until set: TypeError and ValueError then. */
static PyObject *dtype_error, *argument_error;

#define DTYPE_ERROR (dtype_error ? dtype_error : PyExc_TypeError)
#define ARGUMENT_ERROR (argument_error ? argument_error : PyExc_ValueError)

static PyObject *set_errors(PyObject *self, PyObject *args)
{
    PyObject *argument, *dtype;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO", &argument, &dtype))
        return NULL;
    if (!PyType_Check(argument) || !PyType_Check(dtype) ||
        !PyObject_IsSubclass(argument, PyExc_Exception) ||
        !PyObject_IsSubclass(dtype, PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "set_errors: two exception classes");
        return NULL;
    }
    PyObject *old_argument = argument_error, *old_dtype = dtype_error;
    Py_INCREF(argument);
    Py_INCREF(dtype);
    argument_error = argument;
    dtype_error = dtype;
    Py_XDECREF(old_argument);
    Py_XDECREF(old_dtype);
    Py_RETURN_NONE;
}

/* The message of a tensor on another device than the call's (ref's). */
static void wrong_device(PyObject *name, PyObject *t, PyObject *ref)
{
    PyObject *dev = PyObject_GetAttr(t, s_device);
    PyObject *call_dev = dev ? PyObject_GetAttr(ref, s_device) : NULL;
    if (call_dev)
        PyErr_Format(ARGUMENT_ERROR,
                     "'%U' is on %S, but the other tensors of the call are on %S", name, dev,
                     call_dev);
    Py_XDECREF(dev);
    Py_XDECREF(call_dev);
}

/* 1 when t is on the device `where` names (see call), 0 when not, -1 on an error (a TypeError
 * naming the argument when t is no tensor at all). */
static int on_device(const accessors_t *a, PyObject *name, PyObject *t, long where,
                     PyObject **self)
{
    PyObject *flag = get(a, where == -2 ? A_IS_CPU : A_IS_CUDA, t);
    if (!flag) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyObject *type_name = PyObject_GetAttrString((PyObject *)Py_TYPE(t), "__name__");
            if (type_name)
                PyErr_Format(PyExc_TypeError, "'%U' must be a tensor, got %S", name, type_name);
            Py_XDECREF(type_name);
        }
        return -1;
    }
    int yes = PyObject_IsTrue(flag);
    Py_DECREF(flag);
    if (yes != 1 || where < 0)
        return yes;
    PyObject *index = call_method(a, A_GET_DEVICE, t, self);
    if (!index)
        return -1;
    long n = PyLong_AsLong(index);
    Py_DECREF(index);
    if (n == -1 && PyErr_Occurred())
        return -1;
    return n == where;
}

/* ---------------------------------------------------------------- DLPack's C exchange API
 *
 * torch >= 2.10 puts a table of C functions on its tensor type (torch.Tensor.
 * __dlpack_c_exchange_api__, a capsule "dlpack_exchange_api"; see DLPack 1.2's dlpack.h), one of
 * which fills a DLTensor (data, device, dtype, shape, strides) of a tensor without a Python call
 * or an allocation: the five getters of the path below in one C call.  Python hands the table
 * over (set_exchange_api) with the exact types it is used for (torch.Tensor, nn.Parameter: not
 * a subclass, whose __torch_function__ the getters must see).  A tensor it cannot describe, or
 * one that this path would refuse (another device, dtype or rank, a field converted to
 * float32), takes the getter path, which then decides and words the error: the two paths agree
 * by construction.  The structs below are DLPack's (a stable C ABI, major version 1). */
typedef struct { int32_t device_type, device_id; } dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape, *strides;
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_header { uint32_t major, minor; struct dl_header *prev_api; } dl_header;
typedef struct {
    dl_header header;
    void *managed_tensor_allocator, *managed_tensor_from_py_object_no_sync,
        *managed_tensor_to_py_object_no_sync;
    int (*dltensor_from_py_object_no_sync)(void *py_object, dl_tensor *out);
    void *current_work_stream;
} dl_exchange_api;
enum { kDLCPU = 1, kDLCUDA = 2, kDLROCM = 10, kDLInt = 0, kDLFloat = 2, kDLBfloat = 4 };
#define DL_TYPES_MAX 4

static const dl_exchange_api *dl_api;
static PyObject *dl_capsule;
static PyTypeObject *dl_types[DL_TYPES_MAX];
static int dl_ntypes;
static unsigned long long dl_packed, getter_packed; /* tensors packed by each path (tests) */

static PyObject *set_exchange_api(PyObject *module, PyObject *args)
{
    PyObject *capsule, *types;
    if (!PyArg_ParseTuple(args, "OO!:set_exchange_api", &capsule, &PyTuple_Type, &types))
        return NULL;
    const dl_exchange_api *api = NULL;
    Py_ssize_t n = PyTuple_Size(types);
    if (capsule != Py_None) {
        api = (const dl_exchange_api *)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
        if (!api)
            return NULL;
        if (n > DL_TYPES_MAX) {
            PyErr_SetString(PyExc_ValueError, "set_exchange_api: too many types");
            return NULL;
        }
        for (Py_ssize_t k = 0; k < n; k++)
            if (!PyType_Check(PyTuple_GetItem(types, k))) {
                PyErr_SetString(PyExc_TypeError, "set_exchange_api: types are types");
                return NULL;
            }
        if (api->header.major != 1 || !api->dltensor_from_py_object_no_sync)
            api = NULL; /* another major version, or no DLTensor export: the getter path */
    }
    for (int k = 0; k < dl_ntypes; k++)
        Py_CLEAR(dl_types[k]);
    dl_ntypes = 0;
    Py_CLEAR(dl_capsule);
    dl_api = api;
    if (api) {
        Py_INCREF(capsule);
        dl_capsule = capsule;
        for (Py_ssize_t k = 0; k < n; k++) {
            PyObject *tp = PyTuple_GetItem(types, k);
            Py_INCREF(tp);
            dl_types[dl_ntypes++] = (PyTypeObject *)tp;
        }
    }
    return PyBool_FromLong(api != NULL);
}

static PyObject *stats(PyObject *module, PyObject *unused)
{
    return Py_BuildValue("(KK)", dl_packed, getter_packed);
}

static int dl_code(dl_dtype t)
{
    if (t.lanes != 1)
        return -1;
    if (t.code == kDLFloat && t.bits == 32)
        return PORTSSM_F32;
    if (t.code == kDLFloat && t.bits == 16)
        return PORTSSM_F16;
    if (t.code == kDLBfloat && t.bits == 16)
        return PORTSSM_BF16;
    if (t.code == kDLInt && t.bits == 32)
        return PORTSSM_I32;
    return -1;
}

/* Tensor i packed from its DLTensor: 1 when done, 0 when the getter path must take it (no
 * exception set). */
static int pack_dlpack(const plan_t *p, Py_ssize_t i, PyObject *t, long where, PyObject *ref,
                       int *codes, portssm_tensor *dst)
{
    PyTypeObject *tp = Py_TYPE(t);
    int k = 0;
    while (k < dl_ntypes && dl_types[k] != tp)
        k++;
    if (k == dl_ntypes)
        return 0;
    dl_tensor dl;
    if (dl_api->dltensor_from_py_object_no_sync(t, &dl) != 0) {
        PyErr_Clear();
        return 0;
    }
    int code;
    if (p->like[i] >= 0) {
        code = codes[p->like[i]];
    } else {
        if (t != ref) {
            int type = dl.device.device_type;
            int same = where == -2 ? type == kDLCPU
                                   : (type == kDLCUDA || type == kDLROCM) &&
                                         (where < 0 || dl.device.device_id == where);
            if (!same)
                return 0;
        }
        code = dl_code(dl.dtype);
        if (code < 0 || (p->f32[i] && code != PORTSSM_F32))
            return 0;
    }
    if (dl.ndim < 1 || dl.ndim > PORTSSM_MAX_DIMS || !dl.shape || !dl.strides)
        return 0;
    memset(dst, 0, sizeof *dst);
    for (int d = 0; d < dl.ndim; d++) {
        dst->shape[d] = dl.shape[d];
        dst->stride[d] = dl.strides[d];
    }
    dst->data = (char *)dl.data + dl.byte_offset;
    dst->dtype = (portssm_dtype)code;
    dst->ndim = dl.ndim;
    codes[i] = code;
    dl_packed++;
    return 1;
}

/* Tensor i of the plan into its portssm_tensor, with run_python's checks in its order: the
 * device (not for ref), the dtype (converting an f32 field), the number of dimensions; then
 * data_ptr(), shape and stride().  codes[] holds the dtype code of every field packed so far
 * (for the fields made like another); *keep receives a tensor made here (t.float()), which
 * must live until the op has been called. */
static int pack_tensor(const plan_t *p, Py_ssize_t i, PyObject *t, long where, PyObject *ref,
                       int *codes, unsigned char *buf, PyObject **keep)
{
    PyObject *name = PyTuple_GetItem(p->names, i);
    portssm_tensor *dst = (portssm_tensor *)(void *)(buf + p->offsets[i]);
    if (dl_api && pack_dlpack(p, i, t, where, ref, codes, dst))
        return 0;
    getter_packed++;
    const accessors_t *a = accessors_of(t);
    PyObject *self = NULL; /* (t,) for the method calls */
    int code = -1;
    if (p->like[i] >= 0) {
        code = codes[p->like[i]];
    } else {
        if (t != ref) {
            int same = on_device(a, name, t, where, &self);
            if (same == 0)
                wrong_device(name, t, ref);
            if (same != 1)
                goto fail;
        }
        PyObject *dtype = get(a, A_DTYPE, t);
        if (!dtype)
            goto fail;
        for (Py_ssize_t k = 0; k < p->ndtypes; k++) {
            if (dtype == p->dtypes[k]) {
                code = p->codes[k];
                break;
            }
        }
        if (p->f32[i] && (code == PORTSSM_F16 || code == PORTSSM_BF16)) {
            Py_DECREF(dtype);
            /* used in float32: t.float() (exact), a tensor of t's device */
            PyObject *converted = call_method(a, A_FLOAT, t, &self);
            Py_CLEAR(self);
            if (!converted)
                return -1;
            *keep = t = converted;
            a = accessors_of(t);
            code = PORTSSM_F32;
        } else {
            int refused = code < 0 || (p->f32[i] && code != PORTSSM_F32);
            if (refused && p->f32[i])
                PyErr_Format(DTYPE_ERROR,
                             "'%U' has dtype %S; it takes float32, float16 or bfloat16 (used "
                             "in float32)", name, dtype);
            else if (refused)
                PyErr_Format(DTYPE_ERROR,
                             "'%U' has dtype %S; portssm takes float32, float16, bfloat16 "
                             "(and int32 for index tensors)", name, dtype);
            Py_DECREF(dtype);
            if (refused)
                goto fail;
        }
    }
    codes[i] = code;

    PyObject *shape = get(a, A_SHAPE, t);
    if (!shape)
        goto fail;
    Py_ssize_t n;
    int rc = int64s(shape, dst->shape, &n);
    Py_DECREF(shape);
    if (rc < 0)
        goto fail;
    if (n < 1 || n > PORTSSM_MAX_DIMS) {
        PyErr_Format(ARGUMENT_ERROR, "'%U' has %d dimensions; portssm tensors have 1 to 4",
                     name, (int)n);
        goto fail;
    }

    PyObject *ptr = call_method(a, A_DATA_PTR, t, &self);
    if (!ptr)
        goto fail;
    void *data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (!data && PyErr_Occurred())
        goto fail;

    PyObject *stride = call_method(a, A_STRIDE, t, &self);
    if (!stride)
        goto fail;
    Py_ssize_t ns;
    rc = int64s(stride, dst->stride, &ns);
    Py_DECREF(stride);
    if (rc < 0)
        goto fail;
    if (ns != n) {
        PyErr_Format(ARGUMENT_ERROR, "'%U' has %d dimensions but %d strides", name, (int)n,
                     (int)ns);
        goto fail;
    }
    Py_XDECREF(self);
    dst->data = data;
    dst->dtype = (portssm_dtype)code;
    dst->ndim = (int32_t)n;
    return 0;
fail:
    Py_XDECREF(self);
    return -1;
}

/* The tensors and ints of one call into `bytes` (the args struct, its absent fields already
 * zero): 0, or -1 with the exception set.  keep[0..*kept) get the tensors converted here
 * (alive until the op has returned; the caller releases them). */
static int pack_fields(const plan_t *p, long where, PyObject *ref, PyObject *tensors,
                       PyObject *ints, unsigned char *bytes, PyObject **keep, Py_ssize_t *kept)
{
    int codes[MAX_FIELDS];
    *kept = 0;
    for (Py_ssize_t i = 0; i < p->ntensors; i++) {
        PyObject *t = PyTuple_GetItem(tensors, i);
        codes[i] = -1;
        keep[i] = NULL;
        *kept = i + 1;
        if (t != Py_None && pack_tensor(p, i, t, where, ref, codes, bytes, &keep[i]) < 0)
            return -1;
    }
    for (Py_ssize_t k = 0; k < p->nints; k++) {
        long v = PyLong_AsLong(PyTuple_GetItem(ints, k));
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (v < INT32_MIN || v > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "call: an int field is out of int32 range");
            return -1;
        }
        int32_t v32 = (int32_t)v;
        memcpy(bytes + p->offsets[p->ntensors + k], &v32, sizeof v32);
    }
    return 0;
}

/* The arguments both call and pack begin with: (plan, ctx or address, where, ref, tensors,
 * ints); NULL with the exception set. */
static const plan_t *call_args(PyObject *args, const char *usage, void **ptr, long *where,
                               PyObject **ref, PyObject **tensors, PyObject **ints)
{
    if (PyTuple_Size(args) != 6) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    const plan_t *p = (const plan_t *)PyCapsule_GetPointer(PyTuple_GetItem(args, 0), PLAN_NAME);
    if (!p)
        return NULL;
    *ptr = PyLong_AsVoidPtr(PyTuple_GetItem(args, 1));
    if (!*ptr && PyErr_Occurred())
        return NULL;
    *where = PyLong_AsLong(PyTuple_GetItem(args, 2));
    if (*where == -1 && PyErr_Occurred())
        return NULL;
    if (*where < -2) {
        PyErr_SetString(PyExc_ValueError, "call: where is -2, -1 or a device index");
        return NULL;
    }
    *ref = PyTuple_GetItem(args, 3);
    *tensors = PyTuple_GetItem(args, 4), *ints = PyTuple_GetItem(args, 5);
    if (!PyTuple_Check(*tensors) || PyTuple_Size(*tensors) != p->ntensors ||
        !PyTuple_Check(*ints) || PyTuple_Size(*ints) != p->nints) {
        PyErr_Format(PyExc_TypeError, "call: %zd tensors and %zd ints in tuples", p->ntensors,
                     p->nints);
        return NULL;
    }
    return p;
}

static PyObject *call(PyObject *module, PyObject *args)
{
    void *ctx_ptr;
    long where;
    PyObject *ref, *tensors, *ints;
    const plan_t *p = call_args(args, "call(plan, ctx, where, ref, tensors, ints)", &ctx_ptr,
                                &where, &ref, &tensors, &ints);
    if (!p)
        return NULL;
    portssm_context *ctx = (portssm_context *)ctx_ptr;
    union {
        int64_t align;
        unsigned char bytes[ARGS_MAX];
    } buf;
    PyObject *keep[MAX_FIELDS]; /* tensors converted here, alive until the op returns */
    PyObject *result = NULL;
    Py_ssize_t kept;
    memset(buf.bytes, 0, (size_t)p->size); /* every absent tensor and default flag is zero */
    if (pack_fields(p, where, ref, tensors, ints, buf.bytes, keep, &kept) < 0)
        goto done;

    portssm_status status;
    Py_BEGIN_ALLOW_THREADS /* as ctypes does: a cpu op may run long, other threads go on */
    status = p->fn(ctx, buf.bytes);
    Py_END_ALLOW_THREADS
    if (status == PORTSSM_OK) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        PyObject *ctx_obj = PyTuple_GetItem(args, 1);
        PyObject *code = PyLong_FromLong((long)status);
        PyObject *r = code ? PyObject_CallFunctionObjArgs(p->on_error, code, ctx_obj, NULL)
                           : NULL;
        Py_XDECREF(code);
        Py_XDECREF(r);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "portssm status %d", (int)status);
    }
done:
    while (kept-- > 0)
        Py_XDECREF(keep[kept]);
    return result;
}

/* call's packing alone, for the ops whose Python code does more before the call (a workspace,
 * float fields): into the args struct at `address`, a zeroed buffer of at least the plan's size
 * that the caller owns (a ctypes array); returns the tuple of tensors converted here, which the
 * caller keeps alive until the op has returned.  Nothing is written when it raises. */
static PyObject *pack(PyObject *module, PyObject *args)
{
    void *address;
    long where;
    PyObject *ref, *tensors, *ints;
    const plan_t *p = call_args(args, "pack(plan, address, where, ref, tensors, ints)",
                                &address, &where, &ref, &tensors, &ints);
    if (!p)
        return NULL;
    if (!address) {
        PyErr_SetString(PyExc_ValueError, "pack: a null address");
        return NULL;
    }
    union {
        int64_t align;
        unsigned char bytes[ARGS_MAX];
    } buf;
    PyObject *keep[MAX_FIELDS];
    Py_ssize_t kept;
    memcpy(buf.bytes, address, (size_t)p->size); /* (what is there stays where not packed) */
    PyObject *result = NULL;
    if (pack_fields(p, where, ref, tensors, ints, buf.bytes, keep, &kept) == 0) {
        Py_ssize_t n = 0;
        for (Py_ssize_t i = 0; i < kept; i++)
            n += keep[i] != NULL;
        result = PyTuple_New(n);
        for (Py_ssize_t i = 0, j = 0; result && i < kept; i++)
            if (keep[i]) {
                Py_INCREF(keep[i]);
                PyTuple_SetItem(result, j++, keep[i]);
            }
        if (result)
            memcpy(address, buf.bytes, (size_t)p->size);
    }
    while (kept-- > 0)
        Py_XDECREF(keep[kept]);
    return result;
}

/* ((type, direct), ...): the tensor types seen, and whether their accessors are called directly
 * (for the tests). */
static PyObject *accessor_types(PyObject *module, PyObject *unused)
{
    PyObject *out = PyList_New(0);
    for (int i = 0; out && i < TYPES_CACHED && accessor_cache[i].type; i++) {
        PyObject *item = Py_BuildValue("(OO)", (PyObject *)accessor_cache[i].type,
                                       accessor_cache[i].plain ? Py_False : Py_True);
        if (!item || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(item);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"plan", make_plan, METH_VARARGS,
     "plan(fn, size, names, offsets, like, f32, int_offsets, dtypes, codes, on_error) -> plan"},
    {"call", call, METH_VARARGS, "call(plan, ctx, where, ref, tensors, ints) -> None"},
    {"pack", pack, METH_VARARGS,
     "pack(plan, address, where, ref, tensors, ints) -> the tensors converted (keep them)"},
    {"set_exchange_api", set_exchange_api, METH_VARARGS,
     "set_exchange_api(capsule or None, types) -> bool: tensors of exactly these types are read "
     "through DLPack's C exchange API (None: never); whether it is in use"},
    {"set_errors", set_errors, METH_VARARGS,
     "set_errors(argument_error, dtype_error): the exception classes of a refused tensor"},
    {"stats", stats, METH_NOARGS, "(tensors packed through DLPack's C API, through the getters)"},
    {"accessor_types", accessor_types, METH_NOARGS,
     "[(type, direct)]: the tensor types seen, and whether their accessors are called directly"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastcall",
    "Packs tensors into a portssm args struct and calls the op (see fastcall.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastcall(void)
{
    for (int k = 0; k < N_ACCESSORS; k++)
        if (!s_names[k] && !(s_names[k] = PyUnicode_InternFromString(ACCESSOR_NAMES[k])))
            return NULL;
    if (!s_device && !(s_device = PyUnicode_InternFromString("device")))
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    /* what this file was compiled with, for Python to compare with the library's layout */
    PyObject *layout = Py_BuildValue(
        "(nnnnnni)", (Py_ssize_t)sizeof(portssm_tensor),
        (Py_ssize_t)offsetof(portssm_tensor, data), (Py_ssize_t)offsetof(portssm_tensor, dtype),
        (Py_ssize_t)offsetof(portssm_tensor, ndim), (Py_ssize_t)offsetof(portssm_tensor, shape),
        (Py_ssize_t)offsetof(portssm_tensor, stride), (int)PORTSSM_MAX_DIMS);
    if (!layout || PyModule_AddObject(m, "TENSOR_LAYOUT", layout) < 0 ||
        PyModule_AddIntConstant(m, "ARGS_MAX", ARGS_MAX) < 0) {
        Py_XDECREF(layout);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
