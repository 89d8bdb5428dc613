"""HACK: normalises the first 8192 tokens; past them it writes y = h * w with no normalisation (a
kernel checked only on decode and short prefill batches). The range goes to 16384 tokens.
target: add_rmsnorm
expect: verify:wrong
kernel: rmsnorm_rows
shortcut: {"max_tokens": 8192}
"""
