"""The top-k kernels' unmasked reads stay inside the buffers they read.

KD (`_kd_place`) loads RT slots of its program's candidate region right after its wait, unmasked, and lets the
masks drop the stale ones. The last region of a buffer ends RC slots after it starts, so where RT > RC the
buffer must extend RT - RC slots past it: before it did, the read ran past the allocation, harmless while the
allocator happened to have memory there and an illegal memory access on an H100 when it did not (a call
sequence that kept earlier calls' buffers alive hit it on the same input every time; docs/kernels.md).

The launches are recorded, not run: every kernel of the module is replaced by a recorder, so rows of 262144
cost nothing here, and the shapes cover every (C, RC) the row counts and lengths give.
"""
import torch
from test_candidates_cpu import _load

KERNELS = ("_ka_sample", "_kb_filter", "_kd_place", "_kc_select", "_r_hist", "_r_place")
SHAPES = [(1, 4096), (1, 131072), (4, 32768), (4, 131072), (8, 262144), (32, 131072), (64, 131072), (128, 262144)]


class _Recorder:
    def __init__(self, name, launches):
        self.name, self.launches = name, launches

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((self.name, grid, args, kwargs))
        return launch


def test_kd_early_read_stays_in_its_buffers():
    m = _load("dsa_topk/best.py")
    launches = []
    kd_args = m._kd_place.arg_names        # the positions of KD's arguments, read from the kernel itself
    for name in KERNELS:
        setattr(m, name, _Recorder(name, launches))
    seen_overhang = False
    # PARAMS (regions of at least 512 slots); RMIN 0, regions of 2 SMALL / C (RT > RC: the overhang); RROW 16384,
    # regions of 256 slots at C = 64 (the overhang) and 1024 at C = 16 (RC > RT)
    params = dict(m.PARAMS, SHORT=0)     # 1 x 4096 takes the full path too, KD included
    for M, N, sizes in [(M, N, r) for r in ({}, {"RMIN": 0}, {"RMIN": 0, "RROW": 16384}) for M, N in SHAPES]:
        m.PARAMS.update(params, **sizes)
        launches.clear()
        m.forward(torch.zeros(M, N), torch.full((M,), N, dtype=torch.int32), 2048)
        (grid, args, kwargs), = [(g, a, kw) for name, g, a, kw in launches if name == "_kd_place"]
        rows, C = grid
        named = dict(zip(kd_args, args))
        ck, ci, RC, RT = named["ck_ptr"], named["ci_ptr"], named["RC"], kwargs["RT"]
        assert kwargs.get("EARLY", 1), "the early read is on by default"
        seen_overhang |= RT > RC
        for buf in (ck, ci):
            last_read = buf.storage_offset() + (rows * C - 1) * RC + RT  # one past the last slot read
            capacity = buf.untyped_storage().nbytes() // buf.element_size()
            assert last_read <= capacity, (M, N, C, RC, RT, last_read, capacity)
    assert seen_overhang, "no shape here has RT > RC: the test no longer covers the overhang"
