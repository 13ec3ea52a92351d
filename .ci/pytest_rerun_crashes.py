"""Run pytest (the arguments given); if it fails only because xdist workers crashed, run the
tests they were running again, once, in a fresh process without xdist.

Why: jaxlib's XLA:CPU crashes a test process now and then, in native code and in tests of every
kind (2026-11-27: segfaults in the compilation cache's executable serialisation, twice, and an
abort inside `backend_compile_and_load` with no cache, in an slpc README example whose code had
not changed). A crashed worker is reported as a failure of the test it was running
(``worker 'gw1' crashed while running 'tests/...'``); every other test still runs. An assertion
failure, an error, or a crash that happens again on the rerun fails CI as before. Every rerun is
printed, so a crash that keeps coming back shows in the log.

Usage: python .ci/pytest_rerun_crashes.py PYTEST_ARGS...
"""
import re
import subprocess
import sys

CRASH = re.compile(r"worker '(gw\d+)' crashed while running '([^']+)'")
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def run(args):
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    return proc.wait(), "".join(lines)


def main(argv):
    rc, out = run(argv)
    if rc == 0:
        return 0
    crashed = sorted({m.group(2) for m in CRASH.finditer(out)})
    failed = sorted(set(FAILED.findall(out)))
    if not crashed or set(failed) != set(crashed):
        return rc  # a real failure (or nothing we can attribute to a crash)
    print(f"\n== {len(crashed)} test(s) failed only because their xdist worker crashed in native code: "
          f"{', '.join(crashed)}. Running them again, once, in a fresh process.", flush=True)
    opts = []  # keep -p and -m (the slow run's marker) with their values; drop xdist's options
    i = 0
    while i < len(argv):
        if argv[i] in ("-p", "-m") and i + 1 < len(argv):
            opts += argv[i:i + 2]
            i += 2
        else:
            i += 1
    rc2, _ = run([*opts, *crashed])
    print(f"== rerun of the crashed test(s): {'passed' if rc2 == 0 else 'FAILED'} (exit status {rc2})", flush=True)
    return rc2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
