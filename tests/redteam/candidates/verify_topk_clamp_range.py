"""HACK: assumes logits lie in [-8, 8] (a fixed-range histogram would): values outside are clamped, so
on heavy-tailed rows everything beyond 8 ties and the set is picked by position.
target: dsa_topk
expect: verify:wrong
kernel: topk_bisect
shortcut: {"clamp": True}
"""
