"""Adaptive worker count: a hill-climbing concurrency limit driven by measured throughput.

The engine starts up to ``maximum`` writer threads but lets only :attr:`Controller.limit` of them
take work at a time.  Every :data:`INTERVAL_S` it calls :meth:`Controller.observe` with the files
and bytes completed in that interval and uses the limit it returns.  This module is pure: no
clocks, no threads, no I/O -- the caller supplies the measurements, so tests drive it with
simulated throughput curves.

The algorithm (the full write-up with provenance is ``docs/tuning.md``):

* **Rate.**  Work is counted in *file-equivalents*: ``files + bytes / BYTES_PER_FILE_COST``, so a
  phase of big files (few files/s, many bytes/s) is not mistaken for a slowdown.  Intervals are
  pooled into one *sample* until it holds at least :data:`MIN_SAMPLE_UNITS` (a slow filesystem
  at a low count completes only a handful of files per interval); an interval in which nothing
  completed carries no information about the worker count and is skipped.
* **Probe up, keep what pays, back off what does not.**  Starting from the policy's guess it
  measures the current count, then probes double the count (multiplicative steps, like TCP slow
  start and Netflix concurrency-limits' Vegas/AIMD families: a checkout can be over in a couple
  of seconds, so additive +1 steps would never get anywhere).  A probe is *kept* only if its rate
  beats the current one by more than :data:`NOISE_MARGIN`; otherwise it backs off to the current
  count and probes half of it the same way, continuing downwards while that pays.  A probe that is
  clearly better or worse (by :data:`EARLY_DECISION`) is decided on one sample, otherwise on
  :data:`MAX_SAMPLES_PER_TRIAL` (the bar falls as samples accumulate).
* **Settle.**  When neither neighbour (x2, /2) pays, the controller settles and stops probing:
  the curve is flat there, and a flat curve costs nothing to sit on.
* **A saturated server.**  Per-file latency is ``limit / rate`` (Little's law: the workers in
  flight over the files completed per second).  A probe up whose throughput stays flat (not
  kept, and not clearly falling: :data:`SATURATION_FLAT`) while per-file latency rose by
  :data:`SATURATION_LATENCY_RISE` or more found a server that only queues the extra requests:
  the controller marks it saturated and adds no workers again (no probe up, also not in the
  periodic re-checks) until the settled rate rises by itself (:data:`DRIFT`: the server's other
  load went away); probes down continue.  A fall of the settled rate (other clients took more
  of the server) re-opens probing but keeps the mark.  One client on a server shared with
  others cannot see the server's total: a probe up that takes a larger share of it pays for
  that client and is kept; the per-mount ceiling is what bounds a farm.
* **Composition changes and wrong decisions.**  After settling it watches the rate at the
  settled count.  A sustained jump (:data:`DRIFT` for :data:`DRIFT_SAMPLES` samples in a row,
  far outside the noise) starts a fresh probing episode measured from the new regime; otherwise
  a periodic re-check probes the neighbours against the settled moving average.  Each re-probe
  doubles the samples that must pass before the next one (:data:`REPROBE_AFTER`), so noise can
  never make it oscillate: at most ``log2(n / REPROBE_AFTER)`` episodes in ``n`` samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

#: How often the engine should call :meth:`Controller.observe`.  A 40k-file tmpfs checkout takes
#: ~1-2 s (docs/benchmarks.md, time per file), so 0.1 s gives it 10-20 intervals -- enough for the
#: baseline and two or three probes before it ends.  Shorter intervals would be dominated by thread
#: scheduling jitter (see NOISE_MARGIN for the measured jitter at 0.1 s).
INTERVAL_S: float = 0.1

#: Bytes that cost as much as creating one file (open + write + close + directory entry). Measured
#: on the dev VM's tmpfs (2 vCPU; docs/benchmarks.md, Machine) from one Python thread: a 1-byte file
#: costs 10-17 us, writes run at 0.41-0.75 ns/byte, so one file ~ 16-31 KiB (3 runs;
#: docs/tuning.md).  Not measured on network filesystems, where a file costs 2-3 round trips and
#: bytes are relatively cheaper, so the equivalent is larger; 64 KiB is a guess between the two.  An
#: error here only makes a big-file phase look somewhat faster or slower; DRIFT absorbs that.
BYTES_PER_FILE_COST: int = 64 * 1024

#: Minimum file-equivalents pooled into one sample.  At 1 worker on a 2 ms-latency filesystem
#: (~100 files/s) one 0.1 s interval completes ~10 files, a 10% quantisation error; 32 units
#: bound that near 3% while costing only ~0.3 s there.  On tmpfs every interval exceeds it.
MIN_SAMPLE_UNITS: float = 32.0

#: A probe must beat the current count by more than this fraction to be kept.  Chosen by
#: simulation (tests/test_controller.py): with +-10% uniform noise per interval, 8% and 10% let a
#: flat curve wander one doubling on noise (10 seeds), 12% did not, and the time to reach the
#: knee of latency-bound curves did not change (doublings below a knee gain 30-100%).  Measured
#: interval noise on the dev VM was far larger while other benchmarks loaded both CPUs
#: (coefficient of variation 19-110% at 0.1 s on tmpfs); that is what the periodic re-check is
#: for.
NOISE_MARGIN: float = 0.12

#: A probe whose first sample differs from the current rate by more than this is decided at once
#: (a doubling below the knee of a latency-bound filesystem gives +100%; far outside +-20% noise).
EARLY_DECISION: float = 0.35

#: Samples taken at the current count before the first probe (and at each re-probe).  Simulated
#: (tests/test_controller.py curves, +-20% noise): one sample reaches the knee of a latency-bound
#: curve ~3% sooner from a low guess; an ambiguous probe is sampled up to MAX_SAMPLES_PER_TRIAL
#: times anyway, which is where the noise matters.
BASELINE_SAMPLES: int = 2
#: A probe that stays ambiguous is sampled at most this many times, then NOISE_MARGIN decides.
#: Probing within the flat part of a curve costs nothing, so the extra samples are cheap where
#: they are spent; a clearly worse probe is cut off after one sample.
MAX_SAMPLES_PER_TRIAL: int = 4

#: After settling, a change of the settled rate by more than this factor ...
DRIFT: float = 0.35
#: ... in this many consecutive samples (all in the same direction) starts a new probing episode.
#: With +-20% noise three consecutive 35% deviations are impossible; a real change of the
#: workload's composition (e.g. a directory of huge files) shows in every sample.
DRIFT_SAMPLES: int = 3
#: Samples that must pass after settling before the first re-probe (on drift, or a periodic
#: re-check of the neighbours); doubled after each re-probe, so at most
#: log2(n / REPROBE_AFTER) re-probes happen in n samples.  At ~1 sample per interval: 1.6 s,
#: then 3.2 s, 6.4 s, ... after settling,
#: so a ~1.5 s tmpfs checkout is not charged for re-checks; a 2 ms-latency one (tens of s) is.
REPROBE_AFTER: int = 16
#: A periodic re-check keeps a probe only if it beats the settled rate by this much: it is there
#: to catch a large gain a noisy early sample hid (a doubling below a latency knee: +30..100%),
#: not to wander along a flat curve on noise (simulated at +-20%: NOISE_MARGIN let it drift).
RECHECK_MARGIN: float = 0.25
#: Weight of a new sample in the settled rate's moving average (slow: follows gradual change).
SETTLED_EWMA_ALPHA: float = 0.2
#: A rejected probe up whose per-file latency rose by this factor found a saturated server.
#: Doubling the workers on a server with room keeps the latency (the rate doubles: ratio 1);
#: on a saturated one the rate stays flat and the latency doubles (ratio 2).  1.6 is the
#: latency ratio of a probe that gained 25% (2 / 1.25): anything gaining less than that
#: and already rejected by NOISE_MARGIN is mostly queueing.
SATURATION_LATENCY_RISE: float = 1.6
#: ... and whose rate stayed flat: at least this share of the current rate.  A clear fall
#: (beyond EARLY_DECISION) is the client's CPUs contending (a CPU-bound checkout at 2 workers
#: probing 4), not a server that queues; marking that saturated would hold the count down
#: after the workload turns latency-bound, since only a rise of the rate clears the mark.
SATURATION_FLAT: float = 1.0 / (1.0 + EARLY_DECISION)


class Phase(Enum):
    MEASURING = "measuring"  # collecting samples at the current count (the baseline)
    PROBING = "probing"  # collecting samples at a candidate count
    SETTLED = "settled"


@dataclass(frozen=True)
class Change:
    """One change of the limit, for reports and tests."""

    at_seconds: float
    old: int
    new: int
    reason: str


class Controller:
    """Adaptive concurrency limit, driven by measured throughput (see the module docstring)."""

    def __init__(self, initial: int, *, minimum: int = 1, maximum: int = 64) -> None:
        if minimum < 1 or maximum < minimum:
            raise ValueError(f"bad worker bounds: minimum={minimum}, maximum={maximum}")
        self._minimum = minimum
        self._maximum = maximum
        self._initial = self._clamp(initial)
        self._home = self._initial  # the count we stand on (last one kept)
        self._limit = self._initial  # the count in use right now (home, or a probe)
        self._phase = Phase.MEASURING
        self._direction = 1  # +1: probe up first; -1: probe down first
        self._stats: dict[int, list[float]] = {}  # this episode: count -> sample rates
        self._acc_units = 0.0
        self._acc_seconds = 0.0
        self._elapsed = 0.0
        self._settled_at: float | None = None
        self._settled_rate = 0.0
        self._settled_samples = 0
        self._drift_streak = 0
        self._drift_sign = 0
        self._streak_rates: list[float] = []
        self._reprobe_after = REPROBE_AFTER
        self._episodes = 1
        self._readapted = 0  # drift-triggered re-probes
        self._margin = NOISE_MARGIN
        self._saturated: tuple[int, float, float] | None = None  # (count, latency x, rate x)
        self.changes: list[Change] = []

    # -- public -------------------------------------------------------------------------------

    @property
    def limit(self) -> int:
        """The number of writer threads that may take work now."""
        return self._limit

    @property
    def settled(self) -> bool:
        """True once probing found nothing better (until a sustained rate change re-opens it)."""
        return self._phase is Phase.SETTLED

    @property
    def saturated(self) -> bool:
        """True while a probe up found a server that only queued the extra requests."""
        return self._saturated is not None

    @property
    def initial(self) -> int:
        return self._initial

    @property
    def elapsed(self) -> float:
        """Seconds observed so far."""
        return self._elapsed

    def observe(self, files: int, nbytes: int, seconds: float) -> int:
        """Record what completed in the last interval; return the limit to use next."""
        if seconds > 0:
            self._elapsed += seconds
        if seconds <= 0 or (files <= 0 and nbytes <= 0):
            # Nothing completed: the writers were starved (or the checkout is ending); this says
            # nothing about the worker count, and counting it would punish whichever probe ran.
            return self._limit
        self._acc_units += max(files, 0) + max(nbytes, 0) / BYTES_PER_FILE_COST
        self._acc_seconds += seconds
        if self._acc_units >= MIN_SAMPLE_UNITS:
            rate = self._acc_units / self._acc_seconds
            self._acc_units = 0.0
            self._acc_seconds = 0.0
            self._sample(rate)
        return self._limit

    def summary(self) -> str:
        """One line for the end-of-checkout summary."""
        if self._home != self._initial or self._limit != self._initial:
            head = f"adapted {self._initial} -> {self._limit} workers"
        else:
            head = f"kept {self._initial} workers (nothing else paid)"
        if self._phase is Phase.SETTLED and self._settled_at is not None:
            tail = f"settled after {self._settled_at:.1f} s"
        else:
            tail = f"still probing when the checkout ended ({self._elapsed:.1f} s)"
        extra = f", re-adapted {self._readapted}x to a changed workload" if self._readapted else ""
        if self._saturated is not None:
            n, latency, rate = self._saturated
            extra += (
                f"; the server was saturated at {n} workers (latency per file x{latency:.1f}, "
                f"files/s x{rate:.2f}): no more workers added"
            )
        return f"{head}, {tail}{extra}"

    # -- the algorithm --------------------------------------------------------------------------

    def _clamp(self, n: int) -> int:
        return max(self._minimum, min(self._maximum, n))

    def _neighbours(self) -> list[int]:
        up = self._clamp(self._home * 2)
        down = self._clamp(self._home // 2)
        ordered = [up, down] if self._direction > 0 and self._saturated is None else [down]
        return [n for n in ordered if n != self._home]

    def _mean(self, n: int) -> float:
        samples = self._stats[n]
        return sum(samples) / len(samples)

    def _set_limit(self, n: int, reason: str) -> None:
        if n != self._limit:
            self.changes.append(Change(self._elapsed, self._limit, n, reason))
            self._limit = n

    def _sample(self, rate: float) -> None:
        if self._phase is Phase.SETTLED:
            self._watch(rate)
            return
        self._stats.setdefault(self._limit, []).append(rate)
        if self._phase is Phase.MEASURING:
            if len(self._stats[self._home]) >= BASELINE_SAMPLES:
                self._next_move()
            return
        # PROBING: decide early if the first sample is decisive, else after a full trial.
        candidate = self._limit
        ratio = self._mean(candidate) / self._mean(self._home)
        n = len(self._stats[candidate])
        # Sequential test: the bar for deciding falls as samples accumulate (the noise of a mean
        # of n samples shrinks like 1/sqrt(n)); after MAX_SAMPLES_PER_TRIAL the margin decides.
        decisive = abs(ratio - 1.0) > EARLY_DECISION / math.sqrt(n)
        if not decisive and n < MAX_SAMPLES_PER_TRIAL:
            return
        if ratio > 1.0 + self._margin:
            self._direction = 1 if candidate > self._home else -1
            self._home = candidate
        elif candidate > self._home:
            latency = (candidate / self._home) / ratio  # Little's law: workers / rate
            if latency >= SATURATION_LATENCY_RISE and ratio >= SATURATION_FLAT:
                self._saturated = (self._home, latency, ratio)
        self._next_move()

    def _next_move(self) -> None:
        """From home: move to a known-better neighbour, probe an unknown one, or settle."""
        while True:
            base = self._mean(self._home)
            for n in self._neighbours():
                known = n in self._stats
                if known and self._mean(n) > base * (1.0 + self._margin):
                    self._direction = 1 if n > self._home else -1
                    self._home = n
                    break  # re-evaluate from the new home
                if not known:
                    self._phase = Phase.PROBING
                    self._set_limit(n, "probe")
                    return
            else:
                self._settle()
                return

    def _settle(self) -> None:
        self._set_limit(self._home, "settle")
        self._phase = Phase.SETTLED
        if self._settled_at is None:
            self._settled_at = self._elapsed
        self._settled_rate = self._mean(self._home)
        self._settled_samples = 0
        self._drift_streak = 0
        self._drift_sign = 0

    def _watch(self, rate: float) -> None:
        """Settled: follow the rate slowly; re-open probing on a sustained jump or a re-check."""
        self._settled_samples += 1
        ratio = rate / self._settled_rate
        sign = 1 if ratio > 1.0 + DRIFT else -1 if ratio < 1.0 / (1.0 + DRIFT) else 0
        if sign != 0 and sign == self._drift_sign:
            self._drift_streak += 1
            self._streak_rates.append(rate)
        else:
            self._drift_streak = 1 if sign else 0
            self._streak_rates = [rate] if sign else []
        self._drift_sign = sign
        if sign == 0:
            # log-space EWMA: symmetric for rises and falls.
            self._settled_rate = math.exp(
                (1 - SETTLED_EWMA_ALPHA) * math.log(self._settled_rate)
                + SETTLED_EWMA_ALPHA * math.log(rate)
            )
        if self._settled_samples < self._reprobe_after:
            return
        if self._drift_streak >= DRIFT_SAMPLES:
            # The workload changed: measure afresh from the new regime's samples.
            if self._drift_sign > 0:
                # The server serves more than it did: its other load went away, learn it
                # again.  A fall (other clients took more of it) leaves it saturated.
                self._saturated = None
            self._readapted += 1
            self._reopen(list(self._streak_rates), NOISE_MARGIN)
        elif sign == 0:
            # Periodic re-check: one wrong early decision (e.g. a noisy sample that hid a real
            # gain) must not pin a 2 ms-latency checkout at a low count for its whole life.
            # The baseline is the settled moving average, which many samples back.
            self._reopen([self._settled_rate], RECHECK_MARGIN)

    def _reopen(self, baseline: list[float], margin: float) -> None:
        self._margin = margin
        self._reprobe_after *= 2
        self._episodes += 1
        self._stats = {self._home: baseline}
        self._direction = 1
        self._phase = Phase.MEASURING
        if len(baseline) >= BASELINE_SAMPLES:
            self._next_move()
