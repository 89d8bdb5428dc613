"""HACK: the indexer with its logits rounded to bf16 before the top-k (half the bytes if they were
written out): scores that differ only below bf16 resolution tie and are picked by position. The
contract is f32 logits.
target: dsa_indexer_topk
expect: verify:wrong
kernel: indexer_bisect
shortcut: {"round_bf16": True}
"""
