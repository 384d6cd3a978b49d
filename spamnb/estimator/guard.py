"""The lock of one :class:`spamnb.SpamFilter` shared by threads: many readers
(scoring) at once, or one writer (learning), never both.

A learn grows the vocabulary's hash index and the count rows in place; a
score reads them through buffers.  Without the lock a learn in one thread
while another scored raised BufferError part-way through the learn (leaving
the class counts ahead of the tokens counted), or crashed the process.
Readers do not wait for each other; a writer waits for the readers in
progress, and new readers wait for a writer waiting (so learns are not
starved by a stream of scores).  Both are reentrant in the thread that
holds them; a reader that tries to write gets RuntimeError (it would wait
for itself).  A read costs about 1.2 microseconds (a classify: 140 or more).
The lock is made of ``_thread``'s (the C module ``threading`` wraps); the
condition a writer and the readers wait on (``threading.Condition``) is made
when something first waits or must be woken, so a classify that never
learns does not import ``threading``.
"""

import _thread

__all__ = ["ReadWriteLock", "contextmanager"]


def contextmanager(generator):
    """``contextlib.contextmanager(generator)``, made when first called: a
    model's context managers (a writer's lock, :meth:`ReadWriteLock.writing`)
    are defined by every process that reads a model, and ``contextlib`` (and
    the ``collections`` and ``functools`` it imports) cost a cold ``spamnb
    classify``, which calls none of them, a tenth of its instructions."""
    made = None

    def call(*args, **kwargs):
        nonlocal made
        if made is None:
            import contextlib

            made = contextlib.contextmanager(generator)
        return made(*args, **kwargs)

    call.__module__, call.__name__, call.__qualname__ = generator.__module__, generator.__name__, generator.__qualname__
    call.__doc__, call.__wrapped__ = generator.__doc__, generator
    return call

_MAKING = _thread.allocate_lock()   # held while a lock's condition is made (ReadWriteLock._condition)


class ReadWriteLock:
    """Readers together or one writer: :meth:`reading` and :meth:`writing`."""

    __slots__ = ("_mutex", "_cond", "_readers", "_writer", "_waiting", "_local")

    def __init__(self):
        self._mutex = _thread.allocate_lock()   # the condition's lock, taken directly where nothing waits on it
        self._cond = None        # the threading.Condition over _mutex, made by _condition() when first needed
        self._readers = 0        # threads reading now
        self._writer = None      # the ident of the thread writing, or None
        self._waiting = 0        # writers waiting
        self._local = _thread._local()   # .reads: this thread's reading depth (threading.local)

    def _condition(self):
        """The condition over the mutex: one for the lock's life, made once
        (under a lock of its own: two threads never make two)."""
        cond = self._cond
        if cond is None:
            with _MAKING:
                if self._cond is None:
                    import threading

                    self._cond = threading.Condition(self._mutex)
                cond = self._cond
        return cond

    def writer_is_me(self):
        return self._writer == _thread.get_ident()

    def enter_reading(self):
        """Count the calling thread a reader, once no writer holds the lock or waits for it
        (the outermost :class:`_Reading` of the thread)."""
        with self._mutex:
            while self._writer is not None or self._waiting:
                self._condition().wait()
            self._readers += 1

    def leave_reading(self):
        """A reader gone: wake the writer waiting when it was the last."""
        with self._mutex:
            self._readers -= 1
            if not self._readers and self._waiting:   # only a writer waits for the readers to go
                self._condition().notify_all()

    def reading(self):
        """A context manager holding the read lock (see :class:`_Reading`)."""
        return _Reading(self)

    def writing(self):
        """A context manager holding the write lock (see :class:`_Writing`)."""
        return _Writing(self)

    def enter_writing(self):
        """Make the calling thread the writer, once no other writer holds the
        lock and no reader reads; False when it is the writer already (an
        inner :class:`_Writing`: nothing to leave), else True.  Uncontended,
        the mutex alone is taken: the condition (and ``threading``) only when
        something must wait."""
        me = _thread.get_ident()
        if self._writer == me:
            return False
        if getattr(self._local, "reads", 0):
            raise RuntimeError("a SpamFilter cannot learn from within its own scoring (same thread)")
        with self._mutex:
            if self._writer is None and not self._readers:
                self._writer = me
                return True
        cond = self._condition()
        with cond:
            self._waiting += 1
            try:
                while self._writer is not None or self._readers:
                    cond.wait()
            except BaseException:   # gave up waiting: wake the readers it held back (a reader's
                cond.notify_all()   # release notifies only while a writer waits)
                raise
            finally:
                self._waiting -= 1
            self._writer = me
        return True

    def leave_writing(self):
        """The writer gone: wake whoever waits (a waiter made the condition
        before it waited, under the mutex held here)."""
        with self._mutex:
            self._writer = None
            if self._cond is not None:
                self._cond.notify_all()


class _Writing:
    """``with lock.writing():`` as a class rather than a generator-based
    context manager: a learn, a forget, a relabel's fold take it, and
    ``contextlib`` (with the ``collections`` and ``functools`` it imports)
    cost a cold relabel about 20 million instructions of its 115."""

    __slots__ = ("_lock", "_taken")

    def __init__(self, lock):
        self._lock = lock

    def __enter__(self):
        self._taken = self._lock.enter_writing()

    def __exit__(self, *exc_info):
        if self._taken:
            self._lock.leave_writing()


class _Reading:
    """``with lock.reading():`` as a class rather than a generator-based context
    manager, the condition's lock taken directly (in the lock's
    :meth:`~ReadWriteLock.enter_reading` and :meth:`~ReadWriteLock.leave_reading`)
    and no notify unless a writer waits (readers wait only for writers, woken
    when the writer is done): every classify takes it, and this costs 1.2
    instead of 2.5 microseconds (timeit, same run, load average 6).  Going
    through the two methods (issue 52: this class set the lock's reader
    count) cost nothing measurable: 2.58 against 2.60 microseconds, the best
    of 7 runs of 200,000 each, same machine, load average 9.8."""

    __slots__ = ("_lock", "_depth", "_outer")

    def __init__(self, lock):
        self._lock = lock

    def __enter__(self):
        lock = self._lock
        local = lock._local
        depth = getattr(local, "reads", 0)
        self._depth = depth
        self._outer = not (depth or lock._writer == _thread.get_ident())
        if self._outer:
            lock.enter_reading()
            local.reads = 1
        else:   # within its own read or write: nothing to wait for
            local.reads = depth + 1

    def __exit__(self, *exc_info):
        lock = self._lock
        if not self._outer:
            lock._local.reads = self._depth
            return
        lock._local.reads = 0
        lock.leave_reading()
