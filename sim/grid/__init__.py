"""Sweeps over a grid of simulate configurations: points, hashing, the result store, local and Ray runners.

``axes.expand(axes.parse_axes(...))`` makes the configurations; ``sweep.run_grid`` runs the points not yet
stored and writes ``DIR/points/<key>.*``, ``DIR/failed/<key>.json`` and ``DIR/grid.csv``; ``reports/``
reads them back. Nothing is imported here, so that ``cli.py`` can read the axes without pandas.
"""
