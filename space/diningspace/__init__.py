"""The DiningBench Space: browse the data, try a model on a few items, compare results.

The pure logic (dataset index, leaderboard table, evaluation glue, key scrubbing) lives in plain
modules; the `*_tab.py` modules only wire it to Gradio components.
"""
