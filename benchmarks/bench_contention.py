"""Several copies of the README's main job at once: does each get its fair share of the cores?

For each arm (a way of starting torch's OpenMP threads), the job runs alone, then as N
simultaneous copies for each ``--copies`` N, each copy in its own folder. A copy's *fair
share* is N × the arm's time alone; the figure is the slowest copy's wall time over it
(1.0: the cores are shared without loss; the issue asked for at most 1.5, and at most 5% on
the job alone against ``before``).

Arms: ``after`` (evalrun's own setting: nothing in the environment, evalrun/_util/threads.py
sets libgomp's spin count), ``before`` (libgomp's default spin, as evalrun started torch before
it set one), ``passive`` (``OMP_WAIT_POLICY=PASSIVE``), ``one-thread`` (``OMP_NUM_THREADS=1``).

    python benchmarks/bench_contention.py [--arms before,after] [--copies 2 3] [--json PATH]

It takes a while: the main job is about 2.5 minutes alone on 2 cores, so ``before`` with
three copies can run half an hour. Run it on otherwise idle cores. ``--command`` times another
command line instead (a smoke run uses a short one).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalrun._util.threads import USER_SETTINGS

REPO = Path(__file__).resolve().parents[1]

#: arm -> environment variables set for every copy (evalrun's own choices removed first)
ARMS: dict[str, dict[str, str]] = {
    "after": {},
    "before": {"GOMP_SPINCOUNT": "300000"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "one-thread": {"OMP_NUM_THREADS": "1"},
}

#: variables the arms decide (evalrun's own, and the thread count); inherited values are dropped
#: so that each arm means one thing
DECIDED = (*USER_SETTINGS, "OMP_NUM_THREADS")


def readme_main_job() -> list[str]:
    """The README's second set-up command, as a user runs it."""
    for line in (REPO / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("evalrun run --pack mmw_book_reports"):
            words = shlex.split(line)
            return [str(Path(sys.executable).with_name("evalrun")), *words[1:]]
    raise SystemExit("README.md: no line starting 'evalrun run --pack mmw_book_reports'")


def run_copies(command: list[str], env: dict[str, str], copies: int, root: Path) -> list[float]:
    """Start ``copies`` copies at once, each in its own folder; their wall times in seconds."""
    procs = []
    for i in range(copies):
        folder = root / f"copy{i}"
        folder.mkdir(parents=True)
        log = (folder / "output.log").open("w")
        procs.append((time.perf_counter(), subprocess.Popen(command, cwd=folder, env=env,
                                                            stdout=log, stderr=subprocess.STDOUT),
                      folder, log))
    walls = []
    for start, proc, folder, log in procs:
        rc = proc.wait()
        walls.append(time.perf_counter() - start)
        log.close()
        if rc != 0:
            tail = (folder / "output.log").read_text(encoding="utf-8", errors="replace")[-2000:]
            raise SystemExit(f"a copy exited with {rc} in {folder}:\n{tail}")
    return walls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="before,after",
                        help=f"comma-separated, from {', '.join(ARMS)} (default before,after)")
    parser.add_argument("--copies", type=int, nargs="+", default=[2, 3],
                        help="numbers of simultaneous copies to time (default 2 3)")
    parser.add_argument("--command", help="time this command line instead of the README's main job")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"--arms: unknown {', '.join(unknown)} (known: {', '.join(ARMS)})")
    if any(n < 2 for n in args.copies):
        parser.error("--copies: each number must be at least 2 (1 is the job alone, always timed)")
    command = shlex.split(args.command) if args.command else readme_main_job()
    base = {k: v for k, v in os.environ.items() if k not in DECIDED}
    print(f"command: {shlex.join(command)}")
    print(f"cores: {os.cpu_count()}; load average at start: {os.getloadavg()[0]:.2f}")
    figures: dict[str, dict[str, object]] = {}
    alone_by_arm: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench_contention_") as tmp:
        for arm in arms:
            env = base | ARMS[arm]
            alone = alone_by_arm[arm] = run_copies(command, env, 1, Path(tmp) / arm / "alone")[0]
            rows: dict[str, object] = {"alone_s": round(alone, 1)}
            print(f"{arm:>10}  alone: {alone:7.1f} s (load average {os.getloadavg()[0]:.2f})")
            for n in args.copies:
                walls = run_copies(command, env, n, Path(tmp) / arm / f"x{n}")
                ratio = max(walls) / (n * alone) if alone > 0 else 0.0
                rows[str(n)] = {"walls_s": [round(w, 1) for w in walls], "fair_share_s": round(n * alone, 1),
                                "slowest_over_fair_share": round(ratio, 3)}
                print(f"{arm:>10}  {n} at once: " + ", ".join(f"{w:.1f}" for w in walls)
                      + f" s; fair share {n * alone:.1f} s; slowest / fair share = {ratio:.2f}"
                      f" (load average {os.getloadavg()[0]:.2f})")
            figures[arm] = rows
    if "before" in alone_by_arm and "after" in alone_by_arm:
        print(f"job alone, after / before: {alone_by_arm['after'] / alone_by_arm['before']:.3f}")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "arms": figures}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
