"""Implementation processes: started, asked, timed out, restarted.

One :class:`Worker` owns one implementation process.  Asking it a case writes the request line and
waits at most ``timeout`` seconds for the answer line.  A hang (timeout), an exit (crash) or a line
that does not follow the protocol fails that case only: the process is ended and the next case
starts a new one.  ``run_all`` drives ``jobs`` workers from one queue and stores each answer at the
case's own index, so the outcome does not depend on ``jobs`` or on timing.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from mind.conformance.implementations import Launch
from mind.conformance.protocol import parse_answer
from mind.conformance.verdict import Answer
from mind.diagnostics import error

HANDSHAKE_TIMEOUT_S = 120.0
STDERR_TAIL = 2000


@dataclass(frozen=True)
class Identity:
    """What the implementation says it is (its ``--version``)."""

    name: str
    version: str
    profiles: tuple[str, ...] | None


def handshake(launch: Launch) -> Identity:
    """Run ``COMMAND --version``; E6002 when the implementation does not start or answer."""
    try:
        done = subprocess.run(list(launch.argv) + ["--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=HANDSHAKE_TIMEOUT_S, start_new_session=True)
    except FileNotFoundError:
        raise error("E6002", f"implementation `{launch.impl}`: command `{launch.argv[0]}` not found",
                    help="exec: takes a command line; check the program's path") from None
    except PermissionError:
        raise error("E6002", f"implementation `{launch.impl}`: `{launch.argv[0]}` cannot be executed") from None
    except subprocess.TimeoutExpired:
        raise error("E6002", f"implementation `{launch.impl}` did not answer --version within "
                             f"{HANDSHAKE_TIMEOUT_S:.0f} s") from None
    text = done.stdout.strip()
    if done.returncode != 0 or not text:
        tail = done.stderr.strip()[-STDERR_TAIL:]
        raise error("E6002", f"implementation `{launch.impl}` failed its handshake (`--version` exited "
                             f"{done.returncode}{', printing nothing' if not text else ''})",
                    notes=(tail,) if tail else ())
    first = text.splitlines()[0]
    try:
        info = json.loads(first)
    except ValueError:
        info = None
    if isinstance(info, dict):
        profiles = info.get("profiles")
        return Identity(str(info.get("name", launch.impl)), str(info.get("version", "?")),
                        tuple(str(p) for p in profiles) if isinstance(profiles, list) else None)
    return Identity(os.path.basename(launch.argv[0]), first, None)


class Worker:
    """One implementation process, (re)started on demand."""

    def __init__(self, launch: Launch):
        self.launch = launch
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=64)

    def _start(self) -> None:
        self.lines = queue.Queue()
        self.stderr = collections.deque(maxlen=64)
        self.proc = subprocess.Popen(list(self.launch.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
                                     bufsize=1, start_new_session=True)
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.proc.stderr, self.stderr), daemon=True).start()

    @staticmethod
    def _pump(stream: Any, lines: "queue.Queue[str | None]") -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    @staticmethod
    def _drain(stream: Any, tail: "collections.deque[str]") -> None:
        for line in stream:
            tail.append(line)

    def _tail(self) -> str:
        text = "".join(self.stderr).strip()
        return text[-STDERR_TAIL:]

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            try:
                f.close()  # type: ignore[union-attr]
            except OSError:
                pass

    def close(self) -> None:
        """End the process politely (stdin closed), then for sure."""
        if self.proc is not None:
            try:
                self.proc.stdin.close()  # type: ignore[union-attr]
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()

    def ask(self, cid: str, request: str, timeout: float) -> Answer:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            try:
                self._start()
            except OSError as exc:
                return Answer("crash", message=f"the implementation could not be started: {exc}")
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(request + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # it died; the answer below says how
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                return Answer("timeout", message=f"no answer within {timeout:g} s (the implementation was ended)")
            if line is None:
                code = self.proc.wait()
                time.sleep(0.05)  # let the stderr pump catch the last lines
                how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
                tail = self._tail()
                self.stop()
                return Answer("crash", message=f"the implementation {how}" + (f"; stderr:\n{tail}" if tail else ""))
            if line.strip():
                break
        answer = parse_answer(line.rstrip("\n"), cid)
        if answer.status == "protocol":
            self.stop()  # its state is unknown: start afresh
        return answer


def run_all(launch: Launch, requests: Sequence[tuple[str, str]], jobs: int, timeout: float,
            on_answer: Callable[[int, Answer, float], None]) -> None:
    """Ask every ``(case id, request line)``; ``on_answer(index, answer, seconds)`` for each."""
    todo: queue.Queue[int] = queue.Queue()
    for i in range(len(requests)):
        todo.put(i)
    lock = threading.Lock()

    def drive() -> None:
        worker = Worker(launch)
        try:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                cid, line = requests[i]
                t0 = time.perf_counter()
                answer = worker.ask(cid, line, timeout)
                elapsed = time.perf_counter() - t0
                with lock:
                    on_answer(i, answer, elapsed)
        finally:
            worker.close()

    threads = [threading.Thread(target=drive, daemon=True) for _ in range(max(1, min(jobs, len(requests) or 1)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
