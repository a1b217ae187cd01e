"""Matplotlib figures for slt's results, one module per result family (llc, evidence, fisher).

Each result type's `plot()` method calls into here; importing a result never imports matplotlib.
"""
