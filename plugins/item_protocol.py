"""A lean run protocol for evalrun's case items, used when it is provably equivalent.

pytest's own protocol costs about 0.25 ms per item on this class of machine (three phases,
each through four hooks, a ``PYTEST_CURRENT_TEST`` update, marker lookups and capture
wrappers), more than grading a case. A case item has no fixtures and no markers, so when the
only code that hooks into the phases is pytest's own runner, skipping and unittest plugins
(capture off, as ``evalrun run`` sets it), everything those hooks would do for the item is
what this module does directly: set up the collector chain, call ``runtest``, tear down
towards the next item, and send the setup, call and teardown reports through
``pytest_runtest_logreport`` (terminal, junitxml, ``-x``/``--maxfail``, xdist and evalrun's own
tally see exactly the reports they would). Any other plugin hooking a phase (logging,
warnings, timeouts, reruns, a conftest), ``--setup-only``/``--setup-show``, a marker on the
item or capture switched on: pytest's protocol runs, unchanged. Two debugging aids of
pytest's runner are left out: ``PYTEST_CURRENT_TEST`` is not set while a case is graded, and
a failing case does not set ``sys.last_value``. ``tests/plugins/test_item_protocol.py`` compares the
reports, junit XML and stored grades of both protocols.
"""

from __future__ import annotations

from typing import Any

import pytest
from _pytest.runner import check_interactive_exception

#: the hooks of an item's run whose implementers decide whether the lean protocol is exact
PHASE_HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
               "pytest_runtest_teardown", "pytest_runtest_makereport")

#: implementers whose effect on a marker-less, fixture-less item without capture is the
#: protocol below (runner), or nothing (skipping: markers; unittest/nose: their own items;
#: capture: off; tmpdir: keeps tmp_path fixtures of failed tests)
_EQUIVALENT = frozenset({"_pytest.runner", "_pytest.skipping", "_pytest.unittest", "_pytest.nose",
                         "_pytest.capture", "_pytest.tmpdir"})


def lean_allowed(config: pytest.Config, own_module: str) -> bool:
    """Whether this session's plugins leave nothing for pytest's protocol to add (checked once
    per session; ``own_module`` is evalrun's plugin, whose hooks are accounted for)."""
    if config.getoption("capture", "fd") != "no":
        return False
    if config.getoption("setuponly", False) or config.getoption("setupshow", False):
        return False
    known = _EQUIVALENT | {own_module}
    for name in PHASE_HOOKS:
        for impl in getattr(config.hook, name).get_hookimpls():
            # a wrapper of the protocol itself wraps the lean protocol just the same
            wraps = name == "pytest_runtest_protocol" and (impl.hookwrapper or impl.wrapper)
            if not wraps and getattr(impl.function, "__module__", None) not in known:
                return False
    return True


def run_lean(item: pytest.Item, nextitem: pytest.Item | None) -> bool:
    """Run ``item`` as pytest's runner would (see the module docstring); False, doing nothing,
    when the item carries a marker, so that pytest's protocol handles it."""
    if next(item.iter_markers(), None) is not None:
        return False
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reraise: tuple[type[BaseException], ...] = (pytest.exit.Exception,)
    if not item.config.getoption("usepdb", False):
        reraise += (KeyboardInterrupt,)
    setup_state = item.session._setupstate
    keywords = dict.fromkeys(item.keywords, 1)
    passed_setup = _phase(item, ihook, "setup", lambda: setup_state.setup(item), reraise, keywords)
    if passed_setup:
        _phase(item, ihook, "call", item.runtest, reraise, keywords)
    _phase(item, ihook, "teardown", lambda: setup_state.teardown_exact(nextitem), reraise, keywords)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _phase(item: pytest.Item, ihook: Any, when: Any, func: Any, reraise: tuple[type[BaseException], ...],
           keywords: dict[str, Any]) -> bool:
    call = pytest.CallInfo.from_call(func, when=when, reraise=reraise)
    if call.excinfo is None:
        # what TestReport.from_item_and_call makes of a passed phase, keywords gathered once
        # per item instead of once per phase
        sections = [(f"Captured {key} {rwhen}", content) for rwhen, key, content in item._report_sections]
        # pytest >= 9 gives reports the item's structured id, by which junitxml matches
        # the phases of one testcase; a string parsed again would not be the same key
        node_id = getattr(item, "id", item.nodeid)
        report = pytest.TestReport(node_id, item.location, dict(keywords), "passed", None, when, sections,
                                   call.duration, call.start, call.stop, user_properties=item.user_properties)
    else:
        report = pytest.TestReport.from_item_and_call(item, call)
    ihook.pytest_runtest_logreport(report=report)
    if check_interactive_exception(call, report):
        ihook.pytest_exception_interact(node=item, call=call, report=report)
    return report.passed
