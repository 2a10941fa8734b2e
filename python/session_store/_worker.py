"""The worker threads the adapters' async methods run the store's blocking work on.

``await run(fn, *args)`` runs ``fn(*args)`` on one of the package's own threads and resumes
the caller with its result (or its exception); the event loop never waits for it. It is what
``asyncio.to_thread`` does, with less in between: a job is one tuple on a queue, and its
answer one ``call_soon_threadsafe`` back to the loop (``to_thread`` goes through
``concurrent.futures`` and chains a second future), which halves the hop's cost. The pool
grows as the stdlib's ``ThreadPoolExecutor`` does (a thread when none is idle, up to
``min(32, cpus + 4)``), and, like it, is drained and joined when the interpreter exits, so a
write in flight finishes before Python goes away. A caller that gives up (its task
cancelled) gets nothing; the work it started still runs to its end, one transaction.
Context variables are not carried to the worker (the store's work reads none).
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from typing import Any, Callable, List, Optional, Tuple, TypeVar

T = TypeVar("T")

#: Most threads the pool starts (the stdlib's ThreadPoolExecutor default).
MAX_THREADS = min(32, (os.cpu_count() or 1) + 4)

_Job = Tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[..., Any], tuple]


def _settle(future: "asyncio.Future[Any]", result: Any, error: Optional[BaseException]) -> None:
    """On the loop: the answer, unless the caller gave up."""
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class _Pool:
    def __init__(self) -> None:
        self._jobs: "queue.SimpleQueue[Optional[_Job]]" = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: List[threading.Thread] = []
        self._closed = False

    def submit(self, job: _Job) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the interpreter is shutting down")
            self._jobs.put(job)
            if not self._idle.acquire(blocking=False) and len(self._threads) < MAX_THREADS:
                thread = threading.Thread(
                    target=self._work, name=f"session_store-{len(self._threads)}", daemon=True
                )
                thread.start()
                self._threads.append(thread)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            loop, future, fn, args = job
            del job
            result, error = None, None
            try:
                result = fn(*args)
            except BaseException as raised:  # handed to the caller, as to_thread does
                error = raised
            answer = (_settle, future, result, error)
            del future, fn, args, result, error
            # Idle before the loop is woken: its next call finds this thread free, and the
            # answer is the last thing this thread does before it waits again.
            self._idle.release()
            try:
                loop.call_soon_threadsafe(*answer)
            except RuntimeError:  # the loop is closed: nobody waits for the answer
                pass
            del loop, answer

    def shutdown(self) -> None:
        """Lets the queued jobs finish, then stops and joins every thread."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            for _ in threads:
                self._jobs.put(None)
        for thread in threads:
            thread.join()


_POOL = _Pool()
# Joined before the interpreter finalises, as concurrent.futures joins its threads.
_register = getattr(threading, "_register_atexit", None)
if _register is not None:
    _register(_POOL.shutdown)
else:  # pragma: no cover - CPython 3.9+ has it
    import atexit

    atexit.register(_POOL.shutdown)


def run(fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
    """``fn(*args)`` on a worker thread, awaited on the running loop."""
    loop = asyncio.get_running_loop()
    future: "asyncio.Future[T]" = loop.create_future()
    _POOL.submit((loop, future, fn, args))
    return future
