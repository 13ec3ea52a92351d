"""pytest plugin for `.ci/pytest_rerun_crashes.py`. `pytest_runtest_logreport`: the node id of every test that got an outcome,
one per line, in the file named by $JAXSTREAM_CI_OUTCOMES, in the order they reported, each followed
by a tab and the xdist worker that ran it ("-" without xdist). The controlling process writes it
(xdist workers send it their reports); a test counts once its call phase reports, or when its setup
or teardown fails or skips it, or when its worker crashed (reported as a failure)."""
import os


def pytest_runtest_logreport(report):
    path = os.environ.get("JAXSTREAM_CI_OUTCOMES")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controlling process receives the worker's reports and writes them
    if path and (report.when == "call" or report.outcome != "passed"):
        with open(path, "a", encoding="utf-8") as f:
            node = getattr(report, "node", None)                 # set by xdist's controller
            worker = getattr(getattr(node, "gateway", None), "id", None) or "-"
            f.write(f"{report.nodeid}\t{worker}\n")


def pytest_collection_finish(session):
    """With $JAXSTREAM_CI_COLLECTED: the node ids selected (after -m and -k), one per line."""
    path = os.environ.get("JAXSTREAM_CI_COLLECTED")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(item.nodeid + "\n" for item in session.items)
