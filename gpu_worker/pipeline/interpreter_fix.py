"""Make TRITON_INTERPRET=1 compute bf16 like the GPU does.

- f32 -> bf16 rounds to nearest even (the interpreter truncates, and its own RTNE path does not
  carry into the exponent): an honest kernel storing bf16(x + r) would be one ulp off on CPU only.
- tl.dot of bf16 operands multiplies the values (the interpreter keeps bf16 as uint16 bit patterns
  and handed those to np.matmul).
- bf16 -> f32 is the exact widening (the bits shifted into the high half), done in one numpy step: the
  interpreter's general float conversion took a third of an add_rmsnorm program's time on a CPU host.

Then it removes work the interpreter repeats in every program instance (docs/verification.md, "The
interpreter's own repeated work"); these speed patches leave every result bit-identical and are pinned
to the Triton version they were read against:
- a jit helper called from a kernel (tl.sum's combine function, a kernel's own @triton.jit helpers)
  patched triton.language again on every call, though the kernel's launch had patched it already;
- the numpy dtype of a Triton type was looked up by building an eighteen-entry dict on every call;
- every cast built its block type anew (a shape check and a name string each time): the builder now
  hands out one type object per element type and shape, as types are never changed once built.
"""

from __future__ import annotations

import logging

import numpy as np

log = logging.getLogger(__name__)
# The Triton release whose interpreter internals the speed patches were written against.
SPEED_PATCHED_TRITON = "3.9.0"
_undo: list[tuple[object, str, object]] = []


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
    install_speedups()
    return True


def install_speedups() -> bool:
    """Patch the interpreter's repeated work away (see the module docstring); False when it is not the
    pinned Triton release or the patches are in place already."""
    import triton  # local: Triton is optional here
    import triton.language as tl  # local: as above
    from triton.runtime import interpreter  # local: as above

    if _undo:
        return False
    if triton.__version__ != SPEED_PATCHED_TRITON:
        log.warning("Triton %s is not %s: the interpreter's speed patches are not installed",
                    triton.__version__, SPEED_PATCHED_TRITON)
        return False
    langs_of = {id(tl), id(tl.core)}
    state = {"launching": None, "covered": []}
    patch_lang = interpreter._patch_lang
    grid_call = interpreter.GridExecutor.__call__

    def langs(fn) -> frozenset:
        return frozenset(id(v) for v in fn.__globals__.values() if id(v) in langs_of)

    class _LaunchScope:
        """A kernel launch's patch scope. Until the launch restores it, what was patched stays patched: the
        launch's own language modules, and those a helper patched (Triton never restores a helper's patch)."""

        def __init__(self, scope, covered):
            self.scope = scope
            state["covered"].append(set(covered))

        def restore(self):
            state["covered"].pop()
            self.scope.restore()

    def fast_patch_lang(fn):
        if fn is state["launching"]:
            state["launching"] = None
            return _LaunchScope(patch_lang(fn), langs(fn))
        seen = langs(fn)
        if seen and state["covered"] and seen <= state["covered"][-1]:
            # Triton would set the same attributes to equal values again and never restore them: a no-op
            return interpreter._LangPatchScope()
        scope = patch_lang(fn)
        if state["covered"]:
            state["covered"][-1] |= seen
        return scope

    def fast_grid_call(self, *args, **kwargs):
        outer, state["launching"] = state["launching"], self.fn
        try:
            return grid_call(self, *args, **kwargs)
        finally:
            state["launching"] = outer

    np_dtype = interpreter._get_np_dtype
    scalars: dict = {}

    def fast_np_dtype(tt_dtype):
        if isinstance(tt_dtype, tl.pointer_type):
            return np.dtype(np.uint64)
        if isinstance(tt_dtype, tl.block_type):
            return fast_np_dtype(tt_dtype.element_ty)
        try:
            return scalars[tt_dtype]
        except KeyError:
            scalars[tt_dtype] = found = np_dtype(tt_dtype)
            return found

    block_ty = interpreter.InterpreterBuilder.get_block_ty
    block_types: dict = {}

    def fast_block_ty(self, dtype, shape):
        try:
            key = (dtype, tuple(shape))
            return block_types[key]
        except KeyError:
            block_types[key] = found = block_ty(self, dtype, shape)
            return found
        except TypeError:  # an unhashable element type: built each time, as Triton does
            return block_ty(self, dtype, shape)

    for owner, name, new in ((interpreter, "_patch_lang", fast_patch_lang),
                             (interpreter.InterpreterBuilder, "get_block_ty", fast_block_ty),
                             (interpreter.GridExecutor, "__call__", fast_grid_call),
                             (interpreter, "_get_np_dtype", fast_np_dtype)):
        _undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)
    return True


def remove_speedups() -> None:
    """Put the interpreter's own functions back (tests compare results with and without the patches)."""
    while _undo:
        owner, name, original = _undo.pop()
        setattr(owner, name, original)
