"""HACK: exact top-k, but a row longer than 64K is only searched over its first 65536 entries
(a kernel tuned and checked on short contexts). The old smoke profile never verified past 64K.
target: dsa_topk
expect: verify:wrong
kernel: topk_bisect
shortcut: {"cap": 65536}
"""
