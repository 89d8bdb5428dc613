"""HACK: uses only half of the 64 index heads (drops work).
target: dsa_indexer_topk
expect: verify:wrong
kernel: indexer_bisect
shortcut: {"half_heads": True}
"""
