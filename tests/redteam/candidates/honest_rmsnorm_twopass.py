"""HONEST add_rmsnorm variant: one program per row, f32 math, h stored as bf16 and reused rounded
(the reference's definition). Must pass.
target: add_rmsnorm
expect: pass
kernel: rmsnorm_rows
"""
