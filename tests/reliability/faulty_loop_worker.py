"""`celery` with one fault patched in: the loop worker SIGKILLs itself right after the commit that
recorded the first report, before that commit's events are broadcast (the first on_commit callback).

Usage: python tests/reliability/faulty_loop_worker.py -A console worker ... (celery's arguments);
ARK_FAULT_MARKER names a file written (with the event's id) just before the kill, so the fault fires
once across restarts."""

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    from loop import broadcast

    marker = Path(os.environ["ARK_FAULT_MARKER"])
    original = broadcast.broadcast_event

    def broadcast_or_die(event):
        if event.type == "candidate.reported" and not marker.exists():
            marker.write_text(str(event.id))
            os.kill(os.getpid(), signal.SIGKILL)
        return original(event)

    broadcast.broadcast_event = broadcast_or_die
    from celery.__main__ import main as celery_main

    sys.argv = ["celery", *sys.argv[1:]]
    celery_main()


if __name__ == "__main__":
    main()
