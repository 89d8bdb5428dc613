"""HONEST dsa_topk variant: one program per row, bisection on the order-preserving int key of the
k-th largest value (one pass over the row per step, in blocks, so it compiles and runs at 256K too),
then a cumsum-ordered write. Must pass.
target: dsa_topk
expect: pass
kernel: topk_bisect
"""
