"""Work that survives a worker process dying under it (a decoder's segfault, the OOM killer).

A process pool breaks for everything in flight when one worker dies, and cannot tell which item
killed it. So items run at most `workers` at a time; when the pool breaks, the items that were in
flight are suspects, and each runs again alone in a process of its own, where a death is that
item's own: after MAX_CRASHES deaths it becomes `crashed(item, why)` (a recorded failure) and the
rest go on. Innocent suspects simply finish; no item is lost or run twice to completion.

The Ray executor counts attempts with files instead (`AttemptLog`), since Ray retries the task.
"""

from __future__ import annotations

import faulthandler
import hashlib
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

MAX_CRASHES = 2  # deaths of a worker on one item before it is recorded as failed


def describe_exit(code: int | None) -> str:
    """A dead process's exit status in words."""
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return name + (" (killed, often by the out-of-memory killer)" if -code == signal.SIGKILL else "")
    return f"exit code {code}"


def crash_message(deaths: list[str]) -> str:
    return (
        f"the worker process died {len(deaths)} times on this clip ({'; '.join(deaths)}); "
        "not retried further (a decoder crash or memory exhaustion on this file)"
    )


def _child(fn: Callable[[T], R], item: T, conn: Any, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    if initializer is not None:
        initializer(*initargs)
    conn.send(fn(item))
    conn.close()


def run_alone(
    fn: Callable[[T], R], item: T, ctx: Any, initializer: Callable[..., None] | None, initargs: tuple
) -> tuple[R | None, list[str]]:
    """`fn(item)` in a process of its own, again while it dies (up to MAX_CRASHES): the result, or
    None and how each attempt died."""
    deaths: list[str] = []
    while len(deaths) < MAX_CRASHES:
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(fn, item, send, initializer, initargs), daemon=True)
        proc.start()
        send.close()  # the child holds the only writer: a death reads as end of file
        try:
            result = recv.recv()
        except EOFError:
            result = None
            proc.join()
            if proc.exitcode is not None and proc.exitcode > 0:
                # an exit, not a kill: the worker could not run at all (its start-up failed); no
                # clip is to blame, and retrying every clip would only repeat it
                raise RuntimeError(
                    f"a worker process exited with code {proc.exitcode} before finishing any work; "
                    "see its error above (is the calling script guarded by `if __name__ == '__main__':`?)"
                ) from None
            deaths.append(describe_exit(proc.exitcode))
            continue
        finally:
            recv.close()
        proc.join()
        return result, deaths
    return None, deaths


def map_surviving(
    fn: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    ctx: Any,
    crashed: Callable[[T, str], R],
    initializer: Callable[..., None] | None = None,
    initargs: tuple = (),
) -> Iterator[R]:
    """`fn` over `items` in `workers` processes, results as they finish (any order)."""
    todo: deque[T] = deque(items)
    while todo:
        suspects: list[T] = []
        with ProcessPoolExecutor(workers, mp_context=ctx, initializer=initializer, initargs=initargs) as pool:
            running: dict[Future[R], T] = {}
            try:
                while todo or running:
                    while todo and len(running) < workers:
                        # taken off the list only once the pool accepts it: a pool that broke
                        # while the caller handled a result refuses it, and it must not vanish
                        future = pool.submit(fn, todo[0])
                        running[future] = todo.popleft()
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for f in done:
                        result = f.result()  # BrokenProcessPool when a worker died
                        del running[f]
                        yield result
            except BrokenProcessPool:
                suspects = list(running.values())
        for item in suspects:
            alone, deaths = run_alone(fn, item, ctx, initializer, initargs)
            yield alone if alone is not None else crashed(item, crash_message(deaths))


class AttemptLog:
    """Attempts at one item as a file on shared storage, for executors that retry a task whose
    worker died (Ray): each attempt appends a line and points Python's fault handler at the file;
    a finished attempt removes it. An attempt that finds MAX_CRASHES unfinished ones before it
    records the item as failed instead of running it again."""

    FAULTS = ("Segmentation fault", "Aborted", "Bus error", "Floating point exception", "Illegal instruction")

    def __init__(self, folder: Path, key: str):
        self.path = folder / hashlib.sha256(key.encode()).hexdigest()[:24]

    def deaths(self) -> list[str]:
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            return []
        n = sum(1 for line in text.splitlines() if line.startswith("attempt "))
        faults = [f for f in self.FAULTS if f in text]
        why = faults[0] if faults else "killed without a fault report (SIGKILL: often the out-of-memory killer)"
        return [why] * n

    def run(self, fn: Callable[[], R]) -> R:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as log:
            log.write("attempt started\n")
            log.flush()
            was_enabled = faulthandler.is_enabled()
            faulthandler.enable(file=log)
            try:
                result = fn()
            finally:
                faulthandler.disable()
                if was_enabled:
                    faulthandler.enable(file=sys.stderr)
        self.path.unlink(missing_ok=True)
        return result
