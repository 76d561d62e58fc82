"""A toy suite in a package of its own, added as a plug-in adds one: its record
(:mod:`.record`) registered through :func:`whitebox_eval.suites.register` (:func:`register`);
no file of whitebox_eval names it."""

from __future__ import annotations


def register():
    """Register the toy suite's record (once per process) and return it."""
    from whitebox_eval import suites

    from toy_suite.record import SUITE

    return suites.SUITES.get(SUITE.name) or suites.register(SUITE)
