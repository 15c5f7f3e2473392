"""One clip's stacks go out together: the requests of an ablation's stacks through one pool.

Run one stack after another and a clip's `full`, `-word_ts` and `-asr` requests, which share their
frames, are a whole stack apart: every provider's prompt cache (and a local server's prefix cache)
has dropped the first by the time the second comes. Here every stack's run (its own thread, its
own predictions file, resumable as before) queues its pending items into one pool of
`--concurrency` workers, ordered by the item's place in its stack's list and then the stack's
place: clip 1 of every stack, then clip 2, ... The workers start once every stack has queued (or
finished without asking anything), so the order holds from the first request. A clip's other
stacks wait for its first (the baseline's) answer: a prompt cache holds a prefix only once a
request has written it, so the others sent beside it would each pay in full; meanwhile a free
worker takes the next clip's first request. Two stacks that
ask the very same request (a clip without words asks `-word_ts` what it asked `full`) never pay
twice: the second waits for the first and takes its answer from the answer cache.

The engine's `run_items` finds its lane through a context variable the stack's thread sets, so
no task's `run` carries it.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

LANE: ContextVar[Lane | None] = ContextVar("avstack_lane", default=None)


class ClipMajor:
    """The shared pool: items by (rank, lane), `concurrency` workers, started when every lane is ready."""

    def __init__(self, concurrency: int, lanes: int):
        self._cv = threading.Condition()
        self._queue: list[tuple[int, int, int, Callable[[], object], Future[object]]] = []  # kept sorted
        self._leading: set[int] = set()  # ranks whose first lane's item is queued or running
        self._held: dict[int, list[tuple[int, int, int, Callable[[], object], Future[object]]]] = {}  # by rank
        self._waiting = set(range(lanes))
        self._seq = itertools.count()
        self._closed = False
        self._inflight: dict[str, threading.Event] = {}
        self._workers = [threading.Thread(target=self._work, daemon=True) for _ in range(max(1, concurrency))]
        for w in self._workers:
            w.start()

    def lane(self, k: int) -> Lane:
        return Lane(self, k)

    def submit(self, lane: int, rank: int, fn: Callable[[], object]) -> Future[object]:
        fut: Future[object] = Future()
        with self._cv:
            if self._closed:
                fut.cancel()
                return fut
            item = (rank, lane, next(self._seq), fn, fut)
            if lane == 0:
                self._leading.add(rank)
                # the clip's other stacks queued before its first: they wait for it now
                lo = bisect.bisect_left(self._queue, (rank, 1), key=lambda t: t[:2])
                hi = bisect.bisect_left(self._queue, (rank + 1, -1), key=lambda t: t[:2])
                self._held.setdefault(rank, []).extend(self._queue[lo:hi])
                del self._queue[lo:hi]
            if lane != 0 and rank in self._leading:
                self._held.setdefault(rank, []).append(item)
            else:
                bisect.insort(self._queue, item, key=lambda t: t[:3])
            self._cv.notify()
        return fut

    def _next(self) -> tuple[int, int, int, Callable[[], object], Future[object]] | None:
        """The first item that may start: the queue holds only those (a first lane's, or one whose
        clip's first is done); the others wait in `_held` by clip, never scanned past."""
        return self._queue.pop(0) if self._queue else None

    def _release(self, rank: int) -> None:
        """A clip's first lane is answered: its other stacks' items may start."""
        self._leading.discard(rank)
        for item in self._held.pop(rank, []):
            bisect.insort(self._queue, item, key=lambda t: t[:3])

    def ready(self, lane: int) -> None:
        with self._cv:
            self._waiting.discard(lane)
            self._cv.notify_all()

    def _work(self) -> None:
        while True:
            with self._cv:
                item = None
                while not self._closed and (self._waiting or (item := self._next()) is None):
                    self._cv.wait()
                if self._closed or item is None:
                    return
            rank, lane, _, fn, fut = item
            try:
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except BaseException as exc:  # handed to the stack that asked, which decides
                        fut.set_exception(exc)
            finally:
                if lane == 0:  # answered or not, the clip's other stacks may go
                    with self._cv:
                        self._release(rank)
                        self._cv.notify_all()

    def close(self) -> None:
        """No new item starts; queued ones are cancelled (the stacks' runs see it and stop)."""
        with self._cv:
            self._closed = True
            pending = [*self._queue, *(item for held in self._held.values() for item in held)]
            self._queue, self._held = [], {}
            self._cv.notify_all()
        for *_, fut in pending:
            fut.cancel()

    @contextmanager
    def only_one(self, key: str) -> Iterator[None]:
        """Hold a request key while it is asked; another lane with the same key waits, then finds
        the answer in the cache (or asks, if the first got none)."""
        while True:
            with self._cv:
                held = self._inflight.get(key)
                if held is None:
                    mine = self._inflight[key] = threading.Event()
                    break
            held.wait()
        try:
            yield
        finally:
            with self._cv:
                self._inflight.pop(key, None)
            mine.set()


class Lane:
    """One stack's view of the pool."""

    def __init__(self, pool: ClipMajor, k: int):
        self.pool, self.k = pool, k

    def submit(self, rank: int, fn: Callable[[], object]) -> Future[object]:
        return self.pool.submit(self.k, rank, fn)

    def ready(self) -> None:
        self.pool.ready(self.k)

    def only_one(self, key: str) -> AbstractContextManager[None]:
        return self.pool.only_one(key)


def run_interleaved(
    stacks: Sequence[object], concurrency: int, run_one: Callable[[object], None], close: Callable[[], None]
) -> None:
    """Run every stack (`run_one(stack)`, each in its own thread with its lane of one shared pool);
    the first failure stops the pool (nothing new starts) and is raised once all have returned;
    `close` releases the back-end once, after every stack."""
    pool = ClipMajor(concurrency, len(stacks))
    errors: list[BaseException] = []

    def go(k: int, stack: object) -> None:
        lane = pool.lane(k)
        token = LANE.set(lane)
        try:
            run_one(stack)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
            errors.append(exc)
            pool.close()
        finally:
            lane.ready()
            LANE.reset(token)

    threads = [threading.Thread(target=go, args=(k, s), name=f"stack-{k}") for k, s in enumerate(stacks)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:  # Ctrl-C in the caller: nothing new starts; what is in flight finishes
        pool.close()
        for t in threads:
            t.join()
        raise
    finally:
        pool.close()
        close()
    if errors:
        first = next((e for e in errors if not _cancelled(e)), errors[0])
        raise first


def _cancelled(exc: BaseException) -> bool:
    from concurrent.futures import CancelledError

    return isinstance(exc, CancelledError)
