"""DiningBench as tasks of other evaluation frameworks (inspect_ai, lmms-eval), scored by our metrics."""
