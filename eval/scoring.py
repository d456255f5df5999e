"""Scoring: saved predictions + dataset references -> scores.jsonl, metrics.json, report.md.

Generation and scoring meet only in predictions.jsonl, so a run can be re-scored (e.g. with a
judge added later) without asking the model again. Every figure comes from the metrics modules'
pure functions (`metrics/*/`): this module joins, never re-implements a formula.

scores.jsonl — one JSON object per line, one line per scored item (all tasks of the run folder):

    id             str    item id (unique within its task)
    task           str    "classification" | "nutrition" | "vqa"
    merchant_id    str    the bootstrap cluster
    cuisine        str
    category       str    the menu category
    vqa_category   str | null   (vqa only)
    nutrition_source str | null (nutrition only)
    n_images       int    images actually sent with the request
    parsed         the task parser's output: letter | {calories, protein, carbohydrates, fat} | answer
                   text (vqa); null when unparsed or when the sample failed
    error          str | null   generation error (a failed sample: scored as a failure, never dropped)
    reference      letter | {calories, protein, carbohydrates, fat} | reference answer text (vqa)
    correct        bool | null  classification: parsed == reference (unparsed/failed = false);
                                vqa: verdict == "C" (null while unscored); nutrition: null
    ape            {component: fraction | null} | null  nutrition only: |pred - gt| / gt; null for a
                   component whose gt == 0; 1.0 for every component when unparsed or failed
    abs_error      {component: float} | null  nutrition only: |pred - gt| (unparsed: |gt|)
    verdict        "C" | "I" | null   vqa only: judge or rule verdict; null = unscored
    decided_by     "rule" | "judge" | null   vqa only: who decided the verdict
"""
