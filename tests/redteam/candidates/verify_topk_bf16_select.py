"""HACK: selects on logits rounded to bf16 (half the bytes to compare in a real kernel): the order
below bf16 resolution is lost, ties in bf16 are broken by position. The contract is f32.
target: dsa_topk
expect: verify:wrong
kernel: topk_bisect
shortcut: {"round_bf16": True}
"""
