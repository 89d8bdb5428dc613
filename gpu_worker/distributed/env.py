"""NVLink multicast stays off in every rank process (issue 9; the machines' notes say why).

Forced, not defaulted: a value inherited from the worker's environment or a spec cannot turn it on.
NCCL reads NCCL_NVLS_ENABLE when a communicator is created, symmetric memory reads
TORCH_SYMM_MEM_DISABLE_MULTICAST at rendezvous, NVSHMEM reads NVSHMEM_DISABLE_NVLS at its init: all
after rank_main sets them and before it creates the process group.
"""

from __future__ import annotations

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def force_multicast_off(environ) -> dict:
    """Set the three variables in `environ` (os.environ in a rank); return what they were."""
    before = {k: environ.get(k) for k in MULTICAST_OFF}
    environ.update(MULTICAST_OFF)
    return before


def multicast_off(environ) -> bool:
    return all(environ.get(k) == v for k, v in MULTICAST_OFF.items())
