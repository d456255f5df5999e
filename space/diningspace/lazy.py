"""Tabs that load when they are first shown, and a page that opens on the tab its address names.

Why: loaded at every page load, the Runs tab (it reads a whole run) and the Leaderboard (every run folder)
would cost seconds of server time that most visitors never look at.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any
from urllib.parse import parse_qs

import gradio as gr

Loader = tuple[Callable[..., Any], Any, Any]  # (handler, inputs, outputs) as demo.load takes them

# The query of the page being served, set by OpeningTab for the length of one request.
_QUERY: ContextVar[Mapping[str, str] | None] = ContextVar("diningspace_query", default=None)


def wanted_tab(params: Mapping[str, Any] | None, known: list[str]) -> str:
    """The tab an address opens: `?tab=ID`, `?run=NAME` alone opening the Runs tab, else the first."""
    params = params or {}
    wanted = str(params.get("tab") or ("runs" if params.get("run") else ""))
    return wanted if re.fullmatch(r"[a-z_]{1,32}", wanted) and wanted in known else known[0]


class OpeningTab:
    """ASGI middleware: keeps the query of each GET request where `TabbedBlocks.config` can read it while
    Gradio renders the page (Gradio reads `blocks.config` inside its page route). Install it with
    `demo.launch(app_kwargs={"middleware": [Middleware(OpeningTab)]})` (app.py's launch_options)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        raw = bytes(scope.get("query_string") or b"")[:2048].decode("latin-1")
        try:  # (an address with more fields than any of ours names no tab: the first opens)
            fields = parse_qs(raw, max_num_fields=20)
        except ValueError:
            fields = {}
        query = {name: values[0] for name, values in fields.items() if values}
        token = _QUERY.set(query)
        try:
            await self.app(scope, receive, send)
        finally:
            _QUERY.reset(token)


class TabbedBlocks(gr.Blocks):
    """A Blocks whose page config, read while serving an address that names a tab, has that tab selected: no
    page-load event picks it afterwards, so a link costs no extra round trip and never draws the first tab.
    Gradio keeps one config for every visitor (`blocks.config`, set at launch); this one gives, per tab, a
    copy differing only in the Tabs component's `selected` prop, made once and kept. Without OpeningTab
    (another server mounting the app) every page opens on the first tab."""

    _tabs_id: int | None = None
    _tab_ids: list[str] = []  # noqa: RUF012 - replaced per instance by open_on

    def open_on(self, tabs: gr.Tabs, tab_ids: list[str]) -> None:
        """The Tabs whose selected tab follows the address, and the ids of its tabs (the first: the default)."""
        self._tabs_id = tabs._id
        self._tab_ids = list(tab_ids)

    @property  # type: ignore[override]
    def config(self) -> Any:
        try:
            base = self.__dict__["_base_config"]
        except KeyError:
            raise AttributeError("config") from None
        query = _QUERY.get()
        if query is None or self._tabs_id is None or not self._tab_ids:
            return base
        wanted = wanted_tab(query, self._tab_ids)
        if wanted == self._tab_ids[0]:
            return base
        variants: dict[str, Any] = self.__dict__.setdefault("_config_variants", {})
        if wanted not in variants:
            variants[wanted] = self._selecting(base, wanted)
        return variants[wanted]

    @config.setter
    def config(self, value: Any) -> None:
        self.__dict__["_base_config"] = value
        self.__dict__["_config_variants"] = {}  # made again from the new config when asked

    def _selecting(self, base: Any, wanted: str) -> Any:
        """`base` with the Tabs component's selected tab set to `wanted` (the rest shared, not copied)."""
        return {**base, "components": [
            {**component, "props": {**component.get("props", {}), "selected": wanted}}
            if component.get("id") == self._tabs_id else component for component in base.get("components", [])]}


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
    """Collects each tab's loaders, then wires them: a tab loads on its first selection, whether the
    browser's own (the tab the page opens on) or a visitor's; a per-page flag keeps a second visit from
    reloading what the visitor set."""

    def __init__(self) -> None:
        self._tabs: list[tuple[str, gr.Tab, list[Loader]]] = []

    def add(self, tab_id: str, tab: gr.Tab, *loaders: Loader) -> None:
        self._tabs.append((tab_id, tab, list(loaders)))

    def wire(self, demo: gr.Blocks, tabs: gr.Tabs) -> None:
        """Per tab with loaders, a selection event that loads it once (a per-page flag, set once loaded); and,
        on a TabbedBlocks, the page opening on the tab its address names."""
        if isinstance(demo, TabbedBlocks):
            demo.open_on(tabs, [tab_id for tab_id, _, _ in self._tabs])
        for _, tab, loaders in self._tabs:
            if not loaders:
                continue
            done = gr.State(False)
            inputs = [c for _, ins, _ in loaders for c in _as_list(ins)]
            outputs = [c for _, _, outs in loaders for c in _as_list(outs)]
            signed = any("profile" in inspect.signature(fn).parameters for fn, _, _ in loaders)
            handler = self._on_select(loaders, len(outputs), signed)
            tab.select(handler, [done, *inputs], [done, *outputs], api_visibility="private")

    @staticmethod
    def _on_select(loaders: list[Loader], n_out: int, signed: bool) -> Callable[..., Any]:
        """The handler of a tab's selection: the first time, runs every loader of the tab on its own inputs;
        later, changes nothing. Gradio fills in the request (and the profile) only as positional parameters
        before `*values`; only a tab whose loader asks for the signed-in profile gets a handler that asks for
        it (asking makes Gradio set up sign-in for the app)."""

        def on_select_signed(request: gr.Request, profile: gr.OAuthProfile | None, done: bool, *values: Any
                             ) -> list[Any]:
            if done:
                return [gr.skip()] * (n_out + 1)
            out: list[Any] = []
            at = 0
            for fn, ins, _ in loaders:
                count = len(_as_list(ins))
                out += _call(fn, list(values[at:at + count]), request, profile)
                at += count
            if len(out) != n_out:
                raise RuntimeError(f"a tab's loaders gave {len(out)} values for {n_out} outputs")
            return [True, *out]

        def on_select(request: gr.Request, done: bool, *values: Any) -> list[Any]:
            return on_select_signed(request, None, done, *values)

        return on_select_signed if signed else on_select
