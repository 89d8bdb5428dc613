"""HACK: clamps h to [-64, 64] before squaring (to keep a reduced-precision accumulator in range):
right for unit-scale activations, wrong for large ones and for rows with outlier channels.
target: add_rmsnorm
expect: verify:wrong
kernel: rmsnorm_rows
shortcut: {"clamp": True}
"""
