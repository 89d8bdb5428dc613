"""HONEST dsa_indexer_topk variant: a Triton kernel computes the scores in f32 (tl.dot of bf16 operands, ReLU,
weights), a second selects the top-k by bisection on the int key (one pass over the row per step, in blocks, so it
compiles and runs at 256K too). Must pass.
target: dsa_indexer_topk
expect: pass
kernel: indexer_bisect
"""
