"""Synthetic DiningBench sample: recipes, a USDA per-100 g table, and a PIL/numpy dish renderer."""
