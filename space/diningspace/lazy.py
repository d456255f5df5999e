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
    """Collects each tab's loaders, then wires them: at page load for the tab the address opens (`?tab=ID`,
    which the same event selects), else on the tab's first selection (a per-page flag keeps a second visit
    from reloading what the visitor set)."""

    def __init__(self) -> None:
        self._tabs: list[tuple[str, gr.Tab, list[Loader]]] = []

    def add(self, tab_id: str, tab: gr.Tab, *loaders: Loader) -> None:
        self._tabs.append((tab_id, tab, list(loaders)))

    def wire(self, demo: gr.Blocks, tabs: gr.Tabs) -> None:
        """One event at page load (it selects the tab the address names and loads that tab alone), and one
        per tab on its first selection."""
        known = [tab_id for tab_id, _, _ in self._tabs]
        slots: list[tuple[str, Any, list[Any], list[Any], Callable[..., list[Any]], bool]] = []
        for tab_id, tab, loaders in self._tabs:
            if not loaders:
                continue
            inputs = [c for _, ins, _ in loaders for c in _as_list(ins)]
            outputs = [c for _, _, outs in loaders for c in _as_list(outs)]
            done = gr.State(False)
            run = self._runner(loaders, len(outputs))
            signed = any("profile" in inspect.signature(fn).parameters for fn, _, _ in loaders)
            slots.append((tab_id, done, inputs, outputs, run, signed))
            tab.select(self._on_select(tab_id, known, run, len(outputs), signed), [done, *inputs], [done, *outputs],
                       api_visibility="private")
        all_inputs = [c for _, done, inputs, _, _, _ in slots for c in (done, *inputs)]
        all_outputs = [tabs, *(c for _, done, _, outputs, _, _ in slots for c in (done, *outputs))]

        def load(request: gr.Request, profile: Any, values: tuple[Any, ...]) -> list[Any]:
            wanted = wanted_tab(request, known)
            out: list[Any] = [gr.Tabs(selected=wanted) if wanted != known[0] else gr.skip()]
            at = 0
            for tab_id, _, inputs, outputs, run, _ in slots:
                done, mine = values[at], values[at + 1:at + 1 + len(inputs)]
                at += 1 + len(inputs)
                out += [True, *run(mine, request, profile)] if tab_id == wanted else [done, *[gr.skip()] * len(outputs)]
            return out

        def at_load(request: gr.Request, *values: Any) -> list[Any]:
            return load(request, None, values)

        def at_load_signed(request: gr.Request, profile: gr.OAuthProfile | None, *values: Any) -> list[Any]:
            return load(request, profile, values)

        signed = any(slot[5] for slot in slots)
        demo.load(at_load_signed if signed else at_load, all_inputs, all_outputs, api_visibility="private")

    @staticmethod
    def _on_select(tab_id: str, known: list[str], run: Callable[..., list[Any]], n_out: int, signed: bool
                   ) -> Callable[..., Any]:
        """The handler of a tab's selection. Gradio selects a tab (and sends this event) for the first tab at
        start-up and for the tab the page-load event selects; the page load loads the tab the address names
        itself, so a selection of that tab loads nothing, nor does a later selection of a loaded tab. Gradio
        fills in the request (and the profile) only as positional parameters before `*values`; only a tab
        whose loader asks for the signed-in profile gets a handler that asks for it (asking makes Gradio set
        up sign-in for the app)."""
        skip = [gr.skip()] * n_out

        def select(request: gr.Request, profile: Any, done: bool, values: tuple[Any, ...]) -> list[Any]:
            if done or wanted_tab(request, known) == tab_id:
                return [gr.skip(), *skip]
            return [True, *run(values, request, profile)]

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
