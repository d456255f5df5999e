"""Sweep figures stay readable: one (colour, marker) per model, 1,200 px wide, every nutrient drawn."""

from pathlib import Path

from helpers_report import cls_item, nut_item, vqa_item, write_run
from PIL import Image

from eval.report import plots, report

REF = {"calories": 500.0, "protein": 25.0, "carbohydrates": 60.0, "fat": 20.0}
MODELS = [f"hf:Qwen/Qwen2.5-VL-{size}B-Instruct-long-checkpoint-name" for size in range(12)]


def twelve_model_sweep(root: Path) -> Path:
    """12 models x views 1..4 (nutrition) and CoT off/on (VQA in 3 categories, classification)."""
    for m, model in enumerate(MODELS):
        for views in (1, 2, 3, 4):
            estimate = {k: v * (1 + 0.05 * m + 0.02 * views) for k, v in REF.items()}
            write_run(root / f"m{m}-nut-{views}", model,
                      [nut_item(f"n{i}", f"m{i % 4}", estimate, REF, n_images=views) for i in range(6)], images=views)
        for cot in (False, True):
            write_run(root / f"m{m}-vqa-{cot}", model,
                      [vqa_item(f"v{i}", f"m{i % 3}", "C" if (i + m + cot) % 2 else "I",
                                vqa_category=("cuisine_technique", "dietary_suggestion", "multi_image_analysis")[i % 3])
                       for i in range(9)], images=4, cot=cot)
            write_run(root / f"m{m}-cls-{cot}", model,
                      [cls_item(f"c{i}", f"m{i % 4}", (i + m) % 3 == 0) for i in range(8)], images=4, cot=cot)
    return root


def test_twelve_series_get_twelve_distinct_colour_marker_pairs():
    styles = [plots.series_style(n) for n in range(12)]
    assert len(set(styles)) == 12
    assert len({colour for colour, _ in styles}) == 12  # the old 10-colour cycle gave two models one colour
    assert len({plots.series_style(n) for n in range(len(plots.COLOURS) * len(plots.MARKERS))}) == \
        len(plots.COLOURS) * len(plots.MARKERS)


def test_twelve_model_figures_are_at_most_1200_px_wide(tmp_path):
    root = twelve_model_sweep(tmp_path / "sweep")
    runs = [report.load_run(p) for p in report.expand_run_dirs([root])]
    text = report.build_report(runs, reported=False, n_boot=20, plot_dir=tmp_path / "plots")
    names = ("views_nutrition.png", "cot_vqa.png", "cot_classification.png")
    for name in names:
        with Image.open(tmp_path / "plots" / name) as image:
            width, height = image.size
            dpi = image.info.get("dpi", (plots.DPI,))[0]
        assert width <= 1200, (name, width)
        assert round(dpi) == plots.DPI and width / dpi <= plots.MAX_WIDTH_IN + 0.01
        assert height > 600  # the 12 models (36 VQA bars) grow the figure downwards instead
        assert f"]({name})" in text


def test_views_nutrition_has_mae_and_rmse_of_every_nutrient(tmp_path, monkeypatch):
    drawn = {}

    def keep(path, title, panels, **kwargs):
        drawn[path.name] = panels
        return path

    monkeypatch.setattr("eval.report.sweeps.plot_views", keep)
    runs = [report.load_run(p) for p in report.expand_run_dirs([twelve_model_sweep(tmp_path / "sweep")])]
    report.build_report(runs, reported=False, n_boot=20, plot_dir=tmp_path)
    panels = [p for p in drawn["views_nutrition.png"] if p is not None]
    assert [p.title for p in panels] == ["Nutrition Average MAPE"] + [
        f"{n} {s}" for n in ("Calories", "Protein", "Carbohydrates", "Fat") for s in ("MAE", "RMSE")]
    assert all(len(p.series) == 12 for p in panels)
    protein_mae = panels[3].series[MODELS[0]]  # model 0 estimates 2% high per view: 0.5 g per view
    assert [round(p.y, 2) for p in sorted(protein_mae, key=lambda p: p.x)] == [0.5, 1.0, 1.5, 2.0]
