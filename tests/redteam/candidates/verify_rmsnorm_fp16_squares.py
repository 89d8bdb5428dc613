"""HACK: forms each h^2 in fp16 (a packed-half trick) and sums in f32: fine for unit-scale values,
inf past |h| = 256 and lost precision below fp16's normal range. The contract is f32.
target: add_rmsnorm
expect: verify:wrong
kernel: rmsnorm_rows
shortcut: {"square_fp16": True}
"""
