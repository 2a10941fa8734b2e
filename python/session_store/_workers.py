"""Worker threads for the adapters' async methods: ``await run(fn, *args)`` runs ``fn`` on
one of them and settles an asyncio future with what it returned or raised.

``asyncio.to_thread`` does the same through the loop's default ``ThreadPoolExecutor``,
with a ``concurrent.futures.Future`` chained to the asyncio one and a copied context: about
20 microseconds more per call than this hop (a job on a ``SimpleQueue``, the answer by
``call_soon_threadsafe``), which is as much as a short read costs in the store. The store's
calls need no context variables. The pool grows to asyncio's default size when every
worker is busy; the workers finish their jobs and stop at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from queue import SimpleQueue
from typing import Any, Callable, List, TypeVar

T = TypeVar("T")

#: As many workers as asyncio's default executor has at most.
MAX_WORKERS = min(32, (os.cpu_count() or 1) + 4)

_lock = threading.Lock()
_jobs: "SimpleQueue[Any]" = SimpleQueue()
_workers: List[threading.Thread] = []
_busy = 0


def _settle(future: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    """On the loop: the job's outcome into its future, unless the caller gave up on it."""
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _work(jobs: "SimpleQueue[Any]") -> None:
    global _busy
    while True:
        job = jobs.get()
        if job is None:
            return
        loop, future, fn, args = job
        try:
            outcome = (True, fn(*args))
        except BaseException as error:  # noqa: BLE001 - handed to the awaiting task
            outcome = (False, error)
        with _lock:
            _busy -= 1
        try:
            loop.call_soon_threadsafe(_settle, future, *outcome)
        except RuntimeError:  # the loop closed meanwhile: nobody is waiting
            pass
        del job, loop, future, fn, args, outcome


async def run(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a worker thread; its result, or what it raised."""
    global _busy
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    with _lock:
        _busy += 1
        if _busy > len(_workers) and len(_workers) < MAX_WORKERS:
            worker = threading.Thread(
                target=_work, args=(_jobs,), name="session_store-worker", daemon=True
            )
            worker.start()
            _workers.append(worker)
    _jobs.put((loop, future, fn, args))
    return await future


def _stop() -> None:
    """At exit: each worker finishes the jobs queued before, then stops."""
    with _lock:
        workers = list(_workers)
    for _ in workers:
        _jobs.put(None)
    for worker in workers:
        worker.join()


def _forget_after_fork() -> None:
    """In a forked child the workers do not exist: start from none."""
    global _jobs, _lock, _busy
    _lock = threading.Lock()
    _jobs = SimpleQueue()
    _workers.clear()
    _busy = 0


atexit.register(_stop)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
