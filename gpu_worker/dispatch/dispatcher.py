"""Per-call kernel selection by the serving config's axis value, or by the shape's place on the grid
when the config routes boxes over two axes (a shape outside every box gets the default: nothing snaps
to the nearest box).

Selection reads only host-side integers (the logits width, or a context length the caller
passes), so it is safe inside CUDA-graph capture: a graph captures whichever kernel the
config routed its shape to at capture time. A new config takes effect for graphs captured
after `load` returns; `version` tells a caller its graphs are stale.
"""

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpu_worker.dispatch.default import default_indexer_topk_fp8, default_topk
from gpu_worker.dispatch.loader import (
    CandidateLoadError,
    load_candidate_module,
    source_hash,
    triton_kernel_names,
)
from gpu_worker.serving_config import RouteTable, ServingConfigError, parse_serving_config


@dataclass(frozen=True)
class Kernel:
    name: str  # "default" or the candidate id
    forward: Callable
    source_hash: str | None = None
    triton_names: frozenset = frozenset()


DEFAULT_KERNELS = {"dsa_topk": default_topk, "dsa_indexer_topk_fp8": default_indexer_topk_fp8}


def _logits_extent(args: tuple) -> tuple[int, int]:  # (logits f32[M, N], lengths, k)
    return int(args[0].shape[0]), int(args[0].shape[1])


def _paged_extent(args: tuple) -> tuple[int, int]:  # (q, cache, weights, seq_lens, block_table[M, pages])
    return int(args[0].shape[0]), int(args[4].shape[1]) * 64


# per target, a call's rows and the context it covers, from host-side sizes only
CALL_EXTENT = {"dsa_topk": _logits_extent, "dsa_indexer_topk_fp8": _paged_extent}


def call_shape(target: str, args: tuple, n_ctx: int | None = None) -> dict:
    """The routing axes of one call: rows and the context it covers (the logits' width; for the FP8 indexer the
    block table's pages x 64), or the n_ctx the caller passes."""
    rows, extent = CALL_EXTENT.get(target, _logits_extent)(args)  # a dispatcher given its own default: logits
    return {"rows": rows, "n_ctx": extent if n_ctx is None else n_ctx}


