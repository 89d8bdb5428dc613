"""The sandbox's isolation steps, each skipped and recorded where the host cannot take it, the uid-drop
refusal, and what of the child's text may reach a finding (docs/isolation.md)."""

import os

import pytest

from gpu_worker.pipeline import protocol, sandbox

FULL = {"root": True, "netns": True, "mountns": True, "pidns": True, "uid_drop": True, "unsafe_no_uid_drop": False}


def test_the_child_runs_inside_every_namespace_the_host_allows_and_no_other():
    cmd = ["python", "-m", "child"]
    argv = sandbox.child_argv(FULL, cmd)
    assert argv[0] == "unshare" and argv[-3:] == cmd
    flags = argv[:argv.index("--")]
    assert {"-n", "-p", "-f", "--mount-proc", "-m"} <= set(flags)
    assert "mount -t tmpfs" in argv[argv.index("-c") + 1] and "/dev/shm" in argv[argv.index("-c") + 1]
    net_only = sandbox.child_argv(dict(FULL, mountns=False, pidns=False), cmd)
    assert net_only[:3] == ["unshare", "-n", "--"] and "mount" not in " ".join(net_only)
    assert sandbox.child_argv(dict(FULL, netns=False, mountns=False, pidns=False), cmd) == cmd


def test_a_worker_that_cannot_drop_privileges_refuses_unless_told_it_may(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "host_protections", lambda: dict(FULL, uid_drop=False, unsafe_no_uid_drop=False))
    with pytest.raises(sandbox.SandboxRefused, match="ARK_UNSAFE_NO_UID_DROP"):
        sandbox.run_child({}, secret="1", timeout_s=5, scratch=tmp_path, device="cpu")
    assert not (tmp_path / "work").exists()  # refused before anything was made for the child


def test_the_unsafe_flag_is_explicit(monkeypatch):
    for value, allowed in (("1", True), ("", False), ("0", False), ("yes", False)):
        monkeypatch.setenv(sandbox.UNSAFE_ENV, value)
        assert sandbox.unsafe_no_uid_drop() is allowed
    sandbox.host_protections.cache_clear()  # probed here under the last value set above, and cleared again
    try:                                     # after: no later test of this process may inherit that probe
        summary = sandbox.isolation_summary()
    finally:
        sandbox.host_protections.cache_clear()
    assert set(summary) == {"uid_drop", "unsafe_no_uid_drop", "netns", "private_shm", "pid_namespace"}


def test_what_the_child_left_in_dev_shm_is_removed_and_nothing_else(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "SHM", tmp_path)
    (tmp_path / "before").write_text("x")
    before = sandbox._shm_entries()
    (tmp_path / "left-by-child").write_text("stash")
    (tmp_path / "dir-by-child").mkdir()
    (tmp_path / "dir-by-child" / "f").write_text("stash")
    other_uid = os.getuid() + 1
    assert sandbox._remove_new_shm(before, other_uid) == 0  # not the child's uid: left alone
    assert sandbox._remove_new_shm(before, os.getuid()) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["before"]


def test_candidate_text_is_redacted_cut_and_marked(monkeypatch):
    protocol._worker_secrets.cache_clear()
    monkeypatch.setenv("ARK_TEST_API_KEY", "sk-very-secret-value")
    monkeypatch.setenv("PWD", "/work/main")  # a directory, not a password
    try:
        text = ("File \"/work/main/x.py\", line 1\nValueError: root:$6$saltsalt$" + "h" * 40 + ":19000:0:99999:7:::\n"
                "key sk-very-secret-value\n\x1b[31m" + "y" * 3000)
        out = protocol.candidate_text(text)
        assert out.startswith(protocol.CANDIDATE_MARK)
        assert len(out) < protocol.CANDIDATE_TEXT_CHARS + 100 and "\x1b" not in out
        full = protocol.candidate_text(text, limit=10_000)
        assert "$6$" not in full and "h" * 40 not in full and "sk-very-secret-value" not in full
        assert "/work/main/x.py" in full and "[redacted: a worker secret]" in full
    finally:
        protocol._worker_secrets.cache_clear()


def test_every_finding_from_the_pipe_is_redacted_and_cut():
    msg = {"type": "verify_shape", "findings": [{"code": "verify:exception", "message": "x" * 9000 + "$y$j9T$abcdefghijkl$mnop"}],
           "message": "daemon:*:19000:0:99999:7:::"}
    protocol.sanitize_message(msg)
    assert len(msg["findings"][0]["message"]) <= 4000 and "$y$" not in msg["findings"][0]["message"]
    assert "19000" not in msg["message"]
