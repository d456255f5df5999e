"""Tabs that load when they are first shown, not all at every page load.

A page load does only the work of the tab its address opens (`?tab=ID`, else the first); any other tab
loads the first time a visitor opens it, once per page. The Runs tab reads a whole run and the
Leaderboard every run folder: done for every visitor at every page load, they cost seconds of server
time that most visitors never look at.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import gradio as gr

Loader = tuple[Callable[..., Any], Any, Any]  # (handler, inputs, outputs) as demo.load takes them


def wanted_tab(request: gr.Request | None, known: list[str]) -> str:
    """The tab the address opens: `?tab=ID`, `?run=NAME` alone opening the Runs tab, else the first."""
    params = dict(getattr(request, "query_params", None) or {})
    wanted = str(params.get("tab") or ("runs" if params.get("run") else ""))
    return wanted if re.fullmatch(r"[a-z_]{1,32}", wanted) and wanted in known else known[0]


def _as_list(components: Any) -> list[Any]:
    if components is None:
        return []
    return list(components) if isinstance(components, list | tuple) else [components]


def _call(fn: Callable[..., Any], values: list[Any], request: gr.Request | None, profile: Any) -> list[Any]:
    """`fn(*values)`, given the request or the signed-in profile when it asks for them by name."""
    parameters = inspect.signature(fn).parameters
    extra = {name: value for name, value in (("request", request), ("profile", profile)) if name in parameters}
    out = fn(*values, **extra)
    return list(out) if isinstance(out, tuple) else [out]


class LazyTabs:
    """Collects each tab's loaders, then wires them: a tab loads on its first selection, whether Gradio's
    (the first tab at start-up, the tab the address names once the page-load event selects it) or a
    visitor's; a per-page flag keeps a second visit from reloading what the visitor set."""

    def __init__(self) -> None:
        self._tabs: list[tuple[str, gr.Tab, list[Loader]]] = []

    def add(self, tab_id: str, tab: gr.Tab, *loaders: Loader) -> None:
        self._tabs.append((tab_id, tab, list(loaders)))

    def wire(self, demo: gr.Blocks, tabs: gr.Tabs) -> None:
        """A page-load event that only selects the tab the address names, and per tab a selection event that
        loads it. Each tab has a per-page flag, set once it is loaded (a tab without loaders: once shown).

        The page-load event has no other outputs on purpose: Gradio rebuilds every output component of an
        event, even one the handler leaves as it is (`gr.skip()`), and a page load that named every tab's
        outputs spent most of its server time so. Selecting a tab, even from the server, sends that tab's
        selection event, which does the loading."""
        known = [tab_id for tab_id, _, _ in self._tabs]
        flags = [gr.State(False) for _ in self._tabs]
        for (tab_id, tab, loaders), done in zip(self._tabs, flags, strict=True):
            if not loaders:
                continue
            inputs = [c for _, ins, _ in loaders for c in _as_list(ins)]
            outputs = [c for _, _, outs in loaders for c in _as_list(outs)]
            signed = any("profile" in inspect.signature(fn).parameters for fn, _, _ in loaders)
            handler = self._on_select(tab_id, known, self._runner(loaders, len(outputs)), len(inputs), len(outputs),
                                      signed)
            tab.select(handler, [done, *inputs, *flags], [done, *outputs], api_visibility="private")
        without_loaders = {tab_id for tab_id, _, loaders in self._tabs if not loaders}

        def open_tab(request: gr.Request) -> list[Any]:
            wanted = wanted_tab(request, known)
            # A tab with nothing to load counts as loaded once shown (see _on_select).
            shown = [True if tab_id == wanted and tab_id in without_loaders else gr.skip() for tab_id in known]
            return [gr.Tabs(selected=wanted) if wanted != known[0] else gr.skip(), *shown]

        demo.load(open_tab, None, [tabs, *flags], api_visibility="private")

    @staticmethod
    def _on_select(tab_id: str, known: list[str], run: Callable[..., list[Any]], n_in: int, n_out: int,
                   signed: bool) -> Callable[..., Any]:
        """The handler of a tab's selection, which loads it the first time. Gradio sends it by itself for the
        first tab at start-up and for the tab the page-load event selects. On a page whose address names
        another tab, the first tab's automatic selection comes before that tab is loaded (its flag unset):
        it loads nothing (a visitor's click on the first tab that early is taken for it; a second click
        loads it). Any other selection loads the tab once; a later one changes nothing.

        Gradio fills in the request (and the profile) only as positional parameters before `*values`; only
        a tab whose loader asks for the signed-in profile gets a handler that asks for it (asking makes
        Gradio set up sign-in for the app)."""
        skip = [gr.skip()] * n_out

        def select(request: gr.Request, profile: Any, done: bool, values: tuple[Any, ...]) -> list[Any]:
            mine, flags = values[:n_in], values[n_in:]
            wanted = wanted_tab(request, known)
            if done or tab_id == known[0] != wanted and not flags[known.index(wanted)]:
                return [gr.skip(), *skip]
            return [True, *run(mine, request, profile)]

        def on_select(request: gr.Request, done: bool, *values: Any) -> list[Any]:
            return select(request, None, done, values)

        def on_select_signed(request: gr.Request, profile: gr.OAuthProfile | None, done: bool, *values: Any
                             ) -> list[Any]:
            return select(request, profile, done, values)

        return on_select_signed if signed else on_select

    @staticmethod
    def _runner(loaders: list[Loader], n_out: int) -> Callable[..., list[Any]]:
        """A function of (values, request, profile) running every loader of a tab on its own inputs."""

        def run(values: tuple[Any, ...], request: gr.Request | None = None, profile: Any = None) -> list[Any]:
            out: list[Any] = []
            at = 0
            for fn, ins, _ in loaders:
                count = len(_as_list(ins))
                out += _call(fn, list(values[at:at + count]), request, profile)
                at += count
            if len(out) != n_out:
                raise RuntimeError(f"a tab's loaders gave {len(out)} values for {n_out} outputs")
            return out

        return run
