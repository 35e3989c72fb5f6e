"""Background jobs: each a name and a function, run in a fixed order by a pass.

A job reports counts (``report.add(transactions_confirmed=2)``) and may isolate parts of
its work (``with report.part("chain 5"):``): a failing part or job is logged and
recorded in `RunSummary.errors` under ``"<job>"`` or ``"<job>: <part>"``, and the pass
goes on with the rest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from ..errors import TreasuryError
from .logs import Conditions
from .runtime import Runtime

log = logging.getLogger("treasury.jobs")


@dataclass
class RunSummary:
    """What one pass of the background jobs did: counts by name, errors by job (part)."""

    counts: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.standing: set[str] = set()  # counts of conditions, not of work done

    def __getitem__(self, name: str) -> int:
        """A count, 0 when nothing was counted under `name`."""
        return self.counts.get(name, 0)

    @property
    def work(self) -> dict[str, int]:
        """The non-zero counts of work done (conditions such as a wallet without gas
        left out): what makes a pass worth a log line."""
        return {k: n for k, n in sorted(self.counts.items()) if n and k not in self.standing}


class Report:
    """One job's view of the summary of its pass."""

    def __init__(self, job: str, summary: RunSummary, conditions: Conditions) -> None:
        self._job, self._summary, self._conditions = job, summary, conditions

    def condition(self, part: str, message: str, *, count: str) -> None:
        """A standing condition of `part` (logged when it starts or changes, not at every
        pass), counted under `count`."""
        self._conditions.report(f"{self._job}: {part}", message)
        self._summary.standing.add(count)
        self.add({count: 1})

    def add(self, counts: Mapping[str, int] | None = None, **more: int) -> None:
        for name, n in {**(counts or {}), **more}.items():
            self._summary.counts[name] = self._summary.counts.get(name, 0) + n

    @contextmanager
    def part(self, name: str | None = None) -> Iterator[None]:
        """Run a part of the job: a failure is recorded and does not stop the rest."""
        where = self._job if name is None else f"{self._job}: {name}"
        try:
            yield
        except Exception as error:  # isolated on purpose: one part's outage is reported
            message = error.message if isinstance(error, TreasuryError) else repr(error)
            self._conditions.report(where, f"{where} failed: {message}", exc_info=True)
            self._summary.errors[where] = message


@dataclass(frozen=True)
class Job:
    name: str
    run: Callable[[Runtime, Report], None]


def run_pass(runtime: Runtime, jobs: Sequence[Job]) -> RunSummary:
    """Run each job once, in order; each isolated from the others."""
    summary = RunSummary()
    for job in jobs:
        report = Report(job.name, summary, runtime.conditions)
        with report.part():
            job.run(runtime, report)
    runtime.conditions.settle(job.name for job in jobs)
    return summary


class BackgroundWorker:
    """Runs `run_pass` every `interval` seconds until stopped: in a daemon thread after
    `start()` (``treasury serve``), or in the caller's thread with `run()` (``treasury
    worker``). A pass that raises is logged and the loop goes on."""

    def __init__(
        self,
        run_pass: Callable[[], RunSummary],
        interval: float = 5.0,
        on_pass: Callable[[RunSummary], None] | None = None,
    ) -> None:
        self._run_pass, self._interval, self._on_pass = run_pass, interval, on_pass
        self._failures = Conditions(log)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                summary = self._run_pass()
                if self._on_pass is not None:
                    self._on_pass(summary)
            except Exception as error:  # e.g. the storage is down: try again next pass
                message = error.message if isinstance(error, TreasuryError) else repr(error)
                self._failures.report(
                    "pass",
                    f"background pass failed: {message}",
                    level=logging.ERROR,
                    exc_info=True,
                )
            else:
                self._failures.settle(["pass"])
            self._stop.wait(self._interval)

    def start(self) -> Self:
        self._thread = threading.Thread(target=self.run, name="treasury-jobs", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the loop to end and wait (up to `timeout`) for the pass under way."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