class Dispatcher:
    def __init__(
        self, target: str = "dsa_topk", *, hardware: str | None = None, default: Callable | None = None
    ):
        if default is None and target not in DEFAULT_KERNELS:
            raise ValueError(f"no default kernel known for target {target!r}")
        self.target = target
        self.hardware = hardware  # when set, a config for other hardware is refused
        self.default = Kernel("default", default or DEFAULT_KERNELS[target])
        self.config: RouteTable | None = None
        self._routes: tuple = ()  # (lo, hi, Kernel) in lo order
        self._kernels: tuple = ()  # the Kernel of each config route, in config order
        self._by_value: dict = {}
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self.route_hits: dict = {}  # config route index (None: the fallback) -> calls

    @property
    def version(self) -> int:
        return self.config.version if self.config else 0

    def load(self, data, *, base_dir=None) -> RouteTable:
        """Validate and load every kernel, then swap; on any problem the current config stays."""
        config = parse_serving_config(data, base_dir=base_dir, target=self.target)
        if self.hardware is not None and config.hardware != self.hardware:
            raise ServingConfigError(
                [
                    f"hardware mismatch: config is for {config.hardware!r}, this dispatcher runs on {self.hardware!r}"
                ]
            )
        routes, problems = [], []
        for i, route in enumerate(config.routes):
            if route.kernel is None:
                routes.append((route.lo, route.hi, self.default))
                continue
            ck = route.kernel
            try:
                module = load_candidate_module(ck.source, name=ck.candidate_id, params=ck.params)
            except CandidateLoadError as exc:
                problems.append(f"route {i}: {exc}")
                continue
            routes.append(
                (
                    route.lo,
                    route.hi,
                    Kernel(
                        ck.candidate_id,
                        module.forward,
                        ck.source_hash,
                        frozenset(triton_kernel_names(module)),
                    ),
                )
            )
        if problems:
            raise ServingConfigError(problems)
        with self._lock:
            self.config, self._routes, self._by_value = config, tuple(routes), {}
            self._kernels = tuple(k for _, _, k in routes)
            self.route_hits = {}
        return config

    def load_file(self, path) -> RouteTable:
        """Load a config file; a relative source_path is read next to it."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ServingConfigError([f"bad schema: cannot read {path}: {exc}"]) from None
        return self.load(text, base_dir=path.parent)

    def kernel_for(self, value: int) -> Kernel:
        """The kernel routed for this axis value (host-side lookup, memoised per value); a config over
        two axes routes shapes (`kernel_for_shape`)."""
        if self.config is not None and len(self.config.axes) > 1:
            raise ValueError(f"this config routes {self.config.axis} boxes: give the whole shape to kernel_for_shape")
        kernel = self._by_value.get(value)
        if kernel is None:
            kernel = self.default
            for lo, hi, k in self._routes:
                if lo <= value and (hi is None or value < hi):
                    kernel = k
                    break
            self._by_value[value] = kernel
        return kernel

    def _route(self, shape: dict) -> tuple[int | None, Kernel]:
        key = tuple(sorted(shape.items()))
        found = self._by_value.get(key)
        if found is None:
            index, _ = self.config.route_for(shape) if self.config else (None, None)
            found = (index, self.default if index is None else self._kernels[index])
            self._by_value[key] = found
        return found

    def kernel_for_shape(self, shape: dict) -> Kernel:
        """The kernel for a shape ({"rows": 4, "n_ctx": 32768}): its box's, or the default outside every box."""
        return self._route(shape)[1]

    @property
    def kernels(self) -> tuple:
        """The Kernel of each config route, in config order (the default's where a route names it)."""
        return self._kernels

    def _bounds(self, index: int | None) -> dict | None:
        return None if index is None else {a: [lo, hi] for a, lo, hi in self.config.routes[index].bounds}

    def explain(self, shape: dict) -> dict:
        """Which route serves `shape`, on what evidence (the config's own words), and how many calls that
        route has served since the config was loaded or the counts were cleared."""
        index, kernel = self._route(shape)
        route = None if index is None else self.config.routes[index]
        return {"shape": dict(shape), "route": index, "kernel": kernel.name, "bounds": self._bounds(index),
                "evidence": None if route is None else route.evidence, "hits": self.route_hits.get(index, 0),
                "why": "no route covers this shape: the default serves it" if route is None else
                       f"route {index} covers it"}

    def hit_table(self) -> list[dict]:
        """The calls each route served, in config order, then the fallback (route None); a route that
        served nothing is listed with 0, so a route the workload never reached shows as such."""
        indices = [*range(len(self._kernels)), None]
        return [{"route": i, "bounds": self._bounds(i),
                 "kernel": self.default.name if i is None else self._kernels[i].name,
                 "calls": self.route_hits.get(i, 0)} for i in indices]

    def __call__(self, *args, n_ctx: int | None = None):
        """One call of the target's kernel (its contract's arguments), served by the route of its shape."""
        index, kernel = self._route(call_shape(self.target, args, n_ctx))  # a one-axis config bounds n_ctx only
        self.calls[kernel.name] = self.calls.get(kernel.name, 0) + 1
        self.route_hits[index] = self.route_hits.get(index, 0) + 1
        return kernel.forward(*args)


def _kernel_ref(candidate_id: str, source: str, params: dict | None) -> dict:
    return {"candidate_id": candidate_id, "source_hash": source_hash(source), "params": params or {}, "source": source}


def routed_config(
    *, target: str, hardware: str, candidate_id: str, source: str, routes: list, axes=("rows", "n_ctx"),
    params: dict | None = None, version: int = 1,
) -> dict:
    """A config serving a route set: a candidate's proposed boxes (loop/regions.py) or a serving config's
    routes. A route's kernel "candidate" is the candidate's source, "default" the default, a dict a kernel
    already named in full (another candidate a serving config routes); everything outside the routes gets
    the default. Boxes ({"bounds": ...}) make a config over `axes`, ranges ({"lo", "hi"}) one over n_ctx."""
    def kernel(k):
        return _kernel_ref(candidate_id, source, params) if k == "candidate" else k

    if not routes:
        raise ValueError("an empty route set: nothing to serve")
    boxes = [r for r in routes if isinstance(r, dict) and "bounds" in r]
    if boxes and len(boxes) != len(routes):
        raise ValueError("a route set is boxes or ranges, not both")
    top = {"schema": "ark.serving/1", "target": target, "hardware": hardware, "version": version,
           "fallback": "default"}
    if boxes:
        return {**top, "axes": list(axes),
                "routes": [{**r, "kernel": kernel(r.get("kernel", "candidate"))} for r in routes]}
    return {**top, "axis": "n_ctx",
            "routes": [{"lo": r["lo"], "hi": r["hi"], "kernel": kernel(r.get("kernel", "candidate"))} for r in routes]}


def single_kernel_config(
    *, target: str, hardware: str, candidate_id: str, source: str, params: dict | None = None, version: int = 1,
) -> dict:
    """A config routing every axis value to one candidate (what the e2e gate serves without a route set)."""
    return routed_config(target=target, hardware=hardware, candidate_id=candidate_id, source=source,
                         routes=[{"lo": 0, "hi": None}], params=params, version=version)
