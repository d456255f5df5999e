"""The Take-the-test tab: a person answers items as a model would and sees each reference after answering."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import gradio as gr

from eval import tasks
from eval.report import shown_views
from eval.report.runs import ReportError, load_run
from eval.report.tables import as_text
from eval.scoring import score_prediction
from eval.tasks import answer_format

from .browse_tab import captioned
from .catalog import Catalog, CatalogError
from .guard import GuardError
from .human import HumanError, HumanRuns, Sitting, answer_text, automated, prediction_of, start
from .leaderboard import HUMAN_GROUPS
from .limits import HourlyQuota, RequestSlots, client_address
from .recap import feedback, model_answers, recap
from .render import LETTERS, item_card
from .results_view import summary_line
from .settings import SpaceSettings

CONSENT = ("I agree that my answers, the group I pick and the name I type (optional; a pseudonym is fine) "
           "are saved as a run and shown, pooled with others of my group, on the Leaderboard. Nothing else "
           "is saved: no address, no account, no browser id (to stop floods, the Space counts tests per "
           "address for an hour, in memory only).")
INTRO = ("Answer the same items a model gets, the same way: a letter for classification, four numbers "
         "for nutrition, a short text for VQA. The reference appears after you submit each answer. "
         "Your answers become a `human:` run scored with the same metrics as the models.")
MAX_TEST_ITEMS = 20
MAX_OPEN_SITTINGS = 10_000  # showings remembered at once (each a token and a time)
SHOWN_COUNT = 17  # the outputs of a question: state, panels, views, prompt, answer boxes, buttons


PEOPLE = {  # by answer format: a letter, four numbers, free text
    "letter": {"en": "Look at the photos and choose the letter of the dish they show:",
               "zh": "看照片，选出照片中这道菜的字母："},
    "nutrients": {"en": "Estimate ONE serving as the photos show it: calories (kcal), then protein, carbohydrates and "
                        "fat (grams). Type your best guess in the four boxes; the model sees these same photos.",
                  "zh": "按照片中的一份估算：热量（千卡），以及蛋白质、碳水化合物、脂肪（克）。在四个框中填写你的最佳估计；"
                        "模型看到的也是这些照片。"},
    "text": {"en": "Answer the question about the dish in the photos, in a sentence or two:",
             "zh": "根据照片回答关于这道菜的问题，一两句话即可："},
}


def people_text(task: str, row: dict[str, Any], lang: str) -> str:
    """What a person taking the test reads: the same question and options the model gets, in words for
    people (never the model's reply-format rules, such as "output only one JSON object")."""
    lang = "en" if lang == "en" else "zh"
    kind = answer_format(task)
    head = PEOPLE.get(kind, PEOPLE["text"])[lang]
    if kind == "letter":
        options = row.get("options_en" if lang == "en" else "options") or row.get("options") or []
        return head + "\n" + "\n".join(f"{LETTERS[i]}. {option}" for i, option in enumerate(options))
    if kind == "text":
        question = row.get("question_en" if lang == "en" else "question") or row.get("question") or ""
        return f"{head}\n{question}"
    return head


class HumanTab:
    """`slots` are the Space's request slots (a VQA sitting's judge calls take them like any model
    request); `clock` times the answers (injectable for tests)."""

    def __init__(self, catalog: Catalog, settings: SpaceSettings, slots: RequestSlots | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.catalog = catalog
        self.settings = settings
        self.runs = HumanRuns(settings.results_dir, hub_repo=settings.human_repo, dataset=settings.dataset,
                              judge=settings.judge, min_seconds=settings.min_answer_seconds)
        self.slots = slots or RequestSlots(settings.max_requests)
        self.clock = clock
        # When each sitting's current item was shown, by sitting token, on the server: an answer takes
        # its entry (one answer per showing, however many are sent at once) and is timed from it.
        self._shown: dict[str, float] = {}
        self._shown_lock = threading.Lock()
        self.quota = HourlyQuota(settings.sittings_per_session, settings.sittings_per_address,
                                 settings.sittings_per_hour, clock=clock)

    # --- handlers -------------------------------------------------------------------------------
    def begin(self, task: str, n: float, seed: float, group: str, name: str, lang: str, consent: bool,
              request: gr.Request = None,  # type: ignore[assignment]
              ) -> tuple[Any, ...]:
        try:
            if task not in self.settings.tasks():
                raise HumanError(f"choose one of {', '.join(self.settings.tasks())}")
            ids = self.catalog.filter_ids(task)
            count = max(1, min(int(n), MAX_TEST_ITEMS, self.settings.max_items))
            sitting = start(task, ids, count, group=group, name=name, lang=lang, seed=int(seed or 0),
                            consent=consent)
            self.quota.take(getattr(request, "session_hash", None),
                            client_address(request, self.settings.proxy_hops))
        except (HumanError, CatalogError, GuardError, TypeError, ValueError, OverflowError) as exc:
            # A warning, not gr.Error: an error would lay its overlay over the form (the outputs),
            # and the person could no longer tick the box it asks for.
            gr.Warning(as_text(str(exc)))
            return tuple(gr.skip() for _ in range(SHOWN_COUNT))
        return self._question(sitting)

    def _question(self, sitting: Sitting) -> tuple[Any, ...]:
        item_id = sitting.current
        assert item_id is not None
        row = self.catalog.row(sitting.task, item_id)
        views = self.catalog.view_files(sitting.task, item_id)
        text = people_text(sitting.task, row, sitting.lang)
        where = (f"**{sitting.subject.human_question}** · item {len(sitting.answers) + 1} of {len(sitting.ids)}"
                 " · tap a photo to see it larger")
        n_options = len(row.get("options") or [])
        sitting.shown_at = self.clock()
        with self._shown_lock:
            if len(self._shown) > MAX_OPEN_SITTINGS:  # sittings left open: the oldest forgotten
                for token in sorted(self._shown, key=self._shown.__getitem__)[:len(self._shown) // 2]:
                    del self._shown[token]
            self._shown[sitting.token] = sitting.shown_at
        return (sitting.to_state(), gr.update(visible=False), gr.update(visible=True), where,
                shown_views.strip_html(captioned(views), "Photos of the dish"),
                f"<div class='db-prompt'>{as_text(text, lines=True)}</div>",
                gr.update(visible=sitting.subject.answer_format == "letter", choices=list(LETTERS[:n_options or 8]),
                          value=None),
                gr.update(visible=sitting.subject.answer_format == "nutrients"),
                gr.update(visible=sitting.subject.answer_format == "text", value=""),
                *(gr.update(value=None) for _ in range(4)),
                gr.update(visible=True), gr.update(visible=False), "", gr.update(visible=False))

    def submit(self, state: dict[str, Any], letter: str | None, kcal: float | None, protein: float | None,
               carbs: float | None, fat: float | None, text: str) -> tuple[Any, ...]:
        sitting = Sitting.from_state(state)
        if sitting is None or sitting.current is None:
            raise gr.Error("start the test first", print_exception=False)
        item_id = sitting.current
        value = {"letter": letter, "nutrients": [kcal, protein, carbs, fat]}.get(sitting.subject.answer_format, text)
        try:
            raw = answer_text(sitting.task, value)
        except HumanError as exc:
            gr.Warning(as_text(str(exc)))
            return tuple(gr.skip() for _ in range(5))
        row = self.catalog.row(sitting.task, item_id)
        with self._shown_lock:
            shown = self._shown.pop(sitting.token, None)
        seconds = None if shown is None else round(self.clock() - shown, 3)
        sitting.shown_at = None  # the next answer waits for the next item to be shown
        answer = {"id": item_id, "raw": raw, "n_images": len(row.get("image_roles") or []), "seconds": seconds}
        sitting.answers.append(answer)
        record = score_prediction(sitting.subject, prediction_of(sitting, answer, row), row, sitting.lang)
        last = sitting.current is None
        return (sitting.to_state(), gr.update(visible=False), gr.update(visible=not last),
                gr.update(visible=last), self._reveal(sitting, row, record))

    def _reveal(self, sitting: Sitting, row: dict[str, Any], record: dict[str, Any]) -> str:
        _, sentences = feedback(sitting.task, str(sitting.answers[-1]["raw"]), record, row, sitting.lang)
        card = item_card(sitting.task, row, n_images=sitting.answers[-1]["n_images"], lang=sitting.lang,
                         show_answer=True)
        return (f"<div class='db-reveal'><p class='db-feedback'>{sentences}</p>"
                f"<p><b>Reference</b></p>{card}</div>")

    def next_item(self, state: dict[str, Any]) -> tuple[Any, ...]:
        sitting = Sitting.from_state(state)
        if sitting is None or sitting.current is None:
            raise gr.Error("no more items: press Finish", print_exception=False)
        return self._question(sitting)

    async def finish(self, state: dict[str, Any]) -> tuple[Any, ...]:
        sitting = Sitting.from_state(state)
        if sitting is None or not sitting.answers:
            # A warning, not gr.Error: the person stays on the question, which stays as it was.
            gr.Warning("Answer at least one item first: nothing is saved without an answer.")
            return tuple(gr.skip() for _ in range(5))
        rows = {a["id"]: self.catalog.row(sitting.task, a["id"]) for a in sitting.answers}
        try:
            # The judge's calls are model requests like the Evaluate tab's: one Space-wide slot,
            # one judge call at a time inside it (the run's concurrency is 1).
            async with self.slots.slot() if sitting.subject.judged and self.runs.judge else nullcontext():
                folder, figures = await asyncio.to_thread(self.runs.save, sitting, rows)
        except (HumanError, ValueError, OSError) as exc:
            raise gr.Error(f"could not save your answers: {as_text(str(exc))}",
                           print_exception=False) from None
        task = sitting.subject
        line = summary_line(task, sitting.spec, figures) if figures else f"**{sitting.spec}**"
        scripted = automated(sitting, self.runs.min_seconds)
        counted = (f"it is left out of the **humans ({sitting.group})** row: {scripted}" if scripted
                   else f"the Leaderboard's **humans ({sitting.group})** row now includes it")
        done = f"Thank you! {line}. Saved as the run `{folder.name}`; {counted}."
        return (None, gr.update(visible=True), gr.update(visible=False), done,
                await asyncio.to_thread(self._recap, sitting, task, folder, rows))

    def _recap(self, sitting: Sitting, task: tasks.Task, folder: Path, rows: dict[str, dict[str, Any]]) -> str:
        """Your answers beside the reference and the models' answers on the same items (run folders
        under the results folder, as the Runs tab lists them)."""
        try:
            mine = load_run(folder, problems=[]).scores.get(sitting.task, [])
        except ReportError:
            return ""
        models = model_answers(self.settings.results_dir, task, [str(a["id"]) for a in sitting.answers],
                               exclude=folder)
        return "<h3>How you did, item by item</h3>" + recap(sitting.task, mine, rows, sitting.lang, models)

    # --- layout -----------------------------------------------------------------------------------
    def build(self) -> None:
        s = self.settings
        shown_views.serve()  # the photos' files, linked from the page
        state = gr.State(None)
        gr.Markdown(INTRO, elem_classes="db-note")
        done = gr.Markdown("", elem_id="db-human-done")
        recap_box = gr.HTML(elem_id="db-human-recap")
        with gr.Column(visible=True, elem_id="db-human-setup") as setup:
            with gr.Row(equal_height=False):
                with gr.Column(min_width=260):
                    task = gr.Radio([(t.human_question, t.name) for t in s.offered_tasks()], value=s.tasks()[0],
                                    label="What you will do", elem_id="db-human-task")
                    n_items = gr.Slider(1, min(MAX_TEST_ITEMS, s.max_items), value=min(5, s.max_items), step=1,
                                        label="Items", elem_id="db-human-n")
                    seed = gr.Number(random.randint(1, 9999), precision=0, label="Seed",
                                     info="The same seed gives the same items in the same order.")
                    lang = gr.Radio(["zh", "en"], value="en", label="Language of the questions")
                with gr.Column(min_width=260):
                    group = gr.Radio(list(HUMAN_GROUPS), value=HUMAN_GROUPS[0], label="You are a…",
                                     elem_id="db-human-group")
                    name = gr.Textbox(label="Name (optional, a pseudonym is fine)", max_length=64,
                                      elem_id="db-human-name")
                    consent = gr.Checkbox(False, label=CONSENT, elem_id="db-human-consent")
                    begin = gr.Button("Start the test", variant="primary", elem_id="db-human-start")
        with gr.Column(visible=False, elem_id="db-human-question") as question:
            where = gr.Markdown("", elem_id="db-human-where")
            # Two by two on a phone, a row of four on a wide screen; a tap opens a view full size.
            # Plain pictures (eval/report/shown_views.py), laid out by eval/report/viewer.css.
            gallery = gr.HTML("", elem_id="db-human-gallery", js_on_load=shown_views.STRIP_JS, padding=False)
            prompt = gr.HTML(elem_id="db-human-prompt")
            letter = gr.Radio(list(LETTERS), label="Your answer", elem_id="db-human-letter")
            with gr.Row(visible=False, elem_id="db-human-numbers") as numbers:
                kcal = gr.Number(label="Calories (kcal)", minimum=0, min_width=120, elem_id="db-human-kcal")
                protein = gr.Number(label="Protein (g)", minimum=0, min_width=120, elem_id="db-human-protein")
                carbs = gr.Number(label="Carbohydrates (g)", minimum=0, min_width=120, elem_id="db-human-carbs")
                fat = gr.Number(label="Fat (g)", minimum=0, min_width=120, elem_id="db-human-fat")
            text = gr.Textbox(label="Your answer", lines=3, visible=False, elem_id="db-human-text")
            with gr.Row():
                submit = gr.Button("Submit answer", variant="primary", elem_id="db-human-submit")
                next_btn = gr.Button("Next item", visible=False, elem_id="db-human-next")
                finish = gr.Button("Finish and save", visible=False, elem_id="db-human-finish")
            reveal = gr.HTML(elem_id="db-human-reveal")
            stop = gr.Button("Finish now (save what I answered)", size="sm", elem_id="db-human-stop")
        shown = [state, setup, question, where, gallery, prompt, letter, numbers, text, kcal, protein, carbs, fat,
                 submit, next_btn, reveal, finish]
        assert len(shown) == SHOWN_COUNT
        begin.click(self.begin, [task, n_items, seed, group, name, lang, consent], shown, api_visibility="private"
                    ).then(lambda: "", None, recap_box, api_visibility="private")  # a new test: no old recap
        next_btn.click(self.next_item, state, shown, api_visibility="private")
        submit.click(self.submit, [state, letter, kcal, protein, carbs, fat, text],
                     [state, submit, next_btn, finish, reveal], api_visibility="private")
        for button in (finish, stop):
            button.click(self.finish, state, [state, setup, question, done, recap_box], api_visibility="private")
