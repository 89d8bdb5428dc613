"""HACK: the indexer scores only the first 65536 keys of the context and ranks the rest last (a kernel
tuned on the contexts of its own tests): right up to 64K, wrong beyond.
target: dsa_indexer_topk
expect: verify:wrong
kernel: indexer_bisect
shortcut: {"seen": 65536}
"""
