"""The loop shared by the judge's outbound senders (API callbacks, LMS grade passback).

A sender is a thread that, every `poll_s` seconds or at once when kicked, claims due rows from the
database (each claimed by one conditional UPDATE, so one process sends each) and hands each to a
small pool of delivery threads. A slow or dead receiver holds a delivery thread for at most its
time-out, never a grading thread; a claimed row whose sender died is due again when its lease ends.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from server.store.faults import Outage

log = logging.getLogger(__name__)


class DueSender:
    """Base class: subclasses implement `claim()` (due rows, claimed) and `deliver(row)`.

    Args:
        name: the threads' name (logs).
        poll_s: seconds between database polls (`kick` wakes the loop at once).
        threads: deliveries in flight at once.
    """

    def __init__(self, *, name: str, poll_s: float = 1.0, threads: int = 4):
        self.name, self.poll_s = name, poll_s
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._faults = Outage(f"{name}: the database", log)

    def claim(self) -> list[Any]:
        """The rows due now, each claimed for this process."""
        raise NotImplementedError

    def deliver(self, row: Any) -> None:
        """One delivery attempt of a claimed row, recorded in the database."""
        raise NotImplementedError

    def start(self) -> None:
        threading.Thread(target=self._loop, name=self.name, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def kick(self) -> None:
        """Looks for due rows now (a verdict was just stored)."""
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                due = self.claim()
                self._faults.recovered()
            except Exception as exc:  # noqa: BLE001 - the database is away: try again later (said once per outage)
                self._faults.failed(exc)
                continue
            for row in due:
                self._pool.submit(self._deliver_logged, row)

    def _deliver_logged(self, row: Any) -> None:
        try:
            self.deliver(row)
        except Exception:  # never let one row stop the others; its lease runs out and it is due again
            log.exception("%s: a delivery failed", self.name)
