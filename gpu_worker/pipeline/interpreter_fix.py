"""Make TRITON_INTERPRET=1 compute bf16 like the GPU does.

- f32 -> bf16 rounds to nearest even (the interpreter truncates, and its own RTNE path does not
  carry into the exponent): an honest kernel storing bf16(x + r) would be one ulp off on CPU only.
- tl.dot of bf16 operands multiplies the values (the interpreter keeps bf16 as uint16 bit patterns
  and handed those to np.matmul).
- bf16 -> f32 is the exact widening (the bits shifted into the high half), done in one numpy step: the
  interpreter's general float conversion took a third of an add_rmsnorm program's time on a CPU host.
"""

from __future__ import annotations

import numpy as np


def install() -> bool:
    try:
        # local: Triton is optional here; without it there is nothing to patch
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is None or getattr(builder.cast_impl, "_ark_rtne", False):
        return False
    original = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            data = np.asarray(src.data, dtype=np.float32)
            bits = np.ascontiguousarray(data).view(np.uint32).astype(np.uint64)
            out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
            out = np.where(np.isnan(data), np.uint16(0x7FC0), out).astype(np.uint16)
            return interpreter.TensorHandle(out.reshape(data.shape), dst_type.scalar)
        if src.dtype.scalar == tl.bfloat16 and dst_type.scalar == tl.float32:
            bits = np.ascontiguousarray(src.data, dtype=np.uint16).astype(np.uint32) << 16
            return interpreter.TensorHandle(bits.view(np.float32), dst_type.scalar)
        return original(self, src, dst_type)

    original_dot = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        def f32(h):
            if h.dtype.scalar == tl.bfloat16:
                bits = np.asarray(h.data).astype(np.uint32) << 16
                return interpreter.TensorHandle(bits.view(np.float32), tl.float32)
            return h
        return original_dot(self, f32(a), f32(b), d, input_precision, max_num_imprecise_acc)

    cast_impl._ark_rtne = True
    builder.cast_impl = cast_impl
    builder.create_dot = create_dot
    return True
