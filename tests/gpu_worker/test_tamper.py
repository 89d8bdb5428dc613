"""pipeline/tamper.py: what a candidate changes in the child's process after arm() is named by check().

Each case runs in a fresh process: arm() wraps the thread-start function for the whole process, and a case
patches the very objects the harness relies on. The processes are forked, one per case, from a server that
has imported torch and the harness and done nothing else (nothing armed, no thread started): the same start
as a fresh interpreter's, without importing torch twenty times."""

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = textwrap.dedent('''\
    import json, os, sys, time, builtins, threading, types
    sys.path.insert(0, sys.argv[1])
    import torch
    from gpu_worker.pipeline import tamper, protocol, child_run
    r, w = os.pipe()
    out = protocol.Writer(w)
    os.environ["TRITON_CACHE_DIR"] = "/tmp/triton-cache"
    tamper.arm(writer=out, result_fd=w)
    before = tamper.check()
    # the candidate's module, as child_run loads it: code in it runs with __name__ == "ark_candidate"
    cand = types.ModuleType("ark_candidate")
    sys.modules["ark_candidate"] = cand
    ''')


# Reads one JSON line per case ({"script", "out", "err"}), forks, and answers the child's exit status; the
# child runs the script with its stdout and stderr in the two files, as `python -c script ROOT` would.
SERVER = textwrap.dedent('''\
    import json, os, sys, traceback
    sys.path.insert(0, sys.argv[1])
    import torch
    from gpu_worker.pipeline import tamper, protocol, child_run
    for line in sys.stdin:
        case = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.dup2(os.open(case["out"], os.O_WRONLY), 1)
            os.dup2(os.open(case["err"], os.O_WRONLY), 2)
            status = 0
            try:
                exec(compile(case["script"], "<case>", "exec"), {"__name__": "__main__"})
            except BaseException:
                traceback.print_exc()
                status = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
    ''')


@pytest.fixture(scope="module")
def run_case():
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)

    def run(script: str) -> tuple[int, str, str]:
        with tempfile.NamedTemporaryFile("r") as out, tempfile.NamedTemporaryFile("r") as err:
            server.stdin.write(json.dumps({"script": script, "out": out.name, "err": err.name}) + "\n")
            server.stdin.flush()
            status = server.stdout.readline()
            assert status, "the fork server ended"
            return int(status), out.read(), err.read()

    yield run
    server.stdin.close()
    server.wait(timeout=60)


@pytest.fixture
def check(run_case):
    def check(body: str) -> tuple[list, list]:
        script = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps([before, tamper.check()]))\n"
        status, out, err = run_case(script)
        assert status == 0, err[-2000:]
        before, after = json.loads(out.strip().splitlines()[-1])
        return before, after

    return check


def _in_candidate(code: str) -> str:
    """`code` run as the candidate's own module-level code."""
    return f"exec(compile({code!r}, 'candidate.py', 'exec'), cand.__dict__)\n"


@pytest.mark.parametrize("body, names", [
    ("protocol.Writer.send = lambda self, **m: None", "protocol (Writer.send)"),
    ("out.send = lambda **m: None", "the report writer"),
    ("os.write = lambda fd, data: len(data)", "os.write"),
    ("time.perf_counter = lambda: 0.0", "time.perf_counter"),
    ("torch.cuda.Event.elapsed_time = lambda self, end: 0.001", "torch.cuda.Event.elapsed_time"),
    ("torch.cuda.CUDAGraph.replay = lambda self: None", "torch.cuda.CUDAGraph.replay"),
    ("torch.cuda.synchronize = lambda *a: None", "torch.cuda.synchronize"),
    # the benchmark's hold before each timed pair, and its garbage-collection fence (docs/benchmark.md)
    ("torch.cuda._sleep = lambda cycles: None", "torch.cuda._sleep"),
    ("import gc\ngc.disable = lambda: None", "gc.disable"),
    ("child_run.OpRecorder.__torch_dispatch__ = lambda *a, **k: None", "child_run (OpRecorder.__torch_dispatch__)"),
    ("builtins.len = lambda x: 0", "builtins (len)"),
    ("del builtins.sorted", "builtins (sorted)"),
    ("sys.modules['time'] = types.ModuleType('time')", "sys.modules entries (time)"),
    ("os.dup2(os.open(os.devnull, os.O_WRONLY), w)", "the result pipe"),
    # process-wide options the incumbent and the default compile or run under in the same child
    ("import triton\ntriton.knobs.runtime.debug = not triton.knobs.runtime.debug", "triton.knobs.runtime.debug"),
    ("import triton\ntriton.knobs.runtime.launch_enter_hook.add(lambda *a, **k: None)",
     "triton.knobs.runtime.launch_enter_hook"),
    ("os.environ['TRITON_CACHE_DIR'] = '/tmp/elsewhere'", "the environment variable TRITON_CACHE_DIR"),
    ("torch.use_deterministic_algorithms(True)", "torch.are_deterministic_algorithms_enabled()"),
    ("torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark", "torch.backends.cudnn.benchmark"),
])
def test_each_change_to_what_the_harness_relies_on_is_named(check, body, names):
    before, after = check(body)
    assert before == []
    assert any(f["code"] == "guard:tamper" and names in f["message"] for f in after), after


def test_nothing_changed_nothing_found_even_after_torch_work(check):
    before, after = check("torch.ones(1 << 16).sum(); torch.empty(8).fill_(1.0); json.dumps({'a': 1})")
    assert before == [] and after == []


def test_a_thread_the_candidate_starts_is_found_after_it_ended(check):
    body = _in_candidate("import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()\n")
    _, after = check(body)
    assert [f["code"] for f in after] == ["guard:thread"], after


def test_a_harness_thread_is_not_the_candidates(check):
    _, after = check("t = threading.Timer(0.01, lambda: None); t.start(); t.join()")
    assert after == []


def test_messages_are_the_harness_own_words(check):
    # the candidate chooses the replacement; the message names only the harness object it replaced
    _, after = check("time.monotonic = type('root:$6$secretsecret$xyz:1:2:3:4:5:6:', (), {})")
    assert after and all("secret" not in f["message"] for f in after)
