"""Matplotlib figures for slt's results, one module per result family (evidence, fisher, fit,
influence, llc, sbic).

Each result type's `plot()` method calls into here; importing a result never imports matplotlib.
"""
