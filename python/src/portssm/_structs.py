"""ctypes declarations of the public structs of portssm.h.  They are checked field by field
against the loaded library's own view (portssm_struct_layout / portssm_struct_field) when the
library is loaded (_library.check_layouts), so a header change that this file does not follow
fails at import with the struct and field named, never as a misplaced pointer."""

from __future__ import annotations

import ctypes

MAX_DIMS = 4

F32, F16, BF16, I32 = 0, 1, 2, 3
DTYPE_NAMES = {F32: "float32", F16: "float16", BF16: "bfloat16", I32: "int32"}
DTYPE_SIZES = {F32: 4, F16: 2, BF16: 2, I32: 4}

ACTIVATION_NONE, ACTIVATION_SILU = 0, 1

NORM_LAYER, NORM_RMS = 0, 1

BACKEND_AUTO, BACKEND_CPU, BACKEND_CUDA, BACKEND_HIP, BACKEND_SIM = 0, 1, 2, 3, 4

OPS = (
    "causal_conv1d_fwd",
    "causal_conv1d_bwd",
    "causal_conv1d_update",
    "selective_scan_fwd",
    "selective_scan_bwd",
    "selective_state_update",
    "ssd_chunk_scan_fwd",
    "ssd_chunk_scan_bwd",
    "norm_fwd",
    "norm_bwd",
)


class Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("stride", ctypes.c_int64 * MAX_DIMS),
    ]


class Workspace(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("bytes", ctypes.c_size_t)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 256),
        ("arch", ctypes.c_char * 64),
        ("warp_size", ctypes.c_int32),
        ("multiprocessors", ctypes.c_int32),
        ("total_memory", ctypes.c_uint64),
    ]


def _args(name, tensors, tail):
    """An args struct in the field order of portssm.h: `tensors` lists portssm_tensor fields by
    name (or a (name, ctype) pair for a scalar between them), `tail` the fields after them."""
    fields = []
    for entry in tensors:
        fields.append((entry, Tensor) if isinstance(entry, str) else entry)
    fields.extend(tail)
    return type(name, (ctypes.Structure,), {"_fields_": fields})


CausalConv1dFwdArgs = _args(
    "CausalConv1dFwdArgs",
    ["x", "weight", "bias", "seq_idx", "initial_states", "final_states", "out"],
    [("activation", ctypes.c_int)],
)
CausalConv1dBwdArgs = _args(
    "CausalConv1dBwdArgs",
    ["x", "weight", "bias", "seq_idx", "initial_states", "dout", "dfinal_states", "dx",
     "dweight", "dbias", "dinitial_states"],
    [("activation", ctypes.c_int), ("workspace", Workspace)],
)
CausalConv1dUpdateArgs = _args(
    "CausalConv1dUpdateArgs",
    ["x", "conv_state", "weight", "bias", "cache_seqlens", "conv_state_indices", "out"],
    [("activation", ctypes.c_int)],
)
SelectiveScanFwdArgs = _args(
    "SelectiveScanFwdArgs",
    ["u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state", "final_state", "out",
     ("delta_softplus", ctypes.c_int32), "checkpoints"],
    [],
)
SelectiveScanBwdArgs = _args(
    "SelectiveScanBwdArgs",
    ["u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state", "dout",
     "dfinal_state", "du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias",
     "dinitial_state", ("delta_softplus", ctypes.c_int32), "checkpoints"],
    [("workspace", Workspace)],
)
SelectiveStateUpdateArgs = _args(
    "SelectiveStateUpdateArgs",
    ["state", "x", "dt", "A", "B", "C", "D", "z", "dt_bias", "state_batch_indices", "out"],
    [("dt_softplus", ctypes.c_int32)],
)

_SSD_DT = [("dt_softplus", ctypes.c_int32), ("dt_limit", ctypes.c_int32),
           ("dt_min", ctypes.c_float), ("dt_max", ctypes.c_float),
           ("chunk_size", ctypes.c_int32), ("workspace", Workspace)]
SsdChunkScanFwdArgs = _args(
    "SsdChunkScanFwdArgs",
    ["x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states", "seq_idx", "cu_seqlens",
     "out", "final_states", "varlen_states", "y", "checkpoints"],
    _SSD_DT,
)
SsdChunkScanBwdArgs = _args(
    "SsdChunkScanBwdArgs",
    ["x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states", "seq_idx", "cu_seqlens",
     "dout", "dfinal_states", "y", "checkpoints", "dx", "ddt", "dA", "dB", "dC", "dD", "dz",
     "ddt_bias", "dinitial_states"],
    _SSD_DT,
)

NormFwdArgs = _args(
    "NormFwdArgs",
    ["x", "residual", "z", "weight", "bias", "out", "residual_out", "mean", "rstd"],
    [("kind", ctypes.c_int), ("norm_before_gate", ctypes.c_int32),
     ("group_size", ctypes.c_int64), ("eps", ctypes.c_float)],
)
NormBwdArgs = _args(
    "NormBwdArgs",
    ["x", "z", "weight", "bias", "mean", "rstd", "dout", "dresidual_out", "dx", "dresidual",
     "dz", "dweight", "dbias", "out"],
    [("kind", ctypes.c_int), ("norm_before_gate", ctypes.c_int32),
     ("group_size", ctypes.c_int64), ("workspace", Workspace)],
)

# The C name of each struct, as portssm_struct_layout knows it.
STRUCTS = {
    "portssm_tensor": Tensor,
    "portssm_workspace": Workspace,
    "portssm_device_info": DeviceInfo,
    "portssm_causal_conv1d_fwd_args": CausalConv1dFwdArgs,
    "portssm_causal_conv1d_bwd_args": CausalConv1dBwdArgs,
    "portssm_causal_conv1d_update_args": CausalConv1dUpdateArgs,
    "portssm_selective_scan_fwd_args": SelectiveScanFwdArgs,
    "portssm_selective_scan_bwd_args": SelectiveScanBwdArgs,
    "portssm_selective_state_update_args": SelectiveStateUpdateArgs,
    "portssm_ssd_chunk_scan_fwd_args": SsdChunkScanFwdArgs,
    "portssm_ssd_chunk_scan_bwd_args": SsdChunkScanBwdArgs,
    "portssm_norm_fwd_args": NormFwdArgs,
    "portssm_norm_bwd_args": NormBwdArgs,
}

ARGS = {
    "causal_conv1d_fwd": CausalConv1dFwdArgs,
    "causal_conv1d_bwd": CausalConv1dBwdArgs,
    "causal_conv1d_update": CausalConv1dUpdateArgs,
    "selective_scan_fwd": SelectiveScanFwdArgs,
    "selective_scan_bwd": SelectiveScanBwdArgs,
    "selective_state_update": SelectiveStateUpdateArgs,
    "ssd_chunk_scan_fwd": SsdChunkScanFwdArgs,
    "ssd_chunk_scan_bwd": SsdChunkScanBwdArgs,
    "norm_fwd": NormFwdArgs,
    "norm_bwd": NormBwdArgs,
}


def tensor_fields(struct):
    """Names of the portssm_tensor fields of an args struct, in order."""
    return [name for name, ctype in struct._fields_ if ctype is Tensor]
