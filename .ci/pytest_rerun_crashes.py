"""Run pytest (the arguments given); if it fails only because xdist workers crashed, run again,
once, in a fresh process without xdist, the tests they were running and every test that never ran.

Why: jaxlib's XLA:CPU crashes a test process now and then, in native code and in tests of every
kind (2026-11-27: segfaults in the compilation cache's executable serialisation, twice, an abort
inside `backend_compile_and_load` with no cache in an slpc README example whose code had not
changed, and a segfault in `test_tune_improves_held_out_loss`). A crashed worker is reported as a
failure of the test it was running (``worker 'gw1' crashed while running 'tests/...'``). With
``--dist loadfile --max-worker-restart=0`` the rest of that worker's file then never runs and
pytest does not say so (10 tests of test_grad_streams.py on 2026-11-27), so the tests collected are
compared with the tests reported (`outcomes_plugin.py`) and the missing ones are run too. An
assertion failure, an error, or a crash that happens again on the rerun fails CI as before. Every
rerun is printed, so a crash that keeps coming back shows in the log, with the files the crashed
worker ran before it, in order (to reproduce it in one process: the crash depends on them).

Usage: python .ci/pytest_rerun_crashes.py PYTEST_ARGS...
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
XDIST_WITH_VALUE = ("-n", "--dist", "--max-worker-restart", "--durations")

CRASH = re.compile(r"worker '(gw\d+)' crashed while running '([^']+)'")
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def run(args, plugin_env=None, echo=True):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    if plugin_env:
        env.update(plugin_env)
        args = ["-p", "outcomes_plugin", *args]
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", env=env)
    lines = []
    for line in proc.stdout:
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()
        lines.append(line)
    return proc.wait(), "".join(lines)


def serial_options(argv):
    """The options without xdist's (and --durations), to collect or rerun in one process."""
    opts, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in XDIST_WITH_VALUE:
            i += 2
            continue
        if not a.startswith(tuple(o + "=" for o in XDIST_WITH_VALUE)):
            opts.append(a)
        i += 1
    return opts


def _ids(var, args, echo):
    """(exit status, output, [(node id, worker)] the plugin wrote to the file in $var, in order) of pytest `args`."""
    fd, path = tempfile.mkstemp(prefix="jaxstream-ci-")
    os.close(fd)
    try:
        rc, out = run(args, {var: path}, echo)
        with open(path, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
        return rc, out, [(r[0], r[1] if len(r) > 1 else "-") for r in rows]
    finally:
        os.unlink(path)


def files_run_by(worker, rows):
    """The test files `worker` reported, in the order it first reported each."""
    files = []
    for nodeid, w in rows:
        f = nodeid.split("::")[0]
        if w == worker and f not in files:
            files.append(f)
    return files


def main(argv):
    rc, out, want = _ids("JAXSTREAM_CI_COLLECTED", [*serial_options(argv), "--collect-only"], echo=False)
    want = {nodeid for nodeid, _ in want}
    if rc != 0 or not want:
        print(out)
        return rc or 1
    rc, out, rows = _ids("JAXSTREAM_CI_OUTCOMES", argv, echo=True)
    missing = sorted(want - {nodeid for nodeid, _ in rows})
    crashed = sorted({m.group(2) for m in CRASH.finditer(out)})
    for m in CRASH.finditer(out):
        print(f"== worker {m.group(1)} ran these files, in this order, before it crashed: "
              f"{' '.join(files_run_by(m.group(1), rows))}", flush=True)
    failed = sorted(set(FAILED.findall(out)))
    if rc == 0 and not missing:
        return 0
    if set(failed) != set(crashed) or (rc != 0 and not crashed):
        return rc if rc != 0 else 1  # a real failure (or nothing we can attribute to a crash)
    print(f"\n== {len(crashed)} test(s) failed only because their xdist worker crashed in native code"
          f"{': ' + ', '.join(crashed) if crashed else ''}; {len(missing)} selected test(s) never ran"
          f"{': ' + ', '.join(missing) if missing else ''}. Running them, once, in a fresh process.", flush=True)
    rc2, _ = run([*serial_options(argv), *crashed, *missing])
    print(f"== rerun: {'passed' if rc2 == 0 else 'FAILED'} (exit status {rc2})", flush=True)
    return rc2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
