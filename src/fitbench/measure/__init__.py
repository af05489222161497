"""Measurement on the local device: isolated runner, timing loop, memory sampling, datasets."""
