"""ark's execution side: targets, the evaluation pipeline, dispatch and the GPU Celery worker.

Imports nothing from Django: it runs alone on GPU hosts (`python -m gpu_worker ...`).
"""
