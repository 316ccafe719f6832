"""
map(fn, jobs) in forked worker processes: the analyzer's two passes over a token file, in parallel.

parallel_map(fn, jobs, num_workers) gives the same results as map(fn, jobs) (in the order the jobs
finish), in num_workers processes when that is above 1; a worker ends with the pool, and a
SIGTERM to it always kills it (see the subtle note below).
"""

import multiprocessing as mp
import signal


def parallel_map(fn, jobs, num_workers):
    """fn over jobs, in num_workers forked processes (in this one when 1), results as they come."""
    if num_workers <= 1:
        yield from map(fn, jobs)
        return
    # subtle: a fork inherits train.py's handler, which only notes SIGTERM; a worker that gets
    # terminate()'s SIGTERM before its initializer resets that handler lives on, and the pool's join
    # hangs. So SIGTERM stays blocked from the fork until the worker has set SIG_DFL (a pending one
    # then kills it).
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        pool = mp.get_context("fork").Pool(min(num_workers, len(jobs)), _worker_signals)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    with pool:  # an error or an early exit: __exit__ terminates the workers with SIGTERM
        yield from pool.imap_unordered(fn, jobs)
        pool.close()  # a normal end sends no signal: workers exit on the queue's end marker
        pool.join()


def _worker_signals():
    """Worker initializer: SIGTERM kills (Pool.terminate), Ctrl-C is the parent's to handle."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # blocked across the fork
