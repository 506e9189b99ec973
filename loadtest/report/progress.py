"""Progress of a report build: a rich status line (or a bar, for a batch of jobs) while a step runs,
a tick and its time after."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

T = TypeVar("T")


class Steps:
    """Numbered steps; silent without a console (library use, tests)."""

    def __init__(self, console: Console | None, total: int) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, text: str) -> Iterator[None]:
        label = self._label(text)
        start = time.monotonic()
        if self.console is None:
            yield
        else:
            with self.console.status(f"{label} ..."):
                yield
        self._finished(text, label, start)

    def run_all(self, text: str, jobs: dict[str, Callable[[], T]], workers: int = 3) -> dict[str, T]:
        """Run independent jobs on a few threads, with a progress bar; results in the jobs' order.

        Spark runs jobs submitted from several threads side by side: on a small machine most of a
        small job is planning and scheduling, which then overlaps.
        """
        label = self._label(text)
        start = time.monotonic()
        results: dict[str, T] = {}
        with self._bar(label, len(jobs)) as advance, ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(job): name for name, job in jobs.items()}
            for future in as_completed(futures):
                results[futures[future]] = future.result()  # the first failure ends the step
                advance(futures[future])
        self._finished(text, label, start)
        return {name: results[name] for name in jobs}

    def _label(self, text: str) -> str:
        self.done += 1
        return f"[{self.done}/{self.total}] {text}"

    def _finished(self, text: str, label: str, start: float) -> None:
        elapsed = time.monotonic() - start
        self.timings[text] = elapsed
        if self.console is not None:
            self.console.print(f"[green]✓[/] {label} [dim]{elapsed:.1f} s[/]", highlight=False)

    @contextlib.contextmanager
    def _bar(self, label: str, total: int) -> Iterator[Callable[[str], None]]:
        if self.console is None or not self.console.is_terminal:
            yield lambda _name: None  # a bar in a log file is a blank line per refresh
            return
        columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("[dim]{task.fields[last]}"), TimeElapsedColumn())
        with Progress(*columns, console=self.console, transient=True) as progress:
            task = progress.add_task(label, total=total, last="")
            yield lambda name: progress.update(task, advance=1, last=name)
